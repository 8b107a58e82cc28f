#include "commands.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <set>

#include <unistd.h>

#include <boost/program_options.hpp>

#include "attnlab/store.hpp"
#include "child_process.hpp"
#include "attnlab/torch_compat.hpp"
#include "experiment.hpp"
#include "job_exec.hpp"
#include "plugin_host.hpp"
#include "report.hpp"


namespace attnlab {
namespace po = boost::program_options;
namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

po::variables_map parse(const Args& args, const po::options_description& options,
                        const po::positional_options_description& positional = {}) {
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return vm;
}

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

// --- attnlab run: the child process per job --------------------------------------------------


}  // namespace

int cmd_plugins(const Args& args) {
  po::options_description options("attnlab plugins [--plugins DIR]...");
  add_plugin_option(options);
  options.add_options()("help,h", "this help");
  const auto vm = parse(args, options);
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
      ("device", po::value<std::string>()->default_value("cpu"), "cpu, cuda or cuda:N")
      ("threads", po::value<int>()->default_value(0), "intra-op threads per job (0: ATTNLAB_THREADS or every core)")
      ("cache-dir", po::value<std::string>()->default_value(""), "where datasets keep generated files and caches")
      ("rerun", "run again the jobs that are already done")
      ("help,h", "this help");
  po::positional_options_description positional;
  positional.add("experiment", 1);
  const auto vm = parse(args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("experiment")) throw UsageError("run: name the experiment file");

  const auto cli_dirs = plugin_dirs(vm);
  const auto registry = load_plugins(cli_dirs);
  const std::string path = vm["experiment"].as<std::string>();
  const std::string db_path = vm["db"].as<std::string>();
  const std::string device = vm["device"].as<std::string>();
  const std::string cache_dir = vm["cache-dir"].as<std::string>();
  compat::parse_device(device);  // refuse a device this machine lacks before anything is stored

  const Experiment experiment = load_experiment(path, registry);
  // Each dataset configuration once: a plugin may refuse its parameters (a missing folder, say)
  // before any job is stored.
  std::set<std::string> checked;
  for (const auto& job : experiment.jobs) {
    if (!checked.insert(job.dataset + "\n" + job.config_toml.substr(job.config_toml.find("[datasets"))).second) continue;
    try {
      registry.find(PluginKind::dataset, job.dataset)->make_dataset({cache_dir.empty() ? default_cache_dir() : cache_dir}, job.dataset_params)->info();
    } catch (const std::exception& e) {
      throw ConfigError(path + ": [datasets." + job.dataset + "] " + e.what());
    }
  }

  store::Database db(db_path);
  const auto experiment_id = db.add_experiment(experiment.name, path, experiment.source_text);
  std::vector<std::int64_t> to_run, job_ids;
  for (const auto& job : experiment.jobs) {
    store::JobSpec spec{experiment_id, job.method, job.dataset, job.seed, job.config_toml, job.config_hash, job.flat};
    const auto added = db.add_job(spec);
    job_ids.push_back(added.job_id);
    if (added.existed && added.state == "done" && !vm.count("rerun")) {
      std::cout << "job " << added.job_id << " (" << job.method << "/" << job.dataset << " seed " << job.seed
                << ") is already done; --rerun runs it again" << std::endl;
      continue;
    }
    if (added.existed) db.requeue_job(added.job_id);
    to_run.push_back(added.job_id);
  }
  std::cout << "experiment '" << experiment.name << "': " << experiment.jobs.size() << " job(s), " << to_run.size()
            << " to run, database " << db_path << std::endl;  // flushed: job processes share stdout

  for (auto job_id : to_run) {
    if (stop_signal()) break;
    std::vector<std::string> argv = {self_exe, "exec-job", "--db", db_path, "--job", std::to_string(job_id),
                                     "--device", device, "--threads", std::to_string(vm["threads"].as<int>())};
    if (!cache_dir.empty()) argv.insert(argv.end(), {"--cache-dir", cache_dir});
    for (const auto& d : cli_dirs) argv.insert(argv.end(), {"--plugins", d});
    const ChildExit exit = run_child(argv, "job process");
    if (exit.ok()) continue;
    // The job process died or gave up: make sure its run does not stay 'running'.
    const auto run = db.latest_run_of_job(job_id);
    const bool stopped = exit.signalled && (exit.code == SIGINT || exit.code == SIGTERM);
    const std::string why = "job process " + exit.describe();
    if (run && db.fail_run_if_unfinished(*run, stopped ? "interrupted" : "failed", why))
      std::cerr << "attnlab: run " << *run << " of job " << job_id << ": " << why << "\n";
    if (!run) std::cerr << "attnlab: job " << job_id << ": " << why << " before its run started\n";
  }

  std::vector<store::RunSummary> latest;
  for (const auto& r : db.run_summaries(std::nullopt)) {
    for (auto id : job_ids)
      if (r.job_id == id) latest.push_back(r);
  }
  // keep the newest run of each job
  std::map<std::int64_t, store::RunSummary> newest;
  for (const auto& r : latest) newest[r.job_id] = r;
  latest.clear();
  for (const auto& [id, r] : newest) latest.push_back(r);
  std::cout << "\n" << runs_table(latest) << "\n" << seeds_table(latest);
  if (stop_signal()) {
    std::cerr << "attnlab: stopped by signal " << stop_signal() << "; unfinished jobs stay queued\n";
    return 128 + stop_signal();
  }
  return 0;
}

int cmd_results(const Args& args) {
  po::options_description options("attnlab results [--db FILE]");
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("help,h", "this help");
  const auto vm = parse(args, options);
  if (vm.count("help")) return std::cout << options, 0;
  const std::string db_path = vm["db"].as<std::string>();
  if (access(db_path.c_str(), F_OK) != 0) throw UsageError(db_path + ": no such database");
  store::Database db(db_path);
  const auto runs = db.run_summaries(std::nullopt);
  if (runs.empty()) return std::cout << db_path << ": no runs yet\n", 0;
  std::cout << runs_table(runs) << "\n" << seeds_table(runs);
  return 0;
}

int cmd_exec_job(const Args& args) {
  po::options_description options("attnlab exec-job (internal: runs one stored job in this process)");
  add_plugin_option(options);
  options.add_options()
      ("db", po::value<std::string>()->required(), "results database")
      ("job", po::value<std::int64_t>()->required(), "job id")
      ("device", po::value<std::string>()->default_value("cpu"), "device")
      ("threads", po::value<int>()->default_value(0), "intra-op threads")
      ("cache-dir", po::value<std::string>()->default_value(""), "dataset cache folder");
  const auto vm = parse(args, options);
  JobExecOptions o;
  o.db_path = vm["db"].as<std::string>();
  o.job_id = vm["job"].as<std::int64_t>();
  o.device = vm["device"].as<std::string>();
  o.threads = vm["threads"].as<int>();
  o.cache_dir = vm["cache-dir"].as<std::string>();
  const auto registry = load_plugins(plugin_dirs(vm), /*quiet_errors=*/true);
  const std::string status = execute_job(o, registry);
  return status == "done" || status == "diverged" || status == "oom" ? 0 : 3;
}

}  // namespace attnlab
