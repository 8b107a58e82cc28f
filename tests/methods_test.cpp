// Per-method numerics: kernelized attention, the iterative pseudo-inverse (attnlab/linalg),
// Skyformer and Nyströmformer, each against formulas written out here in double precision. The
// plugins are loaded through the plugin host, so the .so files are what is tested.
#include <gtest/gtest.h>

#include "method_support.hpp"

#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/autograd.h>

#include "attnlab/linalg.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {
namespace {

using testing::alone;
using testing::Batch;
using testing::fill_padding;
using testing::make_batch;
using testing::max_diff;

const LoadedPlugin& plugin(const std::string& name) { return testing::attention_plugin(name); }

std::shared_ptr<AttentionMethod> make(const std::string& name, const testing::Overrides& overrides = {},
                                      AttentionShape shape = {2, 8, 64}) {
  return testing::make_method(name, overrides, shape);
}

at::Generator generator(std::uint64_t seed) { return testing::seeded_generator(seed); }

at::Tensor run(AttentionMethod& m, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
               const at::Tensor& valid, std::uint64_t seed = 7) {
  return testing::seeded_forward(m, q, k, v, valid, seed);
}

// exp(−‖x − y‖² / 2) for the rows x of a [n, p] and y of b [m, p], as a formula on [n, m].
at::Tensor gaussian(const at::Tensor& a, const at::Tensor& b) {
  return (-(a.unsqueeze(1) - b.unsqueeze(0)).square().sum(-1) / 2).exp();
}

// --- the plugin host sees three new methods ----------------------------------------------------

TEST(Methods, PluginsLoadWithTheirSchemas) {
  const auto& kernelized = plugin("kernelized");
  EXPECT_EQ(kernelized.info->param_count, 1u);  // the authors' attention dropout, off by default
  EXPECT_DOUBLE_EQ(kernelized.defaults().real("dropout"), 0.0);
  const auto sky = plugin("skyformer").defaults();
  EXPECT_EQ(sky.integer("landmarks"), 128);
  EXPECT_DOUBLE_EQ(sky.real("gamma"), 0.1);
  EXPECT_EQ(sky.integer("iterations"), 6);
  EXPECT_EQ(sky.string("sampling"), "qk_halves");
  const auto nys = plugin("nystromformer").defaults();
  EXPECT_EQ(nys.integer("landmarks"), 64);
  EXPECT_EQ(nys.integer("conv_kernel"), 33);
  EXPECT_EQ(nys.string("init"), "per_head");
  EXPECT_TRUE(make("skyformer")->stochastic());
  EXPECT_FALSE(make("skyformer", {{"sampling", std::string("all")}})->stochastic());
  EXPECT_FALSE(make("nystromformer")->stochastic());
  EXPECT_FALSE(make("kernelized")->stochastic());
  EXPECT_THROW(make("nystromformer", {{"conv_kernel", std::int64_t{4}}}), ParamError);
  // the convolution is the module's only trained parameter: one kernel per head
  auto nystrom = make("nystromformer", {}, {3, 8, 64});
  ASSERT_EQ(nystrom->parameters().size(), 1u);
  EXPECT_EQ(nystrom->parameters()[0].sizes(), at::IntArrayRef({3, 1, 33, 1}));
  EXPECT_TRUE(make("nystromformer", {{"conv_kernel", std::int64_t{0}}})->parameters().empty());
}

// --- kernelized attention --------------------------------------------------------------------

TEST(Kernelized, MatchesTheFormulaElementByElement) {
  const std::int64_t heads = 2, n = 7, dim = 8, real = 5;
  auto x = make_batch({n, real}, heads, n, dim, 1);
  auto out = make("kernelized")->forward(x.q, x.k, x.v, x.valid);
  ASSERT_EQ(out.sizes(), x.q.sizes());
  auto q = x.q.accessor<double, 4>(), k = x.k.accessor<double, 4>(), v = x.v.accessor<double, 4>();
  auto o = out.accessor<double, 4>();
  const double root_p = std::sqrt(static_cast<double>(dim));
  for (std::int64_t b = 0; b < 2; ++b) {
    const std::int64_t len = b == 0 ? n : real;
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < len; ++i)
        for (std::int64_t d = 0; d < dim; ++d) {
          double expected = 0;
          for (std::int64_t j = 0; j < len; ++j) {  // padded keys contribute nothing
            double distance = 0;  // ‖q/p^¼ − k/p^¼‖² = ‖q − k‖² / √p
            for (std::int64_t e = 0; e < dim; ++e) distance += (q[b][h][i][e] - k[b][h][j][e]) * (q[b][h][i][e] - k[b][h][j][e]);
            expected += std::exp(-distance / root_p / 2) * v[b][h][j][d];
          }
          EXPECT_NEAR(o[b][h][i][d], expected, 1e-12) << b << " " << h << " " << i << " " << d;
        }
  }
}

TEST(Kernelized, HugePaddingChangesNothing) {
  auto x = make_batch({9, 4}, 2, 9, 8, 2);
  auto m = make("kernelized");
  const auto base = m->forward(x.q, x.k, x.v, x.valid);
  for (double value : {1e6, std::numeric_limits<double>::infinity(), std::nan("")}) {
    auto y = fill_padding(x, value);
    auto out = m->forward(y.q, y.k, y.v, y.valid);
    EXPECT_TRUE(at::equal(out[0], base[0])) << value;
    EXPECT_TRUE(at::equal(out[1].slice(1, 0, 4), base[1].slice(1, 0, 4))) << value;
  }
}

// With dropout while training: out = dropout(C) V, the mask the one at::dropout draws from the
// default generator; the hand-written backward (C replaced by the dropped D) equals autograd's
// through the formula with the same mask. In evaluation no dropout.
TEST(Kernelized, DropoutDropsKernelEntriesAndTheBackwardFollows) {
  const std::int64_t heads = 2, n = 7, dim = 8;
  const double p = 0.3;
  auto x = make_batch({n, 5}, heads, n, dim, 4);
  auto m = make("kernelized", {{"dropout", p}});
  m->train();
  for (auto* t : {&x.q, &x.k, &x.v}) t->requires_grad_(true);
  at::manual_seed(11);
  const auto out = m->forward(x.q, x.k, x.v, x.valid);
  const auto g = at::randn_like(out);
  const auto grads = torch::autograd::grad({out}, {x.q, x.k, x.v}, {g});

  // the formula: C_ij = exp(−‖q_i − k_j‖² / (2√p)) over real keys, then the same draw of at::dropout
  const double root_p = std::sqrt(static_cast<double>(dim));
  const auto kv = x.valid.unsqueeze(1).unsqueeze(-1);  // [B, 1, N, 1]
  const auto q = x.q.masked_fill(kv.logical_not(), 0), k = x.k.masked_fill(kv.logical_not(), 0), v = x.v.masked_fill(kv.logical_not(), 0);
  auto c = (-(q.unsqueeze(3) - k.unsqueeze(2)).square().sum(-1) / (2 * root_p)).exp();
  c = c.masked_fill(x.valid.unsqueeze(1).unsqueeze(2).logical_not(), 0);
  at::manual_seed(11);
  const auto expected = at::matmul(at::dropout(c, p, true), v);
  EXPECT_TRUE(at::allclose(out, expected, 1e-10, 1e-12)) << (out - expected).abs().max().item<double>();
  EXPECT_FALSE(at::allclose(out, at::matmul(c, v), 1e-3, 1e-3));  // entries were dropped
  const auto expected_grads = torch::autograd::grad({expected}, {x.q, x.k, x.v}, {g});
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(at::allclose(grads[i], expected_grads[i], 1e-9, 1e-11)) << "gradient " << i;

  m->eval();
  EXPECT_TRUE(at::allclose(m->forward(x.q, x.k, x.v, x.valid), at::matmul(c, v), 1e-10, 1e-12));
}

// --- the iterative pseudo-inverse -----------------------------------------------------------

// A batch of symmetric positive definite [m, m] matrices with eigenvalues between 1 and `cond`.
at::Tensor spd(std::int64_t batch, std::int64_t m, double cond, std::uint64_t seed) {
  auto g = generator(seed);
  auto basis = std::get<0>(at::linalg_qr(at::randn({batch, m, m}, g, at::kDouble)));
  auto eigenvalues = at::logspace(0, std::log10(cond), m, 10.0, at::kDouble);
  return at::matmul(basis * eigenvalues, basis.transpose(-2, -1));
}

TEST(Pinv, IterationConvergesToThePseudoInverse) {
  // The iteration converges at third order (I − A Z_{j+1} = (I − A Z_j)³ (3I + (I − A Z_j)) / 4), so
  // a small condition number is what 8 steps can reach.
  const auto a = spd(3, 16, 8, 3);
  const auto exact = at::pinverse(a);
  double previous = std::numeric_limits<double>::infinity();
  for (int iterations = 1; iterations <= 8; ++iterations) {
    const double error = max_diff(linalg::iterative_pinv(a, iterations), exact);
    EXPECT_LT(error, previous) << "the error grew at iteration " << iterations;
    previous = error;
  }
  EXPECT_LT(previous, 1e-6);
  // the exact mode is at::linalg_pinv, symmetric or not
  EXPECT_LT(max_diff(linalg::exact_pinv(a), exact), 1e-10);
  EXPECT_LT(max_diff(linalg::exact_pinv(a, /*hermitian=*/true), exact), 1e-10);
  linalg::PinvOptions options;
  options.method = linalg::PinvMethod::exact;
  EXPECT_LT(max_diff(linalg::pinv(a, options), exact), 1e-10);
}

TEST(Pinv, IterationReachesThePseudoInverseOfASingularMatrix) {
  // rank 3 of 6, not symmetric, singular values 1, 2, 3: the iteration converges to A⁺. (Past
  // convergence, rounding outside A's range grows by 13/4 a step: many more iterations than
  // needed hurt a singular matrix; Skyformer's ridge γ keeps its block non-singular.)
  auto g = generator(4);
  const auto u = std::get<0>(at::linalg_qr(at::randn({2, 6, 6}, g, at::kDouble)));
  const auto w = std::get<0>(at::linalg_qr(at::randn({2, 6, 6}, g, at::kDouble)));
  const auto a = at::matmul(u * at::tensor({1.0, 2.0, 3.0, 0.0, 0.0, 0.0}, at::kDouble), w.transpose(-2, -1));
  const auto z = linalg::iterative_pinv(a, 8);
  EXPECT_LT(max_diff(z, at::pinverse(a)), 1e-10);
  EXPECT_LT(max_diff(at::matmul(at::matmul(a, z), a), a), 1e-10);  // A Z A = A
  EXPECT_LT(max_diff(at::matmul(at::matmul(z, a), z), z), 1e-10);  // Z A Z = Z
}

TEST(Pinv, InitialValueFollowsTheEquation) {
  // zero iterations return Z_0 = Aᵀ / (‖A‖₁ ‖A‖∞), per matrix or with the largest norms of the batch
  auto g = generator(5);
  auto a = at::randn({2, 3, 5, 5}, g, at::kDouble);
  a[1] *= 10;
  const auto norm_1 = a.abs().sum(-2).amax(-1), norm_inf = a.abs().sum(-1).amax(-1);  // [2, 3]
  const auto per_matrix = a.transpose(-2, -1) / (norm_1 * norm_inf).unsqueeze(-1).unsqueeze(-1);
  const auto global = a.transpose(-2, -1) / (norm_1.max() * norm_inf.max());
  EXPECT_LT(max_diff(linalg::iterative_pinv(a, 0, linalg::NormScope::per_matrix), per_matrix), 1e-15);
  EXPECT_LT(max_diff(linalg::iterative_pinv(a, 0, linalg::NormScope::global), global), 1e-15);
  // the Skyformer authors' "original": the largest column sum of the whole batch, no ‖A‖∞
  const auto column_sum = a.transpose(-2, -1) / a.abs().sum(-2).max();
  EXPECT_LT(max_diff(linalg::iterative_pinv(a, 0, linalg::NormScope::global_column_sum), column_sum), 1e-15);
}

// The iteration as autograd differentiates it, op by op: the reference of the written-out backward.
at::Tensor autograd_pinv(const at::Tensor& a, int iterations, linalg::NormScope scope) {
  const auto m = a.size(-1);
  const auto abs = a.abs();
  const auto norm_1 = abs.sum(-2).amax(-1), norm_inf = abs.sum(-1).amax(-1);
  const auto scale = scope == linalg::NormScope::global              ? norm_1.amax() * norm_inf.amax()
                     : scope == linalg::NormScope::global_column_sum ? norm_1.amax()
                                                                     : (norm_1 * norm_inf).unsqueeze(-1).unsqueeze(-1);
  auto z = a.transpose(-2, -1) / scale;
  const auto eye = at::eye(m, a.options());
  for (int j = 0; j < iterations; ++j) {
    const auto p = at::matmul(a, z);
    z = at::matmul(z, 13.0 / 4 * eye - 0.25 * at::matmul(p, 15 * eye - at::matmul(p, 7 * eye - p)));
  }
  return z;
}

// dL/dA through the iteration and Z_0's norms, as autograd gives it: general and symmetric
// matrices, either scope, and rows repeated (ties in ‖A‖₁'s and ‖A‖∞'s maxima, as a landmark
// drawn twice makes) and a batch whose largest norms tie.
TEST(Pinv, WrittenOutBackwardIsAutogradsThroughTheIteration) {
  auto g = generator(21);
  const auto general = at::randn({2, 3, 6, 6}, g, at::kDouble) + 3 * at::eye(6, at::kDouble);
  auto tied = spd(4, 6, 20, 22);
  tied.select(-2, 4).copy_(tied.select(-2, 1));  // rows 1 and 4 the same, so columns too after symmetrising
  tied = (tied + tied.transpose(-2, -1)) / 2;
  tied[3].copy_(tied[0]);  // two matrices with the batch's largest norms
  const auto weights = at::randn({6, 6}, g, at::kDouble);
  for (const auto& [name, matrix] : {std::pair<const char*, at::Tensor>{"general", general}, {"symmetric, tied", tied}})
    for (const auto scope : {linalg::NormScope::per_matrix, linalg::NormScope::global, linalg::NormScope::global_column_sum})
      for (const int iterations : {0, 1, 6}) {
        // the start from ‖A‖₁ alone converges where ‖A‖∞ ≤ 1, as in the Skyformer authors' normalised
        // block (rows summing to about 1); past that six iterations may diverge, theirs as ours
        const auto a = scope == linalg::NormScope::global_column_sum ? matrix / matrix.abs().sum(-1).max() : matrix;
        const auto ours = a.clone().requires_grad_(true), theirs = a.clone().requires_grad_(true);
        const auto z = linalg::iterative_pinv(ours, iterations, scope);
        (z * weights).sum().backward();
        (autograd_pinv(theirs, iterations, scope) * weights).sum().backward();
        const std::string what = std::string(name) +
                                 (scope == linalg::NormScope::global              ? ", global"
                                  : scope == linalg::NormScope::global_column_sum ? ", global column sum"
                                                                                  : ", per matrix") +
                                 ", " + std::to_string(iterations) + " iterations";
        EXPECT_TRUE(at::allclose(z, autograd_pinv(a, iterations, scope), 1e-12, 1e-13)) << what;
        EXPECT_TRUE(at::allclose(ours.grad(), theirs.grad(), 1e-9, 1e-11))
            << what << ": " << max_diff(ours.grad(), theirs.grad());
      }
  // the tape's symmetric backward (no transposes) on a symmetric matrix: the same to rounding
  const auto a = tied.slice(0, 0, 2).reshape({2, 6, 6});
  linalg::PinvTape tape;
  tape.forward(a, 6, linalg::NormScope::per_matrix, /*keep=*/true);
  const auto grad = weights.expand({2, 6, 6}).contiguous();
  EXPECT_TRUE(at::allclose(tape.backward(grad, /*symmetric=*/true), tape.backward(grad), 1e-9, 1e-11));
}

TEST(Pinv, GlobalInitCouplesTheBatchPerMatrixDoesNot) {
  // two well-conditioned matrices of very different scales, inverted together
  auto a = spd(2, 8, 5, 6);
  a[1] *= 100;
  const auto exact = at::pinverse(a);
  const auto per_matrix = linalg::iterative_pinv(a, 6, linalg::NormScope::per_matrix);
  const auto global = linalg::iterative_pinv(a, 6, linalg::NormScope::global);
  // per matrix: each matrix as if it were alone in the batch
  EXPECT_TRUE(at::allclose(per_matrix[0], linalg::iterative_pinv(a.slice(0, 0, 1), 6)[0], 1e-12, 1e-14));
  // global: the small matrix starts from a step 10⁴ too short and is far from converged after 6
  const double small_per_matrix = max_diff(per_matrix[0], exact[0]), small_global = max_diff(global[0], exact[0]);
  EXPECT_LT(small_per_matrix, 1e-8);
  EXPECT_GT(small_global, 1e3 * small_per_matrix);
  // the matrix with the largest norms is the same either way
  EXPECT_TRUE(at::allclose(global[1], per_matrix[1], 1e-12, 1e-14));
  // and with a batch of one the two coincide
  EXPECT_TRUE(at::equal(linalg::iterative_pinv(a.slice(0, 0, 1), 3, linalg::NormScope::global),
                        linalg::iterative_pinv(a.slice(0, 0, 1), 3, linalg::NormScope::per_matrix)));
}

// --- Skyformer -------------------------------------------------------------------------------

TEST(Skyformer, AllRowsNoRidgeExactPinvIsKernelizedAttention) {
  auto x = make_batch({12, 7}, 2, 12, 8, 8);
  auto sky = make("skyformer", {{"sampling", std::string("all")}, {"gamma", 0.0}, {"pinv", std::string("exact")}});
  const auto got = run(*sky, x.q, x.k, x.v, x.valid);
  const auto want = make("kernelized")->forward(x.q, x.k, x.v, x.valid);
  EXPECT_TRUE(at::allclose(got[0], want[0], 1e-7, 1e-9)) << max_diff(got[0], want[0]);
  EXPECT_TRUE(at::allclose(got[1].slice(1, 0, 7), want[1].slice(1, 0, 7), 1e-7, 1e-9))
      << max_diff(got[1].slice(1, 0, 7), want[1].slice(1, 0, 7));
}

TEST(Skyformer, MatchesTheNystromFormulaWithRidgeAndNormalisation) {
  // every valid row of [Q; K] a landmark, γ = 0.3: the formula of §4.4 written out per (batch, head)
  const std::int64_t n = 10, dim = 4, real = 6;
  const double gamma = 0.3;
  auto x = make_batch({n, real}, 2, n, dim, 9);
  auto sky = make("skyformer", {{"sampling", std::string("all")}, {"gamma", gamma}, {"pinv", std::string("exact")}});
  const auto got = run(*sky, x.q, x.k, x.v, x.valid);
  const double scale = std::pow(dim, -0.25);
  for (std::int64_t b = 0; b < 2; ++b) {
    const std::int64_t len = b == 0 ? n : real;
    for (std::int64_t h = 0; h < 2; ++h) {
      const auto q = x.q[b][h].slice(0, 0, len) * scale, k = x.k[b][h].slice(0, 0, len) * scale;
      const auto v = x.v[b][h].slice(0, 0, len);
      const auto marks = at::cat({q, k}, 0);
      const auto block = gaussian(marks, marks) + gamma * at::eye(2 * len, at::kDouble);
      const auto d = block.sum(-1).rsqrt().diag();
      const auto inverse = d.matmul(at::pinverse(d.matmul(block).matmul(d))).matmul(d);
      const auto want = gaussian(q, marks).matmul(inverse).matmul(gaussian(marks, k)).matmul(v);
      EXPECT_TRUE(at::allclose(got[b][h].slice(0, 0, len), want, 1e-9, 1e-11)) << b << " " << h;
    }
  }
}

// The fused node (the default) computes what the composed ops compute, and its written-out
// gradient is autograd's of them: every sampling, each initial value, a landmark drawn twice (m
// above the rows there are), and a sequence without a real token.
TEST(Skyformer, FusedBackwardIsAutogradsOfTheComposedOps) {
  const auto x = make_batch({12, 7, 0}, 2, 12, 8, 31);
  auto g = generator(32);
  auto weights = at::randn({3, 2, 12, 8}, g, at::kDouble) * x.valid.unsqueeze(1).unsqueeze(-1).to(at::kDouble);
  for (const char* sampling : {"qk_halves", "union", "all"})
    for (const char* init : {"per_head", "global", "global_column_sum"})
      for (const std::int64_t landmarks : {std::int64_t{5}, std::int64_t{40}}) {
        at::Tensor out[2], grads[2][3];
        for (int i = 0; i < 2; ++i) {
          auto sky = make("skyformer", {{"sampling", std::string(sampling)}, {"init", std::string(init)},
                                        {"landmarks", landmarks}, {"backward", std::string(i == 0 ? "fused" : "autograd")}});
          std::vector<at::Tensor> in = {x.q.clone().requires_grad_(true), x.k.clone().requires_grad_(true),
                                        x.v.clone().requires_grad_(true)};
          out[i] = run(*sky, in[0], in[1], in[2], x.valid);
          (out[i] * weights).sum().backward();
          for (int j = 0; j < 3; ++j) grads[i][j] = in[j].grad();
        }
        const std::string what = std::string(sampling) + ", " + init + ", " + std::to_string(landmarks) + " landmarks";
        EXPECT_LT(testing::real_rows_diff(out[0], out[1], x.valid), 1e-12) << what;
        for (int j = 0; j < 3; ++j)
          EXPECT_TRUE(at::allclose(grads[0][j], grads[1][j], 1e-8, 1e-10))
              << what << ", d" << "qkv"[j] << ": " << max_diff(grads[0][j], grads[1][j]);
      }
}

TEST(Skyformer, LandmarksComeOnlyFromValidRows) {
  // few landmarks, so that the draw matters; huge values at every padded position
  const std::int64_t n = 20, real = 11;
  auto x = make_batch({n, real, 3}, 2, n, 8, 10);
  for (const char* sampling : {"qk_halves", "union"}) {
    auto sky = make("skyformer", {{"landmarks", std::int64_t{6}}, {"sampling", std::string(sampling)}});
    c10::InferenceMode guard;
    const auto base = run(*sky, x.q, x.k, x.v, x.valid);
    auto huge = fill_padding(x, 1e6);
    const auto out = run(*sky, huge.q, huge.k, huge.v, huge.valid);
    EXPECT_TRUE(out[0].isfinite().all().item<bool>()) << sampling;
    EXPECT_TRUE(out[1].slice(1, 0, real).isfinite().all().item<bool>()) << sampling;
    EXPECT_TRUE(at::equal(out[0], base[0])) << sampling;
    EXPECT_TRUE(at::equal(out[1].slice(1, 0, real), base[1].slice(1, 0, real))) << sampling;
    EXPECT_TRUE(at::equal(out[2].slice(1, 0, 3), base[2].slice(1, 0, 3))) << sampling;
    // and each sequence alone (no padding, a batch of one) draws the same landmarks
    for (std::int64_t b : {1, 2}) {
      const std::int64_t len = b == 1 ? real : 3;
      auto one = alone(x, b, len);
      const auto single = run(*sky, one.q, one.k, one.v, one.valid)[0];
      EXPECT_TRUE(at::allclose(single, base[b].slice(1, 0, len), 1e-10, 1e-12))
          << sampling << " sequence " << b << ": " << max_diff(single, base[b].slice(1, 0, len));
    }
  }
}

TEST(Skyformer, SameSeedSameOutputNewSeedNewLandmarks) {
  auto x = make_batch({40, 31}, 2, 40, 8, 11);
  auto a = make("skyformer", {{"landmarks", std::int64_t{8}}});
  auto b = make("skyformer", {{"landmarks", std::int64_t{8}}});
  c10::InferenceMode guard;
  const auto first = run(*a, x.q, x.k, x.v, x.valid, 21);
  EXPECT_TRUE(at::equal(first, run(*b, x.q, x.k, x.v, x.valid, 21)));  // another module, the same seed
  EXPECT_TRUE(at::equal(first, a->forward(x.q, x.k, x.v, x.valid)));  // evaluation: the same landmarks every call
  EXPECT_FALSE(at::allclose(first, run(*a, x.q, x.k, x.v, x.valid, 22)));
  // training: fresh landmarks every call, the same sequence of them after the same redraw
  a->train();
  b->train();
  auto g1 = generator(21), g2 = generator(21);
  a->redraw(g1);
  b->redraw(g2);
  const auto t1 = a->forward(x.q, x.k, x.v, x.valid), t2 = a->forward(x.q, x.k, x.v, x.valid);
  EXPECT_FALSE(at::allclose(t1, t2));
  EXPECT_TRUE(at::equal(t1, b->forward(x.q, x.k, x.v, x.valid)));
  EXPECT_TRUE(at::equal(t2, b->forward(x.q, x.k, x.v, x.valid)));
}

TEST(Skyformer, ManyLandmarksApproachKernelizedAttention) {
  // the iteration and the ridge leave a small error; it shrinks as both are pushed to the limit
  auto x = make_batch({16}, 2, 16, 8, 12);
  const auto want = make("kernelized")->forward(x.q, x.k, x.v, x.valid);
  auto coarse = make("skyformer", {{"sampling", std::string("all")}});
  auto fine = make("skyformer", {{"sampling", std::string("all")}, {"gamma", 1e-6}, {"iterations", std::int64_t{40}}});
  const double coarse_error = max_diff(run(*coarse, x.q, x.k, x.v, x.valid), want);
  const double fine_error = max_diff(run(*fine, x.q, x.k, x.v, x.valid), want);
  EXPECT_LT(fine_error, 0.1 * coarse_error);
  EXPECT_LT(fine_error, 1e-2);
}

TEST(Skyformer, SequenceWithoutRealTokensStaysFinite) {
  auto x = make_batch({9, 0}, 2, 9, 8, 13);
  for (const char* sampling : {"qk_halves", "all"}) {
    auto out = run(*make("skyformer", {{"sampling", std::string(sampling)}}), x.q, x.k, x.v, x.valid);
    EXPECT_TRUE(out.isfinite().all().item<bool>()) << sampling;
  }
}

// --- Nyströmformer ---------------------------------------------------------------------------

TEST(Nystromformer, OneLandmarkPerTokenWithExactPinvIsSoftmax) {
  auto x = make_batch({16, 11, 1}, 2, 16, 8, 14);
  const auto want = make("softmax")->forward(x.q, x.k, x.v, x.valid);
  for (std::int64_t landmarks : {16, 40}) {  // m = n, and m > n (every sequence short)
    auto nys = make("nystromformer", {{"landmarks", landmarks}, {"pinv", std::string("exact")}, {"conv_kernel", std::int64_t{0}}});
    const auto got = nys->forward(x.q, x.k, x.v, x.valid);
    EXPECT_TRUE(at::allclose(got[0], want[0], 1e-9, 1e-11)) << landmarks << ": " << max_diff(got[0], want[0]);
    EXPECT_TRUE(at::allclose(got[1].slice(1, 0, 11), want[1].slice(1, 0, 11), 1e-9, 1e-11)) << landmarks;
    EXPECT_TRUE(at::allclose(got[2].slice(1, 0, 1), want[2].slice(1, 0, 1), 1e-9, 1e-11)) << landmarks;
  }
}

TEST(Nystromformer, ShortSequencesUseEveryTokenAsALandmark) {
  // 13 real tokens, 64 landmarks: the sequence's 13 tokens are its landmarks, and the iteration
  // (run long enough) gives softmax attention
  auto x = make_batch({30, 13}, 2, 30, 8, 15);
  const auto want = make("softmax")->forward(x.q, x.k, x.v, x.valid)[1].slice(1, 0, 13);
  auto nys = make("nystromformer", {{"iterations", std::int64_t{30}}, {"conv_kernel", std::int64_t{0}}});
  const auto got = nys->forward(x.q, x.k, x.v, x.valid)[1].slice(1, 0, 13);
  EXPECT_TRUE(at::allclose(got, want, 1e-8, 1e-10)) << max_diff(got, want);
}

// F A⁺ (B V) with segment means over the real tokens, written out for one (batch, head).
at::Tensor nystrom_formula(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t m) {
  const auto len = q.size(0);
  const double root_p = std::sqrt(static_cast<double>(q.size(1)));
  std::vector<at::Tensor> q_means, k_means;
  for (std::int64_t j = 0; j < m; ++j) {
    // segment j: real tokens ⌈j L/m⌉ .. ⌈(j+1) L/m⌉ - 1
    const auto start = (j * len + m - 1) / m, stop = ((j + 1) * len + m - 1) / m;
    q_means.push_back(q.slice(0, start, stop).mean(0));
    k_means.push_back(k.slice(0, start, stop).mean(0));
  }
  const auto qm = at::stack(q_means), km = at::stack(k_means);
  const auto f = at::softmax(q.matmul(km.t()) / root_p, -1);
  const auto a = at::softmax(qm.matmul(km.t()) / root_p, -1);
  const auto b = at::softmax(qm.matmul(k.t()) / root_p, -1);
  return f.matmul(at::pinverse(a)).matmul(b.matmul(v));
}

TEST(Nystromformer, MatchesTheFormulaWithSegmentMeansOverRealTokens) {
  // 5 landmarks over 23 and 13 real tokens: segments of unequal sizes, padding excluded
  const std::int64_t n = 23, real = 13, m = 5;
  auto x = make_batch({n, real}, 2, n, 8, 16);
  auto nys = make("nystromformer", {{"landmarks", m}, {"pinv", std::string("exact")}, {"conv_kernel", std::int64_t{0}}});
  const auto got = nys->forward(x.q, x.k, x.v, x.valid);
  for (std::int64_t b = 0; b < 2; ++b) {
    const std::int64_t len = b == 0 ? n : real;
    for (std::int64_t h = 0; h < 2; ++h) {
      const auto want = nystrom_formula(x.q[b][h].slice(0, 0, len), x.k[b][h].slice(0, 0, len),
                                        x.v[b][h].slice(0, 0, len), m);
      EXPECT_TRUE(at::allclose(got[b][h].slice(0, 0, len), want, 1e-9, 1e-11))
          << b << " " << h << ": " << max_diff(got[b][h].slice(0, 0, len), want);
    }
  }
}

TEST(Nystromformer, SegmentMeansIgnorePadding) {
  // the defaults (iterative pinv, convolution on), one module: a padded sequence gives what it
  // gives alone, whatever sits at its padded positions
  const std::int64_t n = 40, real = 27;
  auto x = make_batch({n, real}, 2, n, 8, 17);
  auto nys = make("nystromformer", {{"landmarks", std::int64_t{6}}});
  const auto base = nys->forward(x.q, x.k, x.v, x.valid)[1].slice(1, 0, real);
  auto one = alone(x, 1, real);
  const auto single = nys->forward(one.q, one.k, one.v, one.valid)[0];
  EXPECT_TRUE(at::allclose(single, base, 1e-10, 1e-12)) << max_diff(single, base);
  auto huge = fill_padding(x, 1e6);
  const auto out = nys->forward(huge.q, huge.k, huge.v, huge.valid)[1].slice(1, 0, real);
  EXPECT_TRUE(at::equal(out, base));
}

// The authors' LRA code (Skyformer's src/models/attention_nystrom.py) written out: Q and K zeroed
// at padding and scaled by p^-1/4, landmarks the means of N/m consecutive positions of the padded
// sequence, only B's keys masked, global initial norms.
TEST(Nystromformer, PaddedSegmentsAreTheAuthorsReshapedMeans) {
  const std::int64_t n = 24, m = 6, p = 8;
  auto x = make_batch({n, 13}, 2, n, p, 21);
  const auto mask = x.valid.to(at::kDouble).view({2, 1, n, 1});
  const double scale = std::pow(static_cast<double>(p), -0.25);
  const auto q = x.q * mask * scale, k = x.k * mask * scale;
  const auto q_marks = q.reshape({2, 2, m, n / m, p}).mean(-2), k_marks = k.reshape({2, 2, m, n / m, p}).mean(-2);
  const auto f = at::softmax(q.matmul(k_marks.transpose(-1, -2)), -1);
  const auto a = at::softmax(q_marks.matmul(k_marks.transpose(-1, -2)), -1);
  const auto b = at::softmax(q_marks.matmul(k.transpose(-1, -2)) - 1e9 * (1 - mask.view({2, 1, 1, n})), -1);
  const auto want = f.matmul(at::pinverse(a)).matmul(b.matmul(x.v));

  auto nys = make("nystromformer", {{"landmarks", m}, {"segments", std::string("padded")}, {"pinv", std::string("exact")},
                                    {"conv_kernel", std::int64_t{0}}});
  const auto got = nys->forward(x.q, x.k, x.v, x.valid);
  for (std::int64_t s = 0; s < 2; ++s) {
    const std::int64_t real = s == 0 ? n : 13;
    EXPECT_TRUE(at::allclose(got[s].slice(1, 0, real), want[s].slice(1, 0, real), 1e-9, 1e-11))
        << s << ": " << max_diff(got[s].slice(1, 0, real), want[s].slice(1, 0, real));
  }
  // and unlike the default, the padded sequence's output depends on its padding's length
  auto one = alone(x, 1, 13);
  const auto single = nys->forward(one.q, one.k, one.v, one.valid)[0];
  EXPECT_FALSE(at::allclose(single, got[1].slice(1, 0, 13), 1e-6, 1e-8));
}

TEST(Nystromformer, GlobalInitCouplesTheBatch) {
  // per head (default): a sequence's output does not depend on its batch; global: it does (the
  // peaked attention of the first sequence sets the norms the second one starts from)
  const std::int64_t n = 32, real = 20;
  auto x = make_batch({n, real}, 2, n, 8, 18);
  x.q[0] *= 6;
  x.k[0] *= 6;
  auto one = alone(x, 1, real);
  for (const char* init : {"per_head", "global", "global_column_sum"}) {
    auto nys = make("nystromformer", {{"landmarks", std::int64_t{8}}, {"init", std::string(init)}, {"conv_kernel", std::int64_t{0}}});
    const auto in_batch = nys->forward(x.q, x.k, x.v, x.valid)[1].slice(1, 0, real);
    const auto single = nys->forward(one.q, one.k, one.v, one.valid)[0];
    EXPECT_EQ(at::allclose(single, in_batch, 1e-10, 1e-12), std::string(init) == "per_head") << init;
  }
}

TEST(Nystromformer, ConvolutionIsDepthwiseAlongTheSequence) {
  // with V alone non-zero on one token, the convolution's share of the output is that token's
  // row times the head's kernel, shifted: out[i] − (the same with the convolution off) = w[j - i + c] v[j]
  const std::int64_t n = 12, kernel = 5, token = 6;
  auto x = make_batch({n}, 2, n, 4, 19);
  x.v.zero_();
  x.v.select(2, token).normal_();
  auto with_conv = make("nystromformer", {{"conv_kernel", kernel}, {"landmarks", std::int64_t{3}}});
  auto without = make("nystromformer", {{"conv_kernel", std::int64_t{0}}, {"landmarks", std::int64_t{3}}});
  const auto conv_part = with_conv->forward(x.q, x.k, x.v, x.valid) - without->forward(x.q, x.k, x.v, x.valid);
  const auto w = with_conv->parameters()[0].to(at::kDouble);  // [H, 1, kernel, 1]
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < n; ++i) {
      const auto tap = token - i + kernel / 2;
      const auto want = (tap >= 0 && tap < kernel) ? (w[h][0][tap][0] * x.v[0][h][token]) : at::zeros({4}, at::kDouble);
      EXPECT_TRUE(at::allclose(conv_part[0][h][i], want, 1e-6, 1e-6)) << h << " " << i;
    }
}

TEST(Nystromformer, ConvolutionIsLibTorchsDepthwiseConvolutionForwardAndBackward) {
  // The banded products against at::conv1d (groups = H·p, each head's kernel on its p columns), in
  // double: lengths around the block of 32 positions (k − 1 for 35 taps), kernels of 1 to 35 taps.
  for (const std::int64_t kernel : {1, 3, 33, 35})
    for (const std::int64_t n : {1, 31, 32, 33, 70}) {
      const std::int64_t heads = 2, dim = 4;
      const auto x = make_batch({n, n}, heads, n, dim, 23);
      auto with_conv = make("nystromformer", {{"conv_kernel", kernel}, {"landmarks", std::int64_t{3}}});
      auto without = make("nystromformer", {{"conv_kernel", std::int64_t{0}}, {"landmarks", std::int64_t{3}}});
      with_conv->to(at::kDouble);
      const auto weight = with_conv->parameters()[0];  // [H, 1, kernel, 1]
      const auto g = at::randn(x.v.sizes(), testing::seeded_generator(29), at::kDouble);
      // the convolution's share: the output and V's gradient with it less without it
      auto v = x.v.clone().requires_grad_();
      const auto out_with = with_conv->forward(x.q, x.k, v, x.valid);
      const auto grads_with = torch::autograd::grad({(out_with * g).sum()}, {v, weight});
      const auto out_without = without->forward(x.q, x.k, v, x.valid);
      const auto grad_v_without = torch::autograd::grad({(out_without * g).sum()}, {v})[0];

      const auto w = weight.detach().clone().requires_grad_();
      const auto columns = v.transpose(2, 3).reshape({2, heads * dim, n});
      const auto taps = w.view({heads, 1, 1, kernel}).expand({heads, dim, 1, kernel}).reshape({heads * dim, 1, kernel});
      const auto want = at::conv1d(columns, taps, {}, 1, kernel / 2, 1, heads * dim).view({2, heads, dim, n}).transpose(2, 3);
      const auto want_grads = torch::autograd::grad({(want * g).sum()}, {v, w});
      const auto where = "kernel " + std::to_string(kernel) + ", n " + std::to_string(n);
      EXPECT_LT(max_diff(out_with - out_without, want), 1e-12) << where;
      EXPECT_LT(max_diff(grads_with[0] - grad_v_without, want_grads[0]), 1e-12) << where;
      EXPECT_LT(max_diff(grads_with[1], want_grads[1]), 1e-12) << where;
    }
}

TEST(Nystromformer, SequenceWithoutRealTokensStaysFinite) {
  auto x = make_batch({9, 0}, 2, 9, 8, 20);
  auto out = make("nystromformer", {{"landmarks", std::int64_t{4}}})->forward(x.q, x.k, x.v, x.valid);
  EXPECT_TRUE(out.isfinite().all().item<bool>());
}

}  // namespace
}  // namespace attnlab

namespace attnlab {
namespace {

// The convolution residual is the authors' Conv2d(H, H, (k, 1), groups = H, padding k/2) on V
// with padding zeroed: out[b, h, i, c] = Σ_j w[h, j] · V[b, h, i + j − k/2, c].
TEST(Nystromformer, ConvolutionResidualFollowsTheFormula) {
  const std::int64_t heads = 2, n = 12, dim = 3, kernel = 5, real = 9;
  auto x = make_batch({n, real}, heads, n, dim, 21);
  auto with_conv = make("nystromformer", {{"conv_kernel", kernel}}, {heads, dim, n});
  auto without = make("nystromformer", {{"conv_kernel", std::int64_t{0}}}, {heads, dim, n});
  at::Tensor diff;
  {
    c10::InferenceMode guard;
    diff = with_conv->forward(x.q, x.k, x.v, x.valid) - without->forward(x.q, x.k, x.v, x.valid);
  }
  const auto w = with_conv->parameters()[0].to(at::kDouble);  // [H, 1, k, 1]
  for (std::int64_t b = 0; b < 2; ++b) {
    const std::int64_t len = b == 0 ? n : real;
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < len; ++i)
        for (std::int64_t c = 0; c < dim; ++c) {
          double expected = 0;
          for (std::int64_t j = 0; j < kernel; ++j) {
            const std::int64_t at_pos = i + j - kernel / 2;
            if (at_pos >= 0 && at_pos < len) expected += w[h][0][j][0].item<double>() * x.v[b][h][at_pos][c].item<double>();
          }
          EXPECT_NEAR(diff[b][h][i][c].item<double>(), expected, 1e-9) << b << " " << h << " " << i << " " << c;
        }
  }
}

}  // namespace
}  // namespace attnlab
