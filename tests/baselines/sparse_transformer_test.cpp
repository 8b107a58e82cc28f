// Sparse Transformer (fixed pattern, LRA's merge of the two heads): the blocked kernel against
// softmax under the pattern written out as a dense mask (causal or not, padding, holes), its
// exactness limits (ℓ ≥ N: causal softmax, or full softmax with causal = false; c ≥ ℓ − 1: every
// key a summary key), gradients, what padding does, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>

#include "method_support.hpp"

namespace attnlab::testing {
namespace {

Overrides pattern(std::int64_t stride, std::int64_t summary, bool causal) {
  return {{"stride", stride}, {"summary", summary}, {"causal", causal}};
}

// The pattern as the rule states it, position by position: [1, 1, N, N] bool.
at::Tensor dense_pattern(std::int64_t n, std::int64_t stride, std::int64_t summary, bool causal) {
  auto allowed = at::zeros({1, 1, n, n}, at::kBool);
  auto a = allowed.accessor<bool, 4>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const bool in_pattern = i / stride == j / stride || j % stride == 0 || j % stride >= stride - summary;
      a[0][0][i][j] = in_pattern && (!causal || j <= i);
    }
  return allowed;
}

at::Tensor causal_real_keys(const at::Tensor& valid) {
  const auto n = valid.size(1);
  return real_keys(valid).logical_and(at::ones({n, n}, at::kBool).tril());
}

TEST(SparseTransformer, IsSoftmaxUnderTheDensePatternWithPadding) {
  const std::int64_t n = 23, stride = 5, summary = 2;
  const auto x = make_batch({23, 14}, 2, n, 8, 21);
  for (bool causal : {true, false}) {
    const auto out = make_method("sparse_transformer", pattern(stride, summary, causal))->forward(x.q, x.k, x.v, x.valid);
    const auto allowed = dense_pattern(n, stride, summary, causal).logical_and(real_keys(x.valid));
    const auto expected = reference_softmax_attention(x.q, x.k, x.v, allowed);
    EXPECT_LT(real_rows_diff(out, expected, x.valid), 1e-10) << "causal " << causal;
    // the pattern matters: plain (causal) softmax is something else
    const auto full = reference_softmax_attention(x.q, x.k, x.v, causal ? causal_real_keys(x.valid) : real_keys(x.valid));
    EXPECT_GT(real_rows_diff(out, full, x.valid), 1e-3) << "causal " << causal;
  }
}

TEST(SparseTransformer, AnyKeyMaskAndOtherShapesOfThePattern) {
  // holes anywhere (position 0 included), N a multiple of ℓ or not, c = 0 (first column only),
  // more blocks than the causal kernel's 4 query groups (groups of several blocks)
  for (const auto& [n, stride, summary] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{20, 4, 1},
                                           {17, 3, 0}, {19, 6, 4}, {12, 2, 1}, {40, 3, 1}, {45, 4, 2}, {61, 2, 0}}) {
    auto x = make_batch({n, n}, 2, n, 4, 22 + n);
    x.valid[0][0] = false;
    x.valid[0][n / 2] = false;
    x.valid[1].slice(0, 2, n / 3).fill_(false);
    x.valid[1][n - 1] = false;
    for (bool causal : {true, false}) {
      const auto out = make_method("sparse_transformer", pattern(stride, summary, causal))->forward(x.q, x.k, x.v, x.valid);
      const auto allowed = dense_pattern(n, stride, summary, causal).logical_and(real_keys(x.valid));
      EXPECT_LT(real_rows_diff(out, reference_softmax_attention(x.q, x.k, x.v, allowed), x.valid), 1e-10)
          << "n " << n << " stride " << stride << " summary " << summary << " causal " << causal;
    }
  }
}

TEST(SparseTransformer, LongSequencesInSeveralQueryGroups) {
  // 4 heads × 900 queries × 675 summary columns: more scores than the kernel holds at once
  // on the CPU (2^21), so the queries go in groups of several blocks, causal or not
  const std::int64_t n = 900, stride = 4, summary = 2;
  auto x = make_batch({n}, 4, n, 4, 29);
  x.valid[0].slice(0, 820, n).fill_(false);
  for (bool causal : {true, false}) {
    const auto out = make_method("sparse_transformer", pattern(stride, summary, causal))->forward(x.q, x.k, x.v, x.valid);
    const auto allowed = dense_pattern(n, stride, summary, causal).logical_and(real_keys(x.valid));
    // 1e-8: over 900 queries in groups the BLAS's summation order shows (4.3e-10 in one CI run of
    // many, under load, as in the padding check of attention_checks.cpp); a wrong pattern is O(0.1)
    EXPECT_LT(rows_diff_from_reference(out, x, allowed), 1e-8) << causal;
  }
}

TEST(SparseTransformer, OneBlockIsCausalSoftmaxOrSoftmax) {
  const std::int64_t n = 16;
  const auto x = make_batch({16, 9}, 2, n, 8, 23);
  for (std::int64_t stride : {n, std::int64_t{50}}) {
    const auto causal = make_method("sparse_transformer", pattern(stride, 10, true))->forward(x.q, x.k, x.v, x.valid);
    EXPECT_LT(real_rows_diff(causal, reference_softmax_attention(x.q, x.k, x.v, causal_real_keys(x.valid)), x.valid),
              1e-12);
    const auto full = make_method("sparse_transformer", pattern(stride, 10, false))->forward(x.q, x.k, x.v, x.valid);
    EXPECT_LT(real_rows_diff(full, reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid)), x.valid), 1e-12);
  }
  // the defaults (ℓ = 50, c = 10, causal) on a short sequence: causal softmax
  const auto by_default = make_method("sparse_transformer")->forward(x.q, x.k, x.v, x.valid);
  EXPECT_LT(real_rows_diff(by_default, reference_softmax_attention(x.q, x.k, x.v, causal_real_keys(x.valid)), x.valid),
            1e-12);
}

TEST(SparseTransformer, EveryKeyASummaryKeyIsSoftmaxToo) {
  // c ≥ ℓ − 1: every position is a summary column, over several blocks
  const std::int64_t n = 23;
  const auto x = make_batch({23, 11}, 2, n, 8, 24);
  for (std::int64_t summary : {std::int64_t{3}, std::int64_t{100}}) {
    const auto causal = make_method("sparse_transformer", pattern(4, summary, true))->forward(x.q, x.k, x.v, x.valid);
    EXPECT_LT(real_rows_diff(causal, reference_softmax_attention(x.q, x.k, x.v, causal_real_keys(x.valid)), x.valid),
              1e-12);
    const auto full = make_method("sparse_transformer", pattern(4, summary, false))->forward(x.q, x.k, x.v, x.valid);
    EXPECT_LT(real_rows_diff(full, reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid)), x.valid), 1e-12);
  }
}

TEST(SparseTransformer, GradientsAreThoseOfTheDensePattern) {
  // 13 blocks: the causal kernel's 4 query groups hold three or four blocks each
  const std::int64_t n = 38, stride = 3, summary = 1;
  const auto x = make_batch({38, 25}, 2, n, 4, 25);
  const auto weights = at::randn({2, 2, n, 4}, seeded_generator(3), at::kDouble) *
                       x.valid.unsqueeze(1).unsqueeze(-1).to(at::kDouble);
  for (bool causal : {true, false}) {
    auto m = make_method("sparse_transformer", pattern(stride, summary, causal));
    at::Tensor got[3], want[3];
    for (int way = 0; way < 2; ++way) {
      auto q = x.q.clone().requires_grad_(true), k = x.k.clone().requires_grad_(true), v = x.v.clone().requires_grad_(true);
      const auto allowed = dense_pattern(n, stride, summary, causal).logical_and(real_keys(x.valid));
      const auto out = way == 0 ? m->forward(q, k, v, x.valid) : reference_softmax_attention(q, k, v, allowed);
      (out * weights).sum().backward();
      auto* into = way == 0 ? got : want;
      into[0] = q.grad(), into[1] = k.grad(), into[2] = v.grad();
    }
    for (int i = 0; i < 3; ++i) EXPECT_LT(max_diff(got[i], want[i]), 1e-10) << "causal " << causal << " input " << i;
  }
}

TEST(SparseTransformer, PaddingContentChangesNothingAndASequenceIsItselfAlone) {
  const std::int64_t n = 23;
  const auto x = make_batch({23, 12}, 2, n, 8, 26);
  for (bool causal : {true, false}) {
    auto m = make_method("sparse_transformer", pattern(5, 2, causal));
    const auto base = m->forward(x.q, x.k, x.v, x.valid);
    for (double garbage : {1e6, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
      const auto y = fill_padding(x, garbage);
      const auto out = m->forward(y.q, y.k, y.v, y.valid);
      EXPECT_EQ(max_diff(out[0], base[0]), 0.0) << garbage;
      EXPECT_LT(max_diff(out[1].slice(1, 0, 12), base[1].slice(1, 0, 12)), 1e-12) << garbage;
    }
    const auto a = alone(x, 1, 12);
    EXPECT_LT(max_diff(m->forward(a.q, a.k, a.v, a.valid)[0], base[1].slice(1, 0, 12)), 1e-12);
    // and the other sequence of the batch does not matter
    auto other = make_batch({23, 23}, 2, n, 8, 27);
    other.q[1].copy_(x.q[1]), other.k[1].copy_(x.k[1]), other.v[1].copy_(x.v[1]), other.valid[1].copy_(x.valid[1]);
    EXPECT_LT(max_diff(m->forward(other.q, other.k, other.v, other.valid)[1].slice(1, 0, 12), base[1].slice(1, 0, 12)),
              1e-12);
  }
}

TEST(SparseTransformer, FloatAndLargeScoresStayFinite) {
  auto x = make_batch({23, 10}, 2, 23, 8, 28);
  auto m = make_method("sparse_transformer", pattern(5, 2, true));
  const auto out = m->forward((x.q * 60).to(at::kFloat), (x.k * 60).to(at::kFloat), x.v.to(at::kFloat), x.valid);
  EXPECT_EQ(out.scalar_type(), at::kFloat);
  EXPECT_TRUE(out.isfinite().all().item<bool>());  // padded queries too: a row always has a finite logit or all masked
}

TEST(SparseTransformer, ParametersAndRefusals) {
  const auto defaults = attention_plugin("sparse_transformer").defaults();
  EXPECT_EQ(defaults.integer("stride"), 50);
  EXPECT_EQ(defaults.integer("summary"), 10);
  EXPECT_TRUE(defaults.boolean("causal"));
  EXPECT_FALSE(make_method("sparse_transformer")->stochastic());
  EXPECT_THROW(make_method("sparse_transformer", {{"stride", std::int64_t{0}}}), ParamError);
  EXPECT_THROW(make_method("sparse_transformer", {{"summary", std::int64_t{-1}}}), ParamError);
  const auto& info = *attention_plugin("sparse_transformer").info;
  const auto* stride = find_param(info.params, info.param_count, "stride");
  ASSERT_NE(stride, nullptr);
  EXPECT_THROW(check_param(*stride, ParamValue{std::int64_t{0}}), ParamError);
}

}  // namespace
}  // namespace attnlab::testing
