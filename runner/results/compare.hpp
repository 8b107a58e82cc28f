#pragma once
// Two groups of jobs compared task by task: what `attnlab compare A B` prints and `attnlab report`
// shows for each method against its baseline. Per group of the --by keys both sides share: each
// side's seeds (jobs that ended done with the metric), their mean and standard deviation, the
// difference of means A − B with its confidence interval (results/stats.hpp), and whether the
// interval excludes zero.
#include <cstdint>
#include <string>
#include <vector>

#include "attnlab/store.hpp"
#include "results/formats.hpp"
#include "results/stats.hpp"

namespace attnlab::results {

struct CompareOptions {
  // A and B: a method name, or a --where expression (anything with an operator, a space or a
  // parenthesis).
  std::string a, b;
  std::string metric = "test_acc";
  std::vector<std::string> where;            // applied to both sides
  std::vector<std::string> by = {"dataset"};  // what a row is
  IntervalMethod interval = IntervalMethod::welch;
  double level = 0.95;
  int resamples = 10000;   // bootstrap
  std::uint64_t seed = 1;  // bootstrap
};

struct Comparison {
  Grid grid;                       // one row per shared group; grid.notes left empty
  std::vector<std::string> notes;  // what the rows leave out, the sides' filters, the interval's kind
};

// Throws std::runtime_error, one line: a side selecting no job, both sides the same jobs, no
// shared group, a bad --level or --resamples; store::QueryError for a bad expression, key or metric.
Comparison compare(store::ResultsReader& db, const CompareOptions& options);

}  // namespace attnlab::results
