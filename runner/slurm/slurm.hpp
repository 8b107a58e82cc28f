#pragma once
// Running an experiment's jobs as a SLURM job array. `attnlab slurm submit` writes a submission
// folder: one database shard per array task (the experiment and exactly one job, so no two nodes
// ever write one SQLite file), a manifest, logs/ and the sbatch script; each task runs a worker on
// its own shard; `attnlab slurm collect` merges the shards into the main database by run uid.
// Throttling (%K) and requeueing are SLURM's own.
#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::slurm {

// One array task: the main database's job it runs.
struct Task {
  std::int64_t index = 0;   // SLURM_ARRAY_TASK_ID
  std::int64_t job_id = 0;  // the job's id in the main database (0 in a dry run: none was queued)
  std::string config_hash;
  std::string method, dataset;
  std::int64_t seed = 0;
};

// manifest.toml of a submission folder.
struct Manifest {
  std::string database;         // the main database, absolute
  std::string experiment;       // its name
  std::string experiment_file;  // absolute
  std::string created_at;       // UTC, ISO 8601
  std::string slurm_job_id;     // "" until sbatch accepted it
  bool dry_run = false;         // written by `submit --dry-run`: never submitted, job ids 0; collect skips it
  std::vector<Task> tasks;
};

constexpr const char* kManifestName = "manifest.toml";
constexpr const char* kScriptName = "submit.sbatch";

// shards/task-<index>.db inside a submission folder.
std::string shard_path(const std::string& folder, std::int64_t index);

void write_manifest(const std::string& folder, const Manifest& manifest);  // written whole, then renamed
Manifest read_manifest(const std::string& folder);  // one-line std::runtime_error naming the file

// What the sbatch script asks of SLURM and passes to each task's worker.
struct ScriptOptions {
  std::string partition;                 // "": the cluster's default
  std::string time;                      // "": the partition's default limit
  std::int64_t gpus_per_task = 0;        // 0: CPU only
  std::int64_t cpus_per_task = 1;        // also the job's intra-op threads
  std::int64_t max_parallel = 0;         // 0: no throttle
  std::vector<std::string> extra;        // further "#SBATCH ..." options, as given
  std::string cache_dir;                 // "": the worker's default
  std::vector<std::string> plugin_dirs;  // absolute
};

// The script: `#SBATCH --array=0-(N-1)%K --requeue ...`, then `exec attnlab slurm task`.
std::string sbatch_script(const std::string& folder, const Manifest& manifest, const ScriptOptions& options,
                          const std::string& attnlab_exe);

// Single-quoted for /bin/sh.
std::string shell_quote(const std::string& word);

// The program's path if `name` is an executable on PATH, else "".
std::string find_on_path(const std::string& name);

// A finished child: its exit status (or 128 + signal) and what it wrote.
struct Captured {
  int status = 0;
  std::string out, err;
};
// Runs argv (argv[0] looked up on PATH) with stdout and stderr captured; throws if it cannot start.
Captured run_captured(const std::vector<std::string>& argv);

}  // namespace attnlab::slurm
