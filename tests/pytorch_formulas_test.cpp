// The training formulas attnlab writes itself, held to PyTorch's own values: OneCycleLR's learning
// rate and beta1 over whole schedules (decay = onecycle, onecycle_cosine), the KL authors' LambdaLR
// (decay = sqrt_from_zero), AdamW under it with
// clip_grad_value_ over 100 steps (the optimiser's update that reads beta1 on the device, or on
// 1.13 torch::optim::AdamW's), clip_grad_value_, and the LRA code's "MEAN" pooling
// (pooling = mean_with_padding). The values come from tests/reference/training_formulas.py, run
// once per build folder by the Python torch of this build (python3-torch for 1.13, the 2.11 wheel).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

#include <ATen/ATen.h>

#include "attnlab/train/loss_scaler.hpp"
#include "attnlab/train/model.hpp"
#include "attnlab/train/optimizer.hpp"
#include "attnlab/train/trainer.hpp"
#include "test_paths.hpp"

namespace attnlab {
namespace {

// The script's output, made once per build folder (ctest runs each test in a process of its own):
// kept beside the test binary while newer than the script, written under a temporary name first.
std::filesystem::path pytorch_values_file() {
  const std::filesystem::path script = std::string(ATTNLAB_SOURCE_DIR) + "/tests/reference/training_formulas.py";
  const auto file = std::filesystem::canonical("/proc/self/exe").parent_path() / "pytorch_formulas.txt";
  std::error_code ec;
  if (std::filesystem::exists(file, ec) && std::filesystem::last_write_time(file) > std::filesystem::last_write_time(script))
    return file;
  const std::string partial = file.string() + "." + std::to_string(getpid());
  const std::string command = std::string(ATTNLAB_TORCH_PYTHON) + " " + script.string() + " " + partial + " 2> " + partial + ".log";
  if (std::system(command.c_str()) != 0)
    throw std::runtime_error("`" + command + "` failed: these tests need the Python torch of this build's LibTorch");
  std::filesystem::remove(partial + ".log");
  std::filesystem::rename(partial, file);
  return file;
}

// Each series the script wrote, by name.
const std::map<std::string, std::vector<double>>& pytorch_values() {
  static const auto values = [] {
    std::map<std::string, std::vector<double>> series;
    std::ifstream in(pytorch_values_file());
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string name;
      std::size_t count = 0;
      fields >> name >> count;
      auto& values = series[name];
      for (double v; values.size() < count && fields >> v;) values.push_back(v);
    }
    return series;
  }();
  return values;
}

const std::vector<double>& series(const std::string& name) {
  const auto found = pytorch_values().find(name);
  if (found == pytorch_values().end()) throw std::runtime_error("training_formulas.py wrote no series " + name);
  return found->second;
}

// scale · sin(a·i + b), i = 0..n-1, as the script's formula() makes them (in double, then float).
at::Tensor formula(std::int64_t n, double a, double b, double scale = 1.0) {
  return (at::arange(n, at::kDouble).mul(a).add(b).sin().mul(scale)).to(at::kFloat);
}

TrainConfig one_cycle(double lr, std::int64_t warmup, std::int64_t steps, Decay decay) {
  TrainConfig c;
  c.lr = lr;
  c.warmup = warmup;
  c.steps = steps;
  c.decay = decay;
  return c;
}

// Every step of each schedule: Skyformer's ListOps (50,000 steps), a cosine anneal, no warm-up,
// and a warm-up share that is not a round number. The same arithmetic as PyTorch's: equal to a few ulps.
TEST(PyTorchFormulas, OneCycleLRStepByStep) {
  const std::map<std::string, TrainConfig> schedules{{"skyformer_listops", one_cycle(1e-4, 1000, 50000, Decay::onecycle)},
                                                     {"cosine", one_cycle(2e-4, 30, 300, Decay::onecycle_cosine)},
                                                     {"no_warmup", one_cycle(1e-3, 0, 100, Decay::onecycle)},
                                                     {"uneven", one_cycle(3e-4, 7, 93, Decay::onecycle)}};
  for (const auto& [name, config] : schedules) {
    const auto &lrs = series(name + "_lr"), &beta1s = series(name + "_beta1");
    ASSERT_EQ(lrs.size(), static_cast<std::size_t>(config.steps)) << name;
    for (std::int64_t step = 0; step < config.steps; ++step) {
      ASSERT_NEAR(learning_rate_at(config, step), lrs[step], 1e-15 + 1e-12 * lrs[step]) << name << " step " << step;
      ASSERT_NEAR(beta1_at(config, step), beta1s[step], 1e-14) << name << " step " << step;
    }
  }
  // the shape the conf files rely on: lr / 25 at the first step, lr at the warm-up's last, lr / 25 / 1e4 at the end
  const auto& sky = series("skyformer_listops_lr");
  EXPECT_NEAR(sky.front(), 1e-4 / 25, 1e-18);
  EXPECT_NEAR(sky[999], 1e-4, 1e-18);
  EXPECT_NEAR(sky.back(), 1e-4 / 25 / 1e4, 1e-20);
}

// The KL authors' LambdaLR, min(1, s / W) / sqrt(max(s, W)) times their rate, at every step of
// their ListOps schedule and of Text's: decay = sqrt_from_zero with lr = their rate / sqrt(W). Its
// first step has rate 0 (AdamW's moments still take that step's gradient).
TEST(PyTorchFormulas, KLAuthorsLambdaLRStepByStep) {
  for (const auto& [name, rate, warmup, steps] : {std::tuple<std::string, double, std::int64_t, std::int64_t>{"kl_listops", 5e-3, 1000, 12000},
                                                  {"kl_text", 5e-2, 8000, 20000}}) {
    TrainConfig c = one_cycle(rate / std::sqrt(static_cast<double>(warmup)), warmup, steps, Decay::sqrt_from_zero);
    const auto& lrs = series(name + "_lr");
    ASSERT_EQ(lrs.size(), static_cast<std::size_t>(steps)) << name;
    for (std::int64_t step = 0; step < steps; ++step)
      ASSERT_NEAR(learning_rate_at(c, step), lrs[step], 1e-12 * lrs[warmup]) << name << " step " << step;
    EXPECT_EQ(learning_rate_at(c, 0), 0.0);
    EXPECT_NEAR(learning_rate_at(c, warmup), rate / std::sqrt(static_cast<double>(warmup)), 1e-15);
  }
  auto values = ParamValues::defaults(train_params().data(), train_params().size());
  values.set("decay", std::string("sqrt_from_zero"));
  values.set("warmup", std::int64_t{0});
  EXPECT_THROW(train_config_from(values), ParamError);
}

// A warm-up longer than the run, or of one step (PyTorch's formula divides by zero), is refused.
TEST(PyTorchFormulas, OneCycleSettingsPyTorchRefusesAreRefused) {
  auto values = ParamValues::defaults(train_params().data(), train_params().size());
  values.set("decay", std::string("onecycle"));
  values.set("steps", std::int64_t{100});
  values.set("warmup", std::int64_t{101});
  EXPECT_THROW(train_config_from(values), ParamError);
  values.set("warmup", std::int64_t{1});
  EXPECT_THROW(train_config_from(values), ParamError);
  values.set("warmup", std::int64_t{0});
  EXPECT_EQ(train_config_from(values).decay, Decay::onecycle);
}

// 100 steps of AdamW (weight decay 0.01, eps 1e-6) with OneCycleLR's rate and cycled beta1 and
// each gradient element clipped to [-1, 1], from the same start and gradients as PyTorch's.
at::Tensor adamw_under_one_cycle(double clip_value) {
  TrainConfig c = one_cycle(0.01, 10, 100, Decay::onecycle);
  c.eps = 1e-6;
  c.weight_decay = 0.01;
  c.clip_norm = 0;
  c.clip_value = clip_value;
  std::vector<at::Tensor> params{formula(12, 0.5, 0.1).view({3, 4}).requires_grad_(true),
                                 formula(5, 0.5, 1.1).requires_grad_(true)};
  FusedAdamW optimizer(params, adamw_options(c), cycles_beta1(c));
  LossScaler no_scaling(false);
  for (std::int64_t step = 0; step < c.steps; ++step) {
    schedule_step(optimizer, c, step);
    optimizer.zero_grad();
    for (std::size_t k = 0; k < params.size(); ++k) {
      const auto grad = formula(params[k].numel(), 0.3, 0.7 * static_cast<double>(step) + static_cast<double>(k), 2.5)
                            .view(params[k].sizes());
      if (params[k].grad().defined()) params[k].mutable_grad().copy_(grad);
      else params[k].mutable_grad() = grad;
    }
    EXPECT_TRUE(apply_gradients(optimizer, c, no_scaling));
  }
  return at::cat({params[0].detach().flatten(), params[1].detach().flatten()});
}

TEST(PyTorchFormulas, AdamWUnderOneCycleWithClippedValues) {
  const auto theirs = at::tensor(series("adamw_one_cycle_clipped"), at::kDouble).to(at::kFloat);
  const auto ours = adamw_under_one_cycle(1.0);
  EXPECT_TRUE(at::allclose(ours, theirs, 1e-5, 1e-6)) << (ours - theirs).abs().max().item<double>();
  // the clip matters here: unclipped, the same run ends elsewhere
  EXPECT_FALSE(at::allclose(adamw_under_one_cycle(0.0), theirs, 1e-3, 1e-4));
}

TEST(PyTorchFormulas, ClipGradValue) {
  auto p = at::zeros({20}).requires_grad_(true);
  FusedAdamW optimizer({p}, adamw_options(TrainConfig{}));
  optimizer.zero_grad();
  if (p.grad().defined()) p.mutable_grad().copy_(formula(20, 0.9, 0.0, 3.0));
  else p.mutable_grad() = formula(20, 0.9, 0.0, 3.0);
  optimizer.clip_grad_value(1.25);
  EXPECT_TRUE(at::equal(p.grad(), at::tensor(series("clip_grad_value"), at::kDouble).to(at::kFloat)));
}

// The LRA code's (LayerNorm(X) * mask).mean(dim=1): every position, padding zeroed; and the mean
// over real tokens is the same sum divided by the length instead of N.
TEST(PyTorchFormulas, MeanWithPaddingIsTheLraCodesMean) {
  const std::int64_t batch = 3, length = 6, dim = 4;
  const auto x = at::layer_norm(formula(batch * length * dim, 0.37, 0.0).view({batch, length, dim}), {dim});
  const auto lengths = at::tensor({6, 3, 1}, at::kLong);
  const auto valid = at::arange(length, at::kLong).unsqueeze(0) < lengths.unsqueeze(1);
  const auto ours = pool_sequence(x, valid, Pooling::mean_with_padding);
  const auto theirs = at::tensor(series("lra_mean_pooling"), at::kDouble).to(at::kFloat).view({batch, dim});
  EXPECT_TRUE(at::allclose(ours, theirs, 1e-6, 1e-6)) << (ours - theirs).abs().max().item<double>();
  const auto real_tokens = pool_sequence(x, valid, Pooling::mean);
  EXPECT_TRUE(at::allclose(real_tokens * lengths.to(at::kFloat).unsqueeze(1) / length, ours, 1e-6, 1e-6));
  EXPECT_FALSE(at::allclose(real_tokens, ours, 1e-3, 1e-3));  // the two differ wherever there is padding
}

}  // namespace
}  // namespace attnlab
