#pragma once
// Two groups of jobs compared task by task: what `attnlab compare A B` prints and `attnlab report`
// shows for each method against its baseline. Per group of the --by keys both sides share: each
// side's seeds (jobs that ended done with the metric), their mean and standard deviation, the
// difference of means A − B with its confidence interval (results/stats.hpp), and whether the
// interval excludes zero.
//
// A sweep's values are not seeds (results/sweep.hpp). Of the config keys that differ within one
// (method, dataset) (store::keys_varying_within_groups, the view seed_stats' `config`), a dataset's
// (`datasets.*`) belong to the task and join --by, as in `attnlab results`: sparsity 0.1 is
// compared with sparsity 0.1. The others (a method's features, the learning rate) make a side's
// configurations on a task: by default each side is one configuration per task, the one with the
// best mean validation (Pick::best_validation), and a note says which in one line per side and
// task; a side's expression picks one by naming its value instead
// ("method = performer AND methods.performer.features = 256").
#include <cstdint>
#include <string>
#include <vector>

#include "attnlab/store.hpp"
#include "results/formats.hpp"
#include "results/stats.hpp"

namespace attnlab::results {

// How a side with several configurations on one task is made one: best_validation, the
// configuration whose done seeds have the highest mean kPickMetric (a tie, or none with it, goes
// to the one with more seeds of the compared metric, then to the one listed first); all, a row for
// each pair of A's and B's configurations.
enum class Pick { best_validation, all };
inline constexpr const char* kPickMetric = "best_val_acc";

// "best-val" | "all"; anything else is a std::invalid_argument naming the word and the choices.
Pick parse_pick(const std::string& word);
const char* to_string(Pick pick);

struct CompareOptions {
  // A and B: a method name, or a --where expression (anything with an operator, a space or a
  // parenthesis).
  std::string a, b;
  std::string metric = "test_acc";
  std::vector<std::string> where;            // applied to both sides
  std::vector<std::string> by = {"dataset"};  // what a row is
  Pick pick = Pick::best_validation;         // a side's configurations on a task
  IntervalMethod interval = IntervalMethod::welch;
  double level = 0.95;
  int resamples = 10000;   // bootstrap
  std::uint64_t seed = 1;  // bootstrap
};

struct Comparison {
  // One row per shared group (per pair of configurations under Pick::all); grid.notes left empty.
  // Where a side has several configurations somewhere, the columns "A config" and "B config"
  // (after the --by keys) say which each row used ("features=256 lr=0.001"; "" for a side whose
  // jobs lack every swept key).
  Grid grid;
  // Which configuration each side took where it had a choice (one line per side and task), what
  // the rows leave out, the sides' filters, the interval's kind.
  std::vector<std::string> notes;
};

// Throws std::runtime_error, one line: a side selecting no job, both sides the same jobs, no
// shared group (each side's count of groups and the first few), a bad --level or --resamples; store::QueryError for a bad expression, key or metric.
Comparison compare(store::ResultsReader& db, const CompareOptions& options);

}  // namespace attnlab::results
