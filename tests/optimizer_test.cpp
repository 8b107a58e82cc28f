// The run's optimiser (train/optimizer.hpp): gradient clipping against its formula and LibTorch's
// clip_grad_norm_, FusedAdamW against torch::optim::AdamW over 100 steps, checkpoints read by the
// other, and parameters whose storage was replaced taken back into the flat buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "attnlab/torch_compat.hpp"
#include "attnlab/train/optimizer.hpp"

namespace attnlab {
namespace {

// ‖g‖ over all gradients (3² + 4² + 12² = 13²): scaled by max_norm / (‖g‖ + 1e-6) when over it,
// left alone when under.
TEST(Gradients, ClippedToTheirJointNorm) {
  std::vector<at::Tensor> grads{at::tensor({3.0f, 0.0f}), at::tensor({4.0f}), at::tensor({0.0f, 12.0f, 0.0f})};
  compat::clip_grad_norm(grads, 6.5);
  const double scale = 6.5 / (13.0 + 1e-6);
  EXPECT_NEAR(grads[0][0].item<double>(), 3.0 * scale, 1e-6);
  EXPECT_NEAR(grads[1][0].item<double>(), 4.0 * scale, 1e-6);
  EXPECT_NEAR(grads[2][1].item<double>(), 12.0 * scale, 1e-6);

  std::vector<at::Tensor> under{at::tensor({3.0f, 0.0f}), at::tensor({4.0f})};  // ‖g‖ = 5 < 6.5: unchanged
  compat::clip_grad_norm(under, 6.5);
  EXPECT_TRUE(at::equal(under[0], at::tensor({3.0f, 0.0f})));
  EXPECT_TRUE(at::equal(under[1], at::tensor({4.0f})));
}

// As LibTorch's clip_grad_norm_ (which reads ‖g‖ back to the host), to float rounding.
TEST(Gradients, ClippedAsLibTorchClips) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(3);
  std::vector<at::Tensor> ours, theirs;
  for (const std::int64_t size : {5, 17, 64}) {
    const auto grad = at::randn({size}, generator) * 3;
    ours.push_back(grad.clone());
    theirs.push_back(at::zeros({size}).requires_grad_(true));
    theirs.back().mutable_grad() = grad.clone();
  }
  compat::clip_grad_norm(ours, 1.0);
  torch::nn::utils::clip_grad_norm_(theirs, 1.0);
  for (std::size_t i = 0; i < ours.size(); ++i) EXPECT_TRUE(at::allclose(ours[i], theirs[i].grad(), 1e-6, 1e-7)) << i;
}

// A small model of the LRA model's parts (linear layers, a norm), its loss on seeded data.
struct Net : torch::nn::Module {
  Net() {
    first = register_module("first", torch::nn::Linear(6, 8));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({8})));
    last = register_module("last", torch::nn::Linear(8, 3));
  }
  at::Tensor loss(std::int64_t step) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(100 + step);
    const auto x = at::randn({4, 6}, generator);
    const auto y = at::randint(3, {4}, generator, at::kLong);
    return at::cross_entropy_loss(last->forward(at::gelu(norm->forward(first->forward(x)))), y);
  }
  torch::nn::Linear first{nullptr}, last{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};

std::shared_ptr<Net> seeded_net() {
  torch::manual_seed(7);
  return std::make_shared<Net>();
}

torch::optim::AdamWOptions options() {
  return torch::optim::AdamWOptions(3e-3).betas(std::make_tuple(0.9, 0.98)).eps(1e-8).weight_decay(0.01);
}

double lr_at(std::int64_t step) { return 3e-3 * (1.0 - static_cast<double>(step) / 200); }

// Steps [from, to) of training `net` with `optimizer`: forward, backward, clip to 1, step.
void train_fused(Net& net, FusedAdamW& optimizer, std::int64_t from, std::int64_t to) {
  for (std::int64_t step = from; step < to; ++step) {
    optimizer.set_lr(lr_at(step));
    optimizer.zero_grad();
    net.loss(step).backward();
    optimizer.clip_grad_norm(1.0);
    optimizer.step();
  }
}

void train_reference(Net& net, torch::optim::AdamW& optimizer, std::int64_t from, std::int64_t to) {
  for (std::int64_t step = from; step < to; ++step) {
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr_at(step));
    optimizer.zero_grad();
    net.loss(step).backward();
    torch::nn::utils::clip_grad_norm_(net.parameters(), 1.0);
    optimizer.step();
  }
}

void expect_close(const std::vector<at::Tensor>& ours, const std::vector<at::Tensor>& theirs, double tolerance) {
  ASSERT_EQ(ours.size(), theirs.size());
  for (std::size_t i = 0; i < ours.size(); ++i)
    EXPECT_TRUE(at::allclose(ours[i], theirs[i], tolerance, tolerance))
        << "parameter " << i << ": largest difference " << (ours[i] - theirs[i]).abs().max().item<double>();
}

TEST(FusedAdamW, TrainsAsTorchAdamWOver100Steps) {
  auto ours = seeded_net(), theirs = seeded_net();
  FusedAdamW fused(ours->parameters(), options());
  torch::optim::AdamW reference(theirs->parameters(), options());
  EXPECT_EQ(fused.fused(), compat::fused_adamw_available());
  train_fused(*ours, fused, 0, 100);
  train_reference(*theirs, reference, 0, 100);
  expect_close(ours->parameters(), theirs->parameters(), 1e-5);
  // it did train: the weights moved
  EXPECT_FALSE(at::allclose(ours->parameters()[0], seeded_net()->parameters()[0], 1e-3, 1e-3));
}

// Each optimiser's checkpoint read by the other: torch::optim::AdamW's (today's resume
// checkpoints) continued by FusedAdamW, and FusedAdamW's continued by torch::optim::AdamW.
TEST(FusedAdamW, CheckpointsInterchangeWithTorchAdamW) {
  auto ours = seeded_net(), theirs = seeded_net();
  torch::optim::AdamW reference(theirs->parameters(), options());
  train_reference(*theirs, reference, 0, 30);
  torch::serialize::OutputArchive written;
  reference.save(written);
  std::ostringstream bytes;
  written.save_to(bytes);
  torch::serialize::InputArchive read;
  std::istringstream in(bytes.str());
  read.load_from(in);

  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < ours->parameters().size(); ++i) ours->parameters()[i].copy_(theirs->parameters()[i]);
  }
  FusedAdamW fused(ours->parameters(), options());
  fused.load(read);
  EXPECT_DOUBLE_EQ(fused.lr(), lr_at(29));
  train_fused(*ours, fused, 30, 60);
  train_reference(*theirs, reference, 30, 60);
  expect_close(ours->parameters(), theirs->parameters(), 1e-5);

  torch::serialize::OutputArchive ours_written;
  fused.save(ours_written);
  std::ostringstream ours_bytes;
  ours_written.save_to(ours_bytes);
  torch::serialize::InputArchive ours_read;
  std::istringstream ours_in(ours_bytes.str());
  ours_read.load_from(ours_in);
  auto again = seeded_net();
  {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < again->parameters().size(); ++i) again->parameters()[i].copy_(ours->parameters()[i]);
  }
  torch::optim::AdamW continued(again->parameters(), options());
  continued.load(ours_read);
  train_reference(*again, continued, 60, 80);
  train_fused(*ours, fused, 60, 80);
  expect_close(ours->parameters(), again->parameters(), 1e-5);
}

// A parameter whose storage was replaced (Module::load and set_data do it) keeps its new values and
// is trained from them on; its gradient goes on arriving.
TEST(FusedAdamW, TakesBackAParameterWhoseStorageWasReplaced) {
  auto ours = seeded_net(), theirs = seeded_net();
  FusedAdamW fused(ours->parameters(), options());
  torch::optim::AdamW reference(theirs->parameters(), options());
  train_fused(*ours, fused, 0, 5);
  train_reference(*theirs, reference, 0, 5);
  const auto replacement = at::full_like(ours->first->weight, 0.25);
  {
    torch::NoGradGuard no_grad;
    ours->first->weight.set_data(replacement.clone());
    theirs->first->weight.copy_(replacement);
  }
  train_fused(*ours, fused, 5, 15);
  train_reference(*theirs, reference, 5, 15);
  expect_close(ours->parameters(), theirs->parameters(), 1e-5);
}

TEST(FusedAdamW, RefusesACheckpointWhoseParametersTookDifferentSteps) {
  if (!compat::fused_adamw_available()) GTEST_SKIP() << "no fused AdamW in LibTorch " << compat::torch_version();
  auto theirs = seeded_net();
  torch::optim::AdamW reference(theirs->parameters(), options());
  train_reference(*theirs, reference, 0, 3);
  theirs->loss(3).backward();
  theirs->last->bias.mutable_grad().reset();  // one parameter without a gradient: it skips this step
  reference.step();
  torch::serialize::OutputArchive written;
  reference.save(written);
  std::ostringstream bytes;
  written.save_to(bytes);
  torch::serialize::InputArchive read;
  std::istringstream in(bytes.str());
  read.load_from(in);
  auto ours = seeded_net();
  FusedAdamW fused(ours->parameters(), options());
  try {
    fused.load(read);
    FAIL() << "loaded";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "optimizer state: parameter 5 took 3 steps where the others took 4; the fused AdamW keeps one count for all");
  }
}

}  // namespace
}  // namespace attnlab
