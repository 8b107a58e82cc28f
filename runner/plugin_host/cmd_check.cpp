// `attnlab check`: the conformance suite's command-line front end (the checks are in
// attention_checks.cpp and dataset_checks.cpp; tests/conformance_test.cpp is the other front end).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "attnlab/store.hpp"
#include "attnlab/store/studies.hpp"
#include "attnlab/torch_compat.hpp"
#include "base/child_process.hpp"
#include "base/quantities.hpp"
#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "experiment/enqueue.hpp"
#include "experiment/experiment.hpp"
#include "attnlab/train/config.hpp"
#include "plugin_host/check_support.hpp"
#include "plugin_host/conformance.hpp"
#include "plugin_host/plugin_host.hpp"
#include "plugin_host/scripted_method.hpp"

namespace attnlab {
namespace {

void print_check(const CheckResult& r) {
  char label[32];
  std::snprintf(label, sizeof label, "%-22s", r.name.c_str());
  std::cout << "  " << (r.passed ? "pass" : "FAIL") << "  " << label << "  " << r.figure
            << (r.passed ? "" : (r.figure.empty() ? "" : "; ") + r.failure) << "\n"
            << std::flush;
}

// --bench: the plugin's training step (time, peak memory) next to softmax's at each length, measured
// by `attnlab bench` (each measurement in a fresh process of its own, as always; it prints its
// table) into a scratch database. Passes when every measurement of the plugin completed.
CheckResult bench_against_softmax(const LoadedPlugin& plugin, const std::vector<std::string>& plugin_dirs,
                                  const std::string& device, const std::string& lengths, const std::string& self_exe) {
  const ScratchFolder scratch;
  const std::string db_path = scratch.path("bench.db");
  const std::string name = plugin.name();
  const std::string method = plugin.scripted() ? plugin.path : name;  // a scripted method by its file
  std::vector<std::string> argv = {self_exe, "bench", "--db", db_path, "--methods",
                                   name == "softmax" ? name : "softmax," + method, "--lengths", lengths, "--device", device};
  for (const auto& d : plugin_dirs) argv.insert(argv.end(), {"--plugins", d});
  std::cout << std::flush;  // the bench processes share stdout
  const ChildExit exit = run_child(argv, "bench");
  CheckResult r{"training step (bench)", true, "", ""};
  if (!exit.ok()) return {r.name, false, "", "attnlab bench " + exit.describe()};
  store::Database db(db_path, store::Database::Open::existing);
  const auto rows = store::bench_results(db);
  auto softmax_at = [&](std::int64_t length) -> const store::BenchResult* {
    for (const auto& row : rows)
      if (row.method == "softmax" && row.seq_len == length && row.status == "done") return &row;
    return nullptr;
  };
  for (const auto& row : rows) {
    if (row.method != name) continue;
    if (row.status != "done") {
      r.passed = false;
      r.failure += (r.failure.empty() ? "" : "; ") + std::to_string(row.seq_len) + " tokens: " + row.status + ": " + row.error;
      continue;
    }
    std::string cell = std::to_string(row.seq_len) + " tokens " + figure(row.step_seconds_median) + " s/step, " +
                       format_bytes(row.peak_memory_bytes);
    if (const auto* reference = softmax_at(row.seq_len); reference && name != "softmax")
      cell += " (x" + figure(row.step_seconds_median / reference->step_seconds_median) + " and x" +
              figure(row.peak_memory_bytes / reference->peak_memory_bytes) + " softmax's)";
    r.figure += (r.figure.empty() ? "" : "; ") + cell;
  }
  return r;
}

// --set KEY=VALUE over the plugin's defaults, each checked against its schema.
ParamValues dataset_params(const LoadedPlugin& plugin, const std::vector<std::string>& sets) {
  ParamValues params = plugin.defaults();
  for (const auto& set : sets) {
    const auto eq = set.find('=');
    const std::string key = set.substr(0, eq);
    const ParamSpec* spec = nullptr;
    for (std::size_t i = 0; i < plugin.info->param_count; ++i)
      if (key == plugin.info->params[i].name) spec = &plugin.info->params[i];
    if (eq == std::string::npos || !spec)
      throw std::runtime_error("check: --set " + set + ": expected KEY=VALUE with KEY a parameter of " + plugin.name() +
                               " (attnlab plugins lists them)");
    try {
      params.set(key, check_param(*spec, parse_param(*spec, set.substr(eq + 1))));
    } catch (const std::exception& e) {
      throw std::runtime_error("check: --set " + set + ": " + e.what());
    }
  }
  return params;
}

// --heads, --head-dim, --length, or --config EXP.toml --method NAME: the shape a method is checked
// at (a script's `fixed_length` read from its file). `method` is set to the experiment's method
// where --config names one.
CheckShape check_shape(const po::variables_map& vm, const PluginRegistry& registry, std::string& method) {
  CheckShape shape;
  if (vm.count("config")) {
    if (!vm.count("method")) throw std::runtime_error("check: --config needs --method NAME: the method whose job's shape to take");
    const std::string config = vm["config"].as<std::string>();
    method = vm["method"].as<std::string>();
    const Experiment experiment = load_experiment(config, registry);
    const JobPlan* job = nullptr;
    for (const auto& j : experiment.jobs)
      if (!job && j.method == method) job = &j;
    if (!job) throw std::runtime_error("check: " + config + " has no [methods." + method + "]");
    const ModelConfig model = model_config_from(job->model);
    shape = {model.heads, model.head_dim, job_length(job->dataset_params)};
  } else if (vm.count("method")) {
    throw std::runtime_error("check: --method NAME takes its shape from --config EXP.toml");
  }
  for (const auto& [option, value] : {std::pair<const char*, std::int64_t*>{"heads", &shape.heads},
                                      {"head-dim", &shape.head_dim}, {"length", &shape.length}})
    if (vm.count(option)) {
      *value = vm[option].as<std::int64_t>();
      if (*value < 1) throw std::runtime_error(std::string("check: --") + option + " must be at least 1");
    }
  return shape;
}

// The shape as the checklist's header says it.
std::string shape_text(const CheckShape& shape) {
  if (shape.heads == 0 && shape.head_dim == 0 && shape.length == 0) return "";
  auto value = [](std::int64_t v, const char* own) { return v > 0 ? std::to_string(v) : std::string(own); };
  return ", " + value(shape.heads, "each check's") + " heads of " + value(shape.head_dim, "each check's") + ", " +
         (shape.length > 0 ? (shape.fixed_length ? "exactly " : "") + std::to_string(shape.length) + " tokens"
                           : "each check's length");
}

po::options_description check_options() {
  po::options_description options(
      "attnlab check FILE.so|FILE.pt|NAME [--plugins DIR]... [--device D] [--heads H] [--head-dim D] [--length N] "
      "[--config EXP.toml --method NAME] [--bench [--bench-lengths N,N]] [--set KEY=VALUE]...");
  options.add_options()
      ("plugin", po::value<std::string>(), "a plugin file, a TorchScript method's file (.pt), or a plugin's name")
      ("heads", po::value<std::int64_t>(), "an attention method's checks at H heads (default: each check's own, 1 or 2)")
      ("head-dim", po::value<std::int64_t>(), "... at head size D (default: each check's own, 4 to 16)")
      ("length", po::value<std::int64_t>(), "... built for and fed N tokens, every check (a script whose fixed_length "
                                           "is True takes only N); default: each check's own, 6 to 64")
      ("config", po::value<std::string>(), "with --method: the heads, head size and length of that method's first job")
      ("method", po::value<std::string>(), "a method of --config; without a plugin named, the method checked")
      ("bench", "an attention plugin's training step (time, peak memory) next to softmax's, by attnlab bench")
      ("bench-lengths", po::value<std::string>()->default_value("1024,4096"), "sequence lengths of --bench")
      ("set", po::value<std::vector<std::string>>()->composing(),
       "a dataset plugin's parameter for the checked configuration (repeatable; default: its defaults)")
      ("help,h", "this help");
  add_plugins_option(options);
  add_device_option(options);  // where an attention plugin's checks run
  return options;
}

// The plugin checked, loaded: a file first, so that it is the one checked even where a bundled
// plugin has its name; a script (.pt) beside the bundled plugins (softmax, for --bench), its shape
// and warnings read; a name from the plugin folders.
struct CheckTarget {
  PluginRegistry registry;
  const LoadedPlugin* plugin = nullptr;
  std::vector<std::string> plugin_dirs;  // --bench's processes find the plugin by name in these
  std::vector<std::string> script_warnings;

  CheckTarget(const std::string& given, const po::variables_map& vm, CheckShape& shape) : plugin_dirs(plugin_folders(vm)) {
    const auto ends_with = [&](const std::string& tail) {
      return given.size() > tail.size() && given.compare(given.size() - tail.size(), tail.size(), tail) == 0;
    };
    if (ends_with(".pt")) {
      registry = load_plugins(plugin_dirs);
      plugin = &registry.add_script_file(given);  // a check needs no name: skyformer.pt is checked as "skyformer.pt"
      shape.fixed_length = scripted_fixed_length(plugin->path);
      if (shape.fixed_length && shape.length == 0)
        throw std::runtime_error("check: " + plugin->path + " takes one length only (fixed_length = True): say it, --length N");
      // a file that is no method of attnlab's is one line, not nine failed checks
      check_scripted_attention(plugin->path, {shape.heads > 0 ? shape.heads : 2, shape.head_dim > 0 ? shape.head_dim : 8,
                                              shape.length > 0 ? shape.length : 32});
      script_warnings = scripted_warnings(plugin->path);
    } else if (given.find('/') != std::string::npos || ends_with(".so")) {
      if (!registry.load_file(given)) throw std::runtime_error("check: " + registry.errors().back().line());
      plugin = &registry.plugins().back();
      plugin_dirs.insert(plugin_dirs.begin(), std::filesystem::absolute(given).parent_path().string());
    } else {
      registry = load_plugins(plugin_dirs);
      plugin = registry.find(PluginKind::attention, given);
      if (!plugin) plugin = registry.find(PluginKind::dataset, given);
      if (!plugin) throw std::runtime_error("check: no plugin named '" + given + "' (attnlab plugins lists them)");
    }
  }
  CheckTarget(const CheckTarget&) = delete;
  CheckTarget& operator=(const CheckTarget&) = delete;
};

std::vector<CheckResult> check_dataset_plugin(const LoadedPlugin& plugin, const po::variables_map& vm) {
  if (vm.count("bench")) throw std::runtime_error("check: --bench is for attention plugins; " + plugin.name() + " is a dataset plugin");
  const ParamValues params = dataset_params(plugin, option_values(vm, "set"));
  std::cout << plugin.path << ": " << plugin.name() << " " << plugin.info->version << " (dataset)\n";
  auto results = check_dataset(plugin, params);
  for (const auto& r : results) print_check(r);
  return results;
}

std::vector<CheckResult> check_attention_plugin(const CheckTarget& target, const po::variables_map& vm, const CheckShape& shape,
                                                const std::string& self_exe) {
  const LoadedPlugin& plugin = *target.plugin;
  if (!option_values(vm, "set").empty())
    throw std::runtime_error("check: --set is for dataset plugins; " + plugin.name() + " is an attention plugin");
  const c10::Device device = compat::parse_device(vm["device"].as<std::string>());
  const std::string bench_lengths = vm["bench-lengths"].as<std::string>();
  split_positive_integers(bench_lengths, "check: --bench-lengths");  // refused before any check runs
  std::cout << plugin.path << ": " << plugin.name() << " " << plugin.info->version << " (attention), on " << device.str()
            << shape_text(shape) << "\n";
  for (const auto& warning : target.script_warnings) std::cout << "  warning: " << warning << "\n";
  std::vector<CheckResult> results;
  for (const auto& name : attention_check_names()) {
    results.push_back(check_attention(plugin, name, device, shape));
    print_check(results.back());  // as it goes: a slow check shows where it is
  }
  if (vm.count("bench")) {
    results.push_back(bench_against_softmax(plugin, target.plugin_dirs, device.str(), bench_lengths, self_exe));
    std::cout << "\n";
    print_check(results.back());
  }
  return results;
}

}  // namespace

int cmd_check(const Args& args, const std::string& self_exe) {
  const auto options = check_options();
  po::positional_options_description positional;
  positional.add("plugin", 1);
  const auto vm = parse_command_line("check", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("plugin") && !(vm.count("config") && vm.count("method")))
    throw std::runtime_error("check: usage: attnlab check FILE.so|FILE.pt|NAME [--plugins DIR]... [--device D]");
  compat::parse_device(vm["device"].as<std::string>());  // a bad device is refused before anything loads
  compat::configure_threads(0);  // as a job's: "seeded determinism" compares two calls to the bit
  std::string given = vm.count("plugin") ? vm["plugin"].as<std::string>() : "";
  CheckShape shape;
  {
    const PluginRegistry for_config = vm.count("config") ? load_plugins(plugin_folders(vm)) : PluginRegistry();
    std::string config_method;
    shape = check_shape(vm, for_config, config_method);
    if (given.empty()) {  // the experiment's method: its file where it is a script
      const auto* m = for_config.find(PluginKind::attention, config_method);
      given = m && m->scripted() ? m->path : config_method;
    }
  }
  const CheckTarget target(given, vm, shape);
  const auto results = target.plugin->kind() == PluginKind::dataset ? check_dataset_plugin(*target.plugin, vm)
                                                                    : check_attention_plugin(target, vm, shape, self_exe);
  std::size_t passed = 0;
  for (const auto& r : results) passed += r.passed;
  std::cout << results.size() << " checks: " << passed << " passed, " << results.size() - passed << " failed\n";
  return passed == results.size() ? 0 : 1;
}

}  // namespace attnlab
