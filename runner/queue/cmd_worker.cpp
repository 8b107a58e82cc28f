// attnlab worker: a supervisor with one device worker per device, draining the queue;
// attnlab worker-device (internal): one device worker; attnlab bench-queue: claims per second.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/cli_options.hpp"

#include "attnlab/store.hpp"
#include "base/child_process.hpp"
#include "cli/commands.hpp"
#include "queue/devices.hpp"
#include "queue/worker.hpp"
#include "plugin_host/plugin_host.hpp"
#include "studies/estimate_jobs.hpp"

namespace attnlab {
namespace po = boost::program_options;
namespace fs = std::filesystem;
namespace {

// SQLite's "2025-03-14T09:26:53.589Z" as unix seconds.
double unix_seconds(const std::string& stamp) {
  std::tm tm = {};
  std::istringstream in(stamp);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  double fraction = 0;
  if (in.peek() == '.') in >> fraction;
  if (in.fail()) throw std::runtime_error("bench-queue: unreadable timestamp '" + stamp + "'");
  return static_cast<double>(timegm(&tm)) + fraction;
}

}  // namespace

int cmd_worker(const Args& args, const std::string& self_exe) {
  po::options_description options = WorkerOptions::options(
      "attnlab worker [--db FILE] [--devices cpu|cuda:0,cuda:1,...|all] [--max-jobs N] [--idle-exit] [options]");
  options.add_options()("devices", po::value<std::string>()->default_value("cpu"),
                        "cpu, cuda:0,cuda:1,... or all (every CUDA device, else cpu): one device worker each");
  const auto vm = parse_command_line("worker", args, options);
  if (vm.count("help"))
    return std::cout << options << "\nexit status (--idle-exit, --max-jobs): 0 every job this worker ran is done; 3 a job it\n"
                                   "ran is not done (failed, diverged, oom, or queued again after a failed attempt); 1 a\n"
                                   "device worker kept dying and was given up; 2 bad usage or no usable database or device;\n"
                                   "128 + N stopped by signal N (SIGINT: 130, SIGTERM: 143)\n",
           0;
  WorkerOptions o = WorkerOptions::from(vm, "worker");
  install_stop_handlers();  // from here on SIGINT/SIGTERM end the worker with a word, never silently
  o.devices = resolve_devices(vm["devices"].as<std::string>());
  // refuse a missing, unmigrated or damaged database here, once, rather than in every device
  // worker (they open it unchecked, and check it again before each claim)
  {
    store::Database check(o.db_path, store::Database::Open::existing);
    if (o.jobs_per_device == 0)
      o.jobs_per_device = static_cast<int>(
          auto_jobs_per_device_of_queue(check, o.only_jobs, load_plugins(o.plugin_dirs), o.devices, o.cache_dir));
  }
  if (stop_signal()) {
    std::cerr << "attnlab: worker: stopped by signal " << stop_signal() << " before any device worker started\n";
    return 128 + stop_signal();
  }
  std::string names;
  for (const auto& d : o.devices) names += (names.empty() ? "" : ", ") + d;
  std::cerr << "attnlab: worker: database " << o.db_path << ", device(s) " << names << ", lease " << o.lease_seconds
            << " s"
            << (o.jobs_per_device > 1 ? ", " + std::to_string(o.jobs_per_device) + " jobs at once on each" : "")
            << (o.idle_exit ? ", until the queue is empty" : "") << std::endl;
  return run_supervisor(o, self_exe);
}

int cmd_worker_device(const Args& args, const std::string& self_exe) {
  const auto vm = parse_command_line("worker-device", args, WorkerOptions::device_worker_options());
  return run_device_worker(WorkerOptions::from(vm, "worker-device"), vm["device"].as<std::string>(), self_exe);
}

int cmd_bench_queue(const Args& args, const std::string& self_exe) {
  po::options_description options("attnlab bench-queue [--workers 1,4,8] [--jobs N] [--db FILE]");
  options.add_options()
      ("workers", po::value<std::string>()->default_value("1,4,8"), "device worker processes per round")
      ("jobs", po::value<std::int64_t>()->default_value(2000), "no-op jobs per round")
      ("db", po::value<std::string>()->default_value(""), "scratch database (must not exist; default: a temporary file)")
      ("help,h", "this help");
  const auto vm = parse_command_line("bench-queue", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  const auto rounds = split_positive_integers(vm["workers"].as<std::string>(), "--workers");
  const std::int64_t jobs = vm["jobs"].as<std::int64_t>();
  if (jobs < 1) throw std::runtime_error("bench-queue: --jobs must be at least 1");
  std::string db_path = vm["db"].as<std::string>();
  if (db_path.empty()) db_path = (fs::temp_directory_path() / ("attnlab-bench-queue-" + std::to_string(getpid()) + ".db")).string();
  if (fs::exists(db_path)) throw std::runtime_error("bench-queue: " + db_path + " exists; name a new file (it is filled and removed)");
  auto remove_db = [&] {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db_path + suffix);
  };

  install_stop_handlers();
  std::cout << "bench-queue: " << jobs << " no-op jobs per round (claim, then finish 'done'), database " << db_path << "\n"
            << "workers  claims/s  seconds  (first claim to last finish)" << std::endl;
  for (const auto workers : rounds) {
    remove_db();
    {
      store::Database db(db_path, store::Database::Open::migrate);
      const auto experiment = db.add_experiment("bench-queue", "", "");
      for (std::int64_t i = 1; i <= jobs; ++i)
        db.add_job({experiment, "noop", "noop", i, "noop = " + std::to_string(i), "noop-" + std::to_string(i), {}, {}});
    }
    WorkerOptions o;
    o.db_path = db_path;
    o.idle_exit = true;
    o.noop = true;
    o.lease_seconds = 60;
    std::vector<pid_t> pids;
    for (std::int64_t w = 0; w < workers; ++w)
      pids.push_back(start_child(device_worker_command(o, "cpu", self_exe), "device worker", SIGKILL));
    bool all_ok = true;
    for (auto pid : pids) all_ok = wait_child(pid).ok() && all_ok;
    if (stop_signal()) break;

    store::Database db(db_path, store::Database::Open::existing);
    const auto runs = db.run_summaries();
    double first = 0, last = 0;
    std::int64_t done = 0;
    for (const auto& r : runs) {
      if (r.status != store::RunStatus::done) continue;
      ++done;
      const double begin = unix_seconds(r.started_at), end = unix_seconds(r.finished_at);
      first = done == 1 ? begin : std::min(first, begin);
      last = std::max(last, end);
    }
    if (!all_ok || done != jobs || static_cast<std::int64_t>(runs.size()) != jobs)
      throw std::runtime_error("bench-queue: with " + std::to_string(workers) + " worker(s), " + std::to_string(runs.size()) +
                               " runs for " + std::to_string(jobs) + " jobs, " + std::to_string(done) + " done");
    const double seconds = std::max(last - first, 1e-3);
    std::cout << std::setw(7) << workers << "  " << std::setw(8) << std::fixed << std::setprecision(0) << jobs / seconds
              << "  " << std::setw(7) << std::setprecision(2) << seconds << std::endl;
  }
  remove_db();
  return stop_signal() ? 128 + stop_signal() : 0;
}

}  // namespace attnlab
