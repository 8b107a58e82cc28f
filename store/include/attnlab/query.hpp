#pragma once
// Questions asked of the results database: which jobs (a filter), grouped how, which results.
// What `attnlab results`, `table` and `compare` read. Rows come from the view `job_outcomes`
// (one per job: its state and the run that counts), so they are what a user at the sqlite3
// prompt gets from the same view.
//
// The filter language (`--where`), one expression per string, several strings all required:
//   expr       := term ('OR' term)*
//   term       := factor ('AND' factor)*
//   factor     := 'NOT' factor | '(' expr ')' | key op value | key ['NOT'] 'IN' '(' value (',' value)* ')'
//   op         := '=' | '==' | '!=' | '<>' | '<' | '<=' | '>' | '>='
//   key        := method | dataset | seed | experiment | state | status | job | run
//                 | any resolved config key of a job (train.lr, methods.skyformer.landmarks, ...)
//   value      := a number, a bare word (letters, digits, _ . - + : /), or a quoted string
//                 ('...' or "...", the quote doubled inside)
// Keywords are case-insensitive. A config key compares as a number when the value written is a
// number (1e-3 = 0.001) and as text otherwise; a job without that key never matches. `status`
// is the job's state (done, failed, diverged, oom, queued, running, submitted, cancelled).
// `experiment` matches every experiment that owns the job (a job reused by a second experiment's
// file belongs to both; `!=` is "not owned by"); a row's `experiment` is the job's first.
// The SQL text is made only of constants chosen by the parser; every key and value is bound.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/store.hpp"

namespace attnlab::store {

// A malformed filter, an unknown key or metric: one line naming the expression and what is wrong.
struct QueryError : StoreError {
  using StoreError::StoreError;
};

// A filter compiled to a WHERE clause over `job_outcomes AS o`, with its bound values in order.
struct CompiledFilter {
  std::string sql;  // e.g. "(o.method = ?) AND ((SELECT value FROM job_params ...) = ?)"
  struct Param {
    enum class Kind { text, integer, real } kind = Kind::text;
    std::string text;
    std::int64_t integer = 0;
    double real = 0;
  };
  std::vector<Param> params;
  std::vector<std::string> config_keys;  // the config keys it names (checked against the database)
};

// Parentheses and NOTs one --where expression may nest: deeper is a QueryError ("nesting deeper
// than 12 at column N"). SQLite's parser stack (100 entries) holds every pending operand: nesting
// under "a OR b AND (" costs about 6 entries a level, so 17 such levels already overflow it; 12
// keeps every shape of expression inside it (tests/results_query_test.cpp checks the worst).
constexpr int kMaxWhereNesting = 12;
// Comparisons (each value of an IN list counts) one expression may hold: more is a QueryError
// ("more than 500 comparisons at column N"), inside SQLite's expression depth limit (1000).
constexpr int kMaxWhereComparisons = 500;

// Parses one --where expression. Throws QueryError ("--where 'EXPR': expected a value after '<'
// at column 12").
CompiledFilter compile_filter(const std::string& expression);

// The keys that are columns of job_outcomes rather than config keys.
bool is_builtin_key(const std::string& key);

struct Selection {
  std::vector<std::string> where;     // expressions, all must hold (empty: every job)
  std::vector<std::string> group_by;  // keys (builtin or config); values land in JobRow::group
  std::vector<std::string> metrics;   // result names; values land in JobRow::metrics
};

// One job, its counting run and the values asked for.
// Jobs per state of each experiment (by name, in the order first enqueued), counting the jobs
// it reused from another: what `serve`'s picker lists.
struct ExperimentJobStates {
  std::string experiment;
  std::vector<std::pair<std::string, std::int64_t>> states;  // state name, jobs
};
std::vector<ExperimentJobStates> job_states_by_experiment(ResultsReader& db);

struct JobRow {
  std::int64_t job_id = 0;
  std::int64_t run_id = 0;  // the run that counts (job_outcomes.run_id); 0 while there is none
  std::string experiment, method, dataset;
  std::int64_t seed = 0;
  JobState state = JobState::queued;  // the job's state
  std::vector<std::string> group;    // one per Selection::group_by; "" when the job lacks the key
  // One per Selection::metrics: nullopt when the counting run has no such result (or there is no
  // counting run); NaN when it stored NaN (NULL).
  std::vector<std::optional<double>> metrics;
};

// The jobs matching every filter, in job id order. Throws QueryError for a bad expression, a
// config key no job has (a typo would otherwise silently match nothing), or a metric no run has.
std::vector<JobRow> select_jobs(ResultsReader& db, const Selection& selection);

// Every config key some job has, sorted (for error messages and --help).
std::vector<std::string> config_keys(ResultsReader& db);
// Where the given runs ran, one line per distinct environment, e.g. "cpu (AMD EPYC 7B13), 1
// thread, LibTorch 1.13.1: 6 runs". Times and memory are only comparable within one line.
std::vector<std::string> run_environments(ResultsReader& db, const std::vector<std::int64_t>& run_ids);
// The config keys whose values differ among the given jobs of one (method, dataset), sorted: a
// sweep's keys (datasets.sparse_sum.sparsity, train.lr), which a summary over seeds must group by
// rather than average over. Never the seed, nor keys that do not change a job's numbers
// (train.checkpoint_every, train.accuracy_checkpoints).
std::vector<std::string> keys_varying_within_groups(ResultsReader& db, const std::vector<std::int64_t>& job_ids);
// The distinct values of config `key` among the given jobs, sorted; a job stored before the key
// existed has none and adds nothing.
std::vector<std::string> config_values(ResultsReader& db, const std::vector<std::int64_t>& job_ids, const std::string& key);
// The distinct (key, value) pairs of config among the given jobs, by key then value: which keys
// differ among them in one read (a runs table's default columns), where config_values reads one key.
std::vector<std::pair<std::string, std::string>> config_key_values(ResultsReader& db, const std::vector<std::int64_t>& job_ids);
// One config value of one job.
struct JobParam {
  std::int64_t job_id = 0;
  std::string key, value;
};
// The given jobs' values of `keys` (as stored: no methods.* pattern), by job then key; a job without
// a key has no entry for it.
std::vector<JobParam> job_params(ResultsReader& db, const std::vector<std::int64_t>& job_ids, const std::vector<std::string>& keys);
// The summaries of several runs in one read (each as ResultsReader::run_summary gives it), in run
// id order; a run the database does not have is not in the answer.
std::vector<RunSummary> run_summaries_of(ResultsReader& db, const std::vector<std::int64_t>& run_ids);
// The points of curve (split, name) of each of `runs` (a run id, and the step after which to read
// as ResultsReader::curve's after_step), through one statement prepared once: `point(i, step,
// wall_seconds, value)` with i the run's place in `runs`, each run's points in step order (a value
// stored as NULL reads as NaN).
void each_curve_point(ResultsReader& db, const std::vector<std::pair<std::int64_t, std::int64_t>>& runs,
                      const std::string& split, const std::string& name,
                      const std::function<void(std::size_t, std::int64_t, double, double)>& point);
// Every result name some run has, sorted.
std::vector<std::string> result_names(ResultsReader& db);

}  // namespace attnlab::store
