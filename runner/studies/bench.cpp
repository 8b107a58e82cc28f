#include "experiment/cache_dir.hpp"
#include "studies/bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include <toml++/toml.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/utils.h>

#include "attnlab/precision.hpp"
#include "attnlab/train/config.hpp"
#include "attnlab/train/model.hpp"
#include "attnlab/torch_compat.hpp"
#include "attnlab/train/step_runner.hpp"
#include "attnlab/train/trainer.hpp"
#include "build_info.hpp"
#include "experiment/experiment.hpp"
#include "experiment/train_job.hpp"
#include "plugin_host/plugin_host.hpp"
#include "base/quantities.hpp"
#include "cli/provenance.hpp"
#include "cli/text_table.hpp"
#include "results/bench_measured.hpp"
#include "attnlab/store/studies.hpp"
#include "studies/op_count.hpp"

namespace attnlab {
namespace {

using Clock = std::chrono::steady_clock;

void add_section(toml::table& parent, const std::string& name, const ParamValues& values) {
  toml::table section;
  for (const auto& [key, value] : values.all())
    std::visit([&, &key = key](const auto& v) { section.insert_or_assign(key, v); }, value);
  parent.insert_or_assign(name, std::move(section));
}

std::int64_t bench_integer(const toml::table& bench, const char* key, std::int64_t min, const std::string& where) {
  const auto* node = bench.get(key);
  if (!node || !node->is_integer()) throw ConfigError(where + ": [bench] " + key + ": missing or not an integer");
  const std::int64_t value = node->as_integer()->get();
  if (value < min) throw ConfigError(where + ": [bench] " + key + ": must be at least " + std::to_string(min));
  return value;
}


std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// 0.842, 13.3, 0.0120: three significant digits, no exponent for sensible step times.
std::string seconds_text(double s) {
  if (!std::isfinite(s)) return "-";
  char buf[32];
  if (s >= 100) std::snprintf(buf, sizeof buf, "%.0f", s);
  else if (s >= 10) std::snprintf(buf, sizeof buf, "%.1f", s);
  else if (s >= 1) std::snprintf(buf, sizeof buf, "%.2f", s);
  else std::snprintf(buf, sizeof buf, "%#.3g", s);  // '#' keeps trailing zeros: 0.120
  return buf;
}

std::string ratio_text(double x) {
  if (!std::isfinite(x)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

// The [model] table of a stored configuration: rows measured with different models never compare.
std::string model_section(const std::string& config_toml) {
  const auto begin = config_toml.find("[model]");
  if (begin == std::string::npos) return "";
  const auto end = config_toml.find("\n[", begin);
  return config_toml.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

using Measured = results::BenchMeasured;

bool comparable(const store::BenchResult& a, const store::BenchResult& b) {
  return a.dataset == b.dataset && a.seq_len == b.seq_len && a.batch_size == b.batch_size && a.device == b.device &&
         a.concurrent == b.concurrent &&
         a.device_name == b.device_name && a.threads == b.threads && a.torch_version == b.torch_version &&
         model_section(a.config_toml) == model_section(b.config_toml);
}

double seconds_between(Clock::time_point from, Clock::time_point to) { return std::chrono::duration<double>(to - from).count(); }

// `warmup` untimed calls, then `steps` timed ones, each waited for on the device (and timed also
// until it returned: the host's part); the memory peak over the timed ones; then the probes' calls.
StepTimes time_calls(const std::function<void()>& call, std::int64_t warmup, std::int64_t steps, const c10::Device& device,
                     const StepProbes& probes) {
  for (std::int64_t i = 0; i < warmup; ++i) call();
  compat::synchronize(device);
  if (probes.before_timing) probes.before_timing();
  compat::reset_peak_memory(device);
  StepTimes out;
  for (std::int64_t i = 0; i < steps; ++i) {
    const auto start = Clock::now();
    call();
    const auto issued = Clock::now();
    compat::synchronize(device);
    out.host_seconds.push_back(seconds_between(start, issued));
    out.seconds.push_back(seconds_between(start, Clock::now()));
  }
  out.peak_memory_bytes = compat::peak_memory_bytes(device);
  if (probes.count_ops) {
    OpCounter counter;
    call();
    compat::synchronize(device);
    out.ops = counter.count();
  }
  if (!probes.trace.empty()) {
    torch::autograd::profiler::RecordProfile profile(probes.trace);
    call();
    compat::synchronize(device);
  }
  return out;
}

// <dir>/<method>-<length>-<step|attention>-<precision>.json
std::string trace_file(const std::string& dir, const BenchCase& c) {
  return dir + "/" + c.method + "-" + std::to_string(c.seq_len) + "-" + (c.attention_only ? "attention" : "step") + "-" +
         c.train.string("precision") + ".json";
}

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string bench_config_toml(const BenchCase& c, const PluginRegistry& registry) {
  toml::table root;
  root.insert_or_assign("method", c.method);
  root.insert_or_assign("dataset", c.dataset);
  root.insert_or_assign("seed", c.seed);
  add_section(root, "model", c.model);
  add_section(root, "train", c.train);
  toml::table methods, datasets;
  add_section(methods, c.method, c.method_params);
  add_section(datasets, c.dataset, c.dataset_params);
  root.insert_or_assign("methods", std::move(methods));
  root.insert_or_assign("datasets", std::move(datasets));
  toml::table bench;
  bench.insert_or_assign("seq_len", c.seq_len);
  bench.insert_or_assign("batch_size", c.batch_size);
  bench.insert_or_assign("steps", c.steps);
  bench.insert_or_assign("warmup", c.warmup);
  if (c.attention_only) bench.insert_or_assign("attention_only", true);
  root.insert_or_assign("bench", std::move(bench));
  std::ostringstream text;
  text << root << "\n";
  // checked now, by the same code the measuring process reads it with
  parse_bench_config(text.str(), "bench configuration", registry);
  return text.str();
}

BenchCase parse_bench_config(const std::string& text, const std::string& where, const PluginRegistry& registry) {
  toml::table root;
  try {
    root = toml::parse(text, where);
  } catch (const toml::parse_error& e) {
    throw ConfigError(where + ":" + std::to_string(e.source().begin.line) + ": TOML syntax: " + std::string(e.description()));
  }
  const JobPlan plan = parse_job_config(text, where, registry);  // method, dataset, seed and the four sections
  BenchCase c;
  c.method = plan.method;
  c.dataset = plan.dataset;
  c.seed = plan.seed;
  c.model = plan.model;
  c.train = plan.train;
  c.method_params = plan.method_params;
  c.dataset_params = plan.dataset_params;
  const auto* bench = root.get_as<toml::table>("bench");
  if (!bench) throw ConfigError(where + ": no [bench] table");
  c.seq_len = bench_integer(*bench, "seq_len", 1, where);
  c.batch_size = bench_integer(*bench, "batch_size", 1, where);
  c.steps = bench_integer(*bench, "steps", 1, where);
  c.warmup = bench_integer(*bench, "warmup", 0, where);
  if (const auto* node = bench->get("attention_only")) {
    if (!node->is_boolean()) throw ConfigError(where + ": [bench] attention_only: not a boolean");
    c.attention_only = node->as_boolean()->get();
  }
  try {
    model_config_from(c.model);
  } catch (const ParamError& e) {
    throw ConfigError(where + ": [model] " + e.what());
  }
  return c;
}

StepTimes time_training_steps(const BenchCase& c, const PluginRegistry& registry, const std::string& device_text,
                              const std::string& cache_dir, const StepProbes& probes) {
  const c10::Device device = compat::parse_device(device_text);
  const auto* method = registry.find(PluginKind::attention, c.method);
  if (!method) throw std::runtime_error("no attention plugin named '" + c.method + "'");
  const auto* dataset = registry.find(PluginKind::dataset, c.dataset);
  if (!dataset) throw std::runtime_error("no dataset plugin named '" + c.dataset + "'");

  // The task's description only (vocabulary, classes, inputs); no data is loaded.
  TaskInfo task = dataset->make_dataset({dataset_cache_dir(cache_dir), /*describe_only=*/true}, c.dataset_params)->info();
  task.max_len = c.seq_len;
  const ModelConfig model_config = model_config_from(c.model);
  const TrainConfig train = train_config_from(c.train);
  const Precision precision = apply_precision_settings(train, device);

  torch::manual_seed(static_cast<std::uint64_t>(c.seed));  // weights and dropout
  EncoderClassifier model(model_config, task, attention_maker(*method, c.method_params));
  model->to(device);
  model->train();
  AttentionDraws draws(model->attention_methods(), static_cast<std::uint64_t>(c.seed) ^ kAttentionStream);
  FusedAdamW optimizer(model->unique_parameters(), adamw_options(train), cycles_beta1(train));  // the run's update

  // One batch of random token ids, every position real, and random labels; drawn on the CPU so that
  // the same seed gives the same batch on any device.
  auto data_generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(c.seed) ^ kDataStream);
  const auto tokens = at::randint(task.vocab_size, {c.batch_size, task.inputs, c.seq_len}, data_generator, at::kLong).to(device);
  const auto lengths = at::full({c.batch_size, task.inputs}, c.seq_len, at::kLong).to(device);
  const auto labels = at::randint(task.num_classes, {c.batch_size}, data_generator, at::kLong).to(device);

  std::int64_t steps_taken = 0;
  LossScaler scaler(precision == Precision::fp16);
  StepRunner runner(train, device, precision);
  // One training step as the trainer takes it: forward (autocast at the precision), loss, backward,
  // unscaling, clipping, AdamW; on a GPU a replayed CUDA graph where [train] cuda_graphs allows
  // (the batch's tensors and the learning rate's are static already).
  const std::function<void()> device_step = [&] {
    optimizer.zero_grad();
    const auto logits = forward_logits(model, tokens, lengths, device, precision);
    scaler.scale(at::cross_entropy_loss(logits, labels)).backward();
    apply_gradients(optimizer, train, scaler);
  };
  auto step = [&] {
    runner.run(device_step);
    draws.after_step(++steps_taken);  // the redraws a real run pays for
  };
  // a graph's warm-up and capture are never timed: at least those steps go untimed
  const auto warmup = runner.graphed() ? std::max(c.warmup, StepRunner::kWarmupSteps + 1) : c.warmup;
  auto times = time_calls(step, warmup, c.steps, device, probes);
  times.step_mode = runner.mode();
  return times;
}

StepTimes time_attention_forward(const BenchCase& c, const PluginRegistry& registry, const std::string& device_text,
                                 const StepProbes& probes) {
  const c10::Device device = compat::parse_device(device_text);
  const auto* method = registry.find(PluginKind::attention, c.method);
  if (!method) throw std::runtime_error("no attention plugin named '" + c.method + "'");
  const ModelConfig model_config = model_config_from(c.model);
  const TrainConfig train = train_config_from(c.train);
  const Precision precision = apply_precision_settings(train, device);

  torch::manual_seed(static_cast<std::uint64_t>(c.seed));  // methods with weights of their own
  auto attention = attention_maker(*method, c.method_params)({model_config.heads, model_config.head_dim, c.seq_len});
  attention->to(device);
  attention->eval();
  auto generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(c.seed) ^ kAttentionStream);
  if (attention->stochastic()) attention->redraw(generator);
  // q, k, v as a model's projections hand them over under the precision's autocast; drawn on the CPU
  // so that the same seed gives the same inputs on any device
  auto data_generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(c.seed) ^ kDataStream);
  const std::vector<std::int64_t> shape = {c.batch_size, model_config.heads, c.seq_len, model_config.head_dim};
  auto draw = [&] { return at::randn(shape, data_generator).to(device, reduced_type(precision)); };
  const auto q = draw(), k = draw(), v = draw();
  const auto key_valid = at::ones({c.batch_size, c.seq_len}, at::TensorOptions(device).dtype(at::kBool));

  c10::InferenceMode no_grad;
  auto forward = [&] {
    AutocastScope autocast(device, precision);
    attention->forward(q, k, v, key_valid);
  };
  return time_calls(forward, c.warmup, c.steps, device, probes);
}

double softmax_attention_flops(const store::BenchResult& row) {
  try {
    const auto config = toml::parse(row.config_toml);
    const auto heads = config["model"]["heads"].value_or(std::int64_t{0});
    auto head_dim = config["model"]["head_dim"].value_or(std::int64_t{0});
    if (head_dim == 0 && heads > 0) head_dim = config["model"]["dim"].value_or(std::int64_t{0}) / heads;  // dim / heads
    return 4.0 * static_cast<double>(row.batch_size) * static_cast<double>(heads) * static_cast<double>(row.seq_len) *
           static_cast<double>(row.seq_len) * static_cast<double>(head_dim);
  } catch (const toml::parse_error&) {
    return std::numeric_limits<double>::quiet_NaN();
  }
}

store::BenchResult run_bench_case(const BenchCase& c, const std::string& config_toml, const PluginRegistry& registry,
                                  const std::string& device_text, int threads, const std::string& cache_dir,
                                  bool count_ops, const std::string& trace_dir,
                                  const std::function<void()>& before_timing) {
  store::BenchResult r;
  r.method = c.method;
  r.dataset = c.dataset;
  r.seq_len = c.seq_len;
  r.batch_size = c.batch_size;
  r.device = device_text;  // a row that fails before its device parses says what it was given
  r.torch_version = compat::torch_version();
  r.git_revision = build_info::git_revision();
  r.config_toml = config_toml;
  r.status = "failed";
  std::optional<c10::Device> device;
  try {
    r.threads = compat::configure_threads(threads);
    device = compat::parse_device(device_text);
    stamp_provenance(r, *device);  // cuda -> cuda:0
    const StepProbes probes{count_ops, trace_dir.empty() ? "" : trace_file(trace_dir, c), before_timing};
    const StepTimes t = c.attention_only ? time_attention_forward(c, registry, device_text, probes)
                                         : time_training_steps(c, registry, device_text, cache_dir, probes);
    r.steps_timed = static_cast<std::int64_t>(t.seconds.size());
    r.step_seconds_median = median(t.seconds);
    r.host_seconds_median = median(t.host_seconds);
    r.ops_per_step = t.ops;
    r.step_mode = t.step_mode;
    r.step_seconds_min = *std::min_element(t.seconds.begin(), t.seconds.end());
    r.step_seconds_max = *std::max_element(t.seconds.begin(), t.seconds.end());
    r.peak_memory_bytes = static_cast<double>(t.peak_memory_bytes);
    r.status = "done";
  } catch (const std::exception& e) {
    r.status = compat::is_out_of_memory(e) ? "oom" : "failed";
    r.error = first_line(e.what());  // c10 errors append a backtrace
    if (device) {
      try {
        r.peak_memory_bytes = static_cast<double>(compat::peak_memory_bytes(*device));  // how far it got
      } catch (const std::exception&) {
      }
    }
  }
  return r;
}

namespace {

// A row of the table: one measurement, or the N processes of a packed one (bench --concurrent N)
// as one: the median of their step medians, their extremes, the largest peak, the first failure;
// and their steps a second together (each process's 1 / median, summed).
struct Shown {
  store::BenchResult row;
  double steps_per_second_all = std::numeric_limits<double>::quiet_NaN();
};

bool same_measurement(const store::BenchResult& a, const store::BenchResult& b) {
  return a.method == b.method && a.dataset == b.dataset && a.seq_len == b.seq_len && a.batch_size == b.batch_size &&
         a.device == b.device && a.concurrent == b.concurrent && a.config_toml == b.config_toml;
}

std::vector<Shown> shown_rows(const std::vector<store::BenchResult>& rows) {
  std::vector<Shown> shown;
  for (std::size_t i = 0; i < rows.size();) {
    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(rows[i].concurrent, 1));
    std::size_t end = i + 1;
    while (end < rows.size() && end - i < n && same_measurement(rows[i], rows[end])) ++end;
    Shown s{rows[i]};
    std::vector<double> medians;
    double rate = 0;
    for (std::size_t j = i; j < end; ++j) {
      const auto& r = rows[j];
      if (r.status != "done") {
        if (s.row.status == "done") s.row.status = r.status, s.row.error = r.error;
        continue;
      }
      medians.push_back(r.step_seconds_median);
      rate += 1.0 / r.step_seconds_median;
      s.row.step_seconds_min = std::min(s.row.step_seconds_min, r.step_seconds_min);
      s.row.step_seconds_max = std::max(s.row.step_seconds_max, r.step_seconds_max);
      s.row.peak_memory_bytes = std::max(s.row.peak_memory_bytes, r.peak_memory_bytes);
    }
    if (s.row.status == "done") {
      s.row.step_seconds_median = median(medians);
      // a group cut short (a stopped bench) has no aggregate
      if (end - i == n) s.steps_per_second_all = rate;
    }
    shown.push_back(std::move(s));
    i = end;
  }
  return shown;
}

// Which columns a bench table has: a precision column once a row is not fp32, a part column and
// softmax's TFLOP/s once a row is an attention-only measurement, the packed jobs' figures once a row
// ran several at once.
struct BenchColumns {
  bool context = false, ops = false, mixed = false, parts = false, packed = false;

  std::vector<std::string> header() const {
    std::vector<std::string> h = context ? std::vector<std::string>{"when", "method", "dataset", "length", "batch", "device", "threads"}
                                         : std::vector<std::string>{"method", "length"};
    if (mixed) h.push_back("precision");
    if (parts) h.push_back("part");
    if (packed) h.push_back("at once");
    for (const char* c : {"status", "step (s)", "min-max (s)", "time vs softmax", "peak mem", "mem vs softmax"}) h.push_back(c);
    if (ops)
      for (const char* c : {"host (s)", "ops", "ops vs softmax"}) h.push_back(c);
    if (parts) h.push_back("softmax TFLOP/s");
    if (packed) h.push_back("steps/s, all");
    return h;
  }
};

// The softmax row measured alike nearest to row i (the earlier one on a tie): each row's ratios are
// to it; nullptr when there is none.
const store::BenchResult* softmax_reference(const std::vector<store::BenchResult>& rows, const std::vector<Measured>& measured,
                                            std::size_t i) {
  const store::BenchResult* reference = nullptr;
  std::size_t best = rows.size();
  for (std::size_t j = 0; j < rows.size(); ++j) {
    const std::size_t distance = j > i ? j - i : i - j;
    if (rows[j].method == "softmax" && rows[j].status == "done" && distance < best && comparable(rows[i], rows[j]) &&
        measured[i] == measured[j]) {
      reference = &rows[j];
      best = distance;
    }
  }
  return reference;
}

std::string printed(const char* format, double value) {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::vector<std::string> bench_cells(const BenchColumns& c, const Shown& shown, const Measured& measured,
                                     const store::BenchResult* reference) {
  const auto& r = shown.row;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const bool done = r.status == "done";
  const bool ratios = done && reference && reference->step_seconds_median > 0 && reference->peak_memory_bytes > 0;
  std::vector<std::string> row = c.context ? std::vector<std::string>{r.created_at, r.method, r.dataset, std::to_string(r.seq_len),
                                                                      std::to_string(r.batch_size), r.device, std::to_string(r.threads)}
                                           : std::vector<std::string>{r.method, std::to_string(r.seq_len)};
  if (c.mixed) row.push_back(measured.precision);
  if (c.parts) row.push_back(measured.part);
  if (c.packed) row.push_back(std::to_string(r.concurrent));
  row.push_back(r.status);
  row.push_back(done ? seconds_text(r.step_seconds_median) : "-");
  row.push_back(done ? seconds_text(r.step_seconds_min) + "-" + seconds_text(r.step_seconds_max) : "-");
  row.push_back(ratio_text(ratios ? r.step_seconds_median / reference->step_seconds_median : nan));
  row.push_back(done && r.peak_memory_bytes > 0 ? format_bytes(r.peak_memory_bytes) : "-");
  row.push_back(ratio_text(ratios ? r.peak_memory_bytes / reference->peak_memory_bytes : nan));
  if (c.ops) {
    const bool counted = done && r.ops_per_step > 0;
    row.push_back(done ? seconds_text(r.host_seconds_median) : "-");
    row.push_back(counted ? std::to_string(r.ops_per_step) : "-");
    row.push_back(ratio_text(counted && reference && reference->ops_per_step > 0
                                 ? static_cast<double>(r.ops_per_step) / static_cast<double>(reference->ops_per_step)
                                 : nan));
  }
  if (c.parts) {
    const bool counted = done && r.method == "softmax" && measured.part == "attention" && r.step_seconds_median > 0;
    row.push_back(counted ? printed("%.3g", softmax_attention_flops(r) / r.step_seconds_median / 1e12) : "-");
  }
  if (c.packed) {
    const double all = r.concurrent > 1 ? shown.steps_per_second_all : 1.0 / r.step_seconds_median;
    row.push_back(done && std::isfinite(all) ? printed("%.1f", all) : "-");
  }
  return row;
}

}  // namespace

std::string bench_table(const std::vector<store::BenchResult>& measured_rows, bool context, bool ops) {
  const auto shown = shown_rows(measured_rows);
  std::vector<store::BenchResult> rows;
  std::vector<Measured> measured;
  for (const auto& s : shown) rows.push_back(s.row), measured.push_back(results::bench_measured(s.row.config_toml));
  BenchColumns columns;
  columns.context = context, columns.ops = ops;
  columns.mixed = std::any_of(measured.begin(), measured.end(), [](const auto& m) { return m.precision != "fp32"; });
  columns.parts = std::any_of(measured.begin(), measured.end(), [](const auto& m) { return m.part != "step"; });
  columns.packed = std::any_of(rows.begin(), rows.end(), [](const auto& r) { return r.concurrent > 1; });
  TextTable table(columns.header());
  std::string errors;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    table.add(bench_cells(columns, shown[i], measured[i], softmax_reference(rows, measured, i)));
    if (r.status != "done")
      errors += "  " + r.method + " at " + std::to_string(r.seq_len) + ": " + r.status + (r.error.empty() ? "" : ": " + r.error) + "\n";
  }
  return table.str() + errors;
}

}  // namespace attnlab
