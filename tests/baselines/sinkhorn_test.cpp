// Sparse Sinkhorn attention (plugins/sinkhorn): the method written out densely (N × N mixing and
// mask matrices) with padding; the exactness limit b = N (twice softmax); padding and batch
// independence with several blocks; the sort net's gradient; and lra_compat against LRA's
// computation written out position by position.
#include <gtest/gtest.h>

#include "method_support.hpp"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

namespace attnlab::testing {
namespace {

using I = std::int64_t;

std::shared_ptr<AttentionMethod> sinkhorn(I block, bool lra_compat = false, AttentionShape shape = {2, 8, 64}) {
  return make_method("sinkhorn", {{"block", block}, {"lra_compat", lra_compat}}, shape);
}

at::Tensor sort_weight(AttentionMethod& m) { return m.named_parameters()["sort_weight"]; }

// A sort net with larger, seeded weights than its initialisation, so that P is far from uniform.
void randomise_sort_weight(AttentionMethod& m, std::uint64_t seed) {
  at::NoGradGuard no_grad;
  auto w = sort_weight(m);
  auto g = seeded_generator(seed);
  w.copy_(at::randn(w.sizes(), g, at::kDouble) * 0.7);
}

double real_diff(const at::Tensor& out, const at::Tensor& expected, const at::Tensor& valid) {
  const auto rows = valid.unsqueeze(1).unsqueeze(-1).logical_not();
  return max_diff(out.masked_fill(rows, 0), expected.masked_fill(rows, 0));
}

// The intended method as dense matrices on the N' = nb·b positions (the sequence extended with
// invalid zeros): P over the real blocks, the mixing matrix M = Pᵀ ⊗ I_b (K̃ = M K), and the two
// allowed-key masks, then softmax(q Kᵀ) V + softmax(q K̃ᵀ) Ṽ by the reference formula.
at::Tensor sinkhorn_dense(const Batch& x, const at::Tensor& w, I b) {
  const I batch = x.q.size(0), heads = x.q.size(1), n = x.q.size(2), dim = x.q.size(3);
  const I nb = (n + b - 1) / b, total = nb * b;
  auto ext = [&](const at::Tensor& t) {
    return at::cat({t, at::zeros({batch, heads, total - n, dim}, at::kDouble)}, 2);
  };
  const auto valid = at::cat({x.valid, at::zeros({batch, total - n}, at::kBool)}, 1);  // [B, N']
  const auto rows = valid.view({batch, 1, total, 1});
  const auto q = ext(x.q), k = ext(x.k) * rows, v = ext(x.v) * rows;  // padded keys and values zeroed
  const auto position = at::arange(total, at::kLong);
  const auto block = position.div(b, "floor"), slot = position.remainder(b);
  // S [nb, N'] sums block k's rows; s = S K, Z = s W
  const auto summing = (at::arange(nb, at::kLong).unsqueeze(1) == block.unsqueeze(0)).to(at::kDouble);
  const auto z = at::matmul(at::matmul(summing, k), w.to(at::kDouble).slice(1, 0, nb));  // [B, H, nb, nb]
  const auto real_block = at::matmul(summing, valid.to(at::kDouble).unsqueeze(-1)).squeeze(-1) > 0;  // [B, nb]
  const auto col_ok = real_block.view({batch, 1, 1, nb}), row_ok = real_block.view({batch, 1, nb, 1});
  auto e = at::where(col_ok, (z - z.amax(-1, true)).exp(), at::zeros_like(z));
  const auto p = at::where(row_ok, e / e.sum(-1, true), at::zeros_like(e));  // P[k, l]
  // M[l·b + x, k·b + y] = P[k, l] δ(x, y)
  const auto same_slot = (slot.unsqueeze(1) == slot.unsqueeze(0)).to(at::kDouble);  // [N', N']
  const auto m = p.transpose(-2, -1).index_select(-2, block).index_select(-1, block) * same_slot;
  const auto k_sorted = at::matmul(m, k), v_sorted = at::matmul(m, v);
  // local: same block, real key; sorted: column l·b + x for a query of block l, l real, slot x real somewhere
  const auto local_allowed = (block.unsqueeze(1) == block.unsqueeze(0)).view({1, 1, total, total}) &
                             valid.view({batch, 1, 1, total});
  const auto slot_real = at::matmul(valid.to(at::kDouble), same_slot) > 0;  // [B, N']: slot of column real somewhere
  const auto sorted_allowed = (block.unsqueeze(1) == block.unsqueeze(0)).view({1, 1, total, total}) &
                              real_block.index_select(1, block).view({batch, 1, 1, total}) &
                              slot_real.view({batch, 1, 1, total});
  const auto out = reference_softmax_attention(q, k, v, local_allowed) +
                   reference_softmax_attention(q, k_sorted, v_sorted, sorted_allowed);
  return out.slice(2, 0, n);
}

TEST(Sinkhorn, ParametersAndRefusals) {
  const auto defaults = attention_plugin("sinkhorn").defaults();
  EXPECT_EQ(defaults.integer("block"), 50);
  EXPECT_FALSE(defaults.boolean("lra_compat"));
  const auto& info = *attention_plugin("sinkhorn").info;
  EXPECT_THROW(check_param(*find_param(info.params, info.param_count, "block"), ParamValue{I{0}}), ParamError);
  // one trained tensor, the sort net W [p, ⌈max_len / b⌉], shared by the heads
  auto m = make_method("sinkhorn", {}, {2, 32, 4096});
  ASSERT_EQ(m->parameters().size(), 1u);
  EXPECT_EQ(sort_weight(*m).sizes(), at::IntArrayRef({32, 82}));
  EXPECT_EQ(sort_weight(*sinkhorn(4, false, {2, 8, 13})).sizes(), at::IntArrayRef({8, 4}));
  // more tokens than max_len: more blocks than the sort net has columns
  const auto x = make_batch({20}, 2, 20, 8, 1);
  EXPECT_THROW(sinkhorn(4, false, {2, 8, 16})->forward(x.q, x.k, x.v, x.valid), std::invalid_argument);
}

TEST(Sinkhorn, IsTheDenseFormula) {
  // N = 12, b = 4: three blocks; the second sequence's third block is all padding, the third's
  // holds one real token. N = 10: the last block is cut short (two invalid positions).
  for (I n : {12, 10}) {
    const auto x = make_batch({n, 6, 9}, 2, n, 8, 2);
    auto m = sinkhorn(4);
    randomise_sort_weight(*m, 3);
    const auto out = m->forward(x.q, x.k, x.v, x.valid);
    ASSERT_EQ(out.sizes(), x.q.sizes());
    const auto expected = sinkhorn_dense(x, sort_weight(*m), 4);
    EXPECT_LT(real_diff(out, expected, x.valid), 1e-12) << "N = " << n;
    const auto nan = fill_padding(x, std::numeric_limits<double>::quiet_NaN());
    EXPECT_LT(real_diff(m->forward(nan.q, nan.k, nan.v, x.valid), expected, x.valid), 1e-12) << "N = " << n;
    // the sorted term matters: it is not local attention doubled
    const auto local = reference_softmax_attention(
        x.q, x.k, x.v, (at::arange(n).div(4, "floor").unsqueeze(1) == at::arange(n).div(4, "floor").unsqueeze(0)) &
                           real_keys(x.valid));
    EXPECT_GT(real_diff(out, 2 * local, x.valid), 1e-2);
  }
}

TEST(Sinkhorn, ABlockOfNIsTwiceSoftmax) {
  const auto x = make_batch({12, 7}, 2, 12, 8, 4);
  const auto softmax = reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid));
  for (bool compat : {false, true})
    for (I b : {12, 50}) {
      if (compat && b != 12) continue;  // LRA's code pads nothing: b = N exactly
      auto m = sinkhorn(b, compat);
      randomise_sort_weight(*m, 5);
      EXPECT_LT(real_diff(m->forward(x.q, x.k, x.v, x.valid), 2 * softmax, x.valid), 1e-12)
          << "b = " << b << (compat ? ", lra_compat" : "");
    }
}

TEST(Sinkhorn, PaddingNeitherLengthNorNeighboursMatter) {
  const I n = 24, real = 13;
  const auto x = make_batch({n, real}, 2, n, 8, 6);
  for (I b : {4, 5, 50}) {
    auto m = sinkhorn(b);
    randomise_sort_weight(*m, 7);
    auto run = [&](const Batch& y) { return m->forward(y.q, y.k, y.v, y.valid); };
    const auto base = run(x);
    for (double garbage : {1e6, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()})
      EXPECT_EQ(real_diff(run(fill_padding(x, garbage)), base, x.valid), 0.0) << "b = " << b;
    EXPECT_LT(max_diff(run(alone(x, 1, real))[0], base[1].slice(1, 0, real)), 1e-13) << "b = " << b;
    EXPECT_LT(max_diff(run(alone(x, 0, n))[0], base[0]), 1e-13) << "b = " << b;
    auto other = x;
    other.k = x.k.clone();
    other.k[1].normal_();
    EXPECT_EQ(max_diff(run(other)[0], base[0]), 0.0) << "b = " << b;
  }
}

TEST(Sinkhorn, TheSortNetLearnsExceptInLraCompat) {
  const auto x = make_batch({12, 7}, 2, 12, 8, 8);
  const auto weights = at::randn(x.q.sizes(), seeded_generator(9), at::kDouble) *
                       x.valid.view({2, 1, 12, 1}).to(at::kDouble);  // real query rows only
  double largest[2];
  for (bool compat : {false, true}) {
    auto m = sinkhorn(4, compat);
    randomise_sort_weight(*m, 10);
    (m->forward(x.q, x.k, x.v, x.valid) * weights).sum().backward();
    const auto grad = sort_weight(*m).grad();
    ASSERT_TRUE(grad.defined());
    largest[compat] = grad.abs().max().item<double>();
  }
  EXPECT_GT(largest[0], 1e-3);   // default: W is trained
  EXPECT_LT(largest[1], 1e-12);  // LRA's einsum sums P's rows to 1: no gradient reaches W
}

TEST(Sinkhorn, FloatIsFiniteAtLargeScores) {
  const auto x = make_batch({40, 17}, 2, 40, 8, 11);
  auto m = sinkhorn(8);
  const auto q = (x.q * 60).to(at::kFloat).requires_grad_(true), k = (x.k * 60).to(at::kFloat).requires_grad_(true);
  const auto out = m->forward(q, k, x.v.to(at::kFloat), x.valid);
  EXPECT_TRUE(out[0].isfinite().all().item<bool>());
  EXPECT_TRUE(out[1].slice(1, 0, 17).isfinite().all().item<bool>());
  (out[0].sum() + out[1].slice(1, 0, 17).sum()).backward();
  EXPECT_TRUE(q.grad().isfinite().all().item<bool>());
  EXPECT_TRUE(sort_weight(*m).grad().isfinite().all().item<bool>());
}

// What LRA's sinkhorn_attention.py computes, written out for query position p (N' = nb·b, the
// sequence extended with invalid zeros): group g = p mod nb, slot i = p div nb; local keys are the
// group's positions j·nb + g, masked by the contiguous positions g·b + i, g·b + j; sorted key j is
// the sum of the contiguous chunk j·nb … j·nb + nb − 1 times Σ_l P[g, l] (P the softmax of the
// group's key sum times W), allowed if some contiguous block c has c·b + i and c·b + j real.
at::Tensor lra_sinkhorn_by_position(const Batch& x, const at::Tensor& w, I b) {
  const I batch = x.q.size(0), heads = x.q.size(1), n = x.q.size(2), dim = x.q.size(3);
  const I nb = (n + b - 1) / b;
  auto out = at::zeros_like(x.q);
  const auto wd = w.to(at::kDouble).slice(1, 0, nb);
  for (I s = 0; s < batch; ++s) {
    auto real = [&](I pos) { return pos < n && x.valid[s][pos].item<bool>(); };
    auto row = [&](const at::Tensor& t, I h, I pos) { return pos < n ? t[s][h][pos] : at::zeros({dim}, at::kDouble); };
    for (I h = 0; h < heads; ++h)
      for (I p = 0; p < n; ++p) {
        const I g = p % nb, i = p / nb;
        auto group_sum = at::zeros({dim}, at::kDouble);
        for (I j = 0; j < b; ++j) group_sum += row(x.k, h, j * nb + g);
        const double mass = at::softmax(at::matmul(group_sum, wd), 0).sum().item<double>();
        auto local_logits = at::zeros({b}, at::kDouble), sorted_logits = at::zeros({b}, at::kDouble);
        auto local_values = at::zeros({b, dim}, at::kDouble), sorted_values = at::zeros({b, dim}, at::kDouble);
        for (I j = 0; j < b; ++j) {
          const auto q = x.q[s][h][p] / std::sqrt(double(dim));
          local_logits[j] = (q * row(x.k, h, j * nb + g)).sum();
          local_values[j] = row(x.v, h, j * nb + g);
          if (!(real(g * b + i) && real(g * b + j))) local_logits[j] += -1e10;
          auto chunk_k = at::zeros({dim}, at::kDouble), chunk_v = at::zeros({dim}, at::kDouble);
          bool allowed = false;
          for (I c = 0; c < nb; ++c) {
            chunk_k += row(x.k, h, j * nb + c);
            chunk_v += row(x.v, h, j * nb + c);
            allowed = allowed || (real(c * b + i) && real(c * b + j));
          }
          sorted_logits[j] = (q * chunk_k * mass).sum();
          sorted_values[j] = chunk_v * mass;
          if (!allowed) sorted_logits[j] += -1e10;
        }
        out[s][h][p] = (at::softmax(local_logits, 0).unsqueeze(1) * local_values).sum(0) +
                       (at::softmax(sorted_logits, 0).unsqueeze(1) * sorted_values).sum(0);
      }
  }
  return out;
}

TEST(Sinkhorn, LraCompatIsWhatLraComputes) {
  for (auto [n, b] : {std::pair<I, I>{12, 4}, {12, 3}, {10, 4}}) {
    const auto x = make_batch({n, 7, 2}, 2, n, 4, 12);
    auto m = sinkhorn(b, true, {2, 4, 64});
    randomise_sort_weight(*m, 13);
    EXPECT_LT(max_diff(m->forward(x.q, x.k, x.v, x.valid), lra_sinkhorn_by_position(x, sort_weight(*m), b)), 1e-10)
        << "N = " << n << ", b = " << b;
  }
  // the sort is a no-op there: another sort net gives the same output
  const auto x = make_batch({12, 12}, 2, 12, 8, 14);
  auto m = sinkhorn(4, true);
  randomise_sort_weight(*m, 15);
  const auto first = m->forward(x.q, x.k, x.v, x.valid);
  randomise_sort_weight(*m, 16);
  EXPECT_LT(max_diff(m->forward(x.q, x.k, x.v, x.valid), first), 1e-12);
}

}  // namespace
}  // namespace attnlab::testing
