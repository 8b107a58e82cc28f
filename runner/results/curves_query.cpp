#include "results/curves_query.hpp"

#include <stdexcept>

#include "attnlab/query.hpp"

namespace attnlab::results {
namespace {

// The runs that count for the jobs every expression selects; jobs without one yet (queued,
// running, cancelled) are counted in `without`.
std::vector<std::int64_t> counting_runs(store::ResultsReader& db, const std::vector<std::string>& where,
                                        std::size_t& without) {
  store::Selection selection;
  selection.where = where;
  const auto jobs = store::select_jobs(db, selection);
  std::string expressions;
  for (const auto& w : where) expressions += (expressions.empty() ? "'" : " AND '") + w + "'";
  if (jobs.empty()) throw std::runtime_error("no job in " + db.path() + " matches --where " + expressions);
  std::vector<std::int64_t> ids;
  for (const auto& job : jobs) {
    if (job.run_id) ids.push_back(job.run_id);
    else ++without;
  }
  if (ids.empty())
    throw std::runtime_error("the " + std::to_string(jobs.size()) + " job(s) matching --where " + expressions +
                             " have no run that counts yet (none ended)");
  return ids;
}

}  // namespace

CurvesAnswer curves_for(store::ResultsReader& db, const CurvesQuery& query) {
  CurvesAnswer answer;
  std::vector<std::int64_t> ids = query.run_ids;
  if (ids.empty() && query.where.empty()) throw std::runtime_error("name the runs (RUN... or --where EXPR)");
  if (!query.where.empty())
    for (const auto id : counting_runs(db, query.where, answer.jobs_without_run)) ids.push_back(id);
  answer.runs = read_run_curves(db, ids, query.split, query.name, query.leave_out_empty ? &answer.left_out : nullptr,
                                query.mean ? std::map<std::int64_t, std::int64_t>{} : query.held);
  if (!query.group_by.empty()) {
    group_curves(db, answer.runs, query.group_by);
  } else {
    // A sweep's values are not seeds: its keys label (and with mean, group) the runs too.
    std::vector<std::int64_t> jobs;
    for (const auto& run : answer.runs) jobs.push_back(run.job_id);
    std::vector<std::string> keys = store::keys_varying_within_groups(db, jobs);
    if (!keys.empty()) {
      keys.insert(keys.begin(), {"method", "dataset"});
      group_curves(db, answer.runs, keys);
    }
  }
  if (query.mean) answer.means = mean_over_seeds(answer.runs);
  return answer;
}

}  // namespace attnlab::results
