// Skyformer's instability score: identical methods score exactly 1, a different method does not,
// the score is stored with a run when asked for, and the CLI prints it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "test_support.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "attnlab/train/instability.hpp"
#include "attnlab/train/trainer.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {
namespace {

const LoadedPlugin& softmax() {
  static PluginRegistry registry = [] {
    PluginRegistry r;
    r.load_folders(PluginRegistry::search_path({}));
    return r;
  }();
  return *registry.find(PluginKind::attention, "softmax");
}

AttentionMaker softmax_maker() {
  return [](const AttentionShape& s) { return softmax().make_attention(s, softmax().defaults()); };
}

// Averages the values of the real keys: an attention that ignores q and k entirely.
struct MeanAttention : AttentionMethod {
  at::Tensor forward(const at::Tensor&, const at::Tensor&, const at::Tensor& v, const at::Tensor& valid) override {
    auto w = valid.to(v.scalar_type()).unsqueeze(1).unsqueeze(3);  // [B, 1, N, 1]
    auto mean = (v * w).sum(2, true) / w.sum(2, true);
    return mean.expand_as(v);
  }
};

SplitData toy(std::int64_t n, std::int64_t len) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(3);
  SplitData d;
  d.tokens = at::randint(1, 9, {n, 1, len}, g, at::kShort);
  d.lengths = at::randint(len / 2, len + 1, {n, 1}, g, at::kLong);
  d.labels = at::randint(0, 4, {n}, g, at::kLong);
  return d;
}

TrainJob small_job(AttentionMaker maker) {
  TrainJob job;
  job.model = testing::tiny_model(32);
  job.train.batch_size = 8;
  job.train.lr = 1e-3;
  job.train.warmup = 0;
  job.task = {10, 4, 12, 1};
  job.seed = 4;
  job.make_attention = std::move(maker);
  return job;
}

TEST(Instability, IdenticalMethodsScoreExactlyOne) {
  const auto data = toy(64, 12);
  const auto score = instability_score(small_job(softmax_maker()), softmax_maker(), data, 5);
  ASSERT_EQ(score.tau.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_GT(score.tau[i], 0);
    EXPECT_TRUE(std::isfinite(score.tau[i]));
    EXPECT_EQ(score.tau[i], score.tau_reference[i]);  // same weights, batches and dropout masks
  }
  EXPECT_EQ(score.ratio, 1.0);
  EXPECT_GT(score.shared_parameters, 5);
}

TEST(Instability, ADifferentMethodScoresDifferently) {
  const auto data = toy(64, 12);
  const auto score = instability_score(small_job([](const AttentionShape&) { return std::make_shared<MeanAttention>(); }),
                                       softmax_maker(), data, 5);
  EXPECT_TRUE(std::isfinite(score.ratio));
  EXPECT_GT(score.ratio, 0);
  EXPECT_NE(score.ratio, 1.0);
  // every parameter is shared (MeanAttention has none): both models started from the same weights
  EXPECT_EQ(score.tau.size(), 5u);
}

struct Recorder : TrainObserver {
  std::vector<MetricPoint> points;
  void on_metrics(const std::vector<MetricPoint>& p) override { points.insert(points.end(), p.begin(), p.end()); }
  void on_progress(const Progress&) override {}
};

TEST(Instability, StoredWithARunWhenAsked) {
  auto job = small_job(softmax_maker());
  job.reference_attention = softmax_maker();
  job.train.steps = 4;
  job.train.eval_every = 4;
  job.train.log_every = 2;
  job.train.instability_steps = 3;
  Recorder recorder;
  const auto outcome = train_and_evaluate(job, {toy(64, 12), toy(16, 12), toy(16, 12)}, recorder);
  ASSERT_EQ(outcome.status, TrainStatus::done) << outcome.error;
  bool found = false;
  for (const auto& [name, value] : outcome.results) found |= name == "instability_ratio" && value == 1.0;
  EXPECT_TRUE(found);
  int taus = 0;
  for (const auto& p : recorder.points) taus += p.name == "tau";
  EXPECT_EQ(taus, 3);
  // and the run itself is unaffected: the same numbers as without the measurement
  Recorder plain_recorder;
  job.train.instability_steps = 0;
  const auto plain = train_and_evaluate(job, {toy(64, 12), toy(16, 12), toy(16, 12)}, plain_recorder);
  for (const auto& [name, value] : plain.results) {
    if (name != "test_acc" && name != "best_val_acc") continue;
    for (const auto& [other, v] : outcome.results) {
      if (other == name) {
        EXPECT_EQ(v, value) << name;
      }
    }
  }
}

// The pre-pass is no part of training: the run's clock (train_seconds, steps_per_second,
// wall_seconds) starts after it, as its peak memory does (c797cb7 counted it in all three). 200
// pre-pass steps of two models against 2 training steps: with the pre-pass inside, wall_seconds
// would be most of the call.
TEST(Instability, TheRunsClockStartsAfterThePrePass) {
  auto job = small_job(softmax_maker());
  job.reference_attention = softmax_maker();
  job.train.steps = 2;
  job.train.eval_every = 2;
  job.train.instability_steps = 200;
  Recorder recorder;
  const auto start = std::chrono::steady_clock::now();
  const auto outcome = train_and_evaluate(job, {toy(512, 12), toy(16, 12), toy(16, 12)}, recorder);
  const double call = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(outcome.status, TrainStatus::done) << outcome.error;
  double wall = -1;
  for (const auto& [name, value] : outcome.results)
    if (name == "wall_seconds") wall = value;
  EXPECT_GE(wall, 0);
  EXPECT_LT(wall, 0.25 * call) << "the run's clock counted the pre-pass";
}

// A stop during the pre-pass ends the run there: interrupted, nothing trained or delivered.
TEST(Instability, AStopDuringThePrePassEndsTheRunBeforeItsFirstStep) {
  auto job = small_job(softmax_maker());
  job.reference_attention = softmax_maker();
  job.train.steps = 4;
  job.train.instability_steps = 3;
  std::atomic<bool> stop{true};
  job.stop = &stop;
  Recorder recorder;
  const auto outcome = train_and_evaluate(job, {toy(64, 12), toy(16, 12), toy(16, 12)}, recorder);
  EXPECT_EQ(outcome.status, TrainStatus::interrupted);
  EXPECT_EQ(outcome.error, "stopped before the first step (instability pre-pass)");
  EXPECT_TRUE(recorder.points.empty());
}

TEST(Instability, CommandPrintsTheRatioPerJob) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("attnlab-instab-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const auto file = (dir / "x.toml").string();
  std::ofstream(file) << "[experiment]\nseeds = [1, 2]\n[model]\nlayers = 1\ndim = 16\nffn_dim = 16\n"
                      << "[train]\nbatch_size = 4\n[methods.softmax]\n"
                      << "[datasets.listops]\nmax_len = 32\ntrain_size = 16\nval_size = 4\ntest_size = 4\n"
                      << "max_depth = 3\nmax_args = 3\nmin_length = 2\nmax_length = 30\n";
  const auto log = (dir / "out.log").string();
  const int status = std::system((std::string(ATTNLAB_BINARY) + " instability " + file + " --steps 3 --threads 1 --cache-dir " +
                                  (dir / "cache").string() + " > " + log + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream out;
  out << in.rdbuf();
  EXPECT_EQ(WEXITSTATUS(status), 0) << out.str();
  EXPECT_NE(out.str().find("softmax  listops  1     1.0000"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("1.0000 ± 0.0000"), std::string::npos) << out.str();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace attnlab
