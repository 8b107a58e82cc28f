// Linformer: K̄ = E_h[:, :n] (K ⊙ m), V̄ = E_h[:, :n] (V ⊙ m), out = softmax(Q K̄ᵀ/√p) V̄, against
// the formula written out, its exactness limit (k = n, E_h = I, no padding: softmax), what padding
// does there, E learned or frozen, one E shared by every layer (Nystromformer's code) through the
// model, its optimiser and its checkpoints, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include <ATen/core/grad_mode.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "attnlab/train/model.hpp"
#include "attnlab/train/optimizer.hpp"
#include "method_support.hpp"

namespace attnlab::testing {
namespace {

// E [H, k, L], whether a parameter (learned) or a buffer (freeze_e).
at::Tensor projection(const AttentionMethod& m) {
  const auto parameters = m.named_parameters();
  if (const auto* e = parameters.find("E")) return *e;
  const auto buffers = m.named_buffers();
  if (const auto* e = buffers.find("E")) return *e;
  throw std::runtime_error("linformer has no tensor named E");
}

// The formula, one (sequence, head) at a time, in double.
at::Tensor written_out(const at::Tensor& e, const Batch& x) {
  const auto n = x.q.size(2), dim = x.q.size(3);
  auto out = at::zeros_like(x.q);
  for (std::int64_t b = 0; b < x.q.size(0); ++b) {
    const auto m = x.valid[b].to(at::kDouble).unsqueeze(1);  // [n, 1]
    for (std::int64_t h = 0; h < x.q.size(1); ++h) {
      const auto eh = e[h].slice(1, 0, n).to(at::kDouble);  // [k, n]
      const auto k_bar = eh.mm(x.k[b][h] * m), v_bar = eh.mm(x.v[b][h] * m);
      const auto logits = x.q[b][h].mm(k_bar.t()) / std::sqrt(static_cast<double>(dim));
      const auto w = (logits - std::get<0>(logits.max(1, true))).exp();
      out[b][h].copy_((w / w.sum(1, true)).mm(v_bar));
    }
  }
  return out;
}

TEST(Linformer, IsTheFormulaWithPadding) {
  // n = 12 < max_len = 16: the first 12 columns of E are used
  at::manual_seed(1);
  auto m = make_method("linformer", {{"k", std::int64_t{5}}}, {2, 8, 16});
  const auto x = make_batch({12, 7}, 2, 12, 8, 11);
  const auto out = m->forward(x.q, x.k, x.v, x.valid);
  const auto expected = written_out(projection(*m), x);
  EXPECT_LT(max_diff(out[0], expected[0]), 1e-10);
  EXPECT_LT(max_diff(out[1].slice(1, 0, 7), expected[1].slice(1, 0, 7)), 1e-10);
}

TEST(Linformer, PaddingContentChangesNothingAndASequenceIsItselfAlone) {
  at::manual_seed(2);
  auto m = make_method("linformer", {{"k", std::int64_t{6}}}, {2, 8, 16});
  const auto x = make_batch({16, 9}, 2, 16, 8, 12);
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

// k = n = max_len and E_h = I: K̄ = K, V̄ = V.
std::shared_ptr<AttentionMethod> identity_projection(std::int64_t n) {
  auto m = make_method("linformer", {{"k", n}}, {2, 8, n});
  at::NoGradGuard no_grad;
  projection(*m).copy_(at::eye(n).expand({2, n, n}));
  return m;
}

TEST(Linformer, IdentityProjectionWithoutPaddingIsSoftmax) {
  auto m = identity_projection(10);
  const auto x = make_batch({10, 10}, 2, 10, 8, 13);
  const auto expected = reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid));
  EXPECT_LT(max_diff(m->forward(x.q, x.k, x.v, x.valid), expected), 1e-12);
}

TEST(Linformer, IdentityProjectionWithPaddingGivesPaddedKeysLogitZero) {
  // No mask over the k slots: a zeroed padded key has logit 0 (not −∞) and a zero value, so it
  // still takes its share of the softmax. The output is softmax attention over every key with the
  // padded keys and values zeroed, not softmax over the real keys.
  auto m = identity_projection(10);
  const auto x = make_batch({10, 6}, 2, 10, 8, 14);
  const auto out = m->forward(x.q, x.k, x.v, x.valid)[1].slice(1, 0, 6);
  const auto real = x.valid.to(at::kDouble).view({2, 1, 10, 1});
  const auto all = at::ones({1, 1, 1, 10}, at::kBool);
  const auto zeroed = reference_softmax_attention(x.q, x.k * real, x.v * real, all)[1].slice(1, 0, 6);
  const auto softmax = reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid))[1].slice(1, 0, 6);
  EXPECT_LT(max_diff(out, zeroed), 1e-12);
  EXPECT_GT(max_diff(out, softmax), 1e-3);
}

TEST(Linformer, LearnedProjectionIsAParameterThatGetsAGradient) {
  at::manual_seed(3);
  auto m = make_method("linformer", {{"k", std::int64_t{4}}}, {2, 8, 16});
  m->train();
  EXPECT_TRUE(m->named_buffers().is_empty());
  const auto parameters = m->named_parameters();
  ASSERT_EQ(parameters.size(), 1u);
  const auto e = *parameters.find("E");
  EXPECT_EQ(e.sizes(), (at::IntArrayRef{2, 4, 16}));
  EXPECT_TRUE(e.requires_grad());
  const auto x = make_batch({12, 7}, 2, 12, 8, 15);
  m->forward(x.q, x.k, x.v, x.valid).slice(2, 0, 7).sum().backward();
  ASSERT_TRUE(e.grad().defined());
  EXPECT_GT(e.grad().slice(2, 0, 12).abs().min().item<double>(), 0.0);  // every used column
  EXPECT_EQ(e.grad().slice(2, 12, 16).abs().max().item<double>(), 0.0);  // columns past n: untouched
}

TEST(Linformer, FrozenProjectionIsABufferSavedWithTheModel) {
  at::manual_seed(4);
  auto m = make_method("linformer", {{"k", std::int64_t{4}}, {"freeze_e", true}}, {2, 8, 16});
  EXPECT_TRUE(m->parameters().empty());
  const auto e = projection(*m);
  EXPECT_EQ(e.sizes(), (at::IntArrayRef{2, 4, 16}));
  EXPECT_FALSE(e.requires_grad());
  // a checkpoint carries it: another draw takes it back on load
  torch::serialize::OutputArchive out;
  m->save(out);
  std::stringstream stream;
  out.save_to(stream);
  at::manual_seed(5);
  auto other = make_method("linformer", {{"k", std::int64_t{4}}, {"freeze_e", true}}, {2, 8, 16});
  EXPECT_FALSE(at::equal(projection(*other), e));
  torch::serialize::InputArchive in;
  in.load_from(stream);
  other->load(in);
  EXPECT_TRUE(at::equal(projection(*other), e));
}

// A two-layer model of Linformer, E shared or not (eval mode: no dropout).
EncoderClassifier linformer_model(bool share_e, std::uint64_t seed) {
  at::manual_seed(seed);
  ModelConfig config;
  config.layers = 2;
  config.dim = 16;
  config.ffn_dim = 32;
  config.heads = 2;
  config.head_dim = 8;
  ParamValues params = attention_plugin("linformer").defaults();
  params.set("k", std::int64_t{4});
  params.set("share_e", share_e);
  EncoderClassifier model(config, TaskInfo{10, 3, 12, 1},
                          [params](const AttentionShape& shape) { return attention_plugin("linformer").make_attention(shape, params); });
  model->eval();
  return model;
}

at::Tensor layer_e(const EncoderClassifier& model, std::size_t layer) { return projection(*model->attention_methods()[layer]); }

// A batch of three sequences, one of them padded, and the loss of the model on it.
at::Tensor loss_of(EncoderClassifier& model) {
  const auto tokens = at::arange(36, at::kLong).remainder(9).add(1).view({3, 1, 12});
  const auto lengths = at::tensor({12, 8, 12}, at::kLong).unsqueeze(1);
  return at::cross_entropy_loss(model->forward(tokens, lengths), at::tensor({0, 1, 2}, at::kLong));
}

TEST(Linformer, SharedProjectionIsOneTensorForEveryLayer) {
  auto shared = linformer_model(true, 21), separate = linformer_model(false, 21);
  EXPECT_TRUE(layer_e(shared, 0).is_same(layer_e(shared, 1)));
  EXPECT_FALSE(at::equal(layer_e(separate, 0), layer_e(separate, 1)));
  // listed by both layers, counted and optimised once
  EXPECT_EQ(shared->parameters().size(), separate->parameters().size());
  EXPECT_EQ(shared->unique_parameters().size(), separate->unique_parameters().size() - 1);
  EXPECT_EQ(separate->parameter_count() - shared->parameter_count(), 2 * 4 * 12);
}

// Its gradient is the sum of what each layer's use of it contributes: the gradient of an unshared
// model holding the same weights, E of layer 0 plus E of layer 1.
TEST(Linformer, SharedProjectionsGradientIsBothLayersContributions) {
  auto shared = linformer_model(true, 22), separate = linformer_model(false, 23);
  {
    at::NoGradGuard no_grad;
    const auto from = shared->named_parameters();
    for (auto& p : separate->named_parameters()) p.value().copy_(*from.find(p.key()));
  }
  ASSERT_TRUE(at::equal(layer_e(separate, 0), layer_e(separate, 1)));
  loss_of(shared).backward();
  loss_of(separate).backward();
  const auto expected = layer_e(separate, 0).grad() + layer_e(separate, 1).grad();
  EXPECT_GT(layer_e(separate, 1).grad().abs().max().item<double>(), 1e-6);  // layer 1 contributes
  EXPECT_LT(max_diff(layer_e(shared, 0).grad(), expected), 1e-6);
}

// AdamW's first step moves each weight by lr * g / (|g| + eps) (m̂ = g, v̂ = g²): once, not twice.
// The optimiser refuses the tensor listed twice, as Module::parameters() lists it.
TEST(Linformer, SharedProjectionTakesOneOptimiserStep) {
  auto model = linformer_model(true, 24);
  EXPECT_THROW(FusedAdamW(model->parameters(), torch::optim::AdamWOptions(0.01)), std::invalid_argument);
  const double lr = 0.01, eps = 1e-8;
  FusedAdamW optimizer(model->unique_parameters(), torch::optim::AdamWOptions(lr).weight_decay(0.0).eps(eps));
  optimizer.zero_grad();
  loss_of(model).backward();
  const auto before = layer_e(model, 0).detach().clone();
  const auto g = layer_e(model, 0).grad().detach().clone();
  optimizer.step();
  const auto expected = before - lr * g / (g.abs() + eps);
  EXPECT_LT(max_diff(layer_e(model, 0), expected), 1e-6);
  EXPECT_TRUE(layer_e(model, 0).is_same(layer_e(model, 1)));
}

// A checkpoint written by torch::save and read into another model leaves E shared, with its values.
TEST(Linformer, SharedProjectionStaysSharedThroughACheckpoint) {
  auto model = linformer_model(true, 25), other = linformer_model(true, 26);
  ASSERT_FALSE(at::equal(layer_e(model, 0), layer_e(other, 0)));
  torch::serialize::OutputArchive out;
  model->save(out);
  std::stringstream stream;
  out.save_to(stream);
  torch::serialize::InputArchive in;
  in.load_from(stream);
  other->load(in);
  EXPECT_TRUE(at::equal(layer_e(other, 0), layer_e(model, 0)));
  EXPECT_TRUE(layer_e(other, 0).is_same(layer_e(other, 1)));
}

TEST(Linformer, ProjectionIsDrawnFromTheGlobalGeneratorWithStd002) {
  at::manual_seed(6);
  const auto a = projection(*make_method("linformer", {}, {2, 8, 64}));
  at::manual_seed(6);
  const auto b = projection(*make_method("linformer", {}, {2, 8, 64}));
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_EQ(a.sizes(), (at::IntArrayRef{2, 128, 64}));  // k = 128 by default
  EXPECT_NEAR(a.std().item<double>(), 0.02, 0.001);
  EXPECT_NEAR(a.mean().item<double>(), 0.0, 0.001);
}

TEST(Linformer, LongerThanMaxLenIsRefusedInOneLine) {
  auto m = make_method("linformer", {{"k", std::int64_t{4}}}, {2, 8, 16});
  const auto x = make_batch({17}, 2, 17, 8, 16);
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

TEST(Linformer, ProjectedLengthBelowOneIsRefused) {
  const auto& info = *attention_plugin("linformer").info;
  const auto* k = find_param(info.params, info.param_count, "k");
  ASSERT_NE(k, nullptr);
  EXPECT_THROW(check_param(*k, ParamValue{std::int64_t{0}}), ParamError);
  EXPECT_NO_THROW(check_param(*k, ParamValue{std::int64_t{1}}));
}

}  // namespace
}  // namespace attnlab::testing
