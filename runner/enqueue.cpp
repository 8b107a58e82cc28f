#include "enqueue.hpp"

#include <iostream>
#include <set>

#include "job_exec.hpp"

namespace attnlab {
namespace {

// Each dataset configuration once: a plugin may refuse its parameters (a missing folder, say).
void check_datasets(const std::string& path, const Experiment& experiment, const PluginRegistry& registry,
                    const std::string& cache_dir) {
  std::set<std::string> checked;
  const DatasetContext context{cache_dir.empty() ? default_cache_dir() : cache_dir};
  for (const auto& job : experiment.jobs) {
    const std::string key = job.dataset + "\n" + job.config_toml.substr(job.config_toml.find("[datasets"));
    if (!checked.insert(key).second) continue;
    try {
      registry.find(PluginKind::dataset, job.dataset)->make_dataset(context, job.dataset_params)->info();
    } catch (const std::exception& e) {
      throw ConfigError(path + ": [datasets." + job.dataset + "] " + e.what());
    }
  }
}

std::string count(std::int64_t n, const char* what) { return std::to_string(n) + " " + what; }

}  // namespace

Experiment check_experiment(const std::string& toml_path, const PluginRegistry& registry, const std::string& cache_dir) {
  Experiment experiment = load_experiment(toml_path, registry);
  for (const auto& warning : experiment.warnings) std::cerr << "attnlab: warning: " << warning << "\n";
  check_datasets(toml_path, experiment, registry, cache_dir);
  return experiment;
}

EnqueueReport enqueue_checked(const Experiment& experiment, store::Database& db, bool rerun) {
  EnqueueReport report;
  report.experiment = experiment.name;
  const auto known = db.find_experiment(experiment.name, experiment.source_text);
  report.experiment_id =
      known ? *known : db.add_experiment(experiment.name, experiment.source_path, experiment.source_text);
  for (const auto& job : experiment.jobs) {
    const store::JobSpec spec{report.experiment_id, job.method, job.dataset, job.seed, job.config_toml, job.config_hash,
                              job.flat};
    const store::AddedJob added = db.add_job(spec);
    report.job_ids.push_back(added.job_id);
    if (!added.existed) {
      ++report.added;
    } else if (added.state == "queued" || added.state == "running" || added.state == "submitted") {
      ++report.already_queued;
    } else if (rerun) {
      db.requeue_job(added.job_id);
      ++report.requeued;
    } else if (added.state == "done") {
      ++report.already_done;
    } else {
      ++report.left_alone;
    }
  }
  return report;
}

EnqueueReport enqueue_experiment(const std::string& toml_path, const PluginRegistry& registry, store::Database& db,
                                 const std::string& cache_dir, bool rerun) {
  return enqueue_checked(check_experiment(toml_path, registry, cache_dir), db, rerun);
}

std::string describe(const EnqueueReport& r) {
  std::string line = "experiment '" + r.experiment + "': " + count(static_cast<std::int64_t>(r.job_ids.size()), "job(s)") +
                     ": " + count(r.added, "added");
  if (r.requeued) line += ", " + count(r.requeued, "queued again");
  line += ", " + count(r.already_queued, "already queued or running");
  line += ", " + count(r.already_done, "already done");
  if (r.left_alone) line += ", " + count(r.left_alone, "ended failed/diverged/oom/cancelled");
  if (r.already_done || r.left_alone) line += " (--rerun runs them again)";
  return line;
}

}  // namespace attnlab
