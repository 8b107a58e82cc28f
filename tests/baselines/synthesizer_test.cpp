// Synthesizer (random + dot product): softmax(Q Kᵀ/√p + R_h[:n, :n] + mask) V, against the
// formula written out (outputs and every gradient, R's included), its exactness limit (R ≡ 0:
// softmax), dropout only in training, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <ATen/core/grad_mode.h>

#include "method_support.hpp"

namespace attnlab::testing {
namespace {

at::Tensor table(const AttentionMethod& m) { return *m.named_parameters().find("R"); }  // R [H, L, L]

// The formula in double, with autograd's derivatives: padded keys excluded, R_h[:n, :n] added.
at::Tensor written_out(const at::Tensor& r, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const at::Tensor& valid) {
  const auto n = q.size(2);
  const auto logits = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1))) +
                      r.slice(1, 0, n).slice(2, 0, n);
  const auto allowed = real_keys(valid);
  const auto shifted = logits - std::get<0>(logits.max(-1, true)).detach();
  const auto e = at::where(allowed, shifted.exp(), at::zeros_like(shifted));
  return at::matmul(e / e.sum(-1, true), v);
}

TEST(Synthesizer, IsTheFormulaWithPadding) {
  // n = 12 < max_len = 16: the top-left 12 × 12 block of R is used
  at::manual_seed(1);
  auto m = make_method("synthesizer", {}, {2, 8, 16});
  const auto x = make_batch({12, 7}, 2, 12, 8, 21);
  const auto out = m->forward(x.q, x.k, x.v, x.valid);
  const auto expected = written_out(table(*m).to(at::kDouble), x.q, x.k, x.v, x.valid);
  EXPECT_LT(max_diff(out[0], expected[0]), 1e-10);
  EXPECT_LT(max_diff(out[1].slice(1, 0, 7), expected[1].slice(1, 0, 7)), 1e-10);
}

TEST(Synthesizer, GradientsAreTheFormulasRIncluded) {
  for (const std::int64_t max_len : {16, 12}) {  // n = 12 < L: R sliced; n = L: R whole
    at::manual_seed(2);
    auto m = make_method("synthesizer", {}, {2, 8, max_len});
    m->train();  // dropout 0: the hand-written backward
    const auto x = make_batch({12, 7}, 2, 12, 8, 22);
    const auto r = table(*m);
    auto weights = at::randn({2, 2, 12, 8}, seeded_generator(3), at::kDouble);
    weights[1].slice(1, 7, 12).zero_();  // padded query rows are unspecified
    auto q = x.q.clone().requires_grad_(true), k = x.k.clone().requires_grad_(true), v = x.v.clone().requires_grad_(true);
    (m->forward(q, k, v, x.valid) * weights).sum().backward();
    auto r_d = r.detach().to(at::kDouble).requires_grad_(true);
    auto q_d = x.q.clone().requires_grad_(true), k_d = x.k.clone().requires_grad_(true), v_d = x.v.clone().requires_grad_(true);
    (written_out(r_d, q_d, k_d, v_d, x.valid) * weights).sum().backward();
    ASSERT_TRUE(r.grad().defined());
    EXPECT_EQ(r.grad().sizes(), r.sizes());
    EXPECT_LT(max_diff(r.grad().to(at::kDouble), r_d.grad()), 1e-6) << max_len;  // R is float: its gradient is rounded
    EXPECT_LT(max_diff(q.grad(), q_d.grad()), 1e-10) << max_len;
    EXPECT_LT(max_diff(k.grad(), k_d.grad()), 1e-10) << max_len;
    EXPECT_LT(max_diff(v.grad(), v_d.grad()), 1e-10) << max_len;
    EXPECT_GT(r.grad().slice(1, 0, 12).slice(2, 0, 12).abs().min().item<double>(), 0.0) << max_len;  // every used entry
    if (max_len > 12) {  // past n: untouched
      EXPECT_EQ(r.grad().slice(1, 12, max_len).abs().max().item<double>(), 0.0);
      EXPECT_EQ(r.grad().slice(2, 12, max_len).abs().max().item<double>(), 0.0);
    }
  }
}

TEST(Synthesizer, PaddedKeysGiveRNoGradient) {
  at::manual_seed(3);
  auto m = make_method("synthesizer", {}, {2, 8, 16});
  m->train();
  const auto x = make_batch({7}, 2, 10, 8, 23);
  m->forward(x.q, x.k, x.v, x.valid).slice(2, 0, 7).sum().backward();
  const auto g = table(*m).grad();
  EXPECT_GT(g.slice(1, 0, 7).slice(2, 0, 7).abs().max().item<double>(), 0.0);
  EXPECT_EQ(g.slice(2, 7, 16).abs().max().item<double>(), 0.0);
}

TEST(Synthesizer, ZeroTableIsSoftmax) {
  auto m = make_method("synthesizer", {}, {2, 8, 10});
  {
    at::NoGradGuard no_grad;
    table(*m).zero_();
  }
  const auto x = make_batch({10, 6}, 2, 10, 8, 24);
  const auto out = m->forward(x.q, x.k, x.v, x.valid);
  const auto expected = reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid));
  EXPECT_LT(max_diff(out[0], expected[0]), 1e-12);
  EXPECT_LT(max_diff(out[1].slice(1, 0, 6), expected[1].slice(1, 0, 6)), 1e-12);
}

TEST(Synthesizer, PaddingContentChangesNothingAndASequenceIsItselfAlone) {
  at::manual_seed(4);
  auto m = make_method("synthesizer", {}, {2, 8, 16});
  const auto x = make_batch({16, 9}, 2, 16, 8, 25);
  const auto base = m->forward(x.q, x.k, x.v, x.valid);
  for (double garbage : {1e6, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    const auto y = fill_padding(x, garbage);
    const auto out = m->forward(y.q, y.k, y.v, y.valid);
    EXPECT_LT(max_diff(out[0], base[0]), 1e-12) << garbage;
    EXPECT_LT(max_diff(out[1].slice(1, 0, 9), base[1].slice(1, 0, 9)), 1e-12) << garbage;
  }
  const auto a = alone(x, 1, 9);
  EXPECT_LT(max_diff(m->forward(a.q, a.k, a.v, a.valid)[0], base[1].slice(1, 0, 9)), 1e-12);
}

TEST(Synthesizer, DropoutOnlyWhileTraining) {
  const auto x = make_batch({12, 7}, 2, 12, 8, 26);
  at::manual_seed(5);
  auto plain = make_method("synthesizer", {}, {2, 8, 16});
  at::manual_seed(5);
  auto dropped = make_method("synthesizer", {{"dropout", 0.5}}, {2, 8, 16});
  const auto expected = plain->forward(x.q, x.k, x.v, x.valid);
  EXPECT_TRUE(at::equal(dropped->forward(x.q, x.k, x.v, x.valid), expected));  // eval: none
  plain->train();
  EXPECT_TRUE(at::equal(plain->forward(x.q, x.k, x.v, x.valid), expected));  // dropout 0: none
  dropped->train();
  EXPECT_GT(max_diff(dropped->forward(x.q, x.k, x.v, x.valid)[0], expected[0]), 1e-3);
}

TEST(Synthesizer, TableIsXavierUniformFromTheGlobalGenerator) {
  at::manual_seed(6);
  const auto a = table(*make_method("synthesizer", {}, {2, 8, 64}));
  at::manual_seed(6);
  const auto b = table(*make_method("synthesizer", {}, {2, 8, 64}));
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_EQ(a.sizes(), (at::IntArrayRef{2, 64, 64}));
  const double bound = std::sqrt(6.0 / (2 * 2 * 64));  // Flax's fans of [H, L, L]: H·L in, H·L out
  EXPECT_LE(a.abs().max().item<double>(), bound);
  EXPECT_GT(a.abs().max().item<double>(), 0.99 * bound);
}

TEST(Synthesizer, LongerThanMaxLenIsRefusedInOneLine) {
  auto m = make_method("synthesizer", {}, {2, 8, 16});
  const auto x = make_batch({17}, 2, 17, 8, 27);
  try {
    m->forward(x.q, x.k, x.v, x.valid);
    FAIL() << "17 positions with max_len 16 were accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("17"), std::string::npos) << what;
    EXPECT_NE(what.find("16"), std::string::npos) << what;
  }
}

TEST(Synthesizer, DropoutOfOneIsRefused) {
  const auto& info = *attention_plugin("synthesizer").info;
  const auto* dropout = find_param(info.params, info.param_count, "dropout");
  ASSERT_NE(dropout, nullptr);
  EXPECT_THROW(check_param(*dropout, ParamValue{1.0}), ParamError);
  EXPECT_THROW(check_param(*dropout, ParamValue{-0.1}), ParamError);
}

}  // namespace
}  // namespace attnlab::testing
