// What a CUDA graph of the training step stands on, held on the CPU (the tests that need a GPU,
// replay against eager steps, are skipped here with their reason; the GPU round runs whole jobs with graphs): the reasons a run steps eagerly, in the order StepRunner gives them, the refusal
// of cuda_graphs = "on" where no graph can run, and the SeedStreams' training generators (what a
// capture registers): one a stream, listed in the order made, continued across a checkpoint.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/version.h>

#include "attnlab/cuda_graph.hpp"
#include "attnlab/seed_stream.hpp"
#include "attnlab/train/loss_scaler.hpp"
#include "attnlab/train/optimizer.hpp"
#include "attnlab/train/step_runner.hpp"
#include "attnlab/train/trainer.hpp"

namespace attnlab {
namespace {

const c10::Device cpu(c10::kCPU), gpu(c10::kCUDA, 0);  // a CUDA device object needs no GPU

TEST(StepRunner, SaysWhyTheStepsRunEagerly) {
  TrainConfig train;
  EXPECT_EQ(StepRunner(train, cpu, Precision::fp32).mode(), "eager (cuda graphs off: the device is cpu, not a GPU)");
  train.cuda_graphs = CudaGraphs::off;
  EXPECT_EQ(StepRunner(train, cpu, Precision::fp32).mode(), "eager (cuda graphs off: [train] cuda_graphs = \"off\")");
  EXPECT_FALSE(StepRunner(train, cpu, Precision::fp32).graphed());
  train.cuda_graphs = CudaGraphs::on;
  try {
    StepRunner runner(train, cpu, Precision::fp32);
    FAIL() << "made: " << runner.mode();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "[train] cuda_graphs = \"on\", but the device is cpu, not a GPU");
  }
  // on a GPU, in the order they are checked: the build, fp16's loss scaling, several micro-batches
  train.cuda_graphs = CudaGraphs::automatic;
  std::string no_graphs;
  if (!CudaGraph::available(gpu, &no_graphs)) {
    EXPECT_EQ(why_no_cuda_graph(train, gpu, Precision::fp16), no_graphs);
    EXPECT_EQ(no_graphs, "this build (LibTorch " TORCH_VERSION ") has no CUDA graphs");
    return;
  }
  EXPECT_EQ(why_no_cuda_graph(train, gpu, Precision::bf16), "");
  EXPECT_EQ(why_no_cuda_graph(train, gpu, Precision::fp16), "fp16 loss scaling skips steps on the host");
  train.grad_accum = 2;
  EXPECT_EQ(why_no_cuda_graph(train, gpu, Precision::fp32), "grad_accum 2 takes several batches a step");
}

TEST(StepRunner, EagerStepsRunTheWorkEachTime) {
  StepRunner runner(TrainConfig{}, cpu, Precision::fp32);
  int calls = 0;
  for (int i = 0; i < 5; ++i) runner.run([&] { ++calls; });
  EXPECT_EQ(calls, 5);
}

at::Generator trainer_generator(std::uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

// Training draws come from one generator a stream, moving on; evaluation draws from a fixed start.
TEST(SeedStream, OneGeneratorForTheTrainingDrawsAFixedOneForEvaluation) {
  SeedStream stream;
  auto g = trainer_generator(3);
  stream.reseed(g);
  const auto first = stream.next(cpu, true), second = stream.next(cpu, true);
  EXPECT_EQ(first.unsafeGetGeneratorImpl(), second.unsafeGetGeneratorImpl());
  auto one = first;
  const auto a = at::rand({4}, one, at::kDouble), b = at::rand({4}, one, at::kDouble);
  EXPECT_FALSE(at::equal(a, b));
  auto e1 = stream.next(cpu, false);
  const auto eval_a = at::rand({4}, e1, at::kDouble);
  auto e2 = stream.next(cpu, false);
  EXPECT_TRUE(at::equal(eval_a, at::rand({4}, e2, at::kDouble)));  // evaluation is repeatable
  // a redraw restarts the training stream from the new seed
  SeedStream other;
  auto same = trainer_generator(3);
  other.reseed(same);
  auto fresh = other.next(cpu, true);
  EXPECT_TRUE(at::equal(at::rand({4}, fresh, at::kDouble), a));
}

// A checkpoint carries the stream's place: loaded into a fresh stream, the next draw is the one
// the saved stream makes next. A checkpoint of the earlier format (a seed and a count) is refused.
TEST(SeedStream, ACheckpointContinuesTheStream) {
  SeedStream stream;
  auto g = trainer_generator(5);
  stream.reseed(g);
  auto train = stream.next(cpu, true);
  at::rand({7}, train, at::kDouble);
  torch::serialize::OutputArchive out;
  stream.save(out, "landmark");
  std::ostringstream bytes;
  out.save_to(bytes);
  const auto expected = at::rand({3}, train, at::kDouble);

  torch::serialize::InputArchive in;
  std::istringstream read(bytes.str());
  in.load_from(read);
  SeedStream resumed;
  resumed.load(in, "landmark");
  auto continued = resumed.next(cpu, true);
  EXPECT_TRUE(at::equal(at::rand({3}, continued, at::kDouble), expected));

  torch::serialize::OutputArchive old;
  old.write("landmark_seed", c10::IValue(std::int64_t{11}));
  old.write("landmark_draws", c10::IValue(std::int64_t{4}));
  std::ostringstream old_bytes;
  old.save_to(old_bytes);
  torch::serialize::InputArchive old_in;
  std::istringstream old_read(old_bytes.str());
  old_in.load_from(old_read);
  SeedStream refusing;
  try {
    refusing.load(old_in, "landmark");
    FAIL() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "landmark stream: written by an earlier attnlab (a seed and a count of draws, "
                                     "no generator state): it cannot be continued");
  }
}

// What a capture registers: every live stream's training generator on the device, in the order
// they were made (the model's layers in order), none of a stream that is gone.
TEST(SeedStream, TrainingGeneratorsAreListedInTheOrderMade) {
  const auto before = stream_generators(cpu).size();
  {
    SeedStream first, second;
    auto g = trainer_generator(1);
    first.reseed(g);
    second.reseed(g);
    const auto b = second.next(cpu, true), a = first.next(cpu, true);  // made second first
    second.next(cpu, false);                                           // evaluation: not listed
    const auto listed = stream_generators(cpu);
    ASSERT_EQ(listed.size(), before + 2);
    EXPECT_EQ(listed[before].unsafeGetGeneratorImpl(), b.unsafeGetGeneratorImpl());
    EXPECT_EQ(listed[before + 1].unsafeGetGeneratorImpl(), a.unsafeGetGeneratorImpl());
    EXPECT_TRUE(stream_generators(gpu).empty());  // none made on a GPU
  }
  EXPECT_EQ(stream_generators(cpu).size(), before);
}

// On a GPU: a step that draws from the device's default generator and from a SeedStream, replayed
// as a graph after StepRunner's warm-up, gives what the same steps give eagerly from the same seeds.
TEST(StepRunner, ReplayedStepsDrawAndComputeAsEagerOnes) {
  std::string why;
  if (!CudaGraph::available(gpu, &why) || !at::hasCUDA()) GTEST_SKIP() << "needs a CUDA GPU: " << (why.empty() ? "none here" : why);
  auto steps = [](CudaGraphs cuda_graphs) {
    TrainConfig train;
    train.cuda_graphs = cuda_graphs;
    StepRunner runner(train, gpu, Precision::fp32);
    at::manual_seed(7);
    SeedStream stream;
    auto g = trainer_generator(3);
    stream.reseed(g);
    const auto w = at::ones({64}, at::TensorOptions(gpu));
    stream.next(gpu, true);  // made before a capture registers it, as a model's first forward does
    std::vector<at::Tensor> seen;
    for (int i = 0; i < 8; ++i) {
      runner.run([&] {
        auto noise = at::rand({64}, at::TensorOptions(gpu));
        auto gen = stream.next(gpu, true);
        w.add_(noise).mul_(at::randn({64}, gen, at::TensorOptions(gpu)).tanh());
      });
      seen.push_back(w.clone());
    }
    EXPECT_EQ(runner.mode(), cuda_graphs == CudaGraphs::on ? "cuda graph" : "eager (cuda graphs off: [train] cuda_graphs = \"off\")");
    return seen;
  };
  const auto graphed = steps(CudaGraphs::on), eager = steps(CudaGraphs::off);
  for (std::size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(at::equal(graphed[i].cpu(), eager[i].cpu())) << "step " << i + 1;
}

// AdamW under OneCycleLR, values clipped: the rate and beta1 change every step and a replay reads
// them (and the step count) from the optimiser's device tensors, so graphed steps equal eager ones.
TEST(StepRunner, ReplayedAdamWFollowsOneCycleAsEagerSteps) {
  std::string why;
  if (!CudaGraph::available(gpu, &why) || !at::hasCUDA()) GTEST_SKIP() << "needs a CUDA GPU: " << (why.empty() ? "none here" : why);
  auto steps = [](CudaGraphs cuda_graphs) {
    TrainConfig train;
    train.cuda_graphs = cuda_graphs;
    train.decay = Decay::onecycle;
    train.lr = 0.05;
    train.steps = 12;
    train.warmup = 4;
    train.clip_norm = 0;
    train.clip_value = 0.5;
    StepRunner runner(train, gpu, Precision::fp32);
    auto p = at::linspace(-1, 1, 64, at::TensorOptions(gpu)).requires_grad_(true);
    FusedAdamW optimizer({p}, adamw_options(train), cycles_beta1(train));
    LossScaler no_scaling(false);
    for (std::int64_t step = 0; step < train.steps; ++step) {
      schedule_step(optimizer, train, step);
      runner.run([&] {
        optimizer.zero_grad();
        (p * p * p).sum().backward();  // gradient 3p², clipped at 0.5 where |p| > 0.41
        apply_gradients(optimizer, train, no_scaling);
      });
    }
    return p.detach().cpu();
  };
  const auto graphed = steps(CudaGraphs::on), eager = steps(CudaGraphs::off);
  EXPECT_TRUE(at::allclose(graphed, eager, 1e-6, 1e-7)) << (graphed - eager).abs().max().item<double>();
}

}  // namespace
}  // namespace attnlab
