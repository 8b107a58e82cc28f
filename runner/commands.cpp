#include "commands.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <set>

#include <unistd.h>

#include "cli_options.hpp"

#include "attnlab/store.hpp"
#include "child_process.hpp"
#include "enqueue.hpp"
#include "attnlab/torch_compat.hpp"
#include "experiment.hpp"
#include "job_exec.hpp"
#include "plugin_host.hpp"
#include "report.hpp"
#include "worker.hpp"


namespace attnlab {
namespace po = boost::program_options;
namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<std::string> plugin_dirs(const po::variables_map& vm) {
  return vm.count("plugins") ? vm["plugins"].as<std::vector<std::string>>() : std::vector<std::string>{};
}

// Loads every plugin on the search path; refused files are reported, one line each, on stderr.
PluginRegistry load_plugins(const std::vector<std::string>& cli_dirs, bool quiet_errors = false) {
  PluginRegistry registry;
  registry.load_folders(PluginRegistry::search_path(cli_dirs));
  if (!quiet_errors)
    for (const auto& e : registry.errors()) std::cerr << "attnlab: warning: plugin " << e.line() << "\n";
  return registry;
}

void add_plugin_option(po::options_description& d) {
  d.add_options()("plugins", po::value<std::vector<std::string>>()->composing(), "extra plugin folder (repeatable)");
}

}  // namespace

int cmd_plugins(const Args& args) {
  po::options_description options("attnlab plugins [--plugins DIR]...");
  add_plugin_option(options);
  options.add_options()("help,h", "this help");
  const auto vm = parse_command_line("plugins", args, options);
  if (vm.count("help")) return std::cout << options, 0;

  const auto registry = load_plugins(plugin_dirs(vm), /*quiet_errors=*/true);
  for (auto kind : {PluginKind::attention, PluginKind::dataset}) {
    std::cout << (kind == PluginKind::attention ? "Attention methods" : "Datasets") << ":\n";
    for (const auto& p : registry.plugins()) {
      if (p.kind() != kind) continue;
      std::cout << "  " << p.name() << " " << p.info->version << "  " << p.info->description << "\n"
                << "    " << p.path << "\n";
      for (std::size_t i = 0; i < p.info->param_count; ++i) {
        const auto& s = p.info->params[i];
        std::cout << "    - " << s.name << " (" << to_string(s.type) << ", default " << s.default_value;
        if (s.choices) std::cout << ", one of " << s.choices;
        else if (s.type == ParamType::integer || s.type == ParamType::real)
          std::cout << ", range [" << format_number(s.min_value) << ", " << format_number(s.max_value) << "]";
        std::cout << "): " << s.doc << "\n";
      }
    }
  }
  std::cout << "Searched: ";
  for (std::size_t i = 0; i < registry.searched().size(); ++i) std::cout << (i ? ", " : "") << registry.searched()[i];
  std::cout << "\n";
  if (!registry.errors().empty()) {
    std::cout << "Refused:\n";
    for (const auto& e : registry.errors()) std::cout << "  " << e.line() << "\n";
  }
  return 0;
}

int cmd_run(const Args& args, const std::string& self_exe) {
  po::options_description options("attnlab run EXPERIMENT.toml [options]");
  add_plugin_option(options);
  options.add_options()
      ("experiment", po::value<std::string>(), "the experiment file (TOML)")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("devices", po::value<std::string>(), "cpu, cuda:0,cuda:1,... or all: one device worker each (default cpu)")
      ("device", po::value<std::string>(), "the same as --devices")
      ("threads", po::value<int>()->default_value(0), "intra-op threads per job (0: ATTNLAB_THREADS or every core)")
      ("cache-dir", po::value<std::string>()->default_value(""), "where datasets keep generated files and caches")
      ("lease", po::value<double>()->default_value(60), "lease of a claimed job in seconds, renewed every third of it")
      ("rerun", "run again the jobs that are already done")
      ("force", "load datasets past the memory/disk bound (runner/README.md, \"Size bound\")")
      ("no-load-check", "check dataset parameters and size only; leave loading the splits to the jobs")
      ("help,h", "this help");
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
  if (vm.count("devices") && vm.count("device")) throw UsageError("run: give --devices or --device, not both");

  WorkerOptions workers;
  workers.db_path = vm["db"].as<std::string>();
  workers.threads = vm["threads"].as<int>();
  workers.cache_dir = vm["cache-dir"].as<std::string>();
  workers.plugin_dirs = plugin_dirs(vm);
  workers.lease_seconds = vm["lease"].as<double>();
  workers.idle_exit = true;
  if (!(workers.lease_seconds >= 0.1)) throw UsageError("run: --lease must be at least 0.1 seconds");
  // refuse a device this machine lacks before anything is stored
  workers.devices = resolve_devices(vm.count("devices") ? vm["devices"].as<std::string>()
                                    : vm.count("device") ? vm["device"].as<std::string>() : "cpu");

  const auto registry = load_plugins(workers.plugin_dirs);
  const std::string path = vm["experiment"].as<std::string>();
  // a configuration or dataset error stores nothing, not even the database file
  const Experiment experiment = check_experiment(path, registry, workers.cache_dir, data_check(vm));
  store::Database db(workers.db_path, store::Database::Open::migrate);
  const EnqueueReport report = enqueue_checked(experiment, registry, db, vm.count("rerun") > 0);
  if (!vm.count("rerun")) {
    store::JobFilter done;
    done.ids = report.job_ids;
    done.states = {"done"};
    for (const auto& q : db.list_jobs(done))
      std::cout << "job " << q.job.id << " (" << q.job.method << "/" << q.job.dataset << " seed " << q.job.seed
                << ") is already done; --rerun runs it again\n";
  }
  std::cout << describe(report) << ", database " << workers.db_path << std::endl;  // flushed: workers share stdout

  // Local device workers drain this experiment's jobs, exactly as `attnlab worker` would.
  workers.only_jobs = report.job_ids;
  store::JobFilter pending;
  pending.ids = report.job_ids;
  pending.states = {"queued", "running"};
  const int status = db.list_jobs(pending).empty() ? 0 : run_supervisor(workers, self_exe);

  // the newest run of each job, read back from the database
  std::map<std::int64_t, store::RunSummary> newest;
  const std::set<std::int64_t> ids(report.job_ids.begin(), report.job_ids.end());
  for (const auto& r : db.run_summaries(std::nullopt))
    if (ids.count(r.job_id)) newest[r.job_id] = r;
  std::vector<store::RunSummary> latest;
  for (const auto& [id, r] : newest) latest.push_back(r);
  std::cout << "\n" << runs_table(latest) << "\n" << experiment_summary(db, report.job_ids);
  if (stop_signal()) {
    std::cerr << "attnlab: stopped by signal " << stop_signal() << "; unfinished jobs stay queued\n";
    return 128 + stop_signal();
  }
  if (status != 0 && status != kExitJobsNotDone) return status;  // a device worker could not run or was given up
  // Any state but done counts against the run, whatever its name: the exit status says it.
  std::map<std::string, std::int64_t> not_done;
  if (report.job_ids.empty()) return 0;  // (an empty id filter would select every job)
  store::JobFilter of_experiment;
  of_experiment.ids = report.job_ids;
  for (const auto& q : db.list_jobs(of_experiment))
    if (q.job.state != "done") ++not_done[q.job.state];
  if (not_done.empty()) return 0;
  std::int64_t count = 0;
  std::string states;
  for (const auto& [state, n] : not_done) count += n, states += (states.empty() ? "" : ", ") + std::to_string(n) + " " + state;
  std::cerr << "attnlab: run: " << count << " of " << report.job_ids.size() << " job(s) did not end done (" << states
            << "); exit status " << kExitJobsNotDone << "\n";
  return kExitJobsNotDone;
}

int cmd_exec_job(const Args& args) {
  po::options_description options("attnlab exec-job (internal: runs one claimed attempt of a job in this process)");
  add_plugin_option(options);
  options.add_options()
      ("db", po::value<std::string>()->required(), "the queue's database")
      ("job", po::value<std::int64_t>()->required(), "job id")
      ("run", po::value<std::int64_t>()->required(), "the run its lease names")
      ("device", po::value<std::string>()->default_value("cpu"), "device")
      ("threads", po::value<int>()->default_value(0), "intra-op threads")
      ("cache-dir", po::value<std::string>()->default_value(""), "dataset cache folder")
      ("checkpoint-dir", po::value<std::string>()->default_value(""), "checkpoint folder (default: DB.ckpt)");
  const auto vm = parse_command_line("exec-job", args, options);
  // first: a stop from now on checkpoints the run and ends it 'interrupted'
  install_stop_handlers();
  JobExecOptions o;
  o.db_path = vm["db"].as<std::string>();
  o.job_id = vm["job"].as<std::int64_t>();
  o.run_id = vm["run"].as<std::int64_t>();
  o.device = vm["device"].as<std::string>();
  o.threads = vm["threads"].as<int>();
  o.cache_dir = vm["cache-dir"].as<std::string>();
  o.checkpoint_dir = vm["checkpoint-dir"].as<std::string>();
  return execute_job(o, plugin_dirs(vm)) == "lost" ? kExitLeaseLost : 0;
}

}  // namespace attnlab
