#pragma once
// Putting an experiment file's jobs in the queue: what `attnlab queue add`, `attnlab run` and
// `attnlab slurm submit` share. A job is its resolved config and seed (jobs.config_hash): adding
// the same file again adds nothing that is already queued or done.
#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options/variables_map.hpp>

#include "attnlab/store.hpp"
#include "experiment/experiment.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {

struct EnqueueReport {
  std::string experiment;             // its name
  std::int64_t experiment_id = 0;
  std::vector<std::int64_t> job_ids;  // every job of the file, in its order (methods x datasets x seeds)
  std::int64_t added = 0;             // new jobs, queued
  std::int64_t requeued = 0;          // finished, failed or cancelled jobs queued again (rerun)
  std::int64_t already_queued = 0;    // queued, running or submitted already: left to that
  std::int64_t already_done = 0;      // done already: left alone unless rerun
  std::int64_t left_alone = 0;        // failed, diverged, oom or cancelled: left alone unless rerun
};

// How each dataset configuration is checked before its jobs are stored. By default its size is
// estimated and bounded (data_budget.hpp), then its three splits are loaded once and checked
// (check_split) through the token cache, so that a malformed or missing file fails here, where
// the user is, and the jobs then hit the cache. The job process does neither again: a job stored
// with --force is loaded as it is.
struct DataCheck {
  bool load = true;    // false (--no-load-check): parameters and size only, the splits are loaded by the jobs
  bool force = false;  // true (--force): no size bound
};

// --force and --no-load-check of run, queue add and slurm submit.
inline DataCheck data_check(const boost::program_options::variables_map& vm) {
  return {vm.count("no-load-check") == 0, vm.count("force") > 0};
}

// The positions a job's inputs have, where its dataset says it in its parameters: pad_to when the
// rows are padded past max_len (the text tasks), else max_len; 32 for a dataset with neither.
std::int64_t job_length(const ParamValues& dataset);

// Loads and checks the experiment (every dataset configuration once, as `check` says: a missing
// folder or a malformed file fails here, before anything is stored), then records the experiment
// (the same name and text reuse one row) and its jobs. With `rerun`, jobs that ended (done,
// failed, diverged, oom, cancelled, blocked) are queued again; running and submitted ones never
// are. Without `rerun`, a done job whose counting run loaded a plugin file with another SHA-256
// than the one loaded now is a ConfigError (one line: the plugin, both hashes, --rerun) and
// nothing is stored. Each new job records the folders of its two plugins (jobs.plugin_dirs),
// which the worker that claims it searches first.
EnqueueReport enqueue_experiment(const std::string& toml_path, const PluginRegistry& registry, store::Database& db,
                                 const std::string& cache_dir, bool rerun, const DataCheck& check = {});

// The same in two steps, so that a bad file leaves no database file behind: check first, then
// open the database and store. A dataset that fails is a ConfigError
// "FILE: [datasets.NAME] what the plugin, the reader or the size bound said".
Experiment check_experiment(const std::string& toml_path, const PluginRegistry& registry, const std::string& cache_dir,
                            const DataCheck& check = {});
EnqueueReport enqueue_checked(const Experiment& experiment, const PluginRegistry& registry, store::Database& db,
                              bool rerun);

// One line: "experiment 'NAME': N jobs: A added, ...".
std::string describe(const EnqueueReport& report);

}  // namespace attnlab
