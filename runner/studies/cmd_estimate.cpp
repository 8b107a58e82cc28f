// attnlab estimate EXPERIMENT.toml: each job's time and the whole experiment's on a device, before
// anything is queued, from the bench database's figures (studies/estimate.hpp).
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli_options.hpp"
#include "cli/commands.hpp"

#include "attnlab/store.hpp"
#include "attnlab/store/studies.hpp"
#include "experiment/experiment.hpp"
#include "plugin_host/plugin_host.hpp"
#include "queue/worker.hpp"
#include "studies/estimate.hpp"
#include "studies/estimate_jobs.hpp"

namespace attnlab {
namespace po = boost::program_options;

int cmd_estimate(const Args& args) {
  po::options_description options(
      "attnlab estimate EXPERIMENT.toml [--device D] [--db BENCH_DB] [--devices N] [--jobs-per-device N|auto]:\n"
      "each job's wall time and the experiment's on a device, from `attnlab bench`'s figures (the nearest\n"
      "measured lengths scaled as the method grew between them); a figure it lacks is named with the\n"
      "bench command that measures it");
  options.add_options()
      ("experiment", po::value<std::string>(), "the experiment file (TOML)")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "the database holding the bench figures")
      ("device", po::value<std::string>()->default_value("cpu"), "the device the figures were measured on: cpu, cuda:N")
      ("devices", po::value<std::int64_t>()->default_value(1), "how many such devices the experiment runs on")
      ("jobs-per-device", po::value<std::string>()->default_value("1"),
       "jobs at once on each device, or auto (as attnlab run would choose them; the device must be on this machine)")
      ("help,h", "this help");
  add_cache_dir_option(options);
  add_plugins_option(options);
  po::positional_options_description positional;
  positional.add("experiment", 1);
  const auto vm = parse_command_line("estimate", args, options, positional);
  if (vm.count("help")) return std::cout << options << "\nexit status: 0 an estimate; 3 figures missing (named); 2 bad usage\n", 0;
  if (!vm.count("experiment")) throw std::invalid_argument("estimate: name the experiment file");
  std::string device = vm["device"].as<std::string>();
  if (device == "cuda") device = "cuda:0";  // as bench stores it
  const auto devices = vm["devices"].as<std::int64_t>();
  if (devices < 1) throw std::invalid_argument("estimate: --devices must be 1 or more");
  std::int64_t per_device = jobs_per_device_option(vm["jobs-per-device"].as<std::string>(), "estimate");  // 0: auto

  const auto registry = load_plugins(plugin_folders(vm));
  const std::string path = vm["experiment"].as<std::string>();
  const Experiment experiment = load_experiment(path, registry);
  std::vector<JobWork> jobs;
  for (const auto& plan : experiment.jobs) jobs.push_back(job_work(plan, registry, vm["cache-dir"].as<std::string>()));

  const std::string db_path = vm["db"].as<std::string>();
  existing_database(db_path);
  store::ResultsReader db(db_path);
  const auto rows = store::bench_results(db);
  const std::string bench_command = "attnlab bench --config " + path + " --db " + db_path;

  if (per_device == 0) {
    std::string why;
    per_device = auto_jobs_per_device(jobs, rows, std::vector<std::string>(static_cast<std::size_t>(devices), device),
                                      bench_command, &why);
    std::cout << "jobs per device: " << per_device << " (" << why << ")\n";
  }
  const auto estimate = estimate_experiment(jobs, rows, device, devices, per_device, bench_command);
  std::cout << experiment.name << " on " << device << " (bench figures of " << db_path << ")\n\n"
            << estimate_report(estimate, device);
  return estimate.missing.empty() ? 0 : 3;
}

}  // namespace attnlab
