#include "experiment/cache_dir.hpp"
#include "experiment/enqueue.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "attnlab/dataset.hpp"
#include "attnlab/precision.hpp"
#include "attnlab/store/queue.hpp"
#include "attnlab/train/config.hpp"
#include "attnlab/train/trainer.hpp"
#include "attnlab/train/weights.hpp"
#include "experiment/data_budget.hpp"
#include "experiment/train_job.hpp"
#include "plugin_host/scripted_method.hpp"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

// A job's dataset and its parameters: what two jobs share when they share their data.
std::string dataset_key(const JobPlan& job) {
  return job.dataset + "\n" + job.config_toml.substr(job.config_toml.find("[datasets"));
}

// Each dataset configuration once: a plugin may refuse its parameters (a missing folder, say), its
// size may be past the bound, and loading its splits finds a malformed file. Each split is dropped
// once checked; what stays is the token cache the jobs will hit.
void check_datasets(const std::string& path, const Experiment& experiment, const PluginRegistry& registry,
                    const std::string& cache_dir, const DataCheck& check) {
  std::map<std::string, std::int64_t> train_examples;  // by dataset configuration, when loaded
  const DatasetContext context{dataset_cache_dir(cache_dir)};
  for (const auto& job : experiment.jobs) {
    const std::string key = dataset_key(job);
    if (!train_examples.emplace(key, -1).second) continue;
    try {
      const auto dataset = registry.find(PluginKind::dataset, job.dataset)->make_dataset(context, job.dataset_params);
      const TaskInfo task = dataset->info();
      if (!check.force) check_data_size(job.dataset, *dataset, task, context.cache_dir);
      if (check.load)
        for (const Split split : {Split::train, Split::val, Split::test}) {
          const auto size = load_checked(job.dataset, *dataset, split).size();
          if (split == Split::train) train_examples[key] = size;
        }
    } catch (const std::exception& e) {
      throw ConfigError(path + ": [datasets." + job.dataset + "] " + e.what());
    }
  }
  // what the first step would refuse, known now: better one line here than a job that cannot run
  for (const auto& job : experiment.jobs) {
    const std::string key = dataset_key(job);
    const std::int64_t examples = train_examples.at(key), batch = job.train.integer("batch_size");
    if (examples >= 0 && batch > examples)
      throw ConfigError(path + ": [train] batch_size = " + std::to_string(batch) + " (" + job.method + " on " +
                        job.dataset + ") is more than the " + std::to_string(examples) +
                        " training examples of [datasets." + job.dataset + "]; nothing queued");
    if (std::string why; !autocast_possible(parse_precision(job.train.string("precision")), &why))
      throw ConfigError(path + ": [train] precision = \"" + job.train.string("precision") + "\" (" + job.method +
                        "): " + why + "; nothing queued");
  }
}

// Each scripted method once per shape (heads, head size, the dataset's length where it has one,
// the batch size): the file loads, its forward has attnlab's signature, runs on a batch (the last
// sequence padded) without raising and returns q's shape. At the job's length and batch size, so
// that a script sized for shorter sequences (a Linformer E of 64 columns on 96 tokens) or made for
// one batch size is refused here, not in every job. A file whose parameters start alike in every
// layer and seed says so once.
void check_scripts(const std::string& path, Experiment& experiment, const PluginRegistry& registry) {
  std::set<std::string> checked, warned;
  for (const auto& job : experiment.jobs) {
    const auto& method = *registry.find(PluginKind::attention, job.method);
    if (!method.scripted()) continue;
    const ModelConfig model = model_config_from(job.model);
    const std::int64_t length = job_length(job.dataset_params), batch = train_config_from(job.train).batch_size;
    const std::string shape = std::to_string(model.heads) + " " + std::to_string(model.head_dim) + " " +
                              std::to_string(length) + " " + std::to_string(batch);
    if (!checked.insert(job.method + " " + shape).second) continue;
    const std::string script = job.method_params.string("script");
    try {
      check_scripted_attention(script, {model.heads, model.head_dim, length}, batch);
    } catch (const std::exception& e) {
      throw ConfigError(path + ": [methods." + job.method + "] " + e.what() + "; nothing queued");
    }
    if (!warned.insert(script).second) continue;
    for (const auto& warning : scripted_warnings(script)) {
      std::cerr << "attnlab: warning: " << warning << "\n";
      experiment.warnings.push_back(warning);
    }
  }
}

// Each [model] init_from file once per model it starts (its [model] settings, the method and its
// parameters, the task): built as the job will build it and the file loaded into it, so that a
// file of another model (a name missing or extra, a shape) is one line here, not a blocked job.
void check_init_weights(const std::string& path, const Experiment& experiment, const PluginRegistry& registry,
                        const std::string& cache_dir) {
  std::set<std::string> checked;
  for (const auto& job : experiment.jobs) {
    if (job.model.string("init_from").empty()) continue;
    std::string model_key = dataset_key(job);
    for (const auto& [key, value] : job.flat)
      if (key.rfind("train.", 0) != 0 && key != "seed") model_key += "\n" + key + "=" + value;
    if (!checked.insert(model_key).second) continue;
    try {
      initial_model(make_train_job(job, registry, job_task(job, registry, cache_dir), c10::Device(c10::kCPU)));
    } catch (const WeightsFileError& e) {
      throw ConfigError(path + ": [model] init_from (" + job.method + " on " + job.dataset + "): " + e.what() +
                        "; nothing queued");
    }
  }
}

std::string count(std::int64_t n, const char* what) { return std::to_string(n) + " " + what; }

std::string short_hash(const std::string& sha256) { return sha256.substr(0, 16); }

// A job that is done with a plugin file other than the one loaded now is not "already done": its
// result belongs to other code. Refused (nothing stored) unless rerun; one line names the first
// such plugin, its old and new hash, and how many jobs it concerns.
void refuse_changed_plugins(const Experiment& experiment, const PluginRegistry& registry, store::Database& db) {
  std::string first;
  std::int64_t changed = 0;
  for (const auto& job : experiment.jobs) {
    const auto stored = db.job_by_hash(job.config_hash);
    if (!stored || stored->state != store::JobState::done) continue;
    const auto run = db.counting_run(stored->id);
    if (!run) continue;
    for (const auto& before : db.run_plugins(*run)) {
      const PluginKind kind = before.kind == "dataset" ? PluginKind::dataset : PluginKind::attention;
      const LoadedPlugin* now = registry.find(kind, before.name);
      if (!now || now->sha256 == before.sha256) continue;
      if (changed++ == 0)
        first = "job " + std::to_string(stored->id) + " (" + job.method + "/" + job.dataset + " seed " +
                std::to_string(job.seed) + ") is done with " + before.kind + " plugin '" + before.name + "' " +
                before.version + " sha256 " + short_hash(before.sha256) + " (run " + std::to_string(*run) + ", " +
                before.path + "), but " + now->path + " is now " + now->info->version + " sha256 " +
                short_hash(now->sha256);
      break;
    }
  }
  if (changed == 0) return;
  throw ConfigError(experiment.source_path + ": " + first +
                    (changed > 1 ? " (and " + std::to_string(changed - 1) + " more done job(s) like it)" : "") +
                    "; nothing queued: --rerun runs the file's ended jobs again with the plugins loaded now");
}

// The folders of the job's two plugin files, so that whichever worker claims it searches them first.
std::vector<std::string> plugin_folders(const JobPlan& job, const PluginRegistry& registry) {
  std::vector<std::string> folders;
  for (const auto* plugin : {registry.find(PluginKind::attention, job.method), registry.find(PluginKind::dataset, job.dataset)}) {
    if (!plugin) continue;
    const std::string folder = fs::path(plugin->path).parent_path().string();
    if (std::find(folders.begin(), folders.end(), folder) == folders.end()) folders.push_back(folder);
  }
  return folders;
}

}  // namespace

std::int64_t job_length(const ParamValues& dataset) {
  if (dataset.has("pad_to") && dataset.integer("pad_to") > 0) return dataset.integer("pad_to");
  return dataset.has("max_len") ? dataset.integer("max_len") : 32;
}

Experiment check_experiment(const std::string& toml_path, const PluginRegistry& registry, const std::string& cache_dir,
                            const DataCheck& check) {
  Experiment experiment = load_experiment(toml_path, registry);
  for (const auto& warning : experiment.warnings) std::cerr << "attnlab: warning: " << warning << "\n";
  check_scripts(toml_path, experiment, registry);
  check_datasets(toml_path, experiment, registry, cache_dir, check);
  check_init_weights(toml_path, experiment, registry, cache_dir);
  return experiment;
}

EnqueueReport enqueue_checked(const Experiment& experiment, const PluginRegistry& registry, store::Database& db,
                              bool rerun) {
  if (!rerun) refuse_changed_plugins(experiment, registry, db);
  EnqueueReport report;
  report.experiment = experiment.name;
  const auto known = db.find_experiment(experiment.name, experiment.source_text);
  report.experiment_id =
      known ? *known : db.add_experiment(experiment.name, experiment.source_path, experiment.source_text);
  for (const auto& job : experiment.jobs) {
    const store::JobSpec spec{report.experiment_id, job.method,      job.dataset, job.seed,
                              job.config_toml,      job.config_hash, job.flat,    plugin_folders(job, registry)};
    const store::AddedJob added = db.add_job(spec);
    report.job_ids.push_back(added.job_id);
    if (!added.existed) {
      ++report.added;
    } else if (added.state == store::JobState::queued || added.state == store::JobState::running ||
               added.state == store::JobState::submitted) {
      ++report.already_queued;
    } else if (rerun) {
      store::Queue(db).requeue_job(added.job_id);
      ++report.requeued;
    } else if (added.state == store::JobState::done) {
      ++report.already_done;
    } else {
      ++report.left_alone;
    }
  }
  return report;
}

EnqueueReport enqueue_experiment(const std::string& toml_path, const PluginRegistry& registry, store::Database& db,
                                 const std::string& cache_dir, bool rerun, const DataCheck& check) {
  return enqueue_checked(check_experiment(toml_path, registry, cache_dir, check), registry, db, rerun);
}

std::string describe(const EnqueueReport& r) {
  std::string line = "experiment '" + r.experiment + "': " + count(static_cast<std::int64_t>(r.job_ids.size()), "job(s)") +
                     ": " + count(r.added, "added");
  if (r.requeued) line += ", " + count(r.requeued, "queued again");
  line += ", " + count(r.already_queued, "already queued or running");
  line += ", " + count(r.already_done, "already done");
  if (r.left_alone) line += ", " + count(r.left_alone, "ended failed/diverged/oom/blocked/cancelled");
  if (r.already_done || r.left_alone) line += " (--rerun runs them again)";
  return line;
}

}  // namespace attnlab
