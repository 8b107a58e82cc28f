// attnlab instability: Skyformer's instability score (App. F) for every job of an experiment file,
// measured from the jobs' initial weights without training them. The same figure is stored with
// a run when its [train] instability_steps is set.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>

#include "studies/study_machine.hpp"
#include "cli/cli_options.hpp"
#include "plugin_host/plugin_host.hpp"

#include "attnlab/train/config.hpp"
#include "attnlab/train/instability.hpp"
#include "attnlab/torch_compat.hpp"
#include "cli/commands.hpp"
#include "experiment/experiment.hpp"
#include "experiment/train_job.hpp"
#include "cli/text_table.hpp"

namespace attnlab {
namespace po = boost::program_options;

int cmd_instability(const Args& args) {
  po::options_description options("attnlab instability EXPERIMENT.toml [options]");
  options.add_options()
      ("experiment", po::value<std::string>(), "the experiment file (TOML): its methods x datasets x seeds")
      ("steps", po::value<std::int64_t>()->default_value(20), "training steps measured (the paper: 20)")
      ("help,h", "this help");
  add_study_options(options);
  po::positional_options_description positional;
  positional.add("experiment", 1);
  const auto vm = parse_command_line("instability", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("experiment")) throw std::runtime_error("instability: name the experiment file");
  const auto steps = vm["steps"].as<std::int64_t>();
  if (steps < 1) throw std::runtime_error("instability: --steps must be at least 1");

  const PluginRegistry registry = load_plugins(plugin_folders(vm));
  const auto* softmax = registry.find(PluginKind::attention, "softmax");
  if (!softmax) throw std::runtime_error("instability: the softmax plugin (the reference) was not found");
  const Experiment experiment = load_experiment(vm["experiment"].as<std::string>(), registry);
  const StudyMachine machine = study_machine(vm);
  const c10::Device device = machine.device;
  const std::string& cache = machine.cache;

  const AttentionMaker reference = attention_maker(*softmax, softmax->defaults());

  TextTable table({"method", "dataset", "seed", "instability ratio", "mean tau", "mean tau (softmax)"});
  std::map<std::pair<std::string, std::string>, std::vector<double>> ratios;
  std::map<std::string, std::pair<TaskInfo, SplitData>> loaded;  // one load per dataset configuration
  for (const auto& plan : experiment.jobs) {
    const auto* dataset_plugin = registry.find(PluginKind::dataset, plan.dataset);
    const std::string data_key = plan.dataset + "\n" + plan.config_toml.substr(plan.config_toml.find("[datasets"));
    if (!loaded.count(data_key)) {
      auto dataset = dataset_plugin->make_dataset({cache}, plan.dataset_params);
      loaded[data_key] = {dataset->info(), load_checked(plan.dataset, *dataset, Split::train)};
    }
    const auto& [task, train] = loaded[data_key];
    const TrainJob job = make_train_job(plan, registry, task, device);
    const auto score = instability_score(job, reference, train, steps);
    double tau = 0, tau_ref = 0;
    for (std::size_t i = 0; i < score.tau.size(); ++i) tau += score.tau[i], tau_ref += score.tau_reference[i];
    char cells[3][32];
    std::snprintf(cells[0], sizeof cells[0], "%.4f", score.ratio);
    std::snprintf(cells[1], sizeof cells[1], "%.4g", tau / score.tau.size());
    std::snprintf(cells[2], sizeof cells[2], "%.4g", tau_ref / score.tau.size());
    table.add({plan.method, plan.dataset, std::to_string(plan.seed), cells[0], cells[1], cells[2]});
    ratios[{plan.method, plan.dataset}].push_back(score.ratio);
  }
  std::cout << table.str() << "\n";
  TextTable summary({"method", "dataset", "instability ratio (mean ± std)", "n"});
  for (const auto& [key, values] : ratios) {
    double mean = 0, var = 0;
    for (double v : values) mean += v;
    mean /= values.size();
    for (double v : values) var += (v - mean) * (v - mean);
    char cell[64];
    std::snprintf(cell, sizeof cell, "%.4f ± %.4f", mean, values.size() > 1 ? std::sqrt(var / (values.size() - 1)) : 0.0);
    summary.add({key.first, key.second, cell, std::to_string(values.size())});
  }
  std::cout << summary.str();
  return 0;
}

}  // namespace attnlab
