#pragma once
// Workers. `attnlab worker` is a supervisor process with one device worker process per device
// (`attnlab worker-device`, this same binary). A device worker claims jobs from the queue one at a
// time and runs each in a job process of its own (`attnlab exec-job`), renewing the job's lease
// while it runs; a job that crashes its process fails that attempt only. runner/queue/README.md
// describes the lifecycle; runner/README.md the signals and the exit statuses.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/variables_map.hpp>

namespace attnlab {
namespace store {
class ResultsReader;
}

// --jobs-per-device's text: N (1 or more), or 0 for "auto" (the front end resolves it from the
// jobs' bench figures: auto_jobs_per_device_of_queue); anything else throws, naming `command`.
int jobs_per_device_option(const std::string& text, const std::string& command);

struct WorkerOptions {
  std::string db_path = "attnlab.db";
  std::vector<std::string> devices{"cpu"};
  int jobs_per_device = 1;    // device workers per device: jobs running at once on each (0: auto, which the front end resolves)
  std::int64_t max_jobs = 0;  // jobs per device worker; 0: no limit
  bool idle_exit = false;     // end once nothing is queued or running (among only_jobs, if given)
  double lease_seconds = 60;  // renewed every lease_seconds / 3 while a job runs
  int threads = 0;            // intra-op threads per job process (0: ATTNLAB_THREADS or every core,
                              // shared out among jobs_per_device: job_threads())
  std::string cache_dir;
  std::vector<std::string> plugin_dirs;
  std::vector<std::int64_t> only_jobs;  // claim only these jobs (`attnlab run`); empty: any
  std::string job_exe;  // the program job processes run (tests: a missing one); empty: this executable
  // No-op mode (bench-queue, tests): no job process; each claimed job holds its lease for
  // noop_seconds x a random factor in [0.5, 1.5], heartbeating, then ends 'done' with noop = 1.
  bool noop = false;
  double noop_seconds = 0;

  // `worker`'s and `worker-device`'s options, one definition for both processes: the shared ones
  // (options), those with a device worker's own (--device, --only, --job-exe), and what reads them
  // (from: `command` names the process in errors).
  static boost::program_options::options_description options(const std::string& caption);
  static boost::program_options::options_description device_worker_options();
  static WorkerOptions from(const boost::program_options::variables_map& vm, const std::string& command);
  // The words after "worker-device" that start a device worker on `device`: what from() reads back,
  // with job_threads() as its --threads.
  std::vector<std::string> device_worker_args(const std::string& device) const;
};

// Device worker exit statuses, as the supervisor reads them.
inline constexpr int kDeviceWorkerDone = 0;       // idle (--idle-exit) or --max-jobs reached
inline constexpr int kDeviceWorkerError = 1;      // an unexpected error: restarted
inline constexpr int kDeviceWorkerCannotRun = 2;  // no usable database or device: not restarted
inline constexpr int kDeviceWorkerJobsNotDone = 3;  // ended as kDeviceWorkerDone, but a job it ran is not done
inline constexpr int kDeviceWorkerDiskFull = 5;     // a job could not write a checkpoint, the disk is full: not restarted
inline constexpr int kDeviceWorkerDatabaseUnusable = 6;  // the database is damaged, read-only or full: every worker stops
// stopped by SIGINT/SIGTERM: 128 + the signal; restarted unless the supervisor itself is stopping

// `attnlab run` and `attnlab worker`: every job ran, but some did not end done (run: a job of the
// experiment; worker: a job one of its device workers ran). 1 and 2 keep their meanings above.
inline constexpr int kExitJobsNotDone = 3;

// The jobs among `job_ids` in any state but done (failed, diverged, oom, or queued again after a
// failed attempt), counted by state name, in name order; {} for no ids. What `run` and a device
// worker's end (kDeviceWorkerJobsNotDone, kExitJobsNotDone) both ask.
std::map<std::string, std::int64_t> jobs_not_done(store::ResultsReader& db, const std::vector<std::int64_t>& job_ids);

// The --threads each job process gets: `threads` when set; else, with several jobs per device,
// ATTNLAB_THREADS (or every core) divided among them, at least 1; else 0 (the job decides).
int job_threads(const WorkerOptions& options);

// The supervisor, in this process: starts one device worker per device, restarts one that dies
// unexpectedly (with a back-off), forwards SIGINT/SIGTERM to them (a second signal kills them at
// once) and returns when every one has ended: 128 + the stop signal; else the worst status of a
// device worker that could not run (2), was given up or stopped for a full disk (1); else
// kExitJobsNotDone when a job a device worker ran is not done at its end; else 0.
int run_supervisor(const WorkerOptions& options, const std::string& self_exe);

// One device worker, in this process. Opens the database with Open::supervised (never migrates).
int run_device_worker(const WorkerOptions& options, const std::string& device, const std::string& self_exe);

// The arguments that start a device worker process (`self_exe worker-device ...`).
std::vector<std::string> device_worker_command(const WorkerOptions& options, const std::string& device,
                                               const std::string& self_exe);

}  // namespace attnlab
