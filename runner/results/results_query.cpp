#include "results/results_query.hpp"

#include "results/aggregate.hpp"
#include "results/sweep.hpp"

namespace attnlab::results {

Grid results_for(store::ResultsReader& db, const ResultsQuery& query, bool compact) {
  store::Selection selection;
  selection.where = query.where;
  selection.group_by = query.group_by.empty() ? std::vector<std::string>{"method", "dataset"} : query.group_by;
  selection.metrics = query.metrics.empty() ? std::vector<std::string>{"test_acc"} : query.metrics;
  // A sweep whose runs all failed, or have not finished, has no test_acc yet: the counts still
  // answer "where does it stand?" (a metric named by hand must exist).
  if (query.metrics.empty() && store::result_names(db).empty()) selection.metrics.clear();
  auto rows = store::select_jobs(db, selection);
  if (query.group_by.empty()) {
    // a sweep's keys join method and dataset (values of a swept key are not seeds), and so does a
    // precision other than fp32
    std::vector<std::int64_t> ids;
    for (const auto& row : rows) ids.push_back(row.job_id);
    const auto keys = summary_keys(db, ids);
    if (!keys.empty()) {
      selection.group_by.insert(selection.group_by.end(), keys.begin(), keys.end());
      rows = store::select_jobs(db, selection);
    }
  }
  return results_grid(selection, rows, query.per_job, compact);
}

}  // namespace attnlab::results
