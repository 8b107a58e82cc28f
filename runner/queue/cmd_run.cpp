#include "cli/commands.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <set>

#include <unistd.h>

#include "cli/cli_options.hpp"

#include "attnlab/store.hpp"
#include "base/child_process.hpp"
#include "experiment/enqueue.hpp"
#include "experiment/experiment.hpp"
#include "queue/job_exec.hpp"
#include "plugin_host/plugin_host.hpp"
#include "queue/run_summary.hpp"
#include "queue/devices.hpp"
#include "queue/worker.hpp"
#include "studies/estimate_jobs.hpp"


namespace attnlab {
namespace po = boost::program_options;
namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

po::options_description run_options() {
  po::options_description options("attnlab run EXPERIMENT.toml [options]");
  add_plugins_option(options);
  options.add_options()
      ("experiment", po::value<std::string>(), "the experiment file (TOML)")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("devices", po::value<std::string>(), "cpu, cuda:0,cuda:1,... or all: one device worker each (default cpu)")
      ("device", po::value<std::string>(), "the same as --devices")
      ("lease", po::value<double>()->default_value(60), "lease of a claimed job in seconds, renewed every third of it")
      ("jobs-per-device", po::value<std::string>()->default_value("1"),
       "jobs running at once on each device, a device worker each (--threads 0 shares the cores among them); auto: as "
       "many as the jobs' bench figures (in the database) let fit 90% of the device's memory, one per host core, at most 8")
      ("rerun", "run again the jobs that are already done")
      ("force", "load datasets past the memory/disk bound (runner/experiment/README.md, \"Size bound\")")
      ("no-load-check", "check dataset parameters and size only; leave loading the splits to the jobs")
      ("help,h", "this help");
  add_threads_option(options);
  add_cache_dir_option(options);
  return options;
}

// The device workers `run` starts, as `attnlab worker --idle-exit` would (devices resolved: one this
// machine lacks is refused before anything is stored); jobs_per_device 0 for auto.
WorkerOptions run_workers(const po::variables_map& vm) {
  if (vm.count("devices") && vm.count("device")) throw UsageError("run: give --devices or --device, not both");
  WorkerOptions workers;
  workers.db_path = vm["db"].as<std::string>();
  workers.threads = vm["threads"].as<int>();
  workers.cache_dir = vm["cache-dir"].as<std::string>();
  workers.plugin_dirs = plugin_folders(vm);
  workers.lease_seconds = vm["lease"].as<double>();
  workers.idle_exit = true;
  if (!(workers.lease_seconds >= 0.1)) throw UsageError("run: --lease must be at least 0.1 seconds");
  try {
    workers.jobs_per_device = jobs_per_device_option(vm["jobs-per-device"].as<std::string>(), "run");
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
  workers.devices = resolve_devices(vm.count("devices") ? vm["devices"].as<std::string>()
                                    : vm.count("device") ? vm["device"].as<std::string>() : "cpu");
  return workers;
}

void say_already_done(store::ResultsReader& db, const EnqueueReport& report) {
  store::JobFilter done;
  done.ids = report.job_ids;
  done.states = {store::JobState::done};
  for (const auto& q : db.list_jobs(done))
    std::cout << "job " << q.job.id << " (" << q.job.method << "/" << q.job.dataset << " seed " << q.job.seed
              << ") is already done; --rerun runs it again\n";
}

// The newest run of each job, read back from the database, and the experiment's summary.
void print_outcome(store::ResultsReader& db, const EnqueueReport& report) {
  std::map<std::int64_t, store::RunSummary> newest;
  const std::set<std::int64_t> ids(report.job_ids.begin(), report.job_ids.end());
  for (const auto& r : db.run_summaries(std::nullopt))
    if (ids.count(r.job_id)) newest[r.job_id] = r;
  std::vector<store::RunSummary> latest;
  for (const auto& [id, r] : newest) latest.push_back(r);
  std::cout << "\n" << runs_table(latest) << "\n" << experiment_summary(db, report.job_ids);
}

// Any state but done counts against the run, whatever its name: the exit status says it.
int outcome_status(store::ResultsReader& db, const EnqueueReport& report) {
  const auto not_done = jobs_not_done(db, report.job_ids);
  if (not_done.empty()) return 0;
  std::int64_t count = 0;
  std::string states;
  for (const auto& [state, n] : not_done) count += n, states += (states.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  std::cerr << "attnlab: run: " << count << " of " << report.job_ids.size() << " job(s) did not end done (" << states
            << "); exit status " << kExitJobsNotDone << "\n";
  return kExitJobsNotDone;
}

}  // namespace

int cmd_run(const Args& args, const std::string& self_exe) {
  const auto options = run_options();
  po::positional_options_description positional;
  positional.add("experiment", 1);
  const auto vm = parse_command_line("run", args, options, positional);
  if (vm.count("help"))
    return std::cout << options << "\nexit status: 0 every job of the experiment ended done; 3 every job ran but some did\n"
                                   "not end done (failed, diverged, oom, ...: named on stderr); 1 a device worker kept dying\n"
                                   "and was given up; 2 bad usage, a bad experiment file or database, or a device worker\n"
                                   "that could not run; 128 + N stopped by signal N (SIGINT: 130, SIGTERM: 143)\n",
           0;
  if (!vm.count("experiment")) throw UsageError("run: name the experiment file");
  install_stop_handlers();  // from here on SIGINT/SIGTERM end `run` with a word, never silently
  WorkerOptions workers = run_workers(vm);

  const auto registry = load_plugins(workers.plugin_dirs);
  // a configuration or dataset error stores nothing, not even the database file
  const Experiment experiment = check_experiment(vm["experiment"].as<std::string>(), registry, workers.cache_dir, data_check(vm));
  if (stop_signal()) {
    std::cerr << "attnlab: run: stopped by signal " << stop_signal() << " before anything was queued\n";
    return 128 + stop_signal();
  }
  store::Database db(workers.db_path, store::Database::Open::migrate);
  const EnqueueReport report = enqueue_checked(experiment, registry, db, vm.count("rerun") > 0);
  if (!vm.count("rerun")) say_already_done(db, report);
  std::cout << describe(report) << ", database " << workers.db_path << std::endl;  // flushed: workers share stdout

  // Local device workers drain this experiment's jobs, exactly as `attnlab worker` would.
  workers.only_jobs = report.job_ids;
  if (workers.jobs_per_device == 0)  // auto
    workers.jobs_per_device = report.job_ids.empty() ? 1 : static_cast<int>(auto_jobs_per_device_of_queue(
        db, report.job_ids, registry, workers.devices, workers.cache_dir));
  store::JobFilter pending;
  pending.ids = report.job_ids;
  pending.states = {store::JobState::queued, store::JobState::running};
  const int status = db.list_jobs(pending).empty() || stop_signal() ? 0 : run_supervisor(workers, self_exe);

  print_outcome(db, report);
  if (stop_signal()) {
    std::cerr << "attnlab: stopped by signal " << stop_signal() << "; unfinished jobs stay queued\n";
    return 128 + stop_signal();
  }
  if (status != 0 && status != kExitJobsNotDone) return status;  // a device worker could not run or was given up
  return outcome_status(db, report);
}

int cmd_exec_job(const Args& args) {
  const auto vm = parse_command_line("exec-job", args, JobExecOptions::options());
  // first: a stop from now on checkpoints the run and ends it 'interrupted'
  install_stop_handlers();
  return execute_job(JobExecOptions::from(vm));
}

}  // namespace attnlab
