// Resume checkpoints (core/src/resume.cpp): a run stopped, or crashed after a periodic
// checkpoint, and resumed from it ends with the same curves and results, to the bit, as the same
// run that never stopped (CPU, same seed, same thread count). Checkpoints of another job, truncated
// files and foreign files are refused with one line naming the file.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "attnlab/train/trainer.hpp"
#include "plugin_host/plugin_host.hpp"
#include "plugin_host/scripted_method.hpp"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

const auto toy_split = testing::first_token_split;

// 200 training examples: 25 batches of 8 per epoch, so epochs end mid-step with grad_accum 2.
const TrainSplits& splits() {
  static const TrainSplits s{toy_split(200, 12, 11), toy_split(48, 12, 12), toy_split(48, 12, 13)};
  return s;
}

// A stochastic method with both kinds of state a real one has: a drawn buffer (a random
// projection, like Performer's Ω) and plain members (a seed and a count of training calls, like
// Skyformer's landmark stream) that only its save/load overrides carry into a checkpoint.
struct RandomProjectionAttention : AttentionMethod {
  explicit RandomProjectionAttention(std::int64_t head_dim) {
    projection = register_buffer("projection", at::eye(head_dim));
  }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& valid) override {
    double jitter = 0;  // a fresh number per training call, from (seed, calls)
    if (is_training()) {
      auto g = at::make_generator<at::CPUGeneratorImpl>(seed * 1000003 + calls++);
      jitter = at::rand({1}, g, at::kDouble).item<double>();
    }
    auto scores = at::matmul(at::matmul(q, projection), k.transpose(-2, -1)) * ((1 + jitter) / std::sqrt(q.size(-1)));
    scores = scores.masked_fill(valid.logical_not().unsqueeze(1).unsqueeze(2), -1e9);
    return at::matmul(at::softmax(scores, -1), v);
  }
  bool stochastic() const override { return true; }
  std::int64_t redraw_every() const override { return 4; }
  bool fresh_draw_at_eval() const override { return true; }
  void redraw(at::Generator& generator) override {
    const auto d = projection.size(0);
    projection.copy_(at::eye(d) + 0.3 * at::randn({d, d}, generator));
    seed = at::randint(1 << 30, {1}, generator, at::kLong).item<std::int64_t>();
    calls = 0;
  }
  void save(torch::serialize::OutputArchive& archive) const override {
    AttentionMethod::save(archive);
    archive.write("seed", c10::IValue(seed));
    archive.write("calls", c10::IValue(calls));
  }
  void load(torch::serialize::InputArchive& archive) override {
    AttentionMethod::load(archive);
    c10::IValue value;
    archive.read("seed", value);
    seed = value.toInt();
    archive.read("calls", value);
    calls = value.toInt();
  }

  at::Tensor projection;
  std::int64_t seed = 0, calls = 0;
};

// Wraps a method, counts its training calls, and raises `stop` on call `stop_at_call`, or on the
// second call of validation number `stop_in_validation` (counted from 1; the test evaluation after
// the last one is not counted): a run can be stopped during any step or validation, not only at
// the log steps an observer sees.
struct StopOnCall : AttentionMethod {
  StopOnCall(std::shared_ptr<AttentionMethod> inner, std::atomic<bool>* stop, std::int64_t stop_at_call,
             std::int64_t stop_in_validation)
      : inner(register_module("inner", std::move(inner))), stop(stop), stop_at_call(stop_at_call),
        stop_in_validation(stop_in_validation) {}
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& valid) override {
    if (is_training()) {
      trained_since_validation = true;
      if (++calls == stop_at_call) stop->store(true);
    } else if (calls > 0) {  // not the instability pre-pass
      if (trained_since_validation) ++validations, calls_in_validation = 0, trained_since_validation = false;
      if (validations == stop_in_validation && ++calls_in_validation == 2) stop->store(true);
    }
    return inner->forward(q, k, v, valid);
  }
  bool stochastic() const override { return inner->stochastic(); }
  std::int64_t redraw_every() const override { return inner->redraw_every(); }
  bool fresh_draw_at_eval() const override { return inner->fresh_draw_at_eval(); }
  void redraw(at::Generator& generator) override { inner->redraw(generator); }

  std::shared_ptr<AttentionMethod> inner;
  std::atomic<bool>* stop;
  std::int64_t stop_at_call, stop_in_validation, calls = 0, validations = 0, calls_in_validation = 0;
  bool trained_since_validation = false;
};

std::shared_ptr<AttentionMethod> make_method(const std::string& name, const AttentionShape& shape) {
  if (name == "random_projection") return std::make_shared<RandomProjectionAttention>(shape.head_dim);
  // methods written in PyTorch (tests/scripted/methods.py): Linformer's trained projection (also
  // drawn by reset_parameters() as each layer loads), and random features drawn by redraw()
  if (name.rfind("scripted_", 0) == 0) return load_scripted_attention(testing::scripted_method(name.substr(9)));
  const auto* plugin = testing::built_plugins().find(PluginKind::attention, name);
  if (!plugin) throw std::runtime_error("plugin " + name + " is not built");
  auto params = plugin->defaults();
  if (name == "performer") {
    params.set("features", std::int64_t{16});
    params.set("redraw_every", std::int64_t{5});
    params.set("eval_draw", std::string("fresh"));
  }
  if (name == "skyformer") params.set("landmarks", std::int64_t{6});
  return plugin->make_attention(shape, params);
}

// Records deliveries in order, and each checkpoint with how many points had come before it.
struct Log : TrainObserver {
  std::vector<MetricPoint> points;
  std::vector<std::int64_t> checkpoint_steps;
  std::vector<std::size_t> points_before_checkpoint;
  std::vector<std::string> checkpoint_paths, checksums;
  std::int64_t adopt_until = -1;  // checkpoints after this step are refused (a lost lease); -1: none
  std::vector<std::int64_t> resumed_at;
  std::size_t points_before_resume = 0;
  void on_metrics(const std::vector<MetricPoint>& p) override { points.insert(points.end(), p.begin(), p.end()); }
  void on_progress(const Progress&) override {}
  bool on_checkpoint(std::int64_t steps_done, const std::string& path, const std::string& checksum) override {
    checkpoint_steps.push_back(steps_done);
    points_before_checkpoint.push_back(points.size());
    checkpoint_paths.push_back(path);
    checksums.push_back(checksum);
    return adopt_until < 0 || steps_done <= adopt_until;
  }
  void on_resumed(std::int64_t steps_done, const std::string&) override {
    resumed_at.push_back(steps_done);
    points_before_resume = points.size();
  }
  std::vector<std::string> step_modes;
  void on_step_mode(const std::string& mode) override { step_modes.push_back(mode); }
  std::atomic<bool>* stop = nullptr;
  std::int64_t stop_after_pass = 0;  // raises `stop` after this variance pass (0: never)
  void on_variance_pass(std::int64_t done, std::int64_t, double) override {
    if (stop && done == stop_after_pass) stop->store(true);
  }
};

struct Attempt {
  RunOutcome outcome;
  Log log;
};

double result(const RunOutcome& o, const std::string& name) {
  for (const auto& [n, v] : o.results)
    if (n == name) return v;
  return NAN;
}

class Resume : public ::testing::Test {
 protected:
  fs::path dir;

  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (auto& c : name)
      if (c == '/') c = '_';  // parameterised tests are named "Test/0"
    dir = fs::temp_directory_path() / ("attnlab-resume-" + std::to_string(getpid()) + "-" + name);
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }

  // 60 steps of 2 micro-batches, dropout 0.1, curves every 10 steps, validation every 20, the
  // instability score first, variance passes at the end (stochastic methods). "NAME bf16": the
  // method in a bf16 run (CPU autocast); "NAME authors": with the LRA authors' training
  // (OneCycleLR and its cycled beta1, values clipped, their mean pooling, the validation stream).
  TrainJob job(std::string method) const {
    TrainJob j;
    std::string variant;
    if (const auto space = method.find(' '); space != std::string::npos) {
      variant = method.substr(space + 1);
      method = method.substr(0, space);
    }
    j.model = testing::tiny_model(32);
    if (variant == "authors") {
      j.train.decay = Decay::onecycle;
      j.train.clip_value = 0.05;
      j.train.clip_norm = 0;
      j.model.pooling = Pooling::mean_with_padding;
      j.model.attention_precision = AttentionPrecision::fp32_qkv;
      j.model.zero_tokens_masked = true;
      j.train.eval_stream = true;  // validation goes on through the reshuffled split (set below: 4 batches)
      j.train.test_drop_last = true;
    } else if (!variant.empty()) {
      j.train.precision = variant;
    }
    j.train.steps = 60;
    j.train.batch_size = 8;
    j.train.grad_accum = 2;
    j.train.lr = 3e-3;
    j.train.warmup = 5;
    j.train.eval_every = 20;
    j.train.log_every = 10;
    if (j.train.eval_stream) j.train.eval_batches = 4;  // of 6 a pass: each validation starts where the last stopped
    j.train.instability_steps = 3;
    j.train.variance_passes = 4;
    j.train.checkpoint_every = 0;
    j.task = {10, 4, 12, 1};
    j.seed = 7;
    j.identity = "job-" + method;
    j.reference_attention = [](const AttentionShape& shape) { return make_method("softmax", shape); };
    j.checkpoint_path = path("best.pt");
    j.make_attention = [method](const AttentionShape& shape) { return make_method(method, shape); };
    return j;
  }

  // Trains `job`, its method wrapped in StopOnCall; with stop_during_step > 0, `stop` is raised
  // during that step, with stop_in_validation > 0 during that validation.
  Attempt run(TrainJob job, std::int64_t stop_during_step = 0, std::int64_t adopt_until = -1, std::int64_t stop_after_pass = 0,
              std::int64_t stop_in_validation = 0) {
    stop_ = false;
    const std::int64_t stop_at_call = stop_during_step > 0 ? stop_during_step * job.train.grad_accum : -1;
    auto* stop = &stop_;
    job.make_attention = [make = job.make_attention, stop, stop_at_call, stop_in_validation](const AttentionShape& shape) {
      return std::make_shared<StopOnCall>(make(shape), stop, stop_at_call, stop_in_validation);
    };
    job.stop = &stop_;
    Attempt r;
    r.log.adopt_until = adopt_until;
    r.log.stop = &stop_;
    r.log.stop_after_pass = stop_after_pass;
    r.outcome = train_and_evaluate(job, splits(), r.log);
    return r;
  }

  // `job` set to continue from `attempt`'s last checkpoint, as the runner sets it from the database.
  static TrainJob resuming(TrainJob job, const Attempt& attempt) {
    job.resume_from = attempt.outcome.resume_checkpoint;
    job.resume_step = attempt.log.checkpoint_steps.back();
    job.resume_checksum = attempt.log.checksums.back();
    return job;
  }

  std::atomic<bool> stop_{false};
};

bool is_timing(const std::string& name) {
  return name == "wall_seconds" || name == "train_seconds" || name == "steps_per_second" || name == "peak_memory_bytes";
}

void expect_same_points(const std::vector<MetricPoint>& expected, const std::vector<MetricPoint>& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto &e = expected[i], &a = actual[i];
    EXPECT_EQ(e.step, a.step) << "point " << i;
    EXPECT_EQ(e.split + "/" + e.name, a.split + "/" + a.name) << "point " << i;
    EXPECT_EQ(e.value, a.value) << e.split << "/" << e.name << " at step " << e.step;
  }
}

// Every result but the timings, bit for bit, and no result more or less.
void expect_same_results(const RunOutcome& expected, const RunOutcome& actual) {
  std::set<std::string> names_expected, names_actual;
  for (const auto& [name, value] : expected.results) {
    names_expected.insert(name);
    if (!is_timing(name)) {
      EXPECT_EQ(value, result(actual, name)) << name;
    }
  }
  for (const auto& r : actual.results) names_actual.insert(r.first);
  EXPECT_EQ(names_expected, names_actual);
}

std::vector<MetricPoint> concat(std::vector<MetricPoint> a, const std::vector<MetricPoint>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string refusal(const TrainJob& job) {
  Log log;
  try {
    train_and_evaluate(job, splits(), log);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

class ResumeMethod : public Resume, public ::testing::WithParamInterface<std::string> {};

TEST_P(ResumeMethod, StoppedMidStepThenResumedMatchesAnUninterruptedRun) {
  const auto base = job(GetParam());
  const Attempt reference = run(base);
  ASSERT_EQ(reference.outcome.status, TrainStatus::done) << reference.outcome.error;

  // stopped during step 33: after the draws of step 32, with 3 steps of training curve and 13 of
  // validation not yet logged, in the middle of the third epoch
  auto stopped_job = base;
  stopped_job.resume_stem = path("job");
  const Attempt stopped = run(stopped_job, 33);
  EXPECT_EQ(stopped.outcome.status, TrainStatus::interrupted);
  EXPECT_EQ(result(stopped.outcome, "steps_done"), 33);
  EXPECT_TRUE(std::isnan(result(stopped.outcome, "test_acc")));
  EXPECT_EQ(stopped.log.checkpoint_steps, (std::vector<std::int64_t>{33}));
  EXPECT_EQ(stopped.log.checkpoint_paths, (std::vector<std::string>{path("job.step-33.resume.pt")}));
  EXPECT_EQ(stopped.outcome.resume_checkpoint, path("job.step-33.resume.pt"));
  ASSERT_TRUE(fs::exists(path("job.step-33.resume.pt")));

  const Attempt resumed = run(resuming(stopped_job, stopped));
  ASSERT_EQ(resumed.outcome.status, TrainStatus::done) << resumed.outcome.error;
  ASSERT_FALSE(resumed.log.points.empty());
  EXPECT_GT(resumed.log.points.front().step, 33);  // nothing delivered twice
  EXPECT_EQ(resumed.log.resumed_at, (std::vector<std::int64_t>{33}));
  EXPECT_EQ(resumed.log.points_before_resume, 0u);
  EXPECT_TRUE(stopped.log.resumed_at.empty());
  expect_same_points(reference.log.points, concat(stopped.log.points, resumed.log.points));
  expect_same_results(reference.outcome, resumed.outcome);
  // wall time continues across the attempts
  EXPECT_GE(resumed.log.points.front().wall_seconds, stopped.log.points.back().wall_seconds);
}

INSTANTIATE_TEST_SUITE_P(Methods, ResumeMethod,
                         ::testing::Values("softmax", "random_projection", "performer", "skyformer", "softmax bf16",
                                           "performer bf16", "scripted_projection", "scripted_features", "scripted_reset_projection",
                                           "performer authors"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), ' ', '_');
                           return name;
                         });

// The path a CUDA graph replays, run eagerly on the CPU: each batch copied into static inputs, the
// device's part of the step one function (zero, forward, backward, clip, update), the learning
// rate from the optimiser's tensor. It trains to the bit as the plain step does (one batch a
// step, as a graph takes it), a stochastic method too, and a run of it resumes to the bit.
TEST_F(Resume, TheCudaGraphsStepPathTrainsAsThePlainOne) {
  for (const char* method : {"softmax", "skyformer"}) {
    auto plain = job(method);
    plain.train.grad_accum = 1;
    auto static_inputs = plain;
    static_inputs.static_inputs = true;
    const auto a = run(plain), b = run(static_inputs);
    EXPECT_EQ(a.outcome.status, TrainStatus::done) << method << ": " << a.outcome.error;
    expect_same_points(a.log.points, b.log.points);
    expect_same_results(a.outcome, b.outcome);
    EXPECT_EQ(b.outcome.step_mode, "eager (cuda graphs off: the device is cpu, not a GPU)");
    EXPECT_EQ(b.log.step_modes, std::vector<std::string>{b.outcome.step_mode});

    auto stopping = static_inputs;
    stopping.resume_stem = path(std::string("job-") + method);
    const auto stopped = run(stopping, /*stop_during_step=*/37);
    ASSERT_EQ(stopped.log.checkpoint_steps, (std::vector<std::int64_t>{37})) << method;
    const auto resumed = run(resuming(stopping, stopped));
    expect_same_points(b.log.points, concat(stopped.log.points, resumed.log.points));
    expect_same_results(b.outcome, resumed.outcome);
  }
}

TEST_F(Resume, StoppedAfterTheLastStepResumesIntoTheTestEvaluation) {
  const auto base = job("random_projection");
  const Attempt reference = run(base);
  auto stopped_job = base;
  stopped_job.resume_stem = path("job");
  const Attempt stopped = run(stopped_job, 60);
  EXPECT_EQ(stopped.outcome.status, TrainStatus::interrupted);
  EXPECT_EQ(stopped.log.checkpoint_steps, (std::vector<std::int64_t>{60}));
  const Attempt resumed = run(resuming(stopped_job, stopped));
  ASSERT_EQ(resumed.outcome.status, TrainStatus::done) << resumed.outcome.error;
  expect_same_points(reference.log.points, concat(stopped.log.points, resumed.log.points));
  expect_same_results(reference.outcome, resumed.outcome);
}

// A stop during the variance passes (they can take as long as training) ends them at the next
// batch: the attempt is interrupted with no test result or point, and its last step's resume
// checkpoint (written after every run's last step) gives the next attempt the uninterrupted
// run's test and variance numbers.
TEST_F(Resume, StoppedDuringTheVariancePassesResumesFromTheLastStep) {
  auto base = job("random_projection");
  base.train.checkpoint_every = 25;
  base.resume_stem = path("job");
  const Attempt reference = run(base);
  ASSERT_EQ(reference.outcome.status, TrainStatus::done) << reference.outcome.error;
  EXPECT_EQ(reference.log.checkpoint_steps, (std::vector<std::int64_t>{25, 50, 60}));
  const Attempt stopped = run(base, 0, -1, /*stop_after_pass=*/2);
  EXPECT_EQ(stopped.outcome.status, TrainStatus::interrupted);
  EXPECT_EQ(stopped.outcome.error, "stopped while testing, after step 60");
  EXPECT_TRUE(std::isnan(result(stopped.outcome, "test_acc")));
  for (const auto& p : stopped.log.points) EXPECT_NE(p.split, "test");
  const Attempt resumed = run(resuming(base, stopped));
  ASSERT_EQ(resumed.outcome.status, TrainStatus::done) << resumed.outcome.error;
  expect_same_points(reference.log.points, concat(stopped.log.points, resumed.log.points));
  expect_same_results(reference.outcome, resumed.outcome);
}

// A stop during a validation (minutes at the papers' lengths) ends it at the next batch: the
// attempt checkpoints its step with the validation pending (its draw made, the validation stream
// and generators rewound to where it began) and the next attempt validates first, to the bit as
// the undisturbed run did. At the last step too, before the test evaluation.
TEST_F(Resume, StoppedDuringAValidationResumesIntoIt) {
  for (const std::string method : {"random_projection", "random_projection authors"})
    for (const std::int64_t validation : {2, 3}) {
      SCOPED_TRACE(method + ", validation " + std::to_string(validation));
      auto base = job(method);
      base.resume_stem = path("job");
      base.train.instability_steps = 0;  // its model's forward calls would count as validations too
      const Attempt reference = run(base);
      ASSERT_EQ(reference.outcome.status, TrainStatus::done) << reference.outcome.error;
      const std::int64_t step = validation * base.train.eval_every;
      const Attempt stopped = run(base, 0, -1, 0, validation);
      EXPECT_EQ(stopped.outcome.status, TrainStatus::interrupted);
      EXPECT_EQ(stopped.outcome.error, "stopped while validating step " + std::to_string(step));
      ASSERT_EQ(stopped.log.checkpoint_steps, (std::vector<std::int64_t>{step}));
      for (const auto& p : stopped.log.points) EXPECT_TRUE(p.step < step || p.split == "train") << p.split << " " << p.step;
      const Attempt resumed = run(resuming(base, stopped));
      ASSERT_EQ(resumed.outcome.status, TrainStatus::done) << resumed.outcome.error;
      expect_same_points(reference.log.points, concat(stopped.log.points, resumed.log.points));
      expect_same_results(reference.outcome, resumed.outcome);
    }
}

TEST_F(Resume, CrashAfterAPeriodicCheckpointResumesFromIt) {
  auto base = job("random_projection");
  const Attempt reference = run(base);

  // checkpoints every 25 steps (not a log or validation step); the run goes on to the end, and
  // its file then holds step 50, as if it had crashed anywhere after that checkpoint
  auto periodic_job = base;
  periodic_job.train.checkpoint_every = 25;
  periodic_job.resume_stem = path("job");
  // (the one after the last step, 60, is refused as a lost lease's would be: 50 stays adopted)
  const Attempt periodic = run(periodic_job, 0, /*adopt_until=*/50);
  ASSERT_EQ(periodic.outcome.status, TrainStatus::done) << periodic.outcome.error;
  EXPECT_EQ(periodic.log.checkpoint_steps, (std::vector<std::int64_t>{25, 50, 60}));
  // checkpointing changes nothing, and every point up to a checkpoint's step came before it
  expect_same_points(reference.log.points, periodic.log.points);
  expect_same_results(reference.outcome, periodic.outcome);
  for (std::size_t c = 0; c < periodic.log.checkpoint_steps.size(); ++c)
    for (std::size_t i = periodic.log.points_before_checkpoint[c]; i < periodic.log.points.size(); ++i)
      EXPECT_TRUE(periodic.log.points[i].step > periodic.log.checkpoint_steps[c] || periodic.log.points[i].split == "test");
  // written through temporary files, each checkpoint a file of its own that replaced the one
  // before once adopted: nothing else is left in the folder (the last validation kept the best
  // weights, which are then the last step's too)
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.insert(entry.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"best.pt", "job.step-50.resume.pt"}));
  EXPECT_EQ(periodic.outcome.last_checkpoint, path("best.pt"));

  auto from_50 = periodic_job;
  from_50.resume_from = periodic.outcome.resume_checkpoint;
  from_50.resume_step = 50;
  from_50.resume_checksum = periodic.log.checksums[1];
  const Attempt resumed = run(from_50);
  ASSERT_EQ(resumed.outcome.status, TrainStatus::done) << resumed.outcome.error;
  std::vector<MetricPoint> after_checkpoint;  // the reference's points a resumed attempt must give
  for (const auto& p : reference.log.points)
    if (p.split == "test" || (p.step > 50 && p.name.rfind("tau", 0) != 0)) after_checkpoint.push_back(p);
  expect_same_points(after_checkpoint, resumed.log.points);
  expect_same_results(reference.outcome, resumed.outcome);
  EXPECT_EQ(resumed.log.checkpoint_steps, (std::vector<std::int64_t>{60}));  // 75 is past the end; the last step's
  EXPECT_EQ(resumed.log.resumed_at, (std::vector<std::int64_t>{50}));
}

TEST_F(Resume, CheckpointsOfAnotherJobOrUnreadableFilesAreRefused) {
  auto base = job("softmax");
  base.train.steps = 20;
  base.train.eval_every = 5;  // a best-weights file by the stop
  base.resume_stem = path("job");
  const Attempt stopped = run(base, 12);
  ASSERT_EQ(stopped.outcome.status, TrainStatus::interrupted);
  const auto file = stopped.outcome.resume_checkpoint;
  base = resuming(base, stopped);
  auto refused = [&](TrainJob j, const std::string& why) {
    const auto message = refusal(j);
    EXPECT_NE(message.find("resume checkpoint " + j.resume_from), std::string::npos) << message;
    EXPECT_NE(message.find(why), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  };

  auto other_seed = base;
  other_seed.seed = 8;
  refused(other_seed, "belongs to another job: seed 8 here, 7 in the file");
  auto other_identity = base;
  other_identity.identity = "job-other";
  refused(other_identity, "identity 'job-other' here, 'job-softmax' in the file");
  auto other_config = base;
  other_config.train.lr = 1e-3;
  refused(other_config, "belongs to another job: train.lr=0.001 here, train.lr=0.003 in the file");
  // same identity and configuration, another method: its tensors do not fit
  auto other_model = base;
  {
    other_model.make_attention = [](const AttentionShape& shape) { return make_method("random_projection", shape); };
    const auto message = refusal(other_model);
    EXPECT_NE(message.find("does not fit this model: buffer block0.attention.projection"), std::string::npos) << message;
  }

  // a truncated copy, and a best-weights checkpoint (a LibTorch archive, but not a resume one)
  fs::copy_file(file, path("truncated.pt"));
  fs::resize_file(path("truncated.pt"), fs::file_size(file) / 2);
  auto truncated = base;
  truncated.resume_from = path("truncated.pt");
  truncated.resume_checksum.clear();
  refused(truncated, "is unreadable (truncated, or not a checkpoint)");
  auto foreign = base;
  foreign.resume_from = path("best.pt");
  foreign.resume_checksum.clear();
  ASSERT_TRUE(fs::exists(foreign.resume_from));
  refused(foreign, "is not an attnlab resume checkpoint");
  auto gone = base;
  gone.resume_from = path("gone.pt");
  refused(gone, "is unreadable (No such file or directory)");

  // 4 KiB flipped in the middle: LibTorch may still read it (the bytes of a tensor), the
  // checksum recorded when it was written does not match
  testing::flip_middle(file, 4096);
  ASSERT_EQ(base.resume_checksum.size(), 16u);
  refused(base, "is damaged (checksum ");
  refused(base, ", recorded " + base.resume_checksum + ")");
}

// The step the runner recorded and the file's own must agree: a file another process rewrote
// after the record (a lost lease) is never resumed silently.
TEST_F(Resume, ACheckpointHoldingAnotherStepThanRecordedIsRefused) {
  auto base = job("softmax");
  base.train.steps = 20;
  base.resume_stem = path("job");
  const Attempt stopped = run(base, 12);
  auto other_step = resuming(base, stopped);
  other_step.resume_step = 10;
  const auto message = refusal(other_step);
  EXPECT_NE(message.find("resume checkpoint " + stopped.outcome.resume_checkpoint + " holds step 12, not step 10 as recorded"),
            std::string::npos) << message;
}

// A checkpoint the observer does not adopt (the attempt lost its lease) is removed at once, and
// the one adopted before it stays: nothing a later attempt could read differs from the record.
TEST_F(Resume, ACheckpointNotAdoptedIsRemovedAndTheAdoptedOneStays) {
  auto periodic = job("random_projection");
  periodic.train.checkpoint_every = 25;
  periodic.resume_stem = path("job");
  const Attempt attempt = run(periodic, 0, /*adopt_until=*/25);
  ASSERT_EQ(attempt.outcome.status, TrainStatus::done) << attempt.outcome.error;
  EXPECT_EQ(attempt.log.checkpoint_steps, (std::vector<std::int64_t>{25, 50, 60}));
  EXPECT_EQ(attempt.outcome.resume_checkpoint, path("job.step-25.resume.pt"));
  EXPECT_TRUE(fs::exists(path("job.step-25.resume.pt")));
  EXPECT_FALSE(fs::exists(path("job.step-50.resume.pt")));
  EXPECT_FALSE(fs::exists(path("job.step-60.resume.pt")));
}

// A checkpoint that cannot be written (here: its temporary file is /dev/full, ENOSPC) is one
// exception naming the file and the error, with nothing left behind; before, LibTorch's writer
// threw from its destructor and the process aborted with a backtrace.
TEST_F(Resume, ACheckpointWriteOnAFullDiskIsOneErrorNamingTheFile) {
  auto base = job("softmax");
  base.train.steps = 20;
  base.train.checkpoint_every = 10;
  base.resume_stem = path("job");
  const std::string file = resume_file(path("job"), 10);
  const std::string partial = file + ".partial." + std::to_string(getpid());
  fs::create_symlink("/dev/full", partial);
  Log log;
  try {
    train_and_evaluate(base, splits(), log);
    ADD_FAILURE() << "no error";
  } catch (const CheckpointWriteError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot write checkpoint " + file + ": No space left on device");
    EXPECT_EQ(e.error_number, ENOSPC);
  }
  EXPECT_FALSE(fs::exists(fs::symlink_status(partial)));
  EXPECT_FALSE(fs::exists(file));
  EXPECT_TRUE(log.checkpoint_steps.empty());
}

// Every tensor of a saved module, by its dotted name.
void tensors_of(torch::serialize::InputArchive& archive, const std::string& prefix, std::map<std::string, at::Tensor>& out) {
  for (const auto& key : archive.keys()) {
    at::Tensor tensor;
    torch::serialize::InputArchive inner;
    if (archive.try_read(key, tensor))
      out[prefix + key] = tensor;
    else if (archive.try_read(key, inner))
      tensors_of(inner, prefix + key + ".", out);
  }
}

std::map<std::string, at::Tensor> tensors_in(const std::string& file) {
  torch::serialize::InputArchive archive;
  archive.load_from(file);
  std::map<std::string, at::Tensor> out;
  tensors_of(archive, "", out);
  return out;
}

TEST_F(Resume, ResumingPutsTheBestWeightsFileBackToTheCheckpointsBest) {
  auto base = job("random_projection");
  base.train.steps = 20;
  base.train.eval_every = 5;
  base.resume_stem = path("job");
  const Attempt stopped = run(base, 12);
  ASSERT_EQ(stopped.outcome.status, TrainStatus::interrupted);
  const auto best_at_checkpoint = tensors_in(path("best.pt"));
  ASSERT_GT(best_at_checkpoint.size(), 5u);
  // as if the stopped attempt had found a better model after its checkpoint
  std::ofstream(path("best.pt"), std::ios::binary | std::ios::trunc) << "weights of a later step";
  const Attempt resumed = run(resuming(base, stopped), 1);  // stops again at the end of step 13, before any validation
  EXPECT_EQ(resumed.outcome.status, TrainStatus::interrupted);
  EXPECT_EQ(resumed.log.checkpoint_steps, (std::vector<std::int64_t>{13}));
  const auto best_now = tensors_in(path("best.pt"));
  ASSERT_EQ(best_now.size(), best_at_checkpoint.size());
  for (const auto& [name, tensor] : best_at_checkpoint) {
    ASSERT_EQ(best_now.count(name), 1u) << name;
    EXPECT_TRUE(at::equal(best_now.at(name), tensor)) << name;
  }
}

TEST_F(Resume, WithoutAFileOrAPathTheRunStartsOrStopsPlainly) {
  auto base = job("softmax");
  base.train.steps = 20;
  const Attempt reference = run(base);
  // checkpoints asked for, none due in 20 steps: a fresh run, nothing written
  auto first_attempt = base;
  first_attempt.resume_stem = path("job");
  const Attempt fresh = run(first_attempt);
  EXPECT_TRUE(fresh.log.checkpoint_steps.empty());
  EXPECT_TRUE(fresh.log.resumed_at.empty());
  expect_same_points(reference.log.points, fresh.log.points);
  expect_same_results(reference.outcome, fresh.outcome);
  // stopped without a resume path: interrupted, nothing written, measurements so far returned
  const Attempt stopped = run(base, 7);
  EXPECT_EQ(stopped.outcome.status, TrainStatus::interrupted);
  EXPECT_EQ(result(stopped.outcome, "steps_done"), 7);
  EXPECT_TRUE(stopped.log.checkpoint_steps.empty());
  EXPECT_FALSE(fs::exists(path("job.step-7.resume.pt")));
}

}  // namespace
}  // namespace attnlab
