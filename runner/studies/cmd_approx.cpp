// attnlab approx: the command line around approx.hpp.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/cli_options.hpp"

#include "studies/approx.hpp"
#include "attnlab/torch_compat.hpp"
#include "plugin_host/plugin_host.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab {
namespace po = boost::program_options;
namespace {

const std::vector<std::int64_t> kDefaultLengths = {512, 1024, 2048, 4096};

std::string join(const std::vector<std::int64_t>& xs) {
  std::string out;
  for (auto x : xs) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

po::options_description approx_options() {
  po::options_description options(
      "attnlab approx --methods a,b (--dataset NAME | --run RUN_ID | --qkv DIR) [options]\n"
      "attnlab approx --show [--db FILE] [--absolute]\n\n"
      "Spectral-norm error ||Attn_method(Q,K,V) - Attn_exact(Q,K,V)||_2 per sequence and head, over\n"
      "method x length n x d (the value of --param), stored in the database and printed as a table");
  options.add_options()
      ("methods", po::value<std::string>(), "attention methods to study, comma-separated")
      ("dataset", po::value<std::string>(), "Q, K, V from layer 0 of a freshly initialised LRA model on this dataset's test split")
      ("run", po::value<std::int64_t>(), "Q, K, V from layer 0 of a stored run's best checkpoint, on its dataset's test split")
      ("qkv", po::value<std::string>(), "Q, K, V from DIR/q.npy, k.npy, v.npy ([H, n, p] or [B, H, n, p], '<f4' or '<f8')")
      ("lengths", po::value<std::string>(),
       "sequence lengths n (default 512,1024,2048,4096); with --qkv the default is the files' n, and given lengths "
       "(each at most n) take the first n rows")
      ("features", po::value<std::string>()->default_value("16,32,64,128,256"), "values d of --param, comma-separated")
      ("param", po::value<std::string>()->default_value("landmarks"), "the method parameter set to d")
      ("method-param", po::value<std::vector<std::string>>()->composing(),
       "METHOD.KEY=VALUE: another parameter of a studied method or of a reference (repeatable), e.g. "
       "nystromformer.conv_kernel=0")
      ("exact", po::value<std::string>()->default_value("auto"), "reference: softmax, kernelized, or auto (kernelized for skyformer, softmax otherwise)")
      ("draws", po::value<std::int64_t>()->default_value(3), "fresh draws of a stochastic method's randomness")
      ("seed", po::value<std::int64_t>()->default_value(0), "seed of the fresh model's weights and of the draws")
      ("batch", po::value<std::int64_t>()->default_value(8), "test sequences used (--dataset, --run)")
      ("dataset-param", po::value<std::vector<std::string>>()->composing(),
       "KEY=VALUE for the dataset plugin (repeatable; --dataset, --run); max_len follows the longest length unless given")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("absolute", "print absolute errors instead of relative ones")
      ("show", "print the stored results and exit")
      ("help,h", "this help");
  add_study_options(options);
  return options;
}

int show_stored(const std::string& db_path, bool absolute) {
  existing_database(db_path);
  store::ResultsReader db(db_path);
  const auto rows = store::approx_results(db);
  if (rows.empty()) return std::cout << db_path << ": no approx results yet\n", 0;
  std::cout << approx_table(rows, absolute);
  return 0;
}

// The study the options describe (its source is set where the inputs are chosen).
ApproxStudy study_from(const po::variables_map& vm) {
  ApproxStudy study;
  study.methods = split_list(vm["methods"].as<std::string>(), "approx: --methods");
  study.features = split_positive_integers(vm["features"].as<std::string>(), "approx: --features");
  study.param = vm["param"].as<std::string>();
  study.exact = vm["exact"].as<std::string>();
  study.draws = vm["draws"].as<std::int64_t>();
  study.seed = static_cast<std::uint64_t>(vm["seed"].as<std::int64_t>());
  study.device = vm["device"].as<std::string>();
  for (const auto& item : option_values(vm, "method-param")) {
    const auto dot = item.find('.'), eq = item.find('=');
    if (dot == std::string::npos || eq == std::string::npos || dot == 0 || eq < dot + 2)
      throw ApproxError("--method-param '" + item + "': expected METHOD.KEY=VALUE");
    study.method_params[item.substr(0, dot)].emplace_back(item.substr(dot + 1, eq - dot - 1), item.substr(eq + 1));
  }
  study.lengths = vm.count("lengths") ? split_positive_integers(vm["lengths"].as<std::string>(), "approx: --lengths") : kDefaultLengths;
  return study;
}

DataOptions data_options(const po::variables_map& vm, const ApproxStudy& study) {
  DataOptions data;
  data.batch = vm["batch"].as<std::int64_t>();
  data.cache_dir = vm["cache-dir"].as<std::string>();
  data.max_length = *std::max_element(study.lengths.begin(), study.lengths.end());
  for (const auto& kv : option_values(vm, "dataset-param")) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw ApproxError("--dataset-param '" + kv + "': expected KEY=VALUE");
    data.dataset_params.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return data;
}

// Where the study's Q, K, V come from (--qkv, --run or --dataset), alive while the study runs.
struct InputSource {
  AttentionInputs npy;
  ModelSource model;
  std::function<AttentionInputs(std::int64_t)> at;  // the inputs of n tokens
};

// --qkv DIR: the files' rows; the default length is theirs.
void from_npy(InputSource& source, const std::string& dir, bool lengths_given, const c10::Device& device, ApproxStudy& study) {
  study.source = "npy:" + dir;
  source.npy = npy_inputs(dir);
  if (!lengths_given) study.lengths = {source.npy.length()};
  for (auto n : study.lengths)
    if (n > source.npy.length())
      throw ApproxError("--lengths " + std::to_string(n) + ": the .npy files in " + dir + " have only " +
                        std::to_string(source.npy.length()) + " rows");
  source.npy.q = source.npy.q.to(device);
  source.npy.k = source.npy.k.to(device);
  source.npy.v = source.npy.v.to(device);
  source.npy.key_valid = source.npy.key_valid.to(device);
  source.at = [&npy = source.npy](std::int64_t n) { return first_rows(npy, n); };
}

// --run RUN_ID: its best checkpoint; the default lengths are those its positions hold.
void from_run(InputSource& source, std::int64_t run_id, store::ResultsReader& db, const PluginRegistry& registry,
              const DataOptions& data, bool lengths_given, const c10::Device& device, ApproxStudy& study) {
  study.source = "run:" + std::to_string(run_id);
  source.model = run_source(registry, db, run_id, data, device);
  const ModelSource& model = source.model;
  if (lengths_given) {
    for (auto n : study.lengths)
      if (n > model.max_positions)
        throw ApproxError("--lengths " + std::to_string(n) + ": " + model.description + " has positions for " +
                          std::to_string(model.max_positions) + " tokens only");
  } else {
    std::vector<std::int64_t> kept;
    for (auto n : study.lengths)
      if (n <= model.max_positions) kept.push_back(n);
    if (kept.empty()) kept.push_back(model.max_positions);
    if (kept != study.lengths)
      std::cerr << "attnlab: approx: " << model.description << " has positions for " << model.max_positions
                << " tokens: lengths " << join(kept) << "\n";
    study.lengths = kept;
  }
  source.at = [&model = source.model, device](std::int64_t n) { return model_inputs(model, n, device); };
}

// --dataset NAME: a freshly initialised model on its test split.
void from_dataset(InputSource& source, const std::string& dataset, const PluginRegistry& registry,
                  const DataOptions& data, const c10::Device& device, ApproxStudy& study) {
  study.source = "init:" + dataset;
  source.model = init_source(registry, dataset, data, study.seed, device);
  source.at = [&model = source.model, device](std::int64_t n) { return model_inputs(model, n, device); };
}

// Rows stored as they come (an interrupted study keeps what it did), progress and failures on stderr.
ApproxCallbacks store_as_they_come(store::Database& db, const std::string& param, std::int64_t& stored, std::int64_t& failed) {
  const auto started = std::chrono::steady_clock::now();
  ApproxCallbacks callbacks;
  callbacks.on_rows = [&db, &stored, started](const std::vector<store::ApproxResult>& rows) {
    stored += store::add_approx_results(db, rows);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::cerr << "approx: " << rows.front().method << " n=" << rows.front().seq_len << ": " << rows.size() << " cell(s), "
              << static_cast<int>(seconds) << " s" << std::endl;
  };
  callbacks.on_failure = [&failed, param](const std::string& method, std::int64_t n, std::int64_t d, const std::string& error) {
    ++failed;
    std::cerr << "attnlab: approx: " << method << " at n=" << n << ", " << param << "=" << d << " failed: " << error << std::endl;
  };
  return callbacks;
}

}  // namespace

int cmd_approx(const Args& args) {
  const auto options = approx_options();
  const auto vm = parse_command_line("approx", args, options);
  if (vm.count("help")) return std::cout << options << "\n", 0;
  const std::string db_path = vm["db"].as<std::string>();
  const bool absolute = vm.count("absolute") != 0;
  if (vm.count("show")) return show_stored(db_path, absolute);

  const int sources = static_cast<int>(vm.count("dataset") + vm.count("run") + vm.count("qkv"));
  if (sources != 1) throw ApproxError("approx: give exactly one of --dataset NAME, --run RUN_ID, --qkv DIR");
  if (!vm.count("methods")) throw ApproxError("approx: name the methods to study with --methods a,b");
  if (vm.count("qkv") && (!vm["batch"].defaulted() || vm.count("dataset-param")))
    throw ApproxError("approx: --batch and --dataset-param apply to --dataset and --run, not to --qkv");
  ApproxStudy study = study_from(vm);
  if (vm["batch"].as<std::int64_t>() < 1) throw ApproxError("--batch must be at least 1");
  const c10::Device device = compat::parse_device(study.device);
  compat::configure_threads(vm["threads"].as<int>());
  const PluginRegistry registry = load_plugins(plugin_folders(vm));
  for (auto& method : study.methods)  // a TorchScript method by its file, as check, bench and run take it
    if (method.size() > 3 && method.compare(method.size() - 3, 3, ".pt") == 0) {
      try {
        method = registry.add_script_file(method).name();
      } catch (const std::exception& e) {
        throw ApproxError("approx: --methods: " + std::string(e.what()));
      }
    }
  check_study(study, registry);  // before any data is read or generated
  const DataOptions data = data_options(vm, study);

  std::unique_ptr<store::Database> db;
  InputSource source;
  const bool lengths_given = vm.count("lengths") != 0;
  if (vm.count("qkv")) {
    from_npy(source, vm["qkv"].as<std::string>(), lengths_given, device, study);
  } else if (vm.count("run")) {
    if (access(db_path.c_str(), F_OK) != 0) throw ApproxError(db_path + ": no such database (--run reads the run from it)");
    db = std::make_unique<store::Database>(db_path);
    from_run(source, vm["run"].as<std::int64_t>(), *db, registry, data, lengths_given, device, study);
  } else {
    from_dataset(source, vm["dataset"].as<std::string>(), registry, data, device, study);
  }
  if (!db) db = std::make_unique<store::Database>(db_path);

  std::int64_t stored = 0, failed = 0;
  const auto rows = run_approx_study(study, registry, source.at, store_as_they_come(*db, study.param, stored, failed));
  std::cout << approx_table(rows, absolute) << "stored " << stored << " row(s) in " << db_path << "\n";
  if (failed) {
    std::cerr << "attnlab: approx: " << failed << " cell(s) failed\n";
    return 3;
  }
  return 0;
}

}  // namespace attnlab
