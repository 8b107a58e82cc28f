// Training precision ([train] precision, tf32, deterministic): the autocast scope and the fp32
// regions methods declare (core/include/attnlab/precision.hpp), fp16's loss scaler, and the
// trainer running a bf16 job on the CPU (LibTorch 1.13 autocasts the CPU to bf16 only) and
// failing a deterministic job at an op without a deterministic implementation, naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/version.h>

#include "attnlab/precision.hpp"
#include "attnlab/train/loss_scaler.hpp"
#include "attnlab/train/trainer.hpp"
#include "test_support.hpp"

namespace attnlab {
namespace {

const c10::Device kCpu(c10::kCPU);

TEST(LossScaler, ScalesUnscalesExactlyAndSkipsNonFiniteSteps) {
  LossScaler scaler(true, 8.0, /*growth_interval=*/3);
  EXPECT_DOUBLE_EQ(scaler.scale(at::scalar_tensor(2.0)).item<double>(), 16.0);

  auto grad = at::tensor({16.0f, 32.0f});
  EXPECT_TRUE(scaler.unscale({grad}));
  EXPECT_TRUE(at::equal(grad, at::tensor({2.0f, 4.0f})));  // a power of two: exact
  scaler.update(true);
  scaler.update(true);
  EXPECT_EQ(scaler.current_scale(), 8.0);
  EXPECT_EQ(scaler.clean_steps(), 2);
  scaler.update(true);  // the third clean step in a row doubles it
  EXPECT_EQ(scaler.current_scale(), 16.0);
  EXPECT_EQ(scaler.clean_steps(), 0);

  EXPECT_FALSE(scaler.unscale({at::tensor({2.0f}), at::tensor({1.0f, INFINITY})}));
  scaler.update(false);
  EXPECT_FALSE(scaler.unscale({at::tensor({NAN, 1.0f})}));
  scaler.update(false);
  EXPECT_EQ(scaler.current_scale(), 4.0);
  EXPECT_EQ(scaler.skipped_steps(), 2);

  LossScaler off(false);
  grad = at::tensor({16.0f, INFINITY});
  EXPECT_TRUE(off.unscale({grad}));  // nothing checked, nothing touched
  EXPECT_TRUE(at::equal(grad.slice(0, 0, 1), at::tensor({16.0f})));
  EXPECT_DOUBLE_EQ(off.scale(at::scalar_tensor(2.0)).item<double>(), 2.0);
}

TEST(Autocast, MatmulsRunInBf16InsideTheScopeAndFp32InAFullPrecisionRegion) {
  const auto a = at::randn({4, 4}), b = at::randn({4, 4});
  EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kFloat);
  {
    AutocastScope outer(kCpu, Precision::bf16);
    EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kBFloat16);
    {
      AutocastScope inner(kCpu, Precision::bf16);
      EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kBFloat16);
    }
    EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kBFloat16);  // the inner scope left the outer's state
    {
      FullPrecision full;
      const auto low = a.to(at::kBFloat16);
      EXPECT_EQ(full_precision(low).scalar_type(), at::kFloat);
      EXPECT_EQ(full_precision(a.to(at::kDouble)).scalar_type(), at::kDouble);
      EXPECT_EQ(at::matmul(full_precision(low), b).scalar_type(), at::kFloat);
    }
    EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kBFloat16);
    AutocastScope fp32(kCpu, Precision::fp32);  // changes nothing
    EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kBFloat16);
  }
  EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kFloat);
}

TEST(Autocast, PrecisionNamesParseAndUnknownOnesAreRefused) {
  EXPECT_EQ(parse_precision("bf16"), Precision::bf16);
  EXPECT_STREQ(to_string(parse_precision("fp16")), "fp16");
  EXPECT_EQ(reduced_type(Precision::fp16), at::kHalf);
  try {
    parse_precision("fp8");
    FAIL() << "fp8 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "precision 'fp8': expected fp32, bf16 or fp16");
  }
#if TORCH_VERSION_MAJOR < 2
  std::string why;
  EXPECT_FALSE(autocast_supported(kCpu, Precision::fp16, &why));
  EXPECT_EQ(why.rfind("precision fp16 on the CPU needs LibTorch 2", 0), 0u) << why;
  EXPECT_THROW(AutocastScope(kCpu, Precision::fp16), std::invalid_argument);
#endif
}

// Softmax attention that records the type of every q it is given and of its product q kᵀ, and with `put` runs at::put_,
// which has no deterministic implementation.
struct ProbeAttention : AttentionMethod {
  ProbeAttention(std::vector<at::ScalarType>* seen, bool put) : seen(seen), put(put) {}
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& valid) override {
    seen->push_back(q.scalar_type());
    bf16_values.push_back(q.to(at::kBFloat16).to(q.scalar_type()).equal(q));  // nothing finer than bf16 in q
    if (put) at::zeros({4}).put_(at::tensor({1, 1}, at::kLong), at::ones({2}));
    auto scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
    seen->push_back(scores.scalar_type());  // what autocast made of the method's own product
    scores = scores.masked_fill(valid.logical_not().unsqueeze(1).unsqueeze(2), -1e4);
    return at::matmul(at::softmax(scores, -1), v);
  }
  std::vector<at::ScalarType>* seen;
  bool put;
  std::vector<bool> bf16_values;
};

struct Quiet : TrainObserver {
  std::vector<MetricPoint> points;
  void on_metrics(const std::vector<MetricPoint>& p) override { points.insert(points.end(), p.begin(), p.end()); }
  void on_progress(const Progress&) override {}
};

double result(const RunOutcome& o, const std::string& name) {
  for (const auto& [n, v] : o.results)
    if (n == name) return v;
  return NAN;
}

class MixedPrecision : public ::testing::Test {
 protected:
  void TearDown() override {  // process-wide switches: leave them as found
    compat::set_deterministic(false);
    compat::set_tf32(false);
  }

  RunOutcome run(const std::string& precision, bool deterministic = false, bool put = false, bool tf32 = false,
                 AttentionPrecision attention = AttentionPrecision::autocast) {
    static const TrainSplits data{testing::first_token_split(160, 12, 1), testing::first_token_split(48, 12, 2),
                                  testing::first_token_split(48, 12, 3)};
    TrainJob job;
    job.model = testing::tiny_model(32);
    job.model.dropout = 0;
    job.model.attention_precision = attention;
    job.train.steps = 60;
    job.train.batch_size = 16;
    job.train.lr = 3e-3;
    job.train.warmup = 5;
    job.train.eval_every = 30;
    job.train.log_every = 10;
    job.train.variance_passes = 0;
    job.train.checkpoint_every = 0;
    job.train.precision = precision;
    job.train.deterministic = deterministic;
    job.train.tf32 = tf32;
    job.task = {10, 4, 12, 1};
    job.seed = 3;
    seen.clear();
    probes.clear();
    job.make_attention = [this, put](const AttentionShape&) {
      return probes.emplace_back(std::make_shared<ProbeAttention>(&seen, put));
    };
    Quiet observer;
    auto outcome = train_and_evaluate(job, data, observer);
    points = observer.points;
    return outcome;
  }
  std::vector<at::ScalarType> seen;
  std::vector<std::shared_ptr<ProbeAttention>> probes;  // one per layer, kept past the run
  std::vector<MetricPoint> points;
};

// bf16: the attention sees what autocast's projections give (bf16) in training and evaluation,
// the weights stay fp32, and the run learns the task as the fp32 run does.
TEST_F(MixedPrecision, ABf16RunAutocastsEveryForwardAndLearnsTheTask) {
  const auto fp32 = run("fp32");
  ASSERT_EQ(fp32.status, TrainStatus::done) << fp32.error;
  for (const auto type : seen) ASSERT_EQ(type, at::kFloat);
  const auto bf16 = run("bf16");
  ASSERT_EQ(bf16.status, TrainStatus::done) << bf16.error;
  ASSERT_FALSE(seen.empty());
  for (const auto type : seen) ASSERT_EQ(type, at::kBFloat16);
  EXPECT_GT(result(bf16, "test_acc"), 0.9);  // chance is 0.25
  EXPECT_NEAR(result(bf16, "test_acc"), result(fp32, "test_acc"), 0.1);
  EXPECT_TRUE(std::isnan(result(bf16, "skipped_steps")));  // loss scaling is fp16's alone
  for (const auto& p : points) EXPECT_NE(p.name, "loss_scale");
}

// [model] attention_precision = "fp32" (the LRA authors' code): under autocast the method gets q,
// k, v as float and its own products stay float, while the projection before it is bf16 (q holds
// bf16 values); "fp32_qkv" (their Reformer) projects in fp32 too.
TEST_F(MixedPrecision, AttentionInFp32GetsFloatInputsAndRunsWithoutAutocast) {
  for (const auto attention : {AttentionPrecision::fp32, AttentionPrecision::fp32_qkv}) {
    const auto out = run("bf16", false, false, false, attention);
    ASSERT_EQ(out.status, TrainStatus::done) << out.error;
    ASSERT_FALSE(seen.empty());
    for (const auto type : seen) ASSERT_EQ(type, at::kFloat);
    ASSERT_FALSE(probes.empty());
    for (const auto& probe : probes)
      for (const bool bf16 : probe->bf16_values) ASSERT_EQ(bf16, attention == AttentionPrecision::fp32);
    EXPECT_GT(result(out, "test_acc"), 0.9);
  }
}

#if TORCH_VERSION_MAJOR < 2
TEST_F(MixedPrecision, Fp16OnACpuWithoutItsAutocastIsRefusedBeforeTraining) {
  try {
    run("fp16");
    FAIL() << "fp16 on the CPU ran";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("precision fp16 on the CPU needs LibTorch 2", 0), 0u) << e.what();
  }
  EXPECT_TRUE(seen.empty());
}
#else
TEST_F(MixedPrecision, AnFp16RunCountsItsSkippedStepsAndCurvesItsLossScale) {
  const auto fp16 = run("fp16");
  ASSERT_EQ(fp16.status, TrainStatus::done) << fp16.error;
  EXPECT_GE(result(fp16, "skipped_steps"), 0);
  EXPECT_GT(result(fp16, "loss_scale"), 0);
  bool curve = false;
  for (const auto& p : points) curve = curve || p.name == "loss_scale";
  EXPECT_TRUE(curve);
}
#endif

TEST_F(MixedPrecision, ADeterministicJobFailsAtAnOpWithoutADeterministicImplementationNamingIt) {
  const auto same = run("fp32", /*deterministic=*/true);  // every op of the model has one on the CPU
  ASSERT_EQ(same.status, TrainStatus::done) << same.error;
  EXPECT_TRUE(compat::deterministic());
  const auto refused = run("fp32", /*deterministic=*/true, /*put=*/true);
  EXPECT_EQ(refused.status, TrainStatus::failed);
  EXPECT_EQ(refused.error, "put_ has no deterministic implementation ([train] deterministic = true)");
  const auto allowed = run("fp32", /*deterministic=*/false, /*put=*/true);
  EXPECT_EQ(allowed.status, TrainStatus::done) << allowed.error;
  EXPECT_FALSE(compat::deterministic());
}

// Each run sets TF32 as its [train] says, whatever the run before it set (CUDA reads the switch;
// on the CPU it is only the switch).
TEST_F(MixedPrecision, EachRunSetsTf32AsItsTrainSectionSays) {
  ASSERT_EQ(run("fp32", false, false, /*tf32=*/true).status, TrainStatus::done);
  EXPECT_TRUE(compat::tf32_allowed());
  ASSERT_EQ(run("fp32").status, TrainStatus::done);
  EXPECT_FALSE(compat::tf32_allowed());
}

}  // namespace
}  // namespace attnlab
