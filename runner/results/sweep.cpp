#include "results/sweep.hpp"

#include <algorithm>
#include <set>

namespace attnlab::results {

std::string key_value_label(const std::string& key, const std::string& value) {
  return key.substr(key.rfind('.') + 1) + "=" + value;
}

std::string Sweep::task(const store::JobRow& job) const {
  const auto it = task_of.find(job.job_id);
  return it == task_of.end() ? job.dataset : it->second;
}

std::string Sweep::row(const store::JobRow& job) const {
  const auto it = row_of.find(job.job_id);
  return it == row_of.end() ? job.method : it->second;
}

std::vector<std::string> summary_keys(store::ResultsReader& db, const std::vector<std::int64_t>& job_ids) {
  auto keys = store::keys_varying_within_groups(db, job_ids);
  const auto precisions = store::config_values(db, job_ids, "train.precision");
  const bool swept = std::find(keys.begin(), keys.end(), "train.precision") != keys.end();
  if (!swept && precisions.size() == 1 && precisions.front() != "fp32") keys.push_back("train.precision");
  return keys;
}

Sweep find_sweep(store::ResultsReader& db, const std::vector<store::JobRow>& jobs) {
  Sweep sweep;
  std::vector<std::int64_t> ids;
  for (const auto& job : jobs) ids.push_back(job.job_id);
  sweep.keys = store::keys_varying_within_groups(db, ids);
  if (sweep.keys.empty()) return sweep;
  store::Selection selection;
  selection.group_by = sweep.keys;
  const std::set<std::int64_t> wanted(ids.begin(), ids.end());
  for (const auto& row : store::select_jobs(db, selection)) {
    if (!wanted.count(row.job_id)) continue;
    std::string task = row.dataset, method = row.method;
    for (std::size_t k = 0; k < sweep.keys.size(); ++k) {
      if (row.group[k].empty()) continue;  // a key of another method or dataset
      const bool of_dataset = sweep.keys[k].rfind("datasets.", 0) == 0;
      (of_dataset ? task : method) += " " + key_value_label(sweep.keys[k], row.group[k]);
    }
    if (task != row.dataset) sweep.task_of[row.job_id] = task;
    if (method != row.method) sweep.row_of[row.job_id] = method;
  }
  return sweep;
}

}  // namespace attnlab::results
