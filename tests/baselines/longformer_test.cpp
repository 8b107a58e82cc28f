// Longformer (sliding window as LRA ran it, optionally the first token global): the banded kernel
// against softmax under the band written out as a dense mask (even and odd windows, padding,
// holes, global_cls), its exactness limit (w ≥ 2N − 1: softmax), gradients, what padding does,
// and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "method_support.hpp"

namespace attnlab::testing {
namespace {

Overrides window(std::int64_t w, bool global_cls = false) { return {{"window", w}, {"global_cls", global_cls}}; }

// The rule, position by position: i − left < j ≤ i + right, right = ⌊w/2⌋, left = w − right;
// with global_cls row 0 and column 0 too. [1, 1, N, N] bool.
at::Tensor dense_band(std::int64_t n, std::int64_t w, bool global_cls) {
  const auto right = w / 2, left = w - right;
  auto allowed = at::zeros({1, 1, n, n}, at::kBool);
  auto a = allowed.accessor<bool, 4>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      a[0][0][i][j] = (i - left < j && j <= i + right) || (global_cls && (i == 0 || j == 0));
  return allowed;
}

TEST(Longformer, IsSoftmaxUnderTheDenseBandWithPadding) {
  const std::int64_t n = 23;
  const auto x = make_batch({23, 14}, 2, n, 8, 31);
  for (std::int64_t w : {6, 5}) {
    for (bool global_cls : {false, true}) {
      const auto out = make_method("longformer", window(w, global_cls))->forward(x.q, x.k, x.v, x.valid);
      const auto allowed = dense_band(n, w, global_cls).logical_and(real_keys(x.valid));
      EXPECT_LT(real_rows_diff(out, reference_softmax_attention(x.q, x.k, x.v, allowed), x.valid), 1e-10)
          << "w " << w << " global_cls " << global_cls;
      EXPECT_GT(real_rows_diff(out, reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid)), x.valid), 1e-3);
    }
  }
}

TEST(Longformer, AnyKeyMaskAndOtherWindows) {
  // holes anywhere (position 0 included, which takes the global column away), windows from the
  // query alone (w = 1) to nearly the whole sequence
  const std::int64_t n = 19;
  auto x = make_batch({n, n}, 2, n, 4, 32);
  x.valid[0][0] = false;
  x.valid[0][7] = false;
  x.valid[1].slice(0, 3, 6).fill_(false);
  x.valid[1][n - 1] = false;
  for (std::int64_t w : {1, 2, 3, 4, 9, 16, 30, 36}) {
    for (bool global_cls : {false, true}) {
      const auto out = make_method("longformer", window(w, global_cls))->forward(x.q, x.k, x.v, x.valid);
      const auto allowed = dense_band(n, w, global_cls).logical_and(real_keys(x.valid));
      EXPECT_LT(real_rows_diff(out, reference_softmax_attention(x.q, x.k, x.v, allowed), x.valid), 1e-10)
          << "w " << w << " global_cls " << global_cls;
    }
  }
  // w = 1 is the query alone: out = v on real tokens
  const auto self = make_method("longformer", window(1))->forward(x.q, x.k, x.v, x.valid);
  EXPECT_LT(real_rows_diff(self, x.v, x.valid), 1e-15);
}

TEST(Longformer, LongSequencesInSeveralChunkGroups) {
  // 4 heads × 4 chunks of 225 queries × spans of 674 keys: more scores than the kernel holds at
  // once on the CPU (2^21), so the chunks go in two groups of two
  const std::int64_t n = 900, w = 450;
  auto x = make_batch({n}, 4, n, 4, 39);
  x.valid[0].slice(0, 830, n).fill_(false);
  for (bool global_cls : {false, true}) {
    const auto out = make_method("longformer", window(w, global_cls))->forward(x.q, x.k, x.v, x.valid);
    const auto allowed = dense_band(n, w, global_cls).logical_and(real_keys(x.valid));
    EXPECT_LT(rows_diff_from_reference(out, x, allowed), 1e-10) << global_cls;
  }
}

TEST(Longformer, AWindowOfTwiceTheSequenceIsSoftmax) {
  const std::int64_t n = 16;
  const auto x = make_batch({16, 9}, 2, n, 8, 33);
  const auto softmax = reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid));
  for (std::int64_t w : {2 * n - 1, 2 * n, std::int64_t{512}}) {
    for (bool global_cls : {false, true}) {
      const auto out = make_method("longformer", window(w, global_cls))->forward(x.q, x.k, x.v, x.valid);
      EXPECT_LT(real_rows_diff(out, softmax, x.valid), 1e-12) << "w " << w << " global_cls " << global_cls;
    }
  }
  // one less (left = right = N − 1), and the last query misses the first key
  auto x_full = make_batch({16}, 2, n, 8, 34);
  const auto narrower = make_method("longformer", window(2 * n - 2))->forward(x_full.q, x_full.k, x_full.v, x_full.valid);
  const auto full = reference_softmax_attention(x_full.q, x_full.k, x_full.v, real_keys(x_full.valid));
  EXPECT_GT(max_diff(narrower[0][0][n - 1], full[0][0][n - 1]), 1e-6);
  EXPECT_LT(max_diff(narrower[0][0].slice(0, 0, n - 1), full[0][0].slice(0, 0, n - 1)), 1e-12);
}

TEST(Longformer, GradientsAreThoseOfTheDenseBand) {
  const std::int64_t n = 14;
  const auto x = make_batch({14, 9}, 2, n, 4, 35);
  const auto weights = at::randn({2, 2, n, 4}, seeded_generator(5), at::kDouble) *
                       x.valid.unsqueeze(1).unsqueeze(-1).to(at::kDouble);
  for (bool global_cls : {false, true}) {
    auto m = make_method("longformer", window(5, global_cls));
    at::Tensor got[3], want[3];
    for (int way = 0; way < 2; ++way) {
      auto q = x.q.clone().requires_grad_(true), k = x.k.clone().requires_grad_(true), v = x.v.clone().requires_grad_(true);
      const auto allowed = dense_band(n, 5, global_cls).logical_and(real_keys(x.valid));
      const auto out = way == 0 ? m->forward(q, k, v, x.valid) : reference_softmax_attention(q, k, v, allowed);
      (out * weights).sum().backward();
      auto* into = way == 0 ? got : want;
      into[0] = q.grad(), into[1] = k.grad(), into[2] = v.grad();
    }
    for (int i = 0; i < 3; ++i) EXPECT_LT(max_diff(got[i], want[i]), 1e-10) << "global_cls " << global_cls << " input " << i;
  }
}

TEST(Longformer, PaddingContentChangesNothingAndASequenceIsItselfAlone) {
  const std::int64_t n = 23;
  const auto x = make_batch({23, 12}, 2, n, 8, 36);
  for (bool global_cls : {false, true}) {
    auto m = make_method("longformer", window(4, global_cls));
    const auto base = m->forward(x.q, x.k, x.v, x.valid);
    for (double garbage : {1e6, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
      const auto y = fill_padding(x, garbage);
      const auto out = m->forward(y.q, y.k, y.v, y.valid);
      EXPECT_EQ(max_diff(out[0], base[0]), 0.0) << garbage;
      EXPECT_LT(max_diff(out[1].slice(1, 0, 12), base[1].slice(1, 0, 12)), 1e-12) << garbage;
    }
    const auto a = alone(x, 1, 12);
    EXPECT_LT(max_diff(m->forward(a.q, a.k, a.v, a.valid)[0], base[1].slice(1, 0, 12)), 1e-12);
    auto other = make_batch({23, 23}, 2, n, 8, 37);
    other.q[1].copy_(x.q[1]), other.k[1].copy_(x.k[1]), other.v[1].copy_(x.v[1]), other.valid[1].copy_(x.valid[1]);
    EXPECT_LT(max_diff(m->forward(other.q, other.k, other.v, other.valid)[1].slice(1, 0, 12), base[1].slice(1, 0, 12)),
              1e-12);
  }
}

TEST(Longformer, FloatAndLargeScoresStayFiniteOnRealTokens) {
  const auto x = make_batch({23, 10}, 2, 23, 8, 38);
  for (bool global_cls : {false, true}) {
    const auto out = make_method("longformer", window(4, global_cls))
                         ->forward((x.q * 60).to(at::kFloat), (x.k * 60).to(at::kFloat), x.v.to(at::kFloat), x.valid);
    EXPECT_EQ(out.scalar_type(), at::kFloat);
    EXPECT_TRUE(out[0].isfinite().all().item<bool>());
    EXPECT_TRUE(out[1].slice(1, 0, 10).isfinite().all().item<bool>());
  }
}

TEST(Longformer, ParametersAndRefusals) {
  const auto defaults = attention_plugin("longformer").defaults();
  EXPECT_EQ(defaults.integer("window"), 512);
  EXPECT_FALSE(defaults.boolean("global_cls"));
  EXPECT_FALSE(make_method("longformer")->stochastic());
  EXPECT_THROW(make_method("longformer", {{"window", std::int64_t{0}}}), ParamError);
  const auto& info = *attention_plugin("longformer").info;
  const auto* w = find_param(info.params, info.param_count, "window");
  ASSERT_NE(w, nullptr);
  EXPECT_THROW(check_param(*w, ParamValue{std::int64_t{0}}), ParamError);
}

}  // namespace
}  // namespace attnlab::testing
