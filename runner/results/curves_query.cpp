#include "results/curves_query.hpp"

#include <stdexcept>

#include "attnlab/query.hpp"

namespace attnlab::results {
namespace {

// The runs that count for the jobs `query.where` selects, and with `query.running_too` a running
// job's attempt; jobs without either (queued, cancelled, failed before a run ended) are counted in
// `without`. None at all is an error unless `leave_out_empty` (serve's page says so, no chart).
std::vector<std::int64_t> selected_runs(store::ResultsReader& db, const CurvesQuery& query, std::size_t& without) {
  const auto& where = query.where;
  store::Selection selection;
  selection.where = where;
  const auto jobs = store::select_jobs(db, selection);
  std::string expressions;
  for (const auto& w : where) expressions += (expressions.empty() ? "'" : " AND '") + w + "'";
  if (jobs.empty()) throw std::runtime_error("no job in " + db.path() + " matches --where " + expressions);
  std::vector<std::int64_t> ids;
  for (const auto& job : jobs) {
    const auto attempts = !job.run_id && query.running_too && job.state == store::JobState::running
                              ? db.attempts_of_job(job.job_id)
                              : std::vector<store::RunAttempt>{};
    if (job.run_id) ids.push_back(job.run_id);
    else if (!attempts.empty()) ids.push_back(attempts.back().run_id);
    else ++without;
  }
  if (ids.empty() && !query.leave_out_empty)
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
    for (const auto id : selected_runs(db, query, answer.jobs_without_run)) ids.push_back(id);
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
