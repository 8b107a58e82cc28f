// attnlab bench: option parsing, the configurations, and the measuring processes (one per
// measurement on the CPU, one per method on a GPU).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include "cli/provenance.hpp"
#include "cli/commands.hpp"
#include "experiment/cache_dir.hpp"
#include "cli/cli_options.hpp"

#include "attnlab/dataset.hpp"
#include "attnlab/train/config.hpp"
#include "attnlab/store.hpp"
#include "attnlab/store/studies.hpp"
#include "base/child_process.hpp"
#include "attnlab/torch_compat.hpp"
#include "studies/bench.hpp"
#include "experiment/experiment.hpp"
#include "plugin_host/plugin_host.hpp"
#include "plugin_host/scripted_method.hpp"
#include "base/quantities.hpp"


namespace attnlab {
namespace po = boost::program_options;
namespace {

// Errors in what was asked: one line, nothing stored.
struct BenchUsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// --model.KEY=VALUE (or --model.KEY VALUE) are taken out of the arguments before Boost sees them.
std::vector<std::pair<std::string, std::string>> take_model_overrides(Args& args) {
  std::vector<std::pair<std::string, std::string>> out;
  Args rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--model.", 0) != 0) {
      rest.push_back(a);
      continue;
    }
    const auto eq = a.find('=');
    if (eq != std::string::npos) {
      out.push_back({a.substr(8, eq - 8), a.substr(eq + 1)});
    } else {
      if (i + 1 >= args.size()) throw BenchUsageError("bench: " + a + ": missing value");
      out.push_back({a.substr(8), args[++i]});
    }
  }
  args = std::move(rest);
  return out;
}

void apply_model_overrides(ParamValues& model, const std::vector<std::pair<std::string, std::string>>& overrides) {
  for (const auto& [key, text] : overrides) {
    const ParamSpec* spec = find_param(model_params().data(), model_params().size(), key);
    if (!spec) {
      std::vector<std::string> known;
      for (const auto& s : model_params()) known.push_back(s.name);
      throw BenchUsageError("bench: --model." + key + ": unknown model key (known: " + joined(known) + ")");
    }
    try {
      model.set(key, check_param(*spec, parse_param(*spec, text)));
    } catch (const ParamError& e) {
      throw BenchUsageError(std::string("bench: --model.") + e.what());
    }
  }
}

void set_train(ParamValues& train, const char* key, const ParamValue& value, const char* option) {
  try {
    train.set(key, check_param(*find_param(train_params().data(), train_params().size(), key), value));
  } catch (const ParamError& e) {
    throw BenchUsageError(std::string("bench: --") + option + ": " + e.what());
  }
}

// --- the measuring processes ------------------------------------------------------------------

struct Planned {
  BenchCase c;
  std::string config_toml;
};

// The measurements each process makes: one each on the CPU, where a process's peak resident set
// is the only honest peak; on a GPU, every length of one method in turn (bench-one empties the
// caching allocator's cache and resets its peak between them), since each process start costs a
// CUDA context. `planned` is lengths outer, methods inner; on a GPU the groups are methods outer.
std::vector<std::vector<Planned>> group_into_processes(const std::vector<Planned>& planned, bool per_method) {
  std::vector<std::vector<Planned>> groups;
  for (const auto& p : planned) {
    auto same_method = [&](const std::vector<Planned>& g) { return g.front().c.method == p.c.method; };
    const auto group = per_method ? std::find_if(groups.begin(), groups.end(), same_method) : groups.end();
    if (group == groups.end()) groups.push_back({p});
    else group->push_back(p);
  }
  return groups;
}

// The row of a measurement whose process died before storing it.
store::BenchResult failed_row(const Planned& p, const c10::Device& device, int threads, const std::string& error) {
  store::BenchResult r;
  r.method = p.c.method;
  r.dataset = p.c.dataset;
  r.seq_len = p.c.seq_len;
  r.batch_size = p.c.batch_size;
  compat::configure_threads(threads);
  stamp_provenance(r, device);
  r.status = "failed";
  r.error = error;
  r.config_toml = p.config_toml;
  return r;
}

std::string lengths_text(const std::vector<Planned>& group) {
  std::string out;
  for (const auto& p : group) out += (out.empty() ? "" : ", ") + std::to_string(p.c.seq_len);
  return out;
}


int show(const std::string& db_path, bool ops) {
  existing_database(db_path);
  store::ResultsReader db(db_path);
  const auto rows = store::bench_results(db);
  if (rows.empty()) return std::cout << db_path << ": no bench results yet\n", 0;
  std::cout << bench_table(rows, /*context=*/true, ops);
  return 0;
}

po::options_description bench_options() {
  po::options_description options(
      "attnlab bench [options]: time a training step (forward, backward, AdamW) and its peak memory\n"
      "per attention method and sequence length, on random tokens; one fresh process per measurement\n"
      "(on a GPU, per method).\n"
      "attnlab bench --show [--db FILE]: the stored results.\n"
      "--model.KEY=VALUE sets a [model] key (after --config's)");
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("methods", po::value<std::string>(), "attention methods, comma-separated, by name or TorchScript file (FILE.pt) (default: the --config file's, else every attention plugin found)")
      ("lengths", po::value<std::string>()->default_value("1024,2048,4096"), "sequence lengths, comma-separated")
      ("dataset", po::value<std::string>(), "dataset plugin whose task (vocabulary, classes, inputs) the model is built for (default: the --config file's first, else listops)")
      ("batch-size", po::value<std::int64_t>()->default_value(4), "examples per step")
      ("steps", po::value<std::int64_t>()->default_value(5), "timed steps (the median is reported)")
      ("warmup", po::value<std::int64_t>()->default_value(2), "untimed steps before them")
      ("seed", po::value<std::int64_t>()->default_value(1), "seed of weights, dropout, tokens and labels")
      ("attention-only", "time the attention module's forward alone (no model, no backward) on q, k, v of the model's heads; softmax rows then show TFLOP/s (4 B H N^2 Dh / time)")
      ("precision", po::value<std::string>(), "fp32, bf16 or fp16: the forward pass autocast as [train] precision does (default: the --config file's, else fp32)")
      ("cuda-graphs", po::value<std::string>(), "auto, on or off: on a GPU, the step a replayed CUDA graph as [train] cuda_graphs (default: the --config file's, else auto)")
      ("config", po::value<std::string>(), "experiment file whose [model], [train] (optimiser, precision), [methods.X] and [datasets.Y] apply")
      ("trace", po::value<std::string>()->default_value(""),
       "a folder: after each measurement's timed steps, one more under LibTorch's profiler, written there as a Chrome "
       "trace (METHOD-LENGTH-step|attention-PRECISION.json: every op the host ran, with its duration)")
      ("ops", "also count the ops one step runs (one more step each, as LibTorch's profiler counts them: every op, "
              "nested ones included) and print them with the host's time a step (until the step is issued, before "
              "waiting for the device); with --show, those columns")
      ("concurrent", po::value<std::string>()->default_value("1"),
       "measurement processes at once on the device, comma-separated (1,2,4,8): each N measures every row in N "
       "processes together, as N jobs a device would run; the table adds their aggregate steps/s")
      ("show", "print the stored bench results and stop")
      ("help,h", "this help");
  add_study_options(options);
  return options;
}

// A TorchScript method named on the command line by its file: registered under the file's stem
// (add_script_file), checked at the model's shape once the cases are planned (check_scripts).
std::string scripted_method(const std::string& file, const PluginRegistry& registry) {
  try {
    return registry.add_script_file(file).name();
  } catch (const std::exception& e) {
    throw BenchUsageError("bench: --methods: " + std::string(e.what()));
  }
}

// Each scripted method's forward run once (it loads, runs and returns q's shape) at the shape it is
// measured at, the model's heads and head size at each length and the batch size, before anything
// is measured: a file sized for its job is measured at that job's shape or refused in one line.
void check_scripts(const std::vector<Planned>& planned, const PluginRegistry& registry) {
  std::set<std::string> checked, warned;
  for (const auto& [c, toml] : planned) {
    const auto& method = *registry.find(PluginKind::attention, c.method);
    if (!method.scripted()) continue;
    const ModelConfig model = model_config_from(c.model);
    if (!checked.insert(c.method + " " + std::to_string(model.heads) + " " + std::to_string(model.head_dim) + " " +
                        std::to_string(c.seq_len)).second)
      continue;
    try {
      check_scripted_attention(method.path, {model.heads, model.head_dim, c.seq_len}, c.batch_size);
    } catch (const std::exception& e) {
      throw BenchUsageError("bench: --methods: " + std::string(e.what()));
    }
    if (warned.insert(method.path).second)
      for (const auto& warning : scripted_warnings(method.path)) std::cerr << "attnlab: warning: " << warning << "\n";
  }
}

// --methods, else the experiment's, else every attention plugin (softmax first).
std::vector<std::string> methods_to_bench(const po::variables_map& vm, const PluginRegistry& registry,
                                          const std::optional<Experiment>& experiment) {
  std::vector<std::string> methods;
  const auto found = registry.names(PluginKind::attention);
  if (vm.count("methods")) {
    methods = split_list(vm["methods"].as<std::string>(), "bench: --methods");
    for (auto& m : methods) {
      if (m.size() > 3 && m.compare(m.size() - 3, 3, ".pt") == 0) m = scripted_method(m, registry);
      if (!registry.find(PluginKind::attention, m))
        throw BenchUsageError("bench: no attention method named '" + m + "' (found: " + joined(found) + ")");
    }
  } else if (experiment) {
    for (const auto& job : experiment->jobs)
      if (std::find(methods.begin(), methods.end(), job.method) == methods.end()) methods.push_back(job.method);
  } else {
    methods = found;
    std::stable_partition(methods.begin(), methods.end(), [](const std::string& m) { return m == "softmax"; });
  }
  if (methods.empty()) throw BenchUsageError("bench: no attention plugin found (searched: " + joined(registry.searched()) + ")");
  return methods;
}

// --dataset, else the experiment's first, else listops.
std::string dataset_to_bench(const po::variables_map& vm, const PluginRegistry& registry,
                             const std::optional<Experiment>& experiment) {
  std::string dataset = "listops";
  if (vm.count("dataset")) dataset = vm["dataset"].as<std::string>();
  else if (experiment && !experiment->jobs.empty()) dataset = experiment->jobs.front().dataset;
  if (!registry.find(PluginKind::dataset, dataset))
    throw BenchUsageError("bench: no dataset named '" + dataset + "' (found: " + joined(registry.names(PluginKind::dataset)) + ")");
  return dataset;
}

// One method's resolved configuration (the lengths differ only in [bench]): the experiment's job
// of that method and dataset (--config), else every default; --model.KEY overrides; what the
// measuring process really runs (this batch size, warmup + steps steps, --precision).
BenchCase bench_case(const std::string& method, const std::string& dataset, const po::variables_map& vm,
                     const std::optional<Experiment>& experiment, const PluginRegistry& registry,
                     const std::vector<std::pair<std::string, std::string>>& model_overrides) {
  BenchCase c;
  c.method = method;
  c.dataset = dataset;
  c.batch_size = vm["batch-size"].as<std::int64_t>();
  c.steps = vm["steps"].as<std::int64_t>();
  c.warmup = vm["warmup"].as<std::int64_t>();
  c.seed = vm["seed"].as<std::int64_t>();
  if (experiment) {
    const JobPlan* plan = nullptr;
    for (const auto& job : experiment->jobs)
      if (job.method == method && job.dataset == dataset) plan = plan ? plan : &job;
    if (!plan)
      throw BenchUsageError("bench: " + vm["config"].as<std::string>() + " has no [methods." + method + "] x [datasets." +
                            dataset + "] job; name the method and the dataset there, or leave out --config");
    c.model = plan->model;
    c.train = plan->train;
    c.method_params = plan->method_params;
    c.dataset_params = plan->dataset_params;
  } else {
    c.model = ParamValues::defaults(model_params().data(), model_params().size());
    c.train = ParamValues::defaults(train_params().data(), train_params().size());
    c.method_params = registry.find(PluginKind::attention, method)->defaults();
    c.dataset_params = registry.find(PluginKind::dataset, dataset)->defaults();
  }
  apply_model_overrides(c.model, model_overrides);
  try {
    model_config_from(c.model);
  } catch (const ParamError& e) {
    throw BenchUsageError(std::string("bench: [model] ") + e.what());
  }
  set_train(c.train, "batch_size", c.batch_size, "batch-size");
  if (vm.count("precision")) set_train(c.train, "precision", vm["precision"].as<std::string>(), "precision");
  if (vm.count("cuda-graphs")) set_train(c.train, "cuda_graphs", vm["cuda-graphs"].as<std::string>(), "cuda-graphs");
  c.attention_only = vm.count("attention-only") > 0;
  return c;
}

// Lengths outer, methods inner: every method at a length before the next length. A dataset that
// has a max_len parameter is described at the benchmarked length too.
std::vector<Planned> plan_lengths(const std::vector<BenchCase>& cases, const std::vector<std::int64_t>& lengths,
                                  const PluginRegistry& registry) {
  const LoadedPlugin& dataset = *registry.find(PluginKind::dataset, cases.front().dataset);
  const ParamSpec* max_len = find_param(dataset.info->params, dataset.info->param_count, "max_len");
  std::vector<Planned> planned;
  for (auto length : lengths)
    for (auto c : cases) {
      c.seq_len = length;
      if (max_len) {
        try {
          c.dataset_params.set("max_len", check_param(*max_len, length));
          if (c.dataset_params.has("pad_to")) c.dataset_params.set("pad_to", std::int64_t{0});  // rows as long as the length
        } catch (const ParamError&) {
        }
      }
      std::string text = bench_config_toml(c, registry);
      planned.push_back({std::move(c), std::move(text)});
    }
  return planned;
}

// The row ids a bench-one process appended to `path` (none when it wrote none).
std::vector<std::int64_t> stored_ids(const std::string& path) {
  std::vector<std::int64_t> ids;
  std::ifstream in(path);
  for (std::int64_t id; in >> id;) ids.push_back(id);
  return ids;
}

// A bench-one process's command line for `group`: its rows' ids appended to `ids_file`, recorded as
// measured `concurrent` at once (meeting the others in `barrier` before timing); the probes (--ops,
// --trace) only where `probes`.
std::vector<std::string> bench_one_command(const std::vector<Planned>& group, const po::variables_map& vm,
                                           const std::string& ids_file, std::int64_t concurrent,
                                           const std::string& barrier, bool probes, const std::string& self_exe) {
  BenchOneOptions child;
  child.db_path = vm["db"].as<std::string>();
  for (const auto& p : group) child.config_tomls.push_back(p.config_toml);
  child.device = vm["device"].as<std::string>();
  child.threads = vm["threads"].as<int>();
  child.cache_dir = vm["cache-dir"].as<std::string>();
  child.plugin_dirs = plugin_folders(vm);
  child.stored_ids = ids_file;
  child.concurrent = concurrent;
  child.barrier = barrier;
  child.count_ops = probes && vm.count("ops") > 0;
  child.trace_dir = probes ? vm["trace"].as<std::string>() : "";
  std::vector<std::string> argv = {self_exe, "bench-one"};
  const auto args = child.to_args();
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// `group` measured by `concurrent` processes at once, the same measurements in each, on the same
// device (how much several jobs a device run together take): their rows, and a failed row for each
// measurement a process died before storing. `stopped`: a stop signal ended a process.
std::vector<store::BenchResult> measure_group(const std::vector<Planned>& group, std::int64_t concurrent,
                                              store::Database& db, const po::variables_map& vm,
                                              const c10::Device& device, const std::string& self_exe, bool& stopped) {
  const auto scratch = std::filesystem::temp_directory_path() / ("attnlab-bench-" + std::to_string(getpid()));
  const std::string barrier = concurrent > 1 ? (scratch.string() + "-barrier") : "";
  if (!barrier.empty()) std::filesystem::remove_all(barrier);
  std::vector<std::string> ids_files;
  std::vector<pid_t> children;
  for (std::int64_t i = 0; i < concurrent; ++i) {
    ids_files.push_back(scratch.string() + "-" + std::to_string(i) + ".ids");
    std::filesystem::remove(ids_files.back());
    children.push_back(start_child(bench_one_command(group, vm, ids_files.back(), concurrent, barrier, i == 0, self_exe),
                                   "bench process", SIGTERM));
  }
  std::vector<store::BenchResult> measured;
  for (std::int64_t i = 0; i < concurrent; ++i) {
    const ChildExit exit = wait_child(children[static_cast<std::size_t>(i)]);
    const auto& ids_file = ids_files[static_cast<std::size_t>(i)];
    std::size_t stored = 0;
    for (const std::int64_t id : stored_ids(ids_file))
      if (const auto row = store::bench_result(db, id)) measured.push_back(*row), ++stored;
    std::filesystem::remove(ids_file);
    if (stored >= group.size()) continue;
    if (exit.signalled && (exit.code == SIGINT || exit.code == SIGTERM) && stop_signal()) {
      stopped = true;
      continue;
    }
    std::string error = "bench process " + exit.describe();
    if (exit.signalled && exit.code == SIGKILL && device.is_cpu()) error += "; on the CPU usually the kernel's out-of-memory killer";
    for (std::size_t j = stored; j < group.size(); ++j) {
      std::cout << "  " << group[j].c.method << " at " << group[j].c.seq_len << ": failed: " << error << std::endl;
      auto row = failed_row(group[j], device, vm["threads"].as<int>(), error);
      row.concurrent = concurrent;
      measured.push_back(*store::bench_result(db, store::add_bench_result(db, row)));
    }
  }
  if (!barrier.empty()) std::filesystem::remove_all(barrier);
  return measured;
}

// The measurements, each group in bench-one processes of its own (as many at once as each of
// --concurrent says), stored as they come. Returns the rows of this bench.
std::vector<store::BenchResult> measure_in_processes(const std::vector<Planned>& planned, store::Database& db,
                                                     const po::variables_map& vm, const c10::Device& device,
                                                     const std::string& self_exe) {
  const std::string trace_dir = vm["trace"].as<std::string>();
  if (!trace_dir.empty()) std::filesystem::create_directories(trace_dir);
  const auto at_once = split_positive_integers(vm["concurrent"].as<std::string>(), "bench: --concurrent");
  std::vector<store::BenchResult> measured;
  const auto processes = group_into_processes(planned, device.is_cuda());
  bool stopped = false;
  for (std::size_t index = 0; index < processes.size() && !stop_signal() && !stopped; ++index)
    for (const auto concurrent : at_once) {
      const auto& group = processes[index];
      std::cout << "[" << index + 1 << "/" << processes.size() << "] " << group.front().c.method << " at "
                << lengths_text(group) << " tokens" << (concurrent > 1 ? ", " + std::to_string(concurrent) + " at once" : "")
                << std::endl;
      const auto rows = measure_group(group, concurrent, db, vm, device, self_exe, stopped);
      measured.insert(measured.end(), rows.begin(), rows.end());
      if (stopped || stop_signal()) break;
    }
  return measured;
}

}  // namespace

int cmd_bench(const Args& raw_args, const std::string& self_exe) {
  Args args = raw_args;
  const auto model_overrides = take_model_overrides(args);
  const auto options = bench_options();
  const auto vm = parse_command_line("bench", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  const std::string db_path = vm["db"].as<std::string>();
  if (vm.count("show")) return show(db_path, vm.count("ops") > 0);

  const auto lengths = split_positive_integers(vm["lengths"].as<std::string>(), "bench: --lengths");
  if (vm["batch-size"].as<std::int64_t>() < 1) throw BenchUsageError("bench: --batch-size must be at least 1");
  if (vm["steps"].as<std::int64_t>() < 1) throw BenchUsageError("bench: --steps must be at least 1");
  if (vm["warmup"].as<std::int64_t>() < 0) throw BenchUsageError("bench: --warmup must be at least 0");
  if (vm["seed"].as<std::int64_t>() < 0) throw BenchUsageError("bench: --seed must be at least 0");
  const c10::Device device = compat::parse_device(vm["device"].as<std::string>());  // refuse a device this machine lacks first
  const std::string cache_dir = vm["cache-dir"].as<std::string>();
  const auto registry = load_plugins(plugin_folders(vm));
  std::optional<Experiment> experiment;
  if (vm.count("config")) experiment = load_experiment(vm["config"].as<std::string>(), registry);

  const std::vector<std::string> methods = methods_to_bench(vm, registry, experiment);
  const std::string dataset = dataset_to_bench(vm, registry, experiment);
  std::vector<BenchCase> cases;
  for (const auto& method : methods) cases.push_back(bench_case(method, dataset, vm, experiment, registry, model_overrides));
  // The dataset must describe its task with these parameters before anything is stored (its data
  // need not be here: the bench trains on random tokens).
  try {
    registry.find(PluginKind::dataset, dataset)
        ->make_dataset({dataset_cache_dir(cache_dir), /*describe_only=*/true}, cases.front().dataset_params)
        ->info();
  } catch (const std::exception& e) {
    throw BenchUsageError("bench: [datasets." + dataset + "] " + e.what());
  }
  const std::vector<Planned> planned = plan_lengths(cases, lengths, registry);
  check_scripts(planned, registry);

  store::Database db(db_path);
  std::cout << "bench: " << cases.size() << " method(s) x " << lengths.size() << " length(s) on " << device.str()
            << ", " << dataset << " task, batch " << vm["batch-size"].as<std::int64_t>() << ", "
            << vm["warmup"].as<std::int64_t>() << " warm-up + " << vm["steps"].as<std::int64_t>()
            << " timed step(s), database " << db_path << std::endl;  // flushed: the bench processes share stdout
  const auto measured = measure_in_processes(planned, db, vm, device, self_exe);

  if (!measured.empty()) std::cout << "\n" << bench_table(measured, /*context=*/false, /*ops=*/vm.count("ops") > 0);
  if (stop_signal()) {
    std::cerr << "attnlab: bench stopped by signal " << stop_signal() << "\n";
    return 128 + stop_signal();
  }
  return 0;
}

po::options_description BenchOneOptions::options() {
  po::options_description options("attnlab bench-one (internal: bench measurements in this process, one after another)");
  options.add_options()
      ("db", po::value<std::string>()->required(), "results database")
      ("config-toml", po::value<std::vector<std::string>>()->required(), "a resolved configuration (TOML text), one per measurement")
      ("stored-ids", po::value<std::string>()->default_value(""), "file each stored row's id is appended to")
      ("ops", "count the ops of one more step per measurement")
      ("concurrent", po::value<std::int64_t>()->default_value(1), "measurements running at once on the device (recorded)")
      ("barrier", po::value<std::string>()->default_value(""), "with --concurrent N: folder where the N processes meet before each timing")
      ("trace", po::value<std::string>()->default_value(""), "folder of a Chrome trace of one more step per measurement");
  add_study_options(options);
  return options;
}

BenchOneOptions BenchOneOptions::from(const po::variables_map& vm) {
  BenchOneOptions o;
  o.db_path = vm["db"].as<std::string>();
  o.config_tomls = vm["config-toml"].as<std::vector<std::string>>();
  o.device = vm["device"].as<std::string>();
  o.threads = vm["threads"].as<int>();
  o.cache_dir = vm["cache-dir"].as<std::string>();
  o.plugin_dirs = plugin_folders(vm);
  o.stored_ids = vm["stored-ids"].as<std::string>();
  o.count_ops = vm.count("ops") > 0;
  o.concurrent = vm["concurrent"].as<std::int64_t>();
  o.barrier = vm["barrier"].as<std::string>();
  o.trace_dir = vm["trace"].as<std::string>();
  return o;
}

std::vector<std::string> BenchOneOptions::to_args() const {
  std::vector<std::string> args = {"--db", db_path, "--device", device, "--threads", std::to_string(threads)};
  for (const auto& text : config_tomls) args.insert(args.end(), {"--config-toml", text});
  if (!cache_dir.empty()) args.insert(args.end(), {"--cache-dir", cache_dir});
  for (const auto& folder : plugin_dirs) args.insert(args.end(), {"--plugins", folder});
  if (!stored_ids.empty()) args.insert(args.end(), {"--stored-ids", stored_ids});
  if (count_ops) args.push_back("--ops");
  if (concurrent != 1) args.insert(args.end(), {"--concurrent", std::to_string(concurrent)});
  if (!barrier.empty()) args.insert(args.end(), {"--barrier", barrier});
  if (!trace_dir.empty()) args.insert(args.end(), {"--trace", trace_dir});
  return args;
}

// The packed processes' meeting point before measurement `index`'s timed steps: each leaves a file
// named by its pid in <folder>/<index> and waits until `count` are there. A process that died on
// the way (out of memory) never arrives: after ten minutes the wait gives up and the row fails.
void meet_the_others(const std::string& folder, std::size_t index, std::int64_t count) {
  const std::filesystem::path here = std::filesystem::path(folder) / std::to_string(index);
  std::filesystem::create_directories(here);
  std::ofstream(here / std::to_string(getpid())).put('\n');
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  auto arrived = [&] {
    const auto files = std::distance(std::filesystem::directory_iterator(here), std::filesystem::directory_iterator());
    return files >= count;
  };
  while (!arrived()) {
    if (std::chrono::steady_clock::now() > give_up || stop_signal())
      throw std::runtime_error("the other " + std::to_string(count - 1) + " processes of this packed measurement never started timing");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int cmd_bench_one(const Args& args) {
  const BenchOneOptions o = BenchOneOptions::from(parse_command_line("bench-one", args, BenchOneOptions::options()));
  const auto registry = load_plugins(o.plugin_dirs, /*report_refused=*/false);
  for (std::size_t index = 0; index < o.config_tomls.size(); ++index) {
    const auto& text = o.config_tomls[index];
    const BenchCase c = parse_bench_config(text, "bench configuration", registry);
    std::function<void()> meet;
    if (o.concurrent > 1 && !o.barrier.empty()) meet = [&] { meet_the_others(o.barrier, index, o.concurrent); };
    store::BenchResult r = run_bench_case(c, text, registry, o.device, o.threads, o.cache_dir, o.count_ops, o.trace_dir, meet);
    r.concurrent = o.concurrent;
    // The database is opened after measuring: nothing of it counts in the peak.
    const std::int64_t id = [&] {
      store::Database db(o.db_path);
      return store::add_bench_result(db, r);
    }();
    if (!o.stored_ids.empty()) std::ofstream(o.stored_ids, std::ios::app) << id << "\n";
    if (r.status == "done")
      std::printf("  %lld tokens: done: step %.3g s (min %.3g, max %.3g, host %.3g), peak %s%s; %s\n",
                  static_cast<long long>(r.seq_len), r.step_seconds_median, r.step_seconds_min, r.step_seconds_max,
                  r.host_seconds_median, format_bytes(r.peak_memory_bytes).c_str(),
                  r.ops_per_step > 0 ? (", " + std::to_string(r.ops_per_step) + " ops").c_str() : "",
                  r.step_mode.c_str());
    else
      std::printf("  %lld tokens: %s: %s\n", static_cast<long long>(r.seq_len), r.status.c_str(), r.error.c_str());
    std::fflush(stdout);
    compat::release_cached_memory(compat::parse_device(o.device));  // the next measurement starts from an empty cache
  }
  return 0;
}

}  // namespace attnlab
