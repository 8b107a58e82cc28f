#include "experiment/cache_dir.hpp"
#include "studies/approx.hpp"
#include "studies/stored_run.hpp"
#include "cli/provenance.hpp"
#include "cli/text_table.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/linalg_matrix_norm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/serialize.h>
#include <torch/utils.h>

#include "attnlab/train/config.hpp"
#include "experiment/train_job.hpp"
#include "attnlab/dataset.hpp"
#include "attnlab/params.hpp"
#include "attnlab/torch_compat.hpp"
#include "experiment/experiment.hpp"
#include "studies/npy.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab {
namespace {

// Keeps the [sequences, heads, n, n] scores of one chunk around this many bytes (float32).
constexpr double kChunkBytes = 256.0 * 1024 * 1024;
constexpr std::uint64_t kDrawStream = 0xA0761D6478BD642FULL;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// The model's own attention is never run (only layer 0's projections are read), so a fresh model
// is built with this stand-in: its weights then do not depend on which methods are studied.
class UnusedAttention : public AttentionMethod {
 public:
  at::Tensor forward(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&) override {
    throw std::logic_error("approx: the model's own attention is not meant to run");
  }
};

std::string names_of(const LoadedPlugin& plugin) {
  std::string out;
  for (std::size_t i = 0; i < plugin.info->param_count; ++i) out += (i ? ", " : "") + std::string(plugin.info->params[i].name);
  return out.empty() ? "none" : out;
}

const LoadedPlugin& attention_plugin(const PluginRegistry& registry, const std::string& name, const std::string& role) {
  if (const auto* p = registry.find(PluginKind::attention, name)) return *p;
  std::string known;
  for (const auto& n : registry.names(PluginKind::attention)) known += (known.empty() ? "" : ", ") + n;
  throw ApproxError(role + " '" + name + "' is not a loaded attention plugin (loaded: " + (known.empty() ? "none" : known) + ")");
}

// How a method or reference is stored: its name, with its --method-param overrides in brackets
// ("nystromformer[conv_kernel=0]"), so that rows measured with other settings stay apart.
std::string label(const std::string& name, const ApproxStudy& study) {
  const auto it = study.method_params.find(name);
  if (it == study.method_params.end() || it->second.empty()) return name;
  std::string out = name + "[";
  for (std::size_t i = 0; i < it->second.size(); ++i) out += (i ? "," : "") + it->second[i].first + "=" + it->second[i].second;
  return out + "]";
}

// A plugin's defaults with the study's --method-param overrides for it.
ParamValues overridden(const LoadedPlugin& plugin, const ApproxStudy& study) {
  ParamValues values = plugin.defaults();
  const auto it = study.method_params.find(plugin.name());
  if (it == study.method_params.end()) return values;
  for (const auto& [key, text] : it->second) {
    const ParamSpec* spec = find_param(plugin.info->params, plugin.info->param_count, key);
    if (!spec) throw ApproxError("--method-param " + plugin.name() + "." + key + ": method '" + plugin.name() +
                                 "' has no parameter '" + key + "' (its parameters: " + names_of(plugin) + ")");
    if (key == study.param) throw ApproxError("--method-param " + plugin.name() + "." + key + ": '" + key + "' is what --features sets");
    try {
      values.set(key, check_param(*spec, parse_param(*spec, text)));
    } catch (const ParamError& e) {
      throw ApproxError("--method-param " + plugin.name() + "." + key + ": " + e.what());
    }
  }
  return values;
}

// The method's parameters with `param` = d; a method equal to its reference takes them as they are.
ParamValues params_at(const LoadedPlugin& plugin, const ApproxStudy& study, std::int64_t d, bool exactness_check) {
  ParamValues values = overridden(plugin, study);
  const std::string& param = study.param;
  const ParamSpec* spec = find_param(plugin.info->params, plugin.info->param_count, param);
  if (!spec) {
    if (exactness_check) return values;
    throw ApproxError("method '" + plugin.name() + "' has no parameter '" + param + "' (its parameters: " + names_of(plugin) +
                      "); name the one to vary with --param");
  }
  if (spec->type != ParamType::integer && spec->type != ParamType::real)
    throw ApproxError("method '" + plugin.name() + "': parameter '" + param + "' is a " + to_string(spec->type) +
                      ", not a number of features");
  try {
    values.set(param, check_param(*spec, parse_param(*spec, std::to_string(d))));
  } catch (const ParamError& e) {
    throw ApproxError("method '" + plugin.name() + "': " + e.what());
  }
  return values;
}

// Every module is built right after seeding the global generator with the study's seed, so that
// what a plugin initialises from it (Nyströmformer's convolution, say) does not depend on the order
// of methods, lengths and d.
std::shared_ptr<AttentionMethod> build(const LoadedPlugin& plugin, const AttentionInputs& in, const ParamValues& params,
                                       const c10::Device& device, std::uint64_t seed) {
  const AttentionShape shape{in.q.size(1), in.q.size(3), in.length()};
  torch::manual_seed(seed);
  auto method = attention_maker(plugin, params)(shape);
  if (!method) throw std::runtime_error("the factory returned no module");
  method->to(device);
  method->eval();
  return method;
}

// Sets the dataset's parameters: defaults, then the overrides; max_len (when the dataset has one)
// follows the longest length asked for unless given.
ParamValues dataset_params(const LoadedPlugin& plugin, ParamValues values, const DataOptions& data) {
  bool max_len_given = false;
  for (const auto& [key, text] : data.dataset_params) {
    const ParamSpec* spec = find_param(plugin.info->params, plugin.info->param_count, key);
    if (!spec) throw ApproxError("dataset '" + plugin.name() + "' has no parameter '" + key + "' (its parameters: " + names_of(plugin) + ")");
    try {
      values.set(key, check_param(*spec, parse_param(*spec, text)));
    } catch (const ParamError& e) {
      throw ApproxError("dataset '" + plugin.name() + "': " + e.what());
    }
    max_len_given = max_len_given || key == "max_len";
  }
  if (!max_len_given && data.max_length > 0)
    if (const ParamSpec* spec = find_param(plugin.info->params, plugin.info->param_count, "max_len"))
      if (spec->type == ParamType::integer && static_cast<double>(data.max_length) <= spec->max_value) {
        values.set("max_len", data.max_length);
        if (values.has("pad_to")) values.set("pad_to", std::int64_t{0});  // rows as long as the length
      }
  return values;
}

// The first `batch` test sequences (first input of a pair task) as [B, L0] and [B] int64.
void load_test_batch(ModelSource& source, Dataset& dataset, std::int64_t batch) {
  const SplitData test = dataset.load(Split::test);
  check_split(source.description, Split::test, dataset.info(), test);
  if (test.size() == 0) throw ApproxError(source.description + ": the test split is empty");
  const std::int64_t b = std::min(batch, test.size());
  source.tokens = test.tokens.slice(0, 0, b).select(1, 0).to(at::kLong).contiguous();
  source.lengths = test.lengths.slice(0, 0, b).select(1, 0).to(at::kLong).contiguous();
}

std::string format_stat(double mean, double std) {
  auto num = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", x);
    return std::string(buf);
  };
  return num(mean) + " ± " + num(std);
}

}  // namespace

// --- numerics ------------------------------------------------------------------------------------

at::Tensor spectral_norms(const at::Tensor& x) {
  return at::linalg_matrix_norm(x.to(at::kDouble), 2.0, {-2, -1});
}

NormPair approximation_norms(const at::Tensor& approx, const at::Tensor& exact, const at::Tensor& row_valid) {
  // where(), not a product: outputs at padded query rows are unspecified and may be NaN
  const auto rows = row_valid.to(at::kBool).unsqueeze(1).unsqueeze(3);  // [B, 1, n, 1]
  const auto zero = at::zeros({}, exact.options().dtype(at::kDouble));
  const auto e = at::where(rows, exact.to(at::kDouble), zero);
  const auto d = at::where(rows, approx.to(at::kDouble) - exact.to(at::kDouble), zero);
  return {spectral_norms(d), spectral_norms(e)};
}

ErrorStats summarize(const std::vector<double>& abs_errors, const std::vector<double>& rel_errors) {
  auto stats = [](const std::vector<double>& x, double& mean, double& sd) {
    mean = sd = 0;
    if (x.empty()) return;
    for (double v : x) mean += v;
    mean /= static_cast<double>(x.size());
    if (x.size() < 2) return;
    double ss = 0;
    for (double v : x) ss += (v - mean) * (v - mean);
    sd = std::sqrt(ss / static_cast<double>(x.size() - 1));
  };
  ErrorStats s;
  s.samples = static_cast<std::int64_t>(abs_errors.size());
  stats(abs_errors, s.abs_mean, s.abs_std);
  stats(rel_errors, s.rel_mean, s.rel_std);
  return s;
}

at::Tensor attend(AttentionMethod& method, const AttentionInputs& in) {
  at::NoGradGuard no_grad;
  const std::int64_t b = in.q.size(0), h = in.q.size(1), n = in.length();
  const double per_sequence = static_cast<double>(h) * static_cast<double>(n) * static_cast<double>(n) * 4.0;
  const std::int64_t chunk = std::max<std::int64_t>(1, static_cast<std::int64_t>(kChunkBytes / per_sequence));
  if (chunk >= b) return method.forward(in.q, in.k, in.v, in.key_valid);
  std::vector<at::Tensor> parts;
  for (std::int64_t s = 0; s < b; s += chunk) {
    const std::int64_t e = std::min(b, s + chunk);
    parts.push_back(method.forward(in.q.slice(0, s, e), in.k.slice(0, s, e), in.v.slice(0, s, e), in.key_valid.slice(0, s, e)));
  }
  return at::cat(parts, 0);
}

std::uint64_t draw_seed(std::uint64_t seed, std::int64_t draw) {
  return splitmix64(splitmix64(seed ^ kDrawStream) + static_cast<std::uint64_t>(draw));
}

ErrorStats measure(AttentionMethod& method, const at::Tensor& exact_out, const AttentionInputs& in, std::int64_t draws,
                   std::uint64_t seed) {
  // sequences with no real token have no rows to compare
  const auto has_rows = in.key_valid.any(1).to(at::kCPU);
  std::vector<double> abs_errors, rel_errors;
  const std::int64_t evaluations = method.stochastic() ? std::max<std::int64_t>(1, draws) : 1;
  for (std::int64_t draw = 0; draw < evaluations; ++draw) {
    if (method.stochastic()) {
      auto generator = at::make_generator<at::CPUGeneratorImpl>(draw_seed(seed, draw));
      at::NoGradGuard no_grad;
      method.redraw(generator);
    }
    const auto norms = approximation_norms(attend(method, in), exact_out, in.key_valid);
    const auto err = norms.error.to(at::kCPU).contiguous(), ref = norms.exact.to(at::kCPU).contiguous();
    const auto* e = err.data_ptr<double>();
    const auto* r = ref.data_ptr<double>();
    const auto* valid = has_rows.data_ptr<bool>();
    const std::int64_t b = err.size(0), h = err.size(1);
    for (std::int64_t i = 0; i < b; ++i) {
      if (!valid[i]) continue;
      for (std::int64_t j = 0; j < h; ++j) {
        const double a = e[i * h + j], x = r[i * h + j];
        abs_errors.push_back(a);
        rel_errors.push_back(x > 0 ? a / x : (a == 0 ? 0.0 : std::numeric_limits<double>::infinity()));
      }
    }
  }
  return summarize(abs_errors, rel_errors);
}

std::string reference_for(const std::string& method, const std::string& exact) {
  if (exact == "auto") return method == "skyformer" ? "kernelized" : "softmax";
  return exact;
}

// --- the study -----------------------------------------------------------------------------------

void check_study(const ApproxStudy& study, const PluginRegistry& registry) {
  if (study.methods.empty()) throw ApproxError("name the methods to study with --methods a,b");
  if (study.exact != "auto" && study.exact != "softmax" && study.exact != "kernelized")
    throw ApproxError("--exact '" + study.exact + "': expected softmax, kernelized or auto");
  if (study.lengths.empty()) throw ApproxError("no sequence length to study");
  if (study.features.empty()) throw ApproxError("no value of --features to study");
  if (study.draws < 1) throw ApproxError("--draws must be at least 1");
  for (auto n : study.lengths)
    if (n < 1) throw ApproxError("sequence length " + std::to_string(n) + ": must be at least 1");
  for (auto d : study.features)
    if (d < 1) throw ApproxError("--features " + std::to_string(d) + ": must be at least 1");
  for (const auto& name : study.methods) {
    const auto& plugin = attention_plugin(registry, name, "method");
    const std::string reference = reference_for(name, study.exact);
    attention_plugin(registry, reference, "exact reference (for " + name + ")");
    if (!plugin.scripted())
      for (auto d : study.features) params_at(plugin, study, d, name == reference);
    overridden(*registry.find(PluginKind::attention, reference), study);
  }
  for (const auto& [name, overrides] : study.method_params) {
    bool used = false;
    for (const auto& m : study.methods) used = used || m == name || reference_for(m, study.exact) == name;
    if (!used) throw ApproxError("--method-param " + name + "." + overrides.front().first + ": '" + name +
                                 "' is neither a studied method nor an exact reference");
  }
}

std::vector<store::ApproxResult> run_approx_study(const ApproxStudy& study, const PluginRegistry& registry,
                                                  const std::function<AttentionInputs(std::int64_t)>& inputs,
                                                  const ApproxCallbacks& callbacks) {
  check_study(study, registry);
  const c10::Device device = compat::parse_device(study.device);
  std::vector<store::ApproxResult> all;
  for (const auto n : study.lengths) {
    const AttentionInputs in = inputs(n);
    std::map<std::string, at::Tensor> exact_outputs;  // per reference, at this length
    for (const auto& name : study.methods) {
      const auto& plugin = *registry.find(PluginKind::attention, name);
      const std::string reference = reference_for(name, study.exact);
      auto& exact_out = exact_outputs[reference];
      if (!exact_out.defined()) {
        const auto& ref_plugin = *registry.find(PluginKind::attention, reference);
        auto ref = build(ref_plugin, in, overridden(ref_plugin, study), device, study.seed);
        exact_out = attend(*ref, in);
      }
      std::vector<store::ApproxResult> rows;
      // a script has no parameter to vary: measured once, as its file is (its row's d is 0)
      const std::vector<std::int64_t> values = plugin.scripted() ? std::vector<std::int64_t>{0} : study.features;
      for (const auto d : values) {
        try {
          auto method = build(plugin, in, plugin.scripted() ? plugin.defaults() : params_at(plugin, study, d, name == reference),
                              device, study.seed);
          const ErrorStats s = measure(*method, exact_out, in, study.draws, study.seed);
          store::ApproxResult r;
          r.method = label(name, study);
          r.reference = label(reference, study);
          r.source = study.source;
          r.param = plugin.scripted() ? "script" : study.param;
          r.features = d;
          r.seq_len = n;
          r.samples = s.samples;
          r.abs_error_mean = s.abs_mean;
          r.abs_error_std = s.abs_std;
          r.rel_error_mean = s.rel_mean;
          r.rel_error_std = s.rel_std;
          stamp_provenance(r, device);
          rows.push_back(std::move(r));
        } catch (const std::exception& e) {
          std::string what = e.what();
          what = what.substr(0, what.find('\n'));
          if (!callbacks.on_failure) throw ApproxError(name + " at n = " + std::to_string(n) + ", " + study.param + " = " + std::to_string(d) + ": " + what);
          callbacks.on_failure(name, n, d, what);
        }
      }
      if (callbacks.on_rows && !rows.empty()) callbacks.on_rows(rows);
      all.insert(all.end(), rows.begin(), rows.end());
    }
  }
  return all;
}

// --- sources -------------------------------------------------------------------------------------

AttentionInputs npy_inputs(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw NpyError(dir + ": no such directory (expected one holding q.npy, k.npy, v.npy)");
  at::Tensor t[3];
  std::vector<std::int64_t> shapes[3];
  const char* names[3] = {"q.npy", "k.npy", "v.npy"};
  for (int i = 0; i < 3; ++i) {
    const std::string path = (fs::path(dir) / names[i]).string();
    t[i] = read_npy(path);
    shapes[i] = t[i].sizes().vec();
    if (t[i].dim() != 3 && t[i].dim() != 4)
      throw NpyError(path + ": shape " + shape_text(shapes[i]) + " has rank " + std::to_string(t[i].dim()) +
                     " (expected [H, n, p] or [B, H, n, p])");
    for (auto d : shapes[i])
      if (d == 0) throw NpyError(path + ": shape " + shape_text(shapes[i]) + " is empty (expected every dimension >= 1)");
  }
  for (int i = 1; i < 3; ++i)
    if (shapes[i] != shapes[0])
      throw NpyError((fs::path(dir) / names[i]).string() + ": shape " + shape_text(shapes[i]) + " does not match q.npy's " +
                     shape_text(shapes[0]) + " (expected q, k, v of identical shape)");
  AttentionInputs in;
  auto as_batch = [](const at::Tensor& x) { return (x.dim() == 3 ? x.unsqueeze(0) : x).to(at::kFloat).contiguous(); };
  in.q = as_batch(t[0]);
  in.k = as_batch(t[1]);
  in.v = as_batch(t[2]);
  in.key_valid = at::ones({in.q.size(0), in.q.size(2)}, at::TensorOptions().dtype(at::kBool));
  return in;
}

AttentionInputs first_rows(const AttentionInputs& all, std::int64_t length) {
  if (length > all.length())
    throw ApproxError("length " + std::to_string(length) + " is longer than the " + std::to_string(all.length()) + " rows given");
  if (length == all.length()) return all;
  return {all.q.slice(2, 0, length), all.k.slice(2, 0, length), all.v.slice(2, 0, length), all.key_valid.slice(1, 0, length)};
}

AttentionInputs model_inputs(ModelSource& source, std::int64_t length, const c10::Device& device) {
  if (length > source.max_positions)
    throw ApproxError(source.description + ": length " + std::to_string(length) + " is beyond the model's " +
                      std::to_string(source.max_positions) + " positions");
  at::NoGradGuard no_grad;
  at::Tensor tokens = source.tokens;
  const std::int64_t have = tokens.size(1);
  if (have >= length) {
    tokens = tokens.slice(1, 0, length);
  } else {
    tokens = at::cat({tokens, at::zeros({tokens.size(0), length - have}, tokens.options())}, 1);
  }
  const at::Tensor lengths = source.lengths.clamp_max(length);
  source.model->eval();
  auto li = source.model->layer_inputs(tokens.to(device), lengths.to(device), 0);
  return {li.q.to(at::kFloat).contiguous(), li.k.to(at::kFloat).contiguous(), li.v.to(at::kFloat).contiguous(), li.key_valid};
}

ModelSource init_source(const PluginRegistry& registry, const std::string& dataset, const DataOptions& data,
                        std::uint64_t seed, const c10::Device& device) {
  const auto* plugin = registry.find(PluginKind::dataset, dataset);
  if (!plugin) {
    std::string known;
    for (const auto& n : registry.names(PluginKind::dataset)) known += (known.empty() ? "" : ", ") + n;
    throw ApproxError("dataset '" + dataset + "' is not a loaded dataset plugin (loaded: " + (known.empty() ? "none" : known) + ")");
  }
  ModelSource source;
  source.description = "dataset " + dataset;
  const DatasetContext context{dataset_cache_dir(data.cache_dir)};
  // Only the first --batch test sequences are read: the other splits' sizes go to their minimum
  // unless --dataset-param sets them, so that a generated dataset is not built whole (LRA ListOps:
  // 100,000 trees, 635 MB, for 8 sequences). Its test split is then drawn from the same generator
  // after fewer train/val rows: other sequences than a full-size build's, of the same kind.
  ParamValues values = plugin->defaults();
  std::string shrunk;
  for (const char* key : {"train_size", "val_size"}) {
    const ParamSpec* spec = find_param(plugin->info->params, plugin->info->param_count, key);
    const bool given = std::any_of(data.dataset_params.begin(), data.dataset_params.end(),
                                   [&](const auto& kv) { return kv.first == key; });
    if (!spec || spec->type != ParamType::integer || given) continue;
    values.set(key, static_cast<std::int64_t>(spec->min_value));
    shrunk += (shrunk.empty() ? "" : ", ") + std::string(key) + " = " + std::to_string(values.integer(key));
  }
  if (!shrunk.empty())
    std::cerr << "approx: dataset " << dataset << ": only its test split is read, so " << shrunk
              << " (--dataset-param sets them)" << std::endl;
  auto ds = plugin->make_dataset(context, dataset_params(*plugin, values, data));
  TaskInfo task = ds->info();
  task.max_len = std::max(task.max_len, data.max_length);  // positions for every length asked for
  load_test_batch(source, *ds, data.batch);
  const ModelConfig config = model_config_from(ParamValues::defaults(model_params().data(), model_params().size()));
  torch::manual_seed(seed);
  source.model = EncoderClassifier(config, task, [](const AttentionShape&) { return std::make_shared<UnusedAttention>(); });
  source.model->to(device);
  source.model->eval();
  source.max_positions = task.max_len;
  return source;
}

ModelSource run_source(const PluginRegistry& registry, store::ResultsReader& db, std::int64_t run_id, const DataOptions& data,
                       const c10::Device& device) {
  const std::string where = "run " + std::to_string(run_id);
  JobPlan plan;
  std::string checkpoint;
  try {
    plan = stored_plan(registry, db, run_id);
    checkpoint = locate_checkpoint(db, run_id);
  } catch (const std::exception& e) {
    throw ApproxError(e.what());
  }
  const auto* dataset = registry.find(PluginKind::dataset, plan.dataset);

  ModelSource source;
  source.description = where + " (" + plan.method + "/" + plan.dataset + ")";
  const DatasetContext context{dataset_cache_dir(data.cache_dir)};
  // the model as trained: the run's own dataset parameters give its task (positions, vocabulary)
  const TaskInfo task = dataset->make_dataset(context, plan.dataset_params)->info();
  // its test sequences, read at the longest length asked for (with any --dataset-param on top)
  auto ds = dataset->make_dataset(context, dataset_params(*dataset, plan.dataset_params, data));
  load_test_batch(source, *ds, data.batch);

  try {
    source.model = load_trained_model(registry, plan, task, checkpoint, device);
  } catch (const std::exception& e) {
    throw ApproxError(where + ": " + e.what());
  }
  source.max_positions = task.max_len;
  return source;
}

// --- output --------------------------------------------------------------------------------------

std::string approx_table(const std::vector<store::ApproxResult>& rows, bool absolute) {
  struct Group {
    std::vector<std::pair<std::string, std::int64_t>> row_order;  // (method \t reference, n)
    std::vector<std::int64_t> features;
    std::map<std::tuple<std::string, std::int64_t, std::int64_t>, const store::ApproxResult*> cells;
    std::set<std::int64_t> samples;
  };
  std::vector<std::tuple<std::string, std::string, std::string>> order;
  std::map<std::tuple<std::string, std::string, std::string>, Group> groups;
  for (const auto& r : rows) {
    const auto key = std::make_tuple(r.source, r.param, r.device);
    auto [it, fresh] = groups.try_emplace(key);
    if (fresh) order.push_back(key);
    Group& g = it->second;
    const std::string label = r.method + "\t" + r.reference;
    if (std::find(g.row_order.begin(), g.row_order.end(), std::make_pair(label, r.seq_len)) == g.row_order.end())
      g.row_order.emplace_back(label, r.seq_len);
    if (std::find(g.features.begin(), g.features.end(), r.features) == g.features.end()) g.features.push_back(r.features);
    g.cells[{label, r.seq_len, r.features}] = &r;
  }
  std::string out;
  for (const auto& key : order) {
    Group& g = groups[key];
    std::sort(g.features.begin(), g.features.end());
    // methods in the order they first appear, each by increasing n
    std::map<std::string, std::size_t> first_seen;
    for (const auto& [label, n] : g.row_order) first_seen.emplace(label, first_seen.size());
    std::stable_sort(g.row_order.begin(), g.row_order.end(), [&](const auto& a, const auto& b) {
      return std::make_pair(first_seen[a.first], a.second) < std::make_pair(first_seen[b.first], b.second);
    });
    const auto& [source, param, device] = key;
    if (!out.empty()) out += "\n";
    out += std::string(absolute ? "absolute error ||A - A_exact||_2" : "relative error ||A - A_exact||_2 / ||A_exact||_2") +
           ", mean ± std over heads x draws x sequences; source " + source + ", device " + (device.empty() ? "?" : device) +
           ", d = " + param + "\n";
    std::vector<std::string> header = {"method", "exact", "n", "samples"};
    for (auto d : g.features) header.push_back("d=" + std::to_string(d));
    TextTable table(header);
    for (const auto& [label, n] : g.row_order) {
      const auto tab = label.find('\t');
      std::vector<std::string> line = {label.substr(0, tab), label.substr(tab + 1), std::to_string(n), ""};
      std::set<std::int64_t> samples;
      for (auto d : g.features) {
        const auto it = g.cells.find({label, n, d});
        if (it == g.cells.end()) {
          line.push_back("-");
          continue;
        }
        const auto& r = *it->second;
        samples.insert(r.samples);
        line.push_back(absolute ? format_stat(r.abs_error_mean, r.abs_error_std) : format_stat(r.rel_error_mean, r.rel_error_std));
      }
      for (auto s : samples) line[3] += (line[3].empty() ? "" : "/") + std::to_string(s);
      table.add(line);
    }
    out += table.str();
  }
  return out;
}

}  // namespace attnlab
