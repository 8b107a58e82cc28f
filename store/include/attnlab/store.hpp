#pragma once
// The results database: experiments, jobs, runs, curves and final results in one SQLite file.
// Schema and migrations: store/README.md. Every write is one transaction; every value is bound.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

struct sqlite3;

namespace attnlab::store {

struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Job states and run statuses, as stored.
// jobs.state: queued | running | done | failed | diverged | oom
// runs.status: running | done | failed | diverged | oom | interrupted
// A run whose status is 'running' and whose process is gone is a run that did not finish.

struct JobSpec {
  std::int64_t experiment_id = 0;
  std::string method;
  std::string dataset;
  std::int64_t seed = 0;
  std::string config_toml;   // the fully resolved configuration of this job
  std::string config_hash;   // identity of (resolved config, seed): unique among jobs
  std::vector<std::pair<std::string, std::string>> params;  // flattened config: "train.lr" -> "0.0001"
};

struct Job {
  std::int64_t id = 0;
  std::int64_t experiment_id = 0;
  std::string method;
  std::string dataset;
  std::int64_t seed = 0;
  std::string config_toml;
  std::string config_hash;
  std::string state;
};

struct AddedJob {
  std::int64_t job_id = 0;
  bool existed = false;  // a job with the same config_hash was already there
  std::string state;     // its state now
};

struct PluginFile {
  std::string kind;  // attention | dataset
  std::string name;
  std::string version;
  std::string path;
  std::string sha256;
};

struct RunEnvironment {
  std::string host;
  std::string device;  // cpu, cuda:0, ...
  std::string device_name;  // e.g. the GPU's name, or the CPU model
  std::string torch_version;
  std::string attnlab_version;
  std::string git_revision;
  std::int64_t threads = 0;
  std::vector<PluginFile> plugins;
};

struct CurvePoint {
  std::int64_t step = 0;
  std::string split;  // train | val | test
  std::string name;   // loss | acc | lr | ...
  double value = 0;
  double wall_seconds = 0;
};

// One run with its job and its final results, as `attnlab results` prints it.
struct RunSummary {
  std::int64_t run_id = 0;
  std::int64_t job_id = 0;
  std::string experiment;
  std::string method;
  std::string dataset;
  std::int64_t seed = 0;
  std::int64_t attempt = 0;
  std::string status;
  std::string device;
  std::string error;
  std::string started_at;
  std::string finished_at;  // empty while unfinished
  std::vector<std::pair<std::string, double>> results;  // name -> value, sorted by name
  std::optional<double> result(const std::string& name) const;
};

class Database {
 public:
  static constexpr int kSchemaVersion = 1;

  // Opens or creates the file, sets WAL and a busy timeout, and applies forward migrations.
  // A file that is not SQLite, or whose schema is newer than this build knows, is a StoreError
  // naming the file.
  explicit Database(const std::string& path);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  int schema_version();

  std::int64_t add_experiment(const std::string& name, const std::string& source_path,
                              const std::string& config_text);
  // Inserts the job, or finds the existing one with the same config_hash.
  AddedJob add_job(const JobSpec& spec);
  Job job(std::int64_t job_id);
  std::vector<Job> jobs_of_experiment(std::int64_t experiment_id);
  // Sets a job back to 'queued' (to run it again).
  void requeue_job(std::int64_t job_id);

  // New run of a job: attempt = previous attempts + 1, status 'running', job state 'running'.
  std::int64_t start_run(std::int64_t job_id, const RunEnvironment& env, std::int64_t pid);
  void append_curve(std::int64_t run_id, const std::vector<CurvePoint>& points);
  // Final status (done | failed | diverged | oom | interrupted), results and error; the job
  // takes the same state (interrupted puts it back to queued).
  void finish_run(std::int64_t run_id, const std::string& status,
                  const std::vector<std::pair<std::string, double>>& results,
                  const std::string& error, const std::string& checkpoint_path);
  // For the parent of a crashed job process: ends the run as `status` with `error` only if it
  // is still 'running'; returns whether it changed anything.
  bool fail_run_if_unfinished(std::int64_t run_id, const std::string& status, const std::string& error);
  std::optional<std::int64_t> latest_run_of_job(std::int64_t job_id);

  std::vector<RunSummary> run_summaries(std::optional<std::int64_t> experiment_id = std::nullopt);
  std::vector<CurvePoint> curve(std::int64_t run_id);
  std::vector<PluginFile> run_plugins(std::int64_t run_id);

  sqlite3* handle() { return db_; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace attnlab::store
