// attnlab data: load every dataset of an experiment file the way its jobs will, check each split
// (shapes, vocabulary, lengths, labels) and print what was loaded, how long it took and whether
// the token cache served it. Run it before a sweep to find a bad file in seconds, not hours.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>

#include "experiment/cache_dir.hpp"
#include "cli/cli_options.hpp"
#include "plugin_host/plugin_host.hpp"

#include <ATen/ops/bincount.h>

#include "attnlab/dataset.hpp"
#include "attnlab/train/trainer.hpp"
#include "attnlab/torch_compat.hpp"
#include "cli/commands.hpp"
#include "experiment/data_budget.hpp"
#include "experiment/experiment.hpp"
#include "cli/text_table.hpp"

namespace attnlab {
namespace po = boost::program_options;

int cmd_data(const Args& args) {
  po::options_description options("attnlab data EXPERIMENT.toml [options]");
  options.add_options()
      ("experiment", po::value<std::string>(), "the experiment file (TOML): its [datasets.*] are loaded")
      ("repeat", po::value<int>()->default_value(1), "load each split this many times (the second shows the cache)")
      ("force", "load datasets past the memory/disk bound (runner/experiment/README.md, \"Size bound\")")
      ("help,h", "this help");
  add_threads_option(options);
  add_cache_dir_option(options);
  add_plugins_option(options);
  po::positional_options_description positional;
  positional.add("experiment", 1);
  const auto vm = parse_command_line("data", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("experiment")) throw std::runtime_error("data: name the experiment file");
  const int repeat = vm["repeat"].as<int>();
  if (repeat < 1) throw std::runtime_error("data: --repeat must be at least 1");

  const PluginRegistry registry = load_plugins(plugin_folders(vm));
  const Experiment experiment = load_experiment(vm["experiment"].as<std::string>(), registry);
  compat::configure_threads(vm["threads"].as<int>());
  const std::string cache = dataset_cache_dir(vm["cache-dir"].as<std::string>());

  TextTable table({"dataset", "split", "examples", "inputs", "max len", "mean len", "at max_len", "classes", "majority",
                   "load", "source"});
  std::set<std::string> seen;  // one dataset configuration once, whatever the methods and seeds
  for (const auto& plan : experiment.jobs) {
    // the dataset's own parameters alone decide what is loaded (not the methods' tables)
    std::string data_key = plan.dataset;
    for (const auto& [key, value] : plan.dataset_params.all()) data_key += "\n" + key + "=" + to_toml(value);
    if (!seen.insert(data_key).second) continue;
    auto dataset = registry.find(PluginKind::dataset, plan.dataset)->make_dataset({cache}, plan.dataset_params);
    const TaskInfo task = dataset->info();
    // where inputs are cut: max_len where rows are padded past it (pad_to), else the row's width
    const std::int64_t cut = plan.dataset_params.has("max_len") ? plan.dataset_params.integer("max_len") : task.max_len;
    if (!vm.count("force")) {
      try {
        check_data_size(plan.dataset, *dataset, task, cache);
      } catch (const DataSizeError& e) {
        throw DataSizeError(experiment.source_path + ": [datasets." + plan.dataset + "] " + e.what());
      }
    }
    for (const Split split : {Split::train, Split::val, Split::test}) {
      for (int r = 0; r < repeat; ++r) {
        const auto start = std::chrono::steady_clock::now();
        const SplitData data = load_checked(plan.dataset, *dataset, split);  // includes the full check pass
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const auto lengths = data.lengths.to(at::kDouble);
        char mean_len[32], at_max[32], majority[32], load[32];
        std::snprintf(mean_len, sizeof mean_len, "%.1f", lengths.mean().item<double>());
        std::snprintf(at_max, sizeof at_max, "%.1f%%", 100.0 * (data.lengths == cut).to(at::kDouble).mean().item<double>());
        std::snprintf(majority, sizeof majority, "%.4f", majority_rate(data.labels, task.num_classes));
        std::snprintf(load, sizeof load, "%.3f s", seconds);
        table.add({plan.dataset, to_string(split), std::to_string(data.size()), std::to_string(task.inputs),
                   std::to_string(task.max_len), mean_len, at_max, std::to_string(task.num_classes), majority, load,
                   data.origin});
      }
    }
  }
  std::cout << table.str();
  return 0;
}

}  // namespace attnlab
