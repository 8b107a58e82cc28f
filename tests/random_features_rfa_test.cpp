// Per-method numerics of linear_elu, performer, fastfood_rks and fastfood_prf, and of rf::fwht,
// each against formulas written out here in double precision. The plugins are loaded through the
// plugin host (the .so files are what is tested); their random draws are read back from their
// registered buffers and parameters by name.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include "attnlab/attention.hpp"
#include "plugin_host/plugin_host.hpp"
#include "random_features.hpp"

namespace attnlab {
namespace {

const LoadedPlugin& plugin(const std::string& name) {
  const auto* p = testing::built_plugins().find(PluginKind::attention, name);
  if (!p) throw std::runtime_error("attention plugin '" + name + "' not found");
  return *p;
}

using Overrides = std::vector<std::pair<const char*, ParamValue>>;

std::shared_ptr<AttentionMethod> make(const std::string& name, const Overrides& overrides = {},
                                      AttentionShape shape = {2, 8, 64}) {
  ParamValues params = plugin(name).defaults();
  for (const auto& [key, value] : overrides) params.set(key, value);
  at::manual_seed(0);
  auto m = plugin(name).make_attention(shape, params);
  m->eval();
  return m;
}

void redraw(AttentionMethod& m, std::uint64_t seed) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  m.redraw(g);
}

// (The dictionaries held in locals: find() points into them, and a temporary's would be freed
// before the pointer is read: this test segfaulted where the heap happened to reuse it.)
at::Tensor tensor_named(AttentionMethod& m, const std::string& name) {
  const auto buffers = m.named_buffers(), parameters = m.named_parameters();
  if (const auto* b = buffers.find(name)) return b->detach().to(at::kDouble);
  if (const auto* p = parameters.find(name)) return p->detach().to(at::kDouble);
  throw std::runtime_error("no buffer or parameter '" + name + "'");
}

struct Batch {
  at::Tensor q, k, v, valid;
};

// B sequences of n positions, sequence b having real[b] real tokens followed by padding.
Batch make_batch(std::vector<std::int64_t> real, std::int64_t heads, std::int64_t n, std::int64_t dim,
                 std::uint64_t seed, double spread = 0.5) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto b = static_cast<std::int64_t>(real.size());
  Batch x;
  x.q = at::randn({b, heads, n, dim}, g, at::kDouble) * spread;
  x.k = at::randn({b, heads, n, dim}, g, at::kDouble) * spread;
  x.v = at::randn({b, heads, n, dim}, g, at::kDouble);
  x.valid = at::zeros({b, n}, at::kBool);
  for (std::int64_t i = 0; i < b; ++i) x.valid[i].slice(0, 0, real[i]).fill_(true);
  return x;
}

// Σ_j φ(q_i)ᵀφ(k_j) v_j / Σ_j φ(q_i)ᵀφ(k_j) over the real keys j, O(n²), for one sequence
// ([H, n, F] features, [H, n, Dv] values, `real` real tokens): the rows of the real queries.
at::Tensor quadratic_linear_attention(const at::Tensor& phi_q, const at::Tensor& phi_k, const at::Tensor& v,
                                      std::int64_t real) {
  const auto scores = at::matmul(phi_q.slice(1, 0, real), phi_k.slice(1, 0, real).transpose(-2, -1));  // [H, r, r]
  return at::matmul(scores, v.slice(1, 0, real)) / scores.sum(-1, /*keepdim=*/true);
}

// The Sylvester Hadamard matrix, H_ij = (−1)^popcount(i & j), written out entry by entry.
at::Tensor sylvester(std::int64_t n) {
  auto h = at::empty({n, n}, at::kDouble);
  auto a = h.accessor<double, 2>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) a[i][j] = (__builtin_popcountll(static_cast<unsigned long long>(i & j)) % 2) ? -1.0 : 1.0;
  return h;
}

// Mean absolute error of a kernel estimate over `seeds` draws: estimate(seed) -> [P] vs exact [P].
template <class Estimate>
double mean_abs_error(const at::Tensor& exact, int seeds, Estimate estimate) {
  double total = 0;
  for (int s = 0; s < seeds; ++s) total += (estimate(1000 + s) - exact).abs().mean().template item<double>();
  return total / seeds;
}

// ----------------------------------------------------------------------------------------------
// rf::fwht

TEST(RandomFeatures, FwhtIsMultiplicationByTheSylvesterHadamardMatrix) {
  for (std::int64_t n : {1, 2, 4, 8, 64, 512}) {  // up to 256 one product with H, above butterflies
    const auto h = sylvester(n);
    const auto x = at::randn({3, 5, n}, at::kDouble);
    EXPECT_TRUE(at::allclose(rf::fwht(x), at::matmul(x, h.t()), 1e-12, 1e-12)) << "n = " << n;
    // its gradient: d/dx Σ w ⊙ Hx = Hᵀ w
    const auto xg = x.clone().requires_grad_(true);
    const auto w = at::randn({3, 5, n}, at::kDouble);
    (rf::fwht(xg) * w).sum().backward();
    EXPECT_TRUE(at::allclose(xg.grad(), at::matmul(w, h), 1e-12, 1e-12)) << "gradient, n = " << n;
  }
  EXPECT_THROW(rf::fwht(at::zeros({2, 6}, at::kDouble)), std::invalid_argument);
}

// ----------------------------------------------------------------------------------------------
// rf::linear_attention and rf::stable_prf_features: one autograd node each, their gradients as
// autograd's of the composed formulas

// Outputs and gradients (of u / x_sq or φ_q / φ_k / v) of `fused` and `composed` on the same inputs.
template <class Fused, class Composed>
void expect_same_gradients(const std::vector<at::Tensor>& inputs, const at::Tensor& weights, Fused fused, Composed composed,
                           const std::string& what) {
  std::vector<at::Tensor> a, b;
  for (const auto& t : inputs) {
    a.push_back(t.clone().requires_grad_(true));
    b.push_back(t.clone().requires_grad_(true));
  }
  const auto out_a = fused(a), out_b = composed(b);
  EXPECT_TRUE(at::allclose(out_a, out_b, 1e-12, 1e-14)) << what << ": outputs " << (out_a - out_b).abs().max().template item<double>();
  (out_a * weights).sum().backward();
  (out_b * weights).sum().backward();
  for (std::size_t i = 0; i < inputs.size(); ++i)
    EXPECT_TRUE(at::allclose(a[i].grad(), b[i].grad(), 1e-10, 1e-12))
        << what << ": gradient " << i << " off by " << (a[i].grad() - b[i].grad()).abs().max().template item<double>();
}

TEST(RandomFeatures, FusedLinearAttentionIsAutogradsOfItsFormula) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(41);
  const auto phi_q = at::rand({3, 2, 7, 5}, g, at::kDouble), phi_k = at::rand({3, 2, 7, 5}, g, at::kDouble);
  const auto v = at::randn({3, 2, 7, 4}, g, at::kDouble), weights = at::randn({3, 2, 7, 4}, g, at::kDouble);
  auto valid = at::ones({3, 7}, at::kBool);
  valid[1].slice(0, 4, 7).fill_(false);
  valid[2].fill_(false);  // no real key at all
  expect_same_gradients(
      {phi_q, phi_k, v}, weights, [&](const auto& x) { return rf::linear_attention(x[0], x[1], x[2], valid, 1e-6); },
      [&](const auto& x) {
        const auto mask = valid.to(at::kDouble).unsqueeze(1).unsqueeze(-1);
        const auto k = x[1] * mask;
        return at::matmul(x[0], at::matmul(k.transpose(-2, -1), x[2])) /
               ((x[0] * k.sum(-2, true)).sum(-1, true) + 1e-6);
      },
      "linear attention");
}

TEST(RandomFeatures, FusedPrfFeaturesAreAutogradsOfTheComposedFormula) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(42);
  const auto u = at::randn({3, 2, 6, 8}, g, at::kDouble) * 3, x_sq = at::rand({3, 2, 6, 1}, g, at::kDouble) * 4;
  const auto weights = at::randn({3, 2, 6, 8}, g, at::kDouble);
  auto valid = at::ones({3, 6}, at::kBool);
  valid[1].slice(0, 2, 6).fill_(false);
  valid[2].fill_(false);  // no real key: offset 0
  const auto real = valid.unsqueeze(1).unsqueeze(-1);
  auto key_weights = weights * real.to(at::kDouble);  // the attention never reads a padded key's features
  expect_same_gradients(
      {u, x_sq}, weights, [&](const auto& x) { return rf::stable_prf_features(x[0], x[1], at::Tensor()); },
      [&](const auto& x) { return rf::prf_features(x[0], x[1], rf::prf_offset(x[0], x[1], at::Tensor())); }, "queries");
  expect_same_gradients(
      {u, x_sq}, key_weights, [&](const auto& x) { return rf::stable_prf_features(x[0], x[1], valid); },
      [&](const auto& x) {
        const auto offset = rf::prf_offset(x[0], x[1], valid);
        return rf::prf_features(at::where(real, x[0], offset + 0.5 * x[1]), x[1], offset);
      },
      "keys");
}

// ----------------------------------------------------------------------------------------------
// linear_elu

TEST(LinearElu, MatchesTheQuadraticFormulaOverRealKeys) {
  const std::int64_t n = 12;
  std::vector<std::int64_t> real = {12, 7};
  auto x = make_batch(real, 2, n, 8, 1, 1.0);
  auto m = make("linear_elu", {{"eps", 0.0}});
  EXPECT_FALSE(m->stochastic());
  c10::InferenceMode guard;
  const auto out = m->forward(x.q, x.k, x.v, x.valid);
  const auto phi = [](const at::Tensor& t) { return at::elu(t) + 1; };
  for (std::int64_t b = 0; b < 2; ++b) {
    const auto want = quadratic_linear_attention(phi(x.q[b]), phi(x.k[b]), x.v[b], real[b]);
    EXPECT_TRUE(at::allclose(out[b].slice(1, 0, real[b]), want, 1e-12, 1e-12)) << "sequence " << b;
  }
  // the default eps (1e-6) changes the result only by that much
  const auto with_eps = make("linear_elu")->forward(x.q, x.k, x.v, x.valid);
  EXPECT_LT((with_eps[0] - out[0]).abs().max().item<double>(), 1e-5);
}

// form = "nystromformer_lra": the Nystromformer authors' "linear", φ(Q) (φ(K)ᵀ V) / √n over the real
// keys, n the padded length, written out here per sequence.
TEST(LinearElu, TheNystromformerAuthorsFormIsUnnormalisedOverThePaddedLength) {
  const std::int64_t n = 12;
  std::vector<std::int64_t> real = {12, 7};
  auto x = make_batch(real, 2, n, 8, 4, 1.0);
  auto m = make("linear_elu", {{"form", std::string("nystromformer_lra")}});
  c10::InferenceMode guard;
  const auto out = m->forward(x.q, x.k, x.v, x.valid);
  const auto phi = [](const at::Tensor& t) { return at::elu(t) + 1; };
  for (std::int64_t b = 0; b < 2; ++b) {
    const auto k = phi(x.k[b].slice(1, 0, real[b])), v = x.v[b].slice(1, 0, real[b]);
    const auto want = at::matmul(at::matmul(phi(x.q[b]), k.transpose(-2, -1)), v) / std::sqrt(12.0);
    EXPECT_TRUE(at::allclose(out[b], want, 1e-12, 1e-12)) << "sequence " << b;
  }
}

// ----------------------------------------------------------------------------------------------
// performer

TEST(Performer, OmegaRowsAreOrthogonalWithinEachBlockWithChiNorms) {
  const std::int64_t d = 8, features = 20;  // blocks of rows [0, 8), [8, 16), [16, 20)
  auto m = make("performer", {{"features", features}}, {2, d, 16});
  redraw(*m, 3);
  const auto omega = tensor_named(*m, "omega");
  ASSERT_EQ(omega.sizes(), (std::vector<std::int64_t>{features, d}));
  const auto directions = omega / omega.norm(2, {1}, true);
  for (std::int64_t start = 0; start < features; start += d) {
    const auto block = directions.slice(0, start, std::min(start + d, features));
    const auto gram = at::matmul(block, block.t());
    EXPECT_TRUE(at::allclose(gram, at::eye(block.size(0), at::kDouble), 0, 1e-6)) << "block at " << start;
  }
  // rows of different blocks are not orthogonal (independent blocks)
  EXPECT_GT(at::matmul(directions.slice(0, 0, d), directions.slice(0, d, 2 * d).t()).abs().max().item<double>(), 0.1);
  // norms: chi(d), mean ≈ √(d − ½) ≈ 2.74 for d = 8; over many rows
  auto big = make("performer", {{"features", std::int64_t{4096}}}, {2, d, 16});
  redraw(*big, 4);
  const auto norms = tensor_named(*big, "omega").norm(2, {1});
  EXPECT_NEAR(norms.pow(2).mean().item<double>(), double(d), 0.3);  // E‖ω‖² = d
  // a new seed draws a new Ω
  const auto before = tensor_named(*m, "omega");
  redraw(*m, 4);
  EXPECT_FALSE(at::allclose(before, tensor_named(*m, "omega")));
}

// φ(x) = exp(Ωx − ‖x‖²/2) / √M with the plugin's Ω (no offset): the estimate of exp(xᵀy).
at::Tensor prf(const at::Tensor& x, const at::Tensor& omega) {
  const auto u = at::matmul(x, omega.t());
  return at::exp(u - 0.5 * (x * x).sum(-1, true)) / std::sqrt(static_cast<double>(omega.size(0)));
}

TEST(Performer, KernelEstimateConvergesToExpDotProductAsOneOverRootM) {
  const std::int64_t d = 8, pairs = 32;
  auto g = at::make_generator<at::CPUGeneratorImpl>(5);
  const auto x = at::randn({pairs, d}, g, at::kDouble) * 0.4, y = at::randn({pairs, d}, g, at::kDouble) * 0.4;
  const auto exact = (x * y).sum(-1).exp();
  std::vector<double> errors;
  for (std::int64_t features : {16, 256}) {
    auto m = make("performer", {{"features", features}}, {2, d, 16});
    errors.push_back(mean_abs_error(exact, 100, [&](std::uint64_t seed) {
      redraw(*m, seed);
      const auto omega = tensor_named(*m, "omega");
      return (prf(x, omega) * prf(y, omega)).sum(-1);
    }));
  }
  EXPECT_LT(errors[1], 0.3);  // per-feature std ≈ 3.5 here: ≈ 0.22 at M = 256
  const double ratio = errors[0] / errors[1];  // 16× the features: ≈ 4× smaller error
  EXPECT_GT(ratio, 2.5) << errors[0] << " vs " << errors[1];
  EXPECT_LT(ratio, 6.5) << errors[0] << " vs " << errors[1];
}

TEST(Performer, ForwardIsLinearAttentionWithItsFeaturesOfQOverDQuarter) {
  const std::int64_t n = 10, d = 8;
  std::vector<std::int64_t> real = {10, 6};
  auto x = make_batch(real, 2, n, d, 6, 1.0);
  auto m = make("performer", {{"features", std::int64_t{24}}, {"eps", 0.0}}, {2, d, n});
  redraw(*m, 9);
  c10::InferenceMode guard;
  const auto out = m->forward(x.q, x.k, x.v, x.valid);
  const auto omega = tensor_named(*m, "omega");
  const double scale = std::pow(double(d), -0.25);
  for (std::int64_t b = 0; b < 2; ++b) {
    // the stabilising offsets cancel in the ratio (eps = 0)
    const auto want = quadratic_linear_attention(prf(x.q[b] * scale, omega), prf(x.k[b] * scale, omega), x.v[b], real[b]);
    EXPECT_TRUE(at::allclose(out[b].slice(1, 0, real[b]), want, 1e-9, 1e-11)) << "sequence " << b;
  }
}

// form = "performer_pytorch": Skyformer's and Nystromformer's attention_performer.py, written out
// as that code runs: FastAttention(Q / d^¼, K / d^¼ · mask, V · mask) with performer_pytorch's
// softmax_kernel (which scales by d^-¼ again, adds 1e-4, takes one key maximum for the batch) and
// linear_attention (padded keys in the normaliser, no guard), on the plugin's own Ω.
TEST(Performer, PerformerPytorchFormIsTheLraCodesFastAttention) {
  const std::int64_t n = 10, d = 8, features = 24;
  auto x = make_batch({10, 6}, 2, n, d, 6, 1.0);
  auto m = make("performer", {{"features", features}, {"form", std::string("performer_pytorch")}}, {2, d, n});
  redraw(*m, 9);
  c10::InferenceMode guard;
  const auto out = m->forward(x.q, x.k, x.v, x.valid);
  const auto omega = tensor_named(*m, "omega");
  const auto mask = x.valid.to(at::kDouble).view({2, 1, n, 1});
  const double quarter = std::pow(double(d), -0.25);
  auto softmax_kernel = [&](const at::Tensor& data, bool is_query) {
    const auto dash = at::einsum("bhid,jd->bhij", {data * quarter, omega});
    const auto diag = (data * data).sum(-1, /*keepdim=*/true) / 2.0 * (quarter * quarter);
    const auto stabiliser = is_query ? std::get<0>(dash.max(-1, /*keepdim=*/true)) : dash.max();
    return (at::exp(dash - diag - stabiliser) + 1e-4) * std::pow(double(features), -0.5);
  };
  const auto q = softmax_kernel(x.q * quarter, true), k = softmax_kernel(x.k * quarter * mask, false);
  const auto d_inv = 1.0 / at::einsum("bhnd,bhd->bhn", {q, k.sum(-2)});
  const auto context = at::einsum("bhnd,bhne->bhde", {k, x.v * mask});
  const auto want = at::einsum("bhde,bhnd,bhn->bhne", {context, q, d_inv});
  EXPECT_TRUE(at::allclose(out, want, 1e-10, 1e-12)) << (out - want).abs().max().item<double>();
  // unlike favor, a padded sequence gives not what it gives alone: its padding is counted, and the
  // key maximum is the batch's
  const auto alone = m->forward(x.q.slice(0, 1, 2).slice(2, 0, 6), x.k.slice(0, 1, 2).slice(2, 0, 6),
                                x.v.slice(0, 1, 2).slice(2, 0, 6), x.valid.slice(0, 1, 2).slice(1, 0, 6));
  EXPECT_FALSE(at::allclose(alone[0], out[1].slice(1, 0, 6), 1e-4, 1e-6));
}

TEST(Performer, ApproachesSoftmaxAttentionAsFeaturesGrow) {
  const std::int64_t n = 16, d = 8;
  auto x = make_batch({16, 11}, 2, n, d, 7, 0.6);
  auto softmax = make("softmax", {}, {2, d, n});
  c10::InferenceMode guard;
  const auto exact = softmax->forward(x.q, x.k, x.v, x.valid);
  std::vector<double> errors;
  for (std::int64_t features : {32, 2048}) {
    auto m = make("performer", {{"features", features}}, {2, d, n});
    double total = 0;
    for (int s = 0; s < 10; ++s) {
      redraw(*m, 50 + s);
      total += (m->forward(x.q, x.k, x.v, x.valid)[0] - exact[0]).abs().mean().item<double>();
    }
    errors.push_back(total / 10);
  }
  EXPECT_LT(errors[1], errors[0] / 4) << errors[0] << " vs " << errors[1];  // 64×: ≈ 8× smaller
  EXPECT_LT(errors[1], 0.02);
}

// ----------------------------------------------------------------------------------------------
// fastfood_rks, fastfood_prf

// The plugin's Fastfood projection written densely from its draws: per block
// V_b = diag(S / (‖G‖ √D)) · H · diag(G) · P · H · diag(B), P_{i, π(i)} = 1; blocks stacked, the
// first M rows and the first d columns kept (inputs are zero-padded to D). Returns [M, d].
at::Tensor dense_fastfood(AttentionMethod& m, std::int64_t d, std::int64_t features) {
  const auto b = tensor_named(m, "B"), g = tensor_named(m, "G"), s = tensor_named(m, "S");
  const auto perm = m.named_buffers().find("perm")->to(at::kLong);
  const auto blocks = b.size(0), padded = b.size(1);
  const auto h = sylvester(padded);
  std::vector<at::Tensor> rows;
  for (std::int64_t i = 0; i < blocks; ++i) {
    auto p = at::zeros({padded, padded}, at::kDouble);
    for (std::int64_t r = 0; r < padded; ++r) p[r][perm[i][r].item<std::int64_t>()] = 1.0;
    const auto scale = s[i] / (g[i].norm() * std::sqrt(double(padded)));
    rows.push_back(at::diag(scale).matmul(h).matmul(at::diag(g[i])).matmul(p).matmul(h).matmul(at::diag(b[i])));
  }
  return at::cat(rows, 0).slice(0, 0, features).slice(1, 0, d);
}

at::Tensor rks(const at::Tensor& u) { return at::cat({u.cos(), u.sin()}, -1) / std::sqrt(double(u.size(-1))); }
at::Tensor prf_of_u(const at::Tensor& u, const at::Tensor& x) {
  return at::exp(u - 0.5 * (x * x).sum(-1, true)) / std::sqrt(double(u.size(-1)));
}

TEST(Fastfood, ForwardFollowsTheDenseFormulaWithPaddedDimensionAndSeveralBlocks) {
  const std::int64_t n = 9, d = 6, features = 20;  // D = 8, three blocks, the last one cut
  std::vector<std::int64_t> real = {9, 5};
  auto x = make_batch(real, 2, n, d, 8, 1.0);
  const double scale = std::pow(double(d), -0.25);
  for (const char* name : {"fastfood_rks", "fastfood_prf"}) {
    for (const char* learn : {"sgb", "s", "none"}) {
      auto m = make(name, {{"features", features}, {"learn", std::string(learn)}, {"eps", 0.0}}, {2, d, n});
      redraw(*m, 21);
      const auto v_dense = dense_fastfood(*m, d, features);  // [M, d]
      // row i of the padded V has norm S_i
      const auto s = tensor_named(*m, "S").flatten().slice(0, 0, features);
      const auto full = dense_fastfood(*m, 8, features);
      EXPECT_TRUE(at::allclose(full.norm(2, {1}), s, 1e-10, 1e-12)) << name << " " << learn;
      at::Tensor out;
      {
        c10::InferenceMode guard;
        out = m->forward(x.q, x.k, x.v, x.valid);
      }
      for (std::int64_t b = 0; b < 2; ++b) {
        const auto xq = x.q[b] * scale, xk = x.k[b] * scale;
        const auto uq = at::matmul(xq, v_dense.t()), uk = at::matmul(xk, v_dense.t());
        const bool positive = std::string(name) == "fastfood_prf";
        const auto phi_q = positive ? prf_of_u(uq, xq) : rks(uq), phi_k = positive ? prf_of_u(uk, xk) : rks(uk);
        const auto want = quadratic_linear_attention(phi_q, phi_k, x.v[b], real[b]);
        EXPECT_TRUE(at::allclose(out[b].slice(1, 0, real[b]), want, 1e-8, 1e-10))
            << name << " learn=" << learn << " sequence " << b << ": max diff "
            << (out[b].slice(1, 0, real[b]) - want).abs().max().item<double>();
      }
    }
  }
}

TEST(Fastfood, RedrawRedrawsPermutationAndFixedDiagonalsNeverLearnedOnes) {
  struct Case {
    const char* learn;
    std::vector<std::string> learned;
  };
  for (const auto& c : {Case{"sgb", {"B", "G", "S"}}, Case{"s", {"S"}}, Case{"none", {}}}) {
    auto m = make("fastfood_prf", {{"features", std::int64_t{16}}, {"learn", std::string(c.learn)}}, {2, 8, 16});
    std::vector<std::string> params;
    for (const auto& p : m->named_parameters()) params.push_back(p.key());
    std::sort(params.begin(), params.end());
    EXPECT_EQ(params, c.learned) << c.learn;
    redraw(*m, 1);
    std::map<std::string, at::Tensor> first;
    for (const char* name : {"B", "G", "S", "perm"}) first[name] = tensor_named(*m, name).clone();
    redraw(*m, 2);
    for (const char* name : {"B", "G", "S", "perm"}) {
      const bool learned = std::find(c.learned.begin(), c.learned.end(), name) != c.learned.end();
      EXPECT_EQ(at::equal(first[name], tensor_named(*m, name)), learned) << c.learn << ": " << name;
    }
    // B is ±1 and the permutation a permutation of each block
    if (std::string(c.learn) != "sgb") {
      EXPECT_TRUE(tensor_named(*m, "B").abs().eq(1).all().item<bool>());
    }
    const auto sorted = std::get<0>(tensor_named(*m, "perm").sort(1));
    EXPECT_TRUE(at::equal(sorted, at::arange(8, at::kDouble).expand({2, 8})));
  }
}

// Mean absolute kernel error of fixed Fastfood (learn = none) over seeds, M = blocks · 8.
template <class Feature>
double fastfood_error(const char* name, std::int64_t features, const at::Tensor& x, const at::Tensor& y,
                      const at::Tensor& exact, Feature feature) {
  auto m = make(name, {{"features", features}, {"learn", std::string("none")}}, {2, 8, 16});
  return mean_abs_error(exact, 60, [&](std::uint64_t seed) {
    redraw(*m, seed);
    const auto v = dense_fastfood(*m, 8, features);
    return (feature(at::matmul(x, v.t()), x) * feature(at::matmul(y, v.t()), y)).sum(-1);
  });
}

TEST(FastfoodRks, KernelEstimateConvergesToTheGaussianKernelAsBlocksGrow) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(11);
  const auto x = at::randn({32, 8}, g, at::kDouble) * 0.4, y = at::randn({32, 8}, g, at::kDouble) * 0.4;
  const auto exact = at::exp(-0.5 * (x - y).pow(2).sum(-1));
  const auto feature = [](const at::Tensor& u, const at::Tensor&) { return rks(u); };
  const double few = fastfood_error("fastfood_rks", 16, x, y, exact, feature);    // 2 blocks
  const double many = fastfood_error("fastfood_rks", 256, x, y, exact, feature);  // 32 blocks
  EXPECT_LT(many, 0.05);  // per-feature std ≤ 1/√2: ≲ 0.044 at M = 256
  EXPECT_GT(few / many, 2.5) << few << " vs " << many;
  EXPECT_LT(few / many, 6.5) << few << " vs " << many;
}

TEST(FastfoodPrf, KernelEstimateConvergesToExpDotProductAsBlocksGrow) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(12);
  const auto x = at::randn({32, 8}, g, at::kDouble) * 0.4, y = at::randn({32, 8}, g, at::kDouble) * 0.4;
  const auto exact = (x * y).sum(-1).exp();
  const double few = fastfood_error("fastfood_prf", 16, x, y, exact, prf_of_u);
  const double many = fastfood_error("fastfood_prf", 256, x, y, exact, prf_of_u);
  EXPECT_LT(many, 0.3);  // per-feature std ≈ 3.5 here: ≈ 0.22 at M = 256
  EXPECT_GT(few / many, 2.5) << few << " vs " << many;
  EXPECT_LT(few / many, 6.5) << few << " vs " << many;
}

TEST(FastfoodPrf, TrainsItsDiagonals) {
  // the authors' FastFoodPositiveFeatures cannot even be constructed; this one takes gradient steps
  const std::int64_t n = 12, d = 8;
  auto x = make_batch({12, 8}, 2, n, d, 13, 1.0);
  auto m = make("fastfood_prf", {{"features", std::int64_t{32}}}, {2, d, n});
  m->train();
  redraw(*m, 3);
  const auto target = at::randn({2, 2, n, d}, at::kDouble);
  const auto mask = x.valid.unsqueeze(1).unsqueeze(-1).to(at::kDouble);
  auto loss_of = [&] { return ((m->forward(x.q, x.k, x.v, x.valid) - target).pow(2) * mask).sum(); };
  const auto before = loss_of();
  before.backward();
  for (auto& p : m->parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_TRUE(p.grad().isfinite().all().item<bool>());
    EXPECT_GT(p.grad().abs().sum().item<double>(), 0);
  }
  {
    at::NoGradGuard no_grad;
    for (auto& p : m->parameters()) p.sub_(p.grad() * 1e-3);
  }
  EXPECT_LT(loss_of().item<double>(), before.item<double>());
}

}  // namespace
}  // namespace attnlab
