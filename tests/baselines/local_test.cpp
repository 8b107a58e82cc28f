// Local attention (plugins/local): softmax attention within contiguous blocks, against the block
// mask written out densely; the exactness limit b ≥ N (softmax); padding; and lra_compat against
// LRA's computation written out position by position.
#include <gtest/gtest.h>

#include "method_support.hpp"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

namespace attnlab::testing {
namespace {

using I = std::int64_t;

at::Tensor local(const Batch& x, I block, bool lra_compat = false) {
  return make_method("local", {{"block", block}, {"lra_compat", lra_compat}})->forward(x.q, x.k, x.v, x.valid);
}

// Largest difference over the real query positions of every sequence.
double real_diff(const at::Tensor& out, const at::Tensor& expected, const at::Tensor& valid) {
  const auto rows = valid.unsqueeze(1).unsqueeze(-1);
  return max_diff(out.masked_fill(rows.logical_not(), 0), expected.masked_fill(rows.logical_not(), 0));
}

// The allowed-key mask of block-local attention: key j for query i when both lie in the same
// contiguous block of b and j is real.
at::Tensor block_mask(const at::Tensor& valid, I b) {
  const I n = valid.size(1);
  const auto block = at::arange(n, at::kLong).div(b, "floor");
  return (block.unsqueeze(1) == block.unsqueeze(0)).unsqueeze(0).unsqueeze(0) & real_keys(valid);
}

TEST(Local, ParametersAndRefusals) {
  const auto defaults = attention_plugin("local").defaults();
  EXPECT_EQ(defaults.integer("block"), 50);
  EXPECT_FALSE(defaults.boolean("lra_compat"));
  const auto& info = *attention_plugin("local").info;
  const auto* block = find_param(info.params, info.param_count, "block");
  ASSERT_NE(block, nullptr);
  EXPECT_THROW(check_param(*block, ParamValue{I{0}}), ParamError);
  EXPECT_THROW(check_param(*find_param(info.params, info.param_count, "lra_compat"), ParamValue{std::string("yes")}),
               ParamError);
  EXPECT_TRUE(make_method("local")->parameters().empty());
}

TEST(Local, IsSoftmaxWithinContiguousBlocks) {
  // N = 11 is not a multiple of b = 4: the last block holds 3 positions (and 1 invalid).
  const auto x = make_batch({11, 6, 1, 9}, 2, 11, 8, 1);
  const auto out = local(fill_padding(x, std::numeric_limits<double>::quiet_NaN()), 4);
  ASSERT_EQ(out.sizes(), x.q.sizes());
  EXPECT_LT(real_diff(out, reference_softmax_attention(x.q, x.k, x.v, block_mask(x.valid, 4)), x.valid), 1e-12);
  // b = 1: every token attends to itself alone
  EXPECT_LT(real_diff(local(x, 1), x.v, x.valid), 1e-15);
}

TEST(Local, ABlockOfAtLeastNIsSoftmax) {
  const auto x = make_batch({12, 7}, 2, 12, 8, 2);
  const auto softmax = reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid));
  for (I b : {12, 13, 50}) EXPECT_LT(real_diff(local(x, b), softmax, x.valid), 1e-12) << "b = " << b;
  EXPECT_GT(real_diff(local(x, 6), softmax, x.valid), 1e-3);  // smaller blocks do differ
}

TEST(Local, PaddingNeitherLengthNorNeighboursMatter) {
  const I n = 24, real = 13;
  const auto x = make_batch({n, real}, 2, n, 8, 3);
  for (I b : {4, 5, 50}) {
    const auto base = local(x, b);
    for (double garbage : {1e6, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
      EXPECT_EQ(real_diff(local(fill_padding(x, garbage), b), base, x.valid), 0.0) << "b = " << b;
    EXPECT_LT(max_diff(local(alone(x, 1, real), b)[0], base[1].slice(1, 0, real)), 1e-14) << "b = " << b;
    // the first sequence alone, and with its neighbour changed
    EXPECT_LT(max_diff(local(alone(x, 0, n), b)[0], base[0]), 1e-14) << "b = " << b;
    auto other = x;
    other.k = x.k.clone();
    other.k[1].normal_();
    EXPECT_EQ(max_diff(local(other, b)[0], base[0]), 0.0) << "b = " << b;
  }
}

TEST(Local, FloatIsFiniteAndCloseToDouble) {
  const auto x = make_batch({40, 17}, 2, 40, 8, 4);
  const Batch f{x.q.to(at::kFloat) * 60, x.k.to(at::kFloat) * 60, x.v.to(at::kFloat), x.valid};
  const auto out = local(f, 8);
  EXPECT_TRUE(out[0].isfinite().all().item<bool>());
  EXPECT_TRUE(out[1].slice(1, 0, 17).isfinite().all().item<bool>());
  const Batch d{f.q.to(at::kDouble), f.k.to(at::kDouble), f.v.to(at::kDouble), x.valid};
  EXPECT_LT(real_diff(out.to(at::kDouble), local(d, 8), x.valid), 1e-3);
}

// What LRA's local_attention.py computes, written out for query position p: the sequence padded
// with e = b − (N mod b) zero positions counted as real, groups of the positions ≡ g mod L/b,
// masked by the validity of the contiguous positions g·b + i and g·b + j, −1e10 added.
at::Tensor lra_local_by_position(const Batch& x, I b) {
  const I batch = x.q.size(0), heads = x.q.size(1), n = x.q.size(2), dim = x.q.size(3);
  const I total = n + b - n % b, groups = total / b;
  auto out = at::zeros_like(x.q);
  for (I s = 0; s < batch; ++s) {
    auto real = [&](I pos) { return pos >= n || x.valid[s][pos].item<bool>(); };
    for (I h = 0; h < heads; ++h)
      for (I p = 0; p < n; ++p) {
        const I g = p % groups, i = p / groups;
        auto logits = at::zeros({b}, at::kDouble);
        auto values = at::zeros({b, dim}, at::kDouble);
        for (I j = 0; j < b; ++j) {
          const I pos = j * groups + g;
          if (pos < n) {
            logits[j] = (x.q[s][h][p] * x.k[s][h][pos]).sum() / std::sqrt(double(dim));
            values[j] = x.v[s][h][pos];
          }  // else an appended zero key (logit 0) and value
          if (!(real(g * b + i) && real(g * b + j))) logits[j] += -1e10;
        }
        out[s][h][p] = (at::softmax(logits, 0).unsqueeze(1) * values).sum(0);
      }
  }
  return out;
}

TEST(Local, LraCompatIsWhatLraComputes) {
  // N = 10, b = 4: 2 appended positions, groups of stride 3; N = 8, b = 4: a whole extra block;
  // b = 20 > N: one group with 10 appended zero keys.
  for (auto [n, b] : {std::pair<I, I>{10, 4}, {8, 4}, {10, 20}, {9, 3}}) {
    const auto x = make_batch({n, n - 3, 2}, 2, n, 4, 5);
    const auto out = local(x, b, true);
    EXPECT_LT(max_diff(out, lra_local_by_position(x, b)), 1e-12) << "N = " << n << ", b = " << b;
  }
  // It is not the intended method: the extra zero keys count, even with b ≥ N ...
  const auto x = make_batch({12, 12}, 1, 12, 4, 6);
  EXPECT_GT(max_diff(local(x, 12, true), local(x, 12)), 1e-2);
  // ... and (the mask of other tokens) a real query can see what sits at a padded position.
  const auto padded = make_batch({12, 5}, 1, 12, 4, 7);
  EXPECT_GT(max_diff(local(fill_padding(padded, 3.0), 4, true)[1].slice(1, 0, 5),
                     local(padded, 4, true)[1].slice(1, 0, 5)),
            1e-3);
}

}  // namespace
}  // namespace attnlab::testing
