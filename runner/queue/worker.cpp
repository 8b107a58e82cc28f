#include "queue/worker.hpp"
#include "queue/supervisor.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <iostream>
#include <optional>
#include <random>
#include <thread>
#include <stdexcept>

#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "attnlab/store/run_writer.hpp"
#include "cli/cli_options.hpp"
#include "queue/checkpoint_sweep.hpp"
#include "base/child_process.hpp"
#include "queue/job_exec.hpp"

namespace attnlab {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

constexpr double kPollSeconds = 0.02;       // how often a device worker looks at its job process
constexpr double kIdleBackoffMax = 2.0;     // longest wait between claims on an empty queue
constexpr double kClaimCheckSeconds = 0.5;  // the most a quick_check before a claim may take
constexpr double kIdleCheckSeconds = 30.0;  // between quick_checks while no job comes (polls)
constexpr double kFullDiskGraceSeconds = 10.0;  // a database disk full for a moment is waited out this long

// What a person must do about a database fault that stops the workers, in words.
std::string remedy(store::DatabaseFault fault) {
  switch (fault) {
    case store::DatabaseFault::full: return "free some space and start a worker again";
    case store::DatabaseFault::read_only: return "make the file and its folder writable and start a worker again";
    case store::DatabaseFault::damaged: return "restore the file from a copy (`attnlab db check` lists what is wrong)";
    default: return "start a worker again once it is fixed";
  }
}

// How long a job process that lost its lease gets to stop after SIGTERM before SIGKILL.
double lease_lost_grace(double lease_seconds) { return std::clamp(lease_seconds / 2, 1.0, 10.0); }

// Nothing left for this worker: no job queued or running (among `only`, if given). A running job
// still counts: its lease may expire and put it back in the queue.
bool nothing_left(store::ResultsReader& db, const std::vector<std::int64_t>& only) {
  if (only.empty()) {
    for (const auto& [state, count] : db.queue_counts())
      if ((state == store::JobState::queued || state == store::JobState::running) && count > 0) return false;
    return true;
  }
  store::JobFilter filter;
  filter.states = {store::JobState::queued, store::JobState::running};
  filter.ids = only;
  return db.list_jobs(filter).empty();
}

class DeviceWorker {
 public:
  DeviceWorker(const WorkerOptions& options, std::string device, std::string self_exe)
      : o_(options), device_(std::move(device)), self_exe_(std::move(self_exe)), db_(o_.db_path, store::Database::Open::supervised) {
    claimer_.host = host_name();
    claimer_.pid = getpid();
    claimer_.device = device_;
    claimer_.worker = claimer_.host + ":" + std::to_string(claimer_.pid) + ":" + device_;
    random_.seed(static_cast<std::uint64_t>(claimer_.pid) * 0x9E3779B97F4A7C15ULL ^
                 static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()));
  }

  int run() {
    std::int64_t jobs = 0;
    double idle_wait = 0.05;
    while (stop_requests() == 0) {
      if (o_.max_jobs > 0 && jobs >= o_.max_jobs) return end_status();
      const auto lease = claim();
      if (!lease) {
        if (o_.idle_exit && nothing_left(db_, o_.only_jobs)) return end_status();
        sleep_seconds(idle_wait);
        idle_wait = std::min(idle_wait * 2, kIdleBackoffMax);
        continue;
      }
      idle_wait = 0.05;
      ++jobs;
      ran_.push_back(lease->job_id);
      if (stop_requests() > 0) {  // the stop came while we claimed: give the job straight back
        release_interrupted(*lease, "stopped before it began");
        break;
      }
      if (o_.noop) {
        run_noop(*lease);
      } else if (!run_job_process(*lease)) {
        say("claims no more jobs: the disk is full (see above); free some space and start a worker again");
        return kDeviceWorkerDiskFull;
      }
    }
    return 128 + stop_signal();
  }

 private:
  // The next job, on a file re-checked first (quick_check, if it fits in kClaimCheckSeconds: a file
  // damaged while workers run is never written again): before the first claim and each claim
  // after a job, and every kIdleCheckSeconds while the queue is idle. A disk full for a moment is
  // waited out; any other database fault is thrown (run_device_worker says what it means).
  std::optional<store::Lease> claim() {
    const auto first_try = Clock::now();
    for (;;) {
      try {
        if (!checked_at_ || seconds_since(*checked_at_) > kIdleCheckSeconds) {
          db_.quick_check_within(kClaimCheckSeconds);
          checked_at_ = Clock::now();
        }
        auto lease = store::Queue(db_).claim_next_job(claimer_, o_.lease_seconds, o_.only_jobs);
        if (lease) checked_at_.reset();  // the next claim comes after this job: check again then
        return lease;
      } catch (const store::StoreError& e) {
        if (store::database_fault(e) != store::DatabaseFault::full || seconds_since(first_try) > kFullDiskGraceSeconds ||
            stop_requests() > 0)
          throw;
      }
      sleep_seconds(1.0);
    }
  }

  // A normal end (--idle-exit, --max-jobs): kDeviceWorkerJobsNotDone when a job this worker ran
  // is in any state but done now (failed, diverged, oom, or queued again after a failed attempt).
  int end_status() { return jobs_not_done(db_, ran_).empty() ? kDeviceWorkerDone : kDeviceWorkerJobsNotDone; }

  void say(const std::string& line) const { std::cerr << "attnlab: worker " << claimer_.worker << ": " << line << std::endl; }

  void release_interrupted(const store::Lease& lease, const std::string& why) {
    try {
      store::RunWriter(db_, lease.run_id).finish(store::RunStatus::interrupted, {}, why, "");
    } catch (const store::LeaseLost&) {
    }
  }

  // Renews the lease; false once the run no longer holds it. A database error is not a lost
  // lease: it is reported and the next heartbeat tries again.
  bool heartbeat(const store::Lease& lease) {
    try {
      return store::Queue(db_).renew_lease(lease.run_id, o_.lease_seconds);
    } catch (const store::StoreError& e) {
      say("heartbeat of run " + std::to_string(lease.run_id) + " failed, trying again: " + e.what());
      return true;
    }
  }

  void run_noop(const store::Lease& lease) {
    const double hold = o_.noop_seconds * std::uniform_real_distribution<double>(0.5, 1.5)(random_);
    const auto start = Clock::now();
    for (double left = hold; left > 0; left = hold - seconds_since(start)) {
      sleep_seconds(std::min(left, o_.lease_seconds / 3));
      if (stop_requests() > 0) return release_interrupted(lease, "stopped by signal " + std::to_string(stop_signal()));
      if (!heartbeat(lease)) return;  // taken from us: write nothing
    }
    try {
      store::RunWriter(db_, lease.run_id).finish(store::RunStatus::done, {{"noop", 1.0}}, "", "");
    } catch (const store::LeaseLost&) {
    }
  }

  std::vector<std::string> job_command(const store::Lease& lease) const {
    JobExecOptions job;
    job.db_path = o_.db_path;
    job.job_id = lease.job_id;
    job.run_id = lease.run_id;
    job.device = device_;
    job.threads = o_.threads;
    job.cache_dir = o_.cache_dir;
    job.plugin_dirs = o_.plugin_dirs;
    std::vector<std::string> argv = {o_.job_exe.empty() ? self_exe_ : o_.job_exe, "exec-job"};
    const auto args = job.to_args();
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  // Runs the claimed job in a job process of its own; false when that process could not write a
  // checkpoint because the disk is full (it recorded its attempt as the infrastructure's).
  // One attempt: its job process started, watched (heartbeats, a lost lease) and its end recorded.
  // false: the disk is full (the worker stops; the supervisor does not restart it).
  bool run_job_process(const store::Lease& lease) {
    const std::string what = "run " + std::to_string(lease.run_id) + " (job " + std::to_string(lease.job_id) +
                             ", attempt " + std::to_string(lease.attempt) + ")";
    say(what + " starts");
    const pid_t pid = start_job_process(lease, what);
    const Watched watched = watch(pid, lease, what);
    if (watched.lease_lost || (!watched.exit.signalled && watched.exit.code == kExitLeaseLost)) {
      say(what + " is no longer ours (lease lost); nothing more written");
      return true;
    }
    if (!watched.exit.signalled && watched.exit.code == kExitDiskFull) {
      sweep_files_of(lease);
      return false;
    }
    record_end(lease, what, watched.exit);
    sweep_files_of(lease);
    return true;
  }

  pid_t start_job_process(const store::Lease& lease, const std::string& what) {
    pid_t pid = 0;
    try {
      pid = start_child(job_command(lease), "job process", SIGKILL);
    } catch (const std::exception& e) {
      // Not the job's fault: this worker cannot start processes (its executable gone while it ran,
      // no memory to fork). Counting it would burn every queued job's attempts in a second, so the
      // attempt goes back uncounted and the worker stops; the supervisor restarts it with a back-off.
      say(what + " could not start its job process: " + e.what() + "; the job goes back to the queue uncounted");
      release_interrupted(lease, std::string("the worker could not start the job process: ") + e.what());
      throw std::runtime_error(std::string("stopping: ") + e.what());
    }
    forward_stops_to(pid);
    if (stop_requests() > 0) kill(pid, SIGTERM);  // a stop that came before the forwarding was set
    try {
      store::RunWriter(db_, lease.run_id).set_pid(pid);
    } catch (const store::StoreError& e) {  // a lease lost or a busy file: the job process finds out itself
      say(what + ": could not record its job process's pid: " + e.what());
    } catch (const store::LeaseLost&) {
    }
    return pid;
  }

  struct Watched {
    ChildExit exit;
    bool lease_lost = false;  // someone else ended the run: its job process was stopped
  };

  // Until the job process ends: its lease renewed every third of it; a lease taken from us stops
  // the process (SIGTERM, then SIGKILL after a grace).
  Watched watch(pid_t pid, const store::Lease& lease, const std::string& what) {
    Watched watched;
    auto next_heartbeat = Clock::now() + seconds(o_.lease_seconds / 3);
    std::optional<Clock::time_point> kill_at;
    bool recorded_its_end = false;  // the job process ended its run itself and is exiting
    for (;;) {
      if (const auto ended = poll_child(pid)) {
        watched.exit = *ended;
        break;
      }
      const auto now = Clock::now();
      if (!watched.lease_lost && !recorded_its_end && now >= next_heartbeat) {
        next_heartbeat = now + seconds(o_.lease_seconds / 3);
        if (!heartbeat(lease)) {
          // A refused renewal also follows the job process's own RunWriter::finish, which releases the
          // lease a moment before the process exits: only a run ended from outside is lost.
          const std::string why = taken_from_us(lease);
          if (why.empty()) {
            recorded_its_end = true;
          } else {
            watched.lease_lost = true;
            say(what + " " + why + "; stopping its job process");
            kill(pid, SIGTERM);
            kill_at = now + seconds(lease_lost_grace(o_.lease_seconds));
          }
        }
      }
      if (kill_at && now >= *kill_at) {
        kill(pid, SIGKILL);
        kill_at.reset();
      }
      sleep_seconds(kPollSeconds);
    }
    forward_stops_to(0);
    return watched;
  }

  // The job process records its own end; if it could not (a crash, a kill), we do it for it. A
  // signal the process raised itself (a segfault, an abort) is the method's crash; any other
  // (SIGKILL from a person or the OOM killer, SIGTERM, SIGHUP, SIGPIPE) came from outside and is
  // counted against the job's infrastructure cap instead.
  void record_end(const store::Lease& lease, const std::string& what, const ChildExit& exit) {
    const bool stopped = stop_requests() > 0 && (exit.stopped_by_request() || exit.ok());
    const bool from_outside = exit.signalled && !exit.crashed_itself();
    const store::RunStatus status = stopped        ? store::RunStatus::interrupted
                                    : from_outside ? store::RunStatus::lost
                                                   : store::RunStatus::failed;
    const bool database_fault = !exit.signalled && exit.code == kExitDatabaseFault;
    const std::string error = database_fault ? "the job process could not write the database"
                                             : "job process " + exit.describe() +
                                                   (status == store::RunStatus::lost ? ", not by its own code" : "");
    try {
      if (store::RunWriter(db_, lease.run_id).fail_if_unfinished(database_fault ? store::RunStatus::lost : status, error))
        say(what + " " + to_string(database_fault ? store::RunStatus::lost : status) + ": " + error);
    } catch (const store::LeaseLost&) {
      say(what + " is no longer ours (lease lost); nothing more written");
    } catch (const store::StoreError& e) {
      if (store::database_fault(e) == store::DatabaseFault::none) throw;
      say(what + " could not be ended in the database (" + e.what() + "); it ends as lost when its lease expires");
    }
  }

  // Why the run no longer holds its lease when someone else ended it (its lease expired and was
  // ended, the job was cancelled); "" when the run ended itself (its job process recorded its end).
  std::string taken_from_us(const store::Lease& lease) {
    try {
      const store::RunAttempt run = db_.run_attempt(lease.run_id);
      // lost by its lease's end is someone else's doing; lost otherwise (the database refused the
      // job process's writes) the job process recorded itself
      if (run.status == store::RunStatus::lost && run.error.rfind("lease expired", 0) == 0)
        return "lost its lease (" + run.error + ")";
      if (run.status == store::RunStatus::lost) return "";
      if (run.status == store::RunStatus::interrupted && db_.job(lease.job_id).state == store::JobState::cancelled)
        return "was cancelled";
      if (run.status == store::RunStatus::running) return "lost its lease (run " + std::to_string(lease.run_id) + " holds it no more)";
      return "";
    } catch (const store::StoreError& e) {
      return std::string("lost its lease (") + e.what() + ")";
    }
  }

  // The attempt's files that nothing can resume from any more (checkpoint_sweep.hpp). A failure
  // here costs disk, not results: reported, never fatal.
  void sweep_files_of(const store::Lease& lease) {
    try {
      sweep_checkpoints(db_, checkpoint_dir_of(o_.db_path), lease.job_id);
    } catch (const std::exception& e) {
      say("could not remove the unused checkpoint files of job " + std::to_string(lease.job_id) + ": " + e.what());
    }
  }

  const WorkerOptions& o_;
  const std::string device_;
  const std::string self_exe_;
  store::Database db_;
  store::Claimer claimer_;
  std::mt19937_64 random_;
  std::vector<std::int64_t> ran_;  // the jobs this worker claimed
  std::optional<Clock::time_point> checked_at_;  // the last quick_check (none: check before the next claim)
};

}  // namespace

int job_threads(const WorkerOptions& o) {
  if (o.threads > 0 || o.jobs_per_device <= 1) return o.threads;
  const char* env = std::getenv("ATTNLAB_THREADS");
  const int cores = env && std::atoi(env) > 0 ? std::atoi(env) : static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / o.jobs_per_device);
}

po::options_description WorkerOptions::options(const std::string& caption) {
  po::options_description options(caption);
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "the queue's database (it must exist: attnlab db migrate)")
      ("max-jobs", po::value<std::int64_t>()->default_value(0), "jobs per device worker, then stop (0: no limit)")
      ("jobs-per-device", po::value<std::string>()->default_value("1"),
       "device workers per device: jobs running at once on each; auto: as many as the bench figures of the jobs "
       "let fit 90% of the device's memory, one per host core, at most 8")
      ("idle-exit", "stop once nothing is queued or running")
      ("lease", po::value<double>()->default_value(60), "lease of a claimed job in seconds, renewed every third of it")
      ("noop", "(benchmark, tests) claim jobs and finish them as 'done' without running them")
      ("noop-seconds", po::value<double>()->default_value(0), "(with --noop) mean time a job holds its lease")
      ("help,h", "this help");
  add_threads_option(options);
  add_cache_dir_option(options);
  add_plugins_option(options);
  return options;
}

po::options_description WorkerOptions::device_worker_options() {
  po::options_description options = WorkerOptions::options("attnlab worker-device (internal: one device worker, started by attnlab worker)");
  options.add_options()
      ("device", po::value<std::string>()->required(), "cpu or cuda:N")
      ("only", po::value<std::vector<std::string>>()->composing(), "claim only these job ids (comma-separated; repeatable)")
      ("job-exe", po::value<std::string>()->default_value(""), "(tests) the program job processes run; default: this one");
  return options;
}

int jobs_per_device_option(const std::string& text, const std::string& command) {
  if (text == "auto") return 0;
  std::size_t end = 0;
  int n = 0;
  try {
    n = std::stoi(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  if (end != text.size() || end == 0 || n < 1)
    throw std::runtime_error(command + ": --jobs-per-device must be 1 or more, or auto (got '" + text + "')");
  return n;
}

WorkerOptions WorkerOptions::from(const po::variables_map& vm, const std::string& command) {
  WorkerOptions o;
  o.db_path = vm["db"].as<std::string>();
  o.max_jobs = vm["max-jobs"].as<std::int64_t>();
  o.jobs_per_device = jobs_per_device_option(vm["jobs-per-device"].as<std::string>(), command);
  o.idle_exit = vm.count("idle-exit") > 0;
  o.lease_seconds = vm["lease"].as<double>();
  o.threads = vm["threads"].as<int>();
  o.cache_dir = vm["cache-dir"].as<std::string>();
  o.plugin_dirs = plugin_folders(vm);
  o.noop = vm.count("noop") > 0;
  o.noop_seconds = vm["noop-seconds"].as<double>();
  for (const auto& chunk : option_values(vm, "only"))
    for (auto id : split_positive_integers(chunk, "--only")) o.only_jobs.push_back(id);
  if (vm.count("job-exe")) o.job_exe = vm["job-exe"].as<std::string>();
  if (!(o.lease_seconds >= 0.1)) throw std::runtime_error(command + ": --lease must be at least 0.1 seconds");
  if (o.max_jobs < 0) throw std::runtime_error(command + ": --max-jobs must be 0 (no limit) or more");
  if (!(o.noop_seconds >= 0)) throw std::runtime_error(command + ": --noop-seconds must be 0 or more");
  return o;
}

std::vector<std::string> WorkerOptions::device_worker_args(const std::string& device) const {
  std::vector<std::string> args = {"--db", db_path, "--device", device, "--lease", std::to_string(lease_seconds),
                                   "--threads", std::to_string(job_threads(*this)), "--max-jobs", std::to_string(max_jobs)};
  if (idle_exit) args.push_back("--idle-exit");
  if (!cache_dir.empty()) args.insert(args.end(), {"--cache-dir", cache_dir});
  for (const auto& d : plugin_dirs) args.insert(args.end(), {"--plugins", d});
  // job ids in chunks: one argument of a command line is limited to 128 KiB on Linux
  for (std::size_t i = 0; i < only_jobs.size(); i += 2000) {
    std::string chunk;
    for (std::size_t j = i; j < std::min(only_jobs.size(), i + 2000); ++j) chunk += (j > i ? "," : "") + std::to_string(only_jobs[j]);
    args.insert(args.end(), {"--only", chunk});
  }
  if (!job_exe.empty()) args.insert(args.end(), {"--job-exe", job_exe});
  if (noop) args.insert(args.end(), {"--noop", "--noop-seconds", std::to_string(noop_seconds)});
  return args;
}

std::vector<std::string> device_worker_command(const WorkerOptions& o, const std::string& device, const std::string& self_exe) {
  std::vector<std::string> argv = {self_exe, "worker-device"};
  const auto args = o.device_worker_args(device);
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

int run_device_worker(const WorkerOptions& options, const std::string& device, const std::string& self_exe) {
  install_stop_handlers();
  std::optional<DeviceWorker> worker;
  try {
    worker.emplace(options, device, self_exe);
  } catch (const std::exception& e) {
    std::cerr << "attnlab: worker on " << device << ": " << e.what() << "\n";
    return kDeviceWorkerCannotRun;
  }
  try {
    return worker->run();
  } catch (const std::exception& e) {
    // A database that is damaged, read-only or full stays so until someone acts: every worker
    // stops in one line instead of restarting into the same error. A lock may pass: restarted.
    const auto fault = store::database_fault(e);
    if (fault == store::DatabaseFault::full || fault == store::DatabaseFault::read_only ||
        fault == store::DatabaseFault::damaged) {
      std::cerr << "attnlab: worker on " << device << ": claims no more jobs: " << e.what() << "; " << remedy(fault) << "\n";
      return kDeviceWorkerDatabaseUnusable;
    }
    std::cerr << "attnlab: worker on " << device << ": " << e.what() << "\n";
    return kDeviceWorkerError;
  }
}

std::map<std::string, std::int64_t> jobs_not_done(store::ResultsReader& db, const std::vector<std::int64_t>& job_ids) {
  std::map<std::string, std::int64_t> counts;
  if (job_ids.empty()) return counts;  // (an empty id filter would select every job)
  store::JobFilter filter;
  filter.ids = job_ids;
  for (const auto& q : db.list_jobs(filter))
    if (q.job.state != store::JobState::done) ++counts[to_string(q.job.state)];
  return counts;
}

namespace {

// run_supervisor's device slots (one per device and --jobs-per-device), each running a device
// worker process, until every slot has finished; the rules in supervisor.hpp.
class Supervisor {
 public:
  Supervisor(const WorkerOptions& options, const std::string& self_exe) : options_(options), self_exe_(self_exe) {
    for (const auto& d : options.devices)
      for (int i = 0; i < options.jobs_per_device; ++i) slots_.push_back(Slot{d});
  }

  int run() {
    // A device worker gets SIGTERM if this process dies, so its job is checkpointed and released.
    for (auto& slot : slots_) start(slot);
    for (;;) {
      if (forward_stops()) return 128 + stop_signal();
      bool all_finished = true;
      for (auto& slot : slots_) all_finished = look_at(slot) && all_finished;
      if (all_finished) break;
      sleep_seconds(0.05);
    }
    if (stop_signal()) return 128 + stop_signal();
    int status = 0;
    for (const auto& slot : slots_) status = std::max(status, slot.status);
    return status == 0 && jobs_not_done_ ? kExitJobsNotDone : status;
  }

 private:
  struct Slot {
    std::string device;
    pid_t pid = 0;  // 0: not running
    Clock::time_point started, restart_at;
    int quick_deaths = 0;
    bool finished = false;
    int status = 0;
  };

  static void say(const std::string& line) { std::cerr << "attnlab: worker: " << line << std::endl; }

  void start(Slot& slot) {
    slot.pid = start_child(device_worker_command(options_, slot.device, self_exe_), "device worker", SIGTERM);
    slot.started = Clock::now();
  }

  // Passes new stop requests on: the first as the signal it was (jobs checkpointed and released),
  // a second as SIGKILL. true once the device workers were killed: the supervisor ends.
  bool forward_stops() {
    const int requests = stop_requests();
    if (requests <= forwarded_) return false;
    const bool now = requests >= 2;
    for (auto& slot : slots_)
      if (slot.pid > 0) kill(slot.pid, now ? SIGKILL : stop_signal());
    if (forwarded_ == 0)
      say("stopping on signal " + std::to_string(stop_signal()) +
          (now ? "" : "; running jobs are checkpointed and released (again to kill now)"));
    forwarded_ = requests;
    if (!now) return false;
    for (auto& slot : slots_)
      if (slot.pid > 0) wait_child(slot.pid);
    say("second signal: killed the device workers; a job one still held returns to the queue when its lease expires");
    return true;
  }

  // The slot's worker, if it ended: after_exit decides; a slot waiting for its restart is started
  // when its time comes. true when the slot has finished.
  bool look_at(Slot& slot) {
    if (slot.pid > 0) {
      const auto exit = poll_child(slot.pid);
      if (!exit) return false;
      slot.pid = 0;
      const SlotDecision d = after_exit(*exit, slot.device, slot.quick_deaths, seconds_since(slot.started),
                                        stop_requests() > 0 || database_unusable_);
      if (!d.say.empty()) say(d.say);
      slot.quick_deaths = d.quick_deaths;
      slot.finished = d.finished;
      slot.status = d.status;
      slot.restart_at = Clock::now() + seconds(d.restart_in);
      jobs_not_done_ = jobs_not_done_ || d.jobs_not_done;
      if (d.stop_every_slot) {
        database_unusable_ = true;
        for (auto& other : slots_)
          if (other.pid > 0) kill(other.pid, SIGTERM);
      }
    }
    if (slot.finished) return true;
    if (stop_requests() > 0 || database_unusable_) return slot.finished = true;
    if (Clock::now() >= slot.restart_at) start(slot);
    return false;
  }

  const WorkerOptions& options_;
  const std::string& self_exe_;
  std::vector<Slot> slots_;
  bool jobs_not_done_ = false;      // a device worker ended normally with a job it ran not done
  bool database_unusable_ = false;  // one said so: the others were stopped, none restarts
  int forwarded_ = 0;               // stop requests passed on so far
};

}  // namespace

int run_supervisor(const WorkerOptions& options, const std::string& self_exe) {
  install_stop_handlers();
  return Supervisor(options, self_exe).run();
}

}  // namespace attnlab
