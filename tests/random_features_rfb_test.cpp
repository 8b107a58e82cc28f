// Numerics of the KL-Transformer's learnable-kernel feature maps (gmm_rks, gmm_prf, generative_rks,
// generative_prf), each against formulas written out here in double precision. The plugins are
// loaded through the plugin host, so the .so files are what is tested.
//
// Reading the kernel estimate φ(x)ᵀφ(y) through the attention: one query x, two keys [y, r] with
// values e₀ and e₁. The output is [K̂(x, y), K̂(x, r)] / (K̂(x, y) + K̂(x, r) + eps), so the ratio of
// its first two coordinates is K̂(x, y) / K̂(x, r), whatever eps and whatever stabilising factor a
// positive feature map divides by. For RKS features K̂(x, x) = 1 exactly (cos² + sin²), so r = x
// gives K̂(x, y) itself; for positive features r = 0 gives K̂(x, y) / K̂(x, 0), K̂(x, 0) → 1.
// The methods scale queries and keys by d^-¼ (the authors' softmax_temp = 1/√d); the inputs here
// are multiplied by d^¼ so that the kernel is evaluated at the points written.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

#include "attnlab/attention.hpp"
#include "plugin_host/plugin_host.hpp"
#include "random_features.hpp"

namespace attnlab {
namespace {

const LoadedPlugin& rf_plugin(const std::string& name) {
  const auto* p = testing::built_plugins().find(PluginKind::attention, name);
  if (!p) throw std::runtime_error("attention plugin '" + name + "' not found");
  return *p;
}

using Overrides = std::vector<std::pair<const char*, ParamValue>>;

std::shared_ptr<AttentionMethod> make_rf(const std::string& name, const Overrides& overrides, AttentionShape shape) {
  ParamValues params = rf_plugin(name).defaults();
  for (const auto& [key, value] : overrides) params.set(key, value);
  at::manual_seed(0);
  auto m = rf_plugin(name).make_attention(shape, params);
  m->eval();
  return m;
}

at::Generator gen(std::uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

// (The dictionaries held in locals: find() points into them, and a temporary's would be freed
// before the pointer is read.)
at::Tensor named(const torch::nn::Module& m, const std::string& name) {
  const auto parameters = m.named_parameters(), buffers = m.named_buffers();
  if (const auto* p = parameters.find(name)) return *p;
  if (const auto* b = buffers.find(name)) return *b;
  throw std::runtime_error("no parameter or buffer '" + name + "'");
}

void assign(const torch::nn::Module& m, const std::string& name, const at::Tensor& value) {
  at::NoGradGuard no_grad;
  named(m, name).copy_(value);
}

// K̂(x, y) / K̂(x, r) for B·H pairs at once; x, y, r: [B, H, d] (the points the kernel sees).
at::Tensor estimate(AttentionMethod& m, const at::Tensor& x, const at::Tensor& y, const at::Tensor& r, std::uint64_t seed) {
  const auto b = x.size(0), h = x.size(1), d = x.size(2);
  const double up = std::pow(static_cast<double>(d), 0.25);
  const auto q = at::stack({x, x}, 2) * up;
  const auto k = at::stack({y, r}, 2) * up;
  auto v = at::zeros({b, h, 2, d}, x.options());
  v.select(2, 0).select(2, 0).fill_(1.0);
  v.select(2, 1).select(2, 1).fill_(1.0);
  auto g = gen(seed);
  m.redraw(g);
  const auto out = m.forward(q, k, v, at::ones({b, 2}, at::kBool)).select(2, 0);  // [B, H, d]
  return out.select(-1, 0) / out.select(-1, 1);
}

// Mean |estimate − exact| over `seeds` draws.
double mean_abs_error(AttentionMethod& m, const at::Tensor& x, const at::Tensor& y, const at::Tensor& r,
                      const at::Tensor& exact, int seeds) {
  double total = 0;
  for (int s = 0; s < seeds; ++s) total += (estimate(m, x, y, r, 100 + s) - exact).abs().mean().item<double>();
  return total / seeds;
}

struct Pairs {
  at::Tensor x, y;
};

Pairs random_pairs(std::int64_t b, std::int64_t h, std::int64_t d, double spread, std::uint64_t seed) {
  auto g = gen(seed);
  Pairs p;
  p.x = at::randn({b, h, d}, g, at::kDouble) * spread;
  p.y = at::randn({b, h, d}, g, at::kDouble) * spread;
  return p;
}

// exp(−‖Σᵀz‖²/2) cos(μᵀz) per (b, h, c): the kernel of ω ~ N(μ, ΣΣᵀ) under RKS features,
// E cos(ωᵀz) = Re E e^{iωᵀz} = Re exp(iμᵀz − zᵀΣΣᵀz/2). z: [B, H, d]; mu [H, C, d]; sigma [H, C, d, d].
at::Tensor gaussian_component_kernels(const at::Tensor& z, const at::Tensor& mu, const at::Tensor& sigma) {
  const auto zc = z.unsqueeze(2).unsqueeze(-1);                               // [B, H, 1, d, 1]
  const auto st_z = at::matmul(sigma.transpose(-2, -1).unsqueeze(0), zc).squeeze(-1);  // [B, H, C, d]
  const auto mu_z = (mu.unsqueeze(0) * z.unsqueeze(2)).sum(-1);                // [B, H, C]
  return at::exp(-0.5 * (st_z * st_z).sum(-1)) * at::cos(mu_z);
}

// ---------------------------------------------------------------------------------------- gmm_rks

TEST(GmmRks, LearnableSpectralMixtureIsRegisteredByName) {
  auto m = make_rf("gmm_rks", {{"components", std::int64_t{3}}, {"features", std::int64_t{16}}}, {4, 8, 32});
  EXPECT_EQ(named(*m, "sigma").sizes(), (at::IntArrayRef{4, 3, 8, 8}));
  EXPECT_EQ(named(*m, "mu").sizes(), (at::IntArrayRef{4, 3, 8}));
  EXPECT_TRUE(named(*m, "sigma").requires_grad());
  EXPECT_TRUE(at::equal(named(*m, "sigma"), at::eye(8).expand({4, 3, 8, 8})));  // Σ = I at the start
  EXPECT_TRUE(at::equal(named(*m, "mu"), at::zeros({4, 3, 8})));               // μ = 0
  EXPECT_EQ(named(*m, "noise").sizes(), (at::IntArrayRef{4, 3, 16, 8}));     // a buffer, redrawn
  EXPECT_FALSE(named(*m, "noise").requires_grad());
  const auto before = named(*m, "noise").clone();
  auto g = gen(3);
  m->redraw(g);
  EXPECT_FALSE(at::equal(before, named(*m, "noise")));
}

// With the draw known, the estimate is exactly (1/C) Σ_c (1/M) Σ_m cos(ω_{c,m}ᵀ(x − y)) with
// ω = Σ n + μ: checks the convention (Σ, not Σᵀ) and the equal mixture weights.
TEST(GmmRks, EstimateIsTheMixtureOfCosinesOfTheDraw) {
  const std::int64_t h = 2, c = 3, d = 8, mm = 16;
  auto m = make_rf("gmm_rks", {{"components", c}, {"features", mm}}, {h, d, 32});
  auto g = gen(1);
  const auto mu = at::randn({h, c, d}, g, at::kDouble) * 0.3;
  const auto sigma = at::randn({h, c, d, d}, g, at::kDouble) * 0.4;
  assign(*m, "mu", mu);
  assign(*m, "sigma", sigma);
  const auto p = random_pairs(3, h, d, 0.5, 2);
  at::NoGradGuard no_grad;
  const auto got = estimate(*m, p.x, p.y, p.x, 5);
  const auto noise = named(*m, "noise").to(at::kDouble);                                     // [H, C, M, d]
  const auto omega = at::matmul(noise, sigma.to(at::kFloat).to(at::kDouble).transpose(-2, -1)) +
                     mu.to(at::kFloat).to(at::kDouble).unsqueeze(-2);                         // rows Σn + μ
  const auto z = (p.x - p.y).unsqueeze(2).unsqueeze(2);                                       // [B, H, 1, 1, d]
  const auto want = at::cos((omega.unsqueeze(0) * z).sum(-1)).mean({-2, -1});                 // [B, H]
  EXPECT_TRUE(at::allclose(got, want, 1e-9, 1e-12)) << (got - want).abs().max().item<double>();
}

// smoothing = s appends the constant feature s: the same draw's estimate plus s² (the ratio read
// here is (K̂(x, y) + s²) / (K̂(x, x) + s²), and K̂(x, x) = 1).
TEST(GmmRks, SmoothingAddsItsSquareToEveryEstimate) {
  const std::int64_t h = 2, c = 2, d = 8, mm = 16;
  const double s = 1.5;
  auto plain = make_rf("gmm_rks", {{"components", c}, {"features", mm}}, {h, d, 32});
  auto smoothed = make_rf("gmm_rks", {{"components", c}, {"features", mm}, {"smoothing", s}}, {h, d, 32});
  const auto p = random_pairs(4, h, d, 0.8, 3);
  at::NoGradGuard no_grad;
  const auto k = estimate(*plain, p.x, p.y, p.x, 7);
  const auto k_smoothed = estimate(*smoothed, p.x, p.y, p.x, 7);
  const auto want = (k + s * s) / (1 + s * s);
  EXPECT_TRUE(at::allclose(k_smoothed, want, 1e-5, 1e-6)) << (k_smoothed - want).abs().max().item<double>();
  EXPECT_GT((k_smoothed - k).abs().max().item<double>(), 1e-2);  // it did change the estimate
}

// μ = 0, Σ = I, C = 1: the Gaussian kernel exp(−‖x − y‖²/2), error ∝ 1/√M.
TEST(GmmRks, ConvergesToTheGaussianKernelAsOneOverRootM) {
  const std::int64_t h = 4, d = 8;
  const auto p = random_pairs(16, h, d, 0.4, 11);
  const auto exact = at::exp(-0.5 * (p.x - p.y).pow(2).sum(-1));
  at::NoGradGuard no_grad;
  auto small = make_rf("gmm_rks", {{"components", std::int64_t{1}}, {"features", std::int64_t{16}}}, {h, d, 2});
  auto large = make_rf("gmm_rks", {{"components", std::int64_t{1}}, {"features", std::int64_t{256}}}, {h, d, 2});
  const double e_small = mean_abs_error(*small, p.x, p.y, p.x, exact, 12);
  const double e_large = mean_abs_error(*large, p.x, p.y, p.x, exact, 12);
  EXPECT_GT(e_small / e_large, 2.8) << e_small << " vs " << e_large;  // 16x the features: 4x smaller
  EXPECT_LT(e_small / e_large, 5.7) << e_small << " vs " << e_large;
  EXPECT_LT(e_large, 0.05);
}

// General μ, Σ, C = 3: the mixture kernel (1/C) Σ_c exp(−‖Σ_cᵀ(x − y)‖²/2) cos(μ_cᵀ(x − y)).
TEST(GmmRks, ConvergesToTheMixtureKernel) {
  const std::int64_t h = 2, c = 3, d = 8;
  auto g = gen(21);
  const auto mu = (at::randn({h, c, d}, g, at::kDouble) * 0.5).to(at::kFloat).to(at::kDouble);
  const auto sigma = (at::eye(d, at::kDouble) * 0.7 + at::randn({h, c, d, d}, g, at::kDouble) * 0.15)
                         .to(at::kFloat).to(at::kDouble);  // what the float parameters hold
  const auto p = random_pairs(16, h, d, 0.4, 22);
  const auto exact = gaussian_component_kernels(p.x - p.y, mu, sigma).mean(-1);
  at::NoGradGuard no_grad;
  std::vector<double> errors;
  for (std::int64_t features : {8, 128}) {
    auto m = make_rf("gmm_rks", {{"components", c}, {"features", features}}, {h, d, 2});
    assign(*m, "mu", mu);
    assign(*m, "sigma", sigma);
    errors.push_back(mean_abs_error(*m, p.x, p.y, p.x, exact, 16));
  }
  EXPECT_GT(errors[0] / errors[1], 2.8) << errors[0] << " vs " << errors[1];
  EXPECT_LT(errors[0] / errors[1], 5.7) << errors[0] << " vs " << errors[1];
  EXPECT_LT(errors[1], 0.05);
}

// The mean squared error of the estimate against its variance, derived here (the paper's
// Theorem 3 was not at hand): per component the estimate is (1/M) Σ_m cos(ω_mᵀz) with independent
// ω_m, and Var cos(ωᵀz) = E cos²(ωᵀz) − k(z)² = (1 + k(2z))/2 − k(z)², E cos(2ωᵀz) = k(2z), so
//   MSE = (1/C²) Σ_c (1 + k_c(2z) − 2 k_c(z)²) / (2M)
// for C components of equal weight drawn independently (k_c the component kernels above).
TEST(GmmRks, MeanSquaredErrorMatchesTheDerivedVariance) {
  const std::int64_t h = 4, c = 2, d = 8, mm = 8;
  const int seeds = 300;
  auto g = gen(31);
  const auto mu = (at::randn({h, c, d}, g, at::kDouble) * 0.4).to(at::kFloat).to(at::kDouble);
  const auto sigma = (at::eye(d, at::kDouble) * 0.8 + at::randn({h, c, d, d}, g, at::kDouble) * 0.1)
                         .to(at::kFloat).to(at::kDouble);
  const auto p = random_pairs(8, h, d, 0.4, 32);
  const auto z = p.x - p.y;
  const auto k1 = gaussian_component_kernels(z, mu, sigma), k2 = gaussian_component_kernels(2 * z, mu, sigma);
  const auto exact = k1.mean(-1);
  const auto predicted = ((1 + k2 - 2 * k1 * k1) / (2.0 * mm)).sum(-1) / double(c * c);  // [B, H]
  at::NoGradGuard no_grad;
  auto m = make_rf("gmm_rks", {{"components", c}, {"features", mm}}, {h, d, 2});
  assign(*m, "mu", mu);
  assign(*m, "sigma", sigma);
  auto squared = at::zeros_like(exact);
  for (int s = 0; s < seeds; ++s) squared += (estimate(*m, p.x, p.y, p.x, 1000 + s) - exact).pow(2);
  const double empirical = (squared / seeds).sum().item<double>(), theory = predicted.sum().item<double>();
  EXPECT_NEAR(empirical / theory, 1.0, 0.1) << "empirical " << empirical << ", derived " << theory;
}

// ---------------------------------------------------------------------------------------- gmm_prf

TEST(GmmPrf, LearnableDiagonalMixtureIsRegisteredByName) {
  auto m = make_rf("gmm_prf", {{"components", std::int64_t{3}}, {"features", std::int64_t{16}}}, {4, 8, 32});
  EXPECT_EQ(named(*m, "sigma").sizes(), (at::IntArrayRef{4, 3, 8}));
  EXPECT_EQ(named(*m, "mu").sizes(), (at::IntArrayRef{4, 3, 8}));
  EXPECT_TRUE(at::equal(named(*m, "sigma"), at::ones({4, 3, 8})));
  EXPECT_EQ(named(*m, "noise").sizes(), (at::IntArrayRef{4, 3, 16, 8}));
}

// μ = 0, σ = 1, C = 1: K̂(x, y) / K̂(x, 0) → exp(xᵀy) / exp(0), error ∝ 1/√M.
TEST(GmmPrf, ConvergesToTheSoftmaxKernelAsOneOverRootM) {
  const std::int64_t h = 4, d = 8;
  const auto p = random_pairs(16, h, d, 0.25, 41);
  const auto zero = at::zeros_like(p.x);
  const auto exact = at::exp((p.x * p.y).sum(-1));
  at::NoGradGuard no_grad;
  auto small = make_rf("gmm_prf", {{"components", std::int64_t{1}}, {"features", std::int64_t{64}}}, {h, d, 2});
  auto large = make_rf("gmm_prf", {{"components", std::int64_t{1}}, {"features", std::int64_t{1024}}}, {h, d, 2});
  const double e_small = mean_abs_error(*small, p.x, p.y, zero, exact, 12);
  const double e_large = mean_abs_error(*large, p.x, p.y, zero, exact, 12);
  EXPECT_GT(e_small / e_large, 2.8) << e_small << " vs " << e_large;
  EXPECT_LT(e_small / e_large, 5.7) << e_small << " vs " << e_large;
  EXPECT_LT(e_large / exact.mean().item<double>(), 0.05);
}

// General μ, σ, C = 2: E φ(x)ᵀφ(y) = (1/C) Σ_c exp(μ_cᵀs + ‖σ_c ⊙ s‖²/2 − (‖x‖² + ‖y‖²)/2), s = x + y
// (the Gaussian moment generating function), and K(x, 0) the same with y = 0.
TEST(GmmPrf, ConvergesToTheMixtureKernel) {
  const std::int64_t h = 2, c = 2, d = 8;
  auto g = gen(51);
  const auto mu = (at::randn({h, c, d}, g, at::kDouble) * 0.3).to(at::kFloat).to(at::kDouble);
  const auto sigma = (0.6 + at::rand({h, c, d}, g, at::kDouble) * 0.6).to(at::kFloat).to(at::kDouble);
  const auto p = random_pairs(16, h, d, 0.25, 52);
  auto kernel = [&](const at::Tensor& x, const at::Tensor& y) {
    const auto s = (x + y).unsqueeze(2);  // [B, H, 1, d]
    const auto log_k = (mu.unsqueeze(0) * s).sum(-1) + 0.5 * (sigma.unsqueeze(0) * s).pow(2).sum(-1) -
                       0.5 * (x.pow(2).sum(-1) + y.pow(2).sum(-1)).unsqueeze(-1);
    return at::exp(log_k).mean(-1);  // [B, H]
  };
  const auto zero = at::zeros_like(p.x);
  const auto exact = kernel(p.x, p.y) / kernel(p.x, zero);
  at::NoGradGuard no_grad;
  std::vector<double> errors;
  for (std::int64_t features : {64, 1024}) {
    auto m = make_rf("gmm_prf", {{"components", c}, {"features", features}}, {h, d, 2});
    assign(*m, "mu", mu);
    assign(*m, "sigma", sigma);
    errors.push_back(mean_abs_error(*m, p.x, p.y, zero, exact, 16));
  }
  EXPECT_GT(errors[0] / errors[1], 2.8) << errors[0] << " vs " << errors[1];
  EXPECT_LT(errors[0] / errors[1], 5.7) << errors[0] << " vs " << errors[1];
  EXPECT_LT(errors[1] / exact.mean().item<double>(), 0.05);
}

// `kernel = gaussian` (the authors' norm term ‖x‖²): K̂(x, y) / K̂(x, 0) → exp(−‖x − y‖²/2) / exp(−‖x‖²/2).
TEST(GmmPrf, GaussianNormTermGivesTheGaussianKernel) {
  const std::int64_t h = 4, d = 8;
  const auto p = random_pairs(16, h, d, 0.25, 61);
  const auto zero = at::zeros_like(p.x);
  const auto exact = at::exp(-0.5 * (p.x - p.y).pow(2).sum(-1) + 0.5 * p.x.pow(2).sum(-1));
  at::NoGradGuard no_grad;
  auto m = make_rf("gmm_prf",
                   {{"components", std::int64_t{1}}, {"features", std::int64_t{1024}}, {"kernel", std::string("gaussian")}},
                   {h, d, 2});
  EXPECT_LT(mean_abs_error(*m, p.x, p.y, zero, exact, 4) / exact.mean().item<double>(), 0.05);
}

// Large queries and keys in single precision: the stabilising offsets keep every output finite.
TEST(GmmPrf, LargeInputsStayFiniteInFloat) {
  for (const char* name : {"gmm_prf", "generative_prf"}) {
    auto m = make_rf(name, {}, {2, 16, 32});
    auto g = gen(71);
    const auto q = at::randn({2, 2, 32, 16}, g, at::kFloat) * 30, k = at::randn({2, 2, 32, 16}, g, at::kFloat) * 30;
    const auto v = at::randn({2, 2, 32, 16}, g, at::kFloat);
    auto valid = at::ones({2, 32}, at::kBool);
    valid[1].slice(0, 20).fill_(false);
    at::NoGradGuard no_grad;
    m->redraw(g);
    const auto out = m->forward(q, k, v, valid);
    EXPECT_TRUE(out[0].isfinite().all().item<bool>()) << name;
    EXPECT_TRUE(out[1].slice(1, 0, 20).isfinite().all().item<bool>()) << name;
  }
}

// ------------------------------------------------------------------------ generative_rks / _prf

const char* const kGenerative[] = {"generative_rks", "generative_prf"};

TEST(Generative, ShapesAndTheGeneratorsLayers) {
  for (const char* name : kGenerative) {
    auto m = make_rf(name, {{"features", std::int64_t{32}}, {"layers", std::int64_t{4}}}, {3, 8, 16});
    auto g = gen(1);
    const auto q = at::randn({2, 3, 16, 8}, g, at::kDouble), k = at::randn({2, 3, 16, 8}, g, at::kDouble);
    const auto v = at::randn({2, 3, 16, 8}, g, at::kDouble);
    m->redraw(g);
    EXPECT_EQ(m->forward(q, k, v, at::ones({2, 16}, at::kBool)).sizes(), q.sizes()) << name;
    EXPECT_EQ(named(*m, "noise").sizes(), (at::IntArrayRef{32, 8})) << name;  // noise_dim = head dim
    EXPECT_EQ(named(*m, "generator.fc0.weight").sizes(), (at::IntArrayRef{32, 8})) << name;  // hidden 4d
    EXPECT_EQ(named(*m, "generator.fc3.weight").sizes(), (at::IntArrayRef{32, 32})) << name;
    EXPECT_EQ(named(*m, "generator.bn3.running_var").sizes(), (at::IntArrayRef{32})) << name;
    EXPECT_EQ(named(*m, "generator.out.weight").sizes(), (at::IntArrayRef{8, 32})) << name;  // to ω ∈ R^d
    EXPECT_THROW(named(*m, "generator.fc4.weight"), std::runtime_error) << name;
  }
}

TEST(Generative, OutputIsDeterministicGivenTheNoise) {
  for (const char* name : kGenerative) {
    auto a = make_rf(name, {{"features", std::int64_t{16}}}, {2, 8, 16});
    auto b = make_rf(name, {{"features", std::int64_t{16}}}, {2, 8, 16});  // same weights (same global seed)
    auto g = gen(2);
    const auto q = at::randn({1, 2, 16, 8}, g, at::kDouble), k = at::randn({1, 2, 16, 8}, g, at::kDouble);
    const auto v = at::randn({1, 2, 16, 8}, g, at::kDouble);
    const auto valid = at::ones({1, 16}, at::kBool);
    const auto noise = at::randn({16, 8}, g, at::kFloat);
    assign(*a, "noise", noise);
    assign(*b, "noise", noise);
    at::NoGradGuard no_grad;
    const auto out_a = a->forward(q, k, v, valid);
    EXPECT_TRUE(at::equal(out_a, a->forward(q, k, v, valid))) << name;
    EXPECT_TRUE(at::equal(out_a, b->forward(q, k, v, valid))) << name;
    assign(*b, "noise", noise * 1.5);
    EXPECT_FALSE(at::allclose(out_a, b->forward(q, k, v, valid))) << name;
  }
}

// Batch norm follows the module's mode: batch statistics and running-statistic updates in
// training, running statistics (unchanged) in evaluation.
TEST(Generative, BatchNormFollowsTrainingAndEvaluation) {
  for (const char* name : kGenerative) {
    auto m = make_rf(name, {{"features", std::int64_t{16}}}, {2, 8, 16});
    auto g = gen(3);
    const auto q = at::randn({1, 2, 16, 8}, g, at::kDouble), k = at::randn({1, 2, 16, 8}, g, at::kDouble);
    const auto v = at::randn({1, 2, 16, 8}, g, at::kDouble);
    const auto valid = at::ones({1, 16}, at::kBool);
    m->redraw(g);
    at::NoGradGuard no_grad;
    const auto stats = named(*m, "generator.bn0.running_mean").clone();
    const auto eval_out = m->forward(q, k, v, valid);
    EXPECT_TRUE(at::equal(stats, named(*m, "generator.bn0.running_mean"))) << name;
    m->train();
    const auto train_out = m->forward(q, k, v, valid);
    EXPECT_FALSE(at::equal(stats, named(*m, "generator.bn0.running_mean"))) << name;
    EXPECT_FALSE(at::allclose(eval_out, train_out)) << name;
  }
}

TEST(Generative, GradientsReachTheGeneratorsWeights) {
  for (const char* name : kGenerative) {
    for (bool training : {true, false}) {
      auto m = make_rf(name, {{"features", std::int64_t{16}}}, {2, 8, 16});
      m->train(training);
      auto g = gen(4);
      const auto q = at::randn({2, 2, 16, 8}, g, at::kFloat), k = at::randn({2, 2, 16, 8}, g, at::kFloat);
      const auto v = at::randn({2, 2, 16, 8}, g, at::kFloat), w = at::randn({2, 2, 16, 8}, g, at::kFloat);
      m->redraw(g);
      (m->forward(q, k, v, at::ones({2, 16}, at::kBool)) * w).sum().backward();
      int checked = 0;
      for (const auto& item : m->named_parameters()) {
        ASSERT_TRUE(item.value().grad().defined()) << name << ": no gradient for " << item.key();
        EXPECT_GT(item.value().grad().abs().sum().item<double>(), 0) << name << ": zero gradient for " << item.key();
        ++checked;
      }
      EXPECT_EQ(checked, 4 * 4 + 2) << name;  // 4 × (fc weight, bias, bn weight, bias) + output layer
    }
  }
}

// features = 0 follows the authors' experiment code: M = min(max_len, pow2cast(d ln d)), where
// pow2cast rounds d ln d to a power of two, up at >= 1.5 * 2^k. The values are worked out by hand:
// 8 ln 8 = 16.6 -> 16; 16 ln 16 = 44.4 -> 32; 24 ln 24 = 76.3 (0b1001100) -> 64;
// 32 ln 32 = 110.9 (0b1101110) -> 128; 48 ln 48 = 185.8 -> 128; 64 ln 64 = 266.2 -> 256.
TEST(RandomFeatures, AutoFeatureCountIsTheAuthorsPow2castOfDLogDCappedAtTheLength) {
  const std::vector<std::pair<std::int64_t, std::int64_t>> want = {{8, 16}, {16, 32}, {24, 64}, {32, 128}, {48, 128}, {64, 256}};
  for (const auto& [d, m] : want) EXPECT_EQ(rf::kl_feature_count(d, 4096), m) << "head dim " << d;
  EXPECT_EQ(rf::kl_feature_count(64, 200), 200);
  EXPECT_EQ(rf::kl_feature_count(2, 4096), 2);
  // Each KL method's feature buffer follows the rule at default parameters and a set value wins.
  auto auto_m = make_rf("gmm_prf", {}, {2, 32, 1000});
  EXPECT_EQ(named(*auto_m, "noise").size(2), 128);
  auto short_m = make_rf("gmm_rks", {}, {2, 32, 100});
  EXPECT_EQ(named(*short_m, "noise").size(2), 100);
  auto set_m = make_rf("generative_prf", {{"features", std::int64_t{40}}}, {2, 32, 1000});
  EXPECT_EQ(named(*set_m, "noise").size(0), 40);
  auto gen_m = make_rf("generative_rks", {}, {2, 16, 1000});
  EXPECT_EQ(named(*gen_m, "noise").size(0), 32);
}

// The library's pieces the four methods above are written with.
TEST(RandomFeatures, PrfNormFactorReadsTheKernelParameter) {
  ParamValues params;
  params.set("kernel", std::string("softmax"));
  EXPECT_EQ(rf::prf_norm_factor(params), 1.0);
  params.set("kernel", std::string("gaussian"));
  EXPECT_EQ(rf::prf_norm_factor(params), 2.0);
  params.set("kernel", std::string("laplace"));
  try {
    rf::prf_norm_factor(params);
    FAIL() << "no error";
  } catch (const ParamError& e) {
    EXPECT_EQ(std::string(e.what()), "kernel: expected softmax or gaussian, got 'laplace'");
  }
}

TEST(RandomFeatures, ScaledFeatureMapsAreTheMapsOfXOverDQuarter) {
  at::manual_seed(3);
  const auto x = at::randn({2, 3, 5, 16}, at::kDouble), w = at::randn({3, 16, 8}, at::kDouble);
  const auto key_valid = at::tensor({1, 1, 1, 0, 1, 1, 1, 1, 1, 0}, at::kInt).to(at::kBool).view({2, 5});
  const auto xs = x / 2.0;  // d^¼ = 2 at d = 16
  EXPECT_TRUE(at::allclose(rf::scaled_rks_features(x, w), rf::rks_features(at::matmul(xs, w))));
  for (const double factor : {1.0, 2.0}) {
    const auto queries = rf::stable_prf_features(at::matmul(xs, w), factor * (xs * xs).sum(-1, true), at::Tensor());
    EXPECT_TRUE(at::allclose(rf::scaled_prf_features(x, w, at::Tensor(), factor), queries));
    // keys: padded rows zeroed before the offset is taken, so whatever sits there changes nothing on real ones
    const auto keys = rf::scaled_prf_features(x, w, key_valid, factor);
    const auto zeroed = rf::zero_padded_keys(xs, key_valid);
    EXPECT_TRUE(at::allclose(keys, rf::stable_prf_features(at::matmul(zeroed, w), factor * (zeroed * zeroed).sum(-1, true), key_valid)));
    auto big = x.clone();
    big.select(2, 3).select(0, 0).fill_(1e4);
    const auto real = key_valid.unsqueeze(1).unsqueeze(-1);
    EXPECT_TRUE(at::equal(at::where(real, rf::scaled_prf_features(big, w, key_valid, factor), at::zeros({}, at::kDouble)),
                          at::where(real, keys, at::zeros({}, at::kDouble))));
  }
}

// A bare subclass of each base: what the base registers and draws.
struct BareMixture : rf::MixtureAttention {
  using rf::MixtureAttention::MixtureAttention;
  at::Tensor features(const at::Tensor& x, const at::Tensor&) override { return x; }
  at::Tensor columns(const at::Tensor& omega) const { return as_columns(omega); }
};
struct BareGenerative : rf::GenerativeAttention {
  using rf::GenerativeAttention::GenerativeAttention;
  at::Tensor features(const at::Tensor& x, const at::Tensor&) override {
    seen = frequency_columns();
    return at::matmul(x, seen);
  }
  at::Tensor seen;
};

ParamValues rf_params(std::int64_t features) {
  ParamValues params;
  params.set("features", features);
  params.set("components", std::int64_t{3});
  params.set("noise_dim", std::int64_t{0});
  params.set("hidden", std::int64_t{0});
  params.set("layers", std::int64_t{2});
  params.set("redraw_every", std::int64_t{100});
  params.set("eval_draw", std::string("fixed"));
  params.set("eps", 1e-6);
  return params;
}

TEST(RandomFeatures, MixtureBaseOwnsMeansNoiseAndItsRedraws) {
  BareMixture m({2, 4, 64}, rf_params(5));
  EXPECT_EQ(named(m, "mu").sizes().vec(), (std::vector<std::int64_t>{2, 3, 4}));
  EXPECT_TRUE(named(m, "mu").requires_grad());
  EXPECT_EQ(named(m, "noise").sizes().vec(), (std::vector<std::int64_t>{2, 3, 5, 4}));
  auto g = gen(9);
  m.redraw(g);
  auto again = gen(9);
  EXPECT_TRUE(at::equal(named(m, "noise"), at::randn({2, 3, 5, 4}, again, at::kFloat)));
  // rows ω [H, C, M, d] become the columns of [H, d, C·M], component-major
  const auto omega = at::arange(2 * 3 * 5 * 4, at::kFloat).view({2, 3, 5, 4});
  const auto w = m.columns(omega);
  EXPECT_EQ(w.sizes().vec(), (std::vector<std::int64_t>{2, 4, 15}));
  EXPECT_TRUE(at::equal(w.select(0, 1).select(1, 5 + 2), omega[1][1][2]));
}

TEST(RandomFeatures, GenerativeBaseComputesTheFrequenciesOncePerCall) {
  BareGenerative m({2, 4, 64}, rf_params(1));  // at least 2 frequencies: batch norm
  EXPECT_EQ(named(m, "noise").sizes().vec(), (std::vector<std::int64_t>{2, 4}));  // noise_dim 0: head dim
  auto g = gen(4);
  m.redraw(g);
  auto again = gen(4);
  EXPECT_TRUE(at::equal(named(m, "noise"), at::randn({2, 4}, again, at::kFloat)));
  m.eval();
  const auto q = at::randn({1, 2, 3, 4}), valid = at::ones({1, 3}, at::kBool);
  m.forward(q, q, q, valid);
  EXPECT_EQ(m.seen.sizes().vec(), (std::vector<std::int64_t>{4, 2}));  // ω as columns [d, M]
  const auto children = m.named_children();  // held: find() points into it
  const auto* generator = children.find("generator");
  ASSERT_NE(generator, nullptr);
  const auto omega = (*generator)->as<rf::FrequencyGenerator>()->forward(named(m, "noise"));
  EXPECT_TRUE(at::equal(m.seen, omega.transpose(0, 1)));
}

}  // namespace
}  // namespace attnlab
