#pragma once
// Seed aggregation: the jobs select_jobs returns, grouped, each metric summarised over the seeds
// of the jobs that ended done. Failed, diverged and oom jobs are counted, never averaged in; a job
// still queued, running, submitted or cancelled is counted as unfinished.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "attnlab/query.hpp"
#include "results/formats.hpp"

namespace attnlab::results {

struct SeedStats {
  std::size_t n = 0;  // values summarised (NaN results are not values)
  double mean = 0, std = 0, min = 0, max = 0;  // std: sample (n - 1), NaN for n < 2; all NaN for n = 0
};

SeedStats seed_stats(const std::vector<double>& values);

struct GroupSummary {
  std::vector<std::string> key;  // the group's values, one per group-by key
  std::size_t jobs = 0, done = 0;
  std::size_t failed = 0;      // store::is_failed: failed, diverged, oom or blocked
  std::size_t unfinished = 0;  // queued, running, submitted or cancelled
  std::vector<SeedStats> metrics;  // one per metric of the rows
};

// The order groups are listed in, key by key: numbers (seeds, learning rates, sizes) by value,
// before text; text (methods, datasets) in the order the rows first name it, which is the
// experiment file's order since select_jobs returns rows by job id. Sees every key before use.
class GroupOrder {
 public:
  void see(const std::vector<std::string>& key);
  bool operator()(const std::vector<std::string>& a, const std::vector<std::string>& b) const;

 private:
  std::vector<std::map<std::string, std::size_t>> first_seen_;  // per key position: value -> rank
};

// Groups rows by JobRow::group, in GroupOrder.
std::vector<GroupSummary> summarize(const std::vector<store::JobRow>& rows, std::size_t metric_count);

// How a metric's value reads in a table: bytes as MiB/GiB, seconds to 0.1 s, counts as integers,
// the rest to four decimals. CSV and JSON get the exact value whatever this shows.
Cell metric_cell(const std::string& metric, double value);

// "mean ± std (n)" with `shown` the printf format of mean and std; "mean (1)" for one value (no
// std); "-" for none.
std::string mean_std_text(const SeedStats& s, const char* shown);

// `attnlab results`: one row per group (keys, jobs, done, failed, unfinished, then per metric
// mean, std, n, min, max as separate columns), or with `per_job` one row per job (its counting
// run and values). `compact` (terminal, Markdown): per metric one "mean ± std (n)" column and one
// "min – max" column instead.
Grid results_grid(const store::Selection& selection, const std::vector<store::JobRow>& rows, bool per_job,
                  bool compact = false);

}  // namespace attnlab::results
