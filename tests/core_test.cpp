// core/: parameters, schedules, the softmax plugin against the explicit formula, the model's
// padding behaviour, and seeded determinism of a short CPU training run.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <cmath>
#include <filesystem>
#include <map>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "attnlab/torch_compat.hpp"
#include "attnlab/train/config.hpp"
#include "attnlab/train/trainer.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {
namespace {

const ParamSpec kSpecs[] = {
    {"n", ParamType::integer, "4", 1, 10, nullptr, ""},
    {"r", ParamType::real, "0.5", 0, 1, nullptr, ""},
    {"b", ParamType::boolean, "true", 0, 0, nullptr, ""},
    {"s", ParamType::string, "mean", 0, 0, "mean|cls", ""},
};

TEST(Params, DefaultsParseToTheirTypes) {
  auto v = ParamValues::defaults(kSpecs, 4);
  EXPECT_EQ(v.integer("n"), 4);
  EXPECT_DOUBLE_EQ(v.real("r"), 0.5);
  EXPECT_TRUE(v.boolean("b"));
  EXPECT_EQ(v.string("s"), "mean");
  EXPECT_DOUBLE_EQ(v.real("n"), 4.0);  // integers read as reals
  EXPECT_THROW(v.integer("r"), ParamError);
  EXPECT_THROW(v.integer("missing"), ParamError);
}

TEST(Params, CheckRefusesWrongTypeRangeAndChoice) {
  EXPECT_THROW(check_param(kSpecs[0], ParamValue(std::int64_t{11})), ParamError);
  EXPECT_THROW(check_param(kSpecs[0], ParamValue(2.5)), ParamError);
  EXPECT_THROW(check_param(kSpecs[1], ParamValue(1.5)), ParamError);
  EXPECT_THROW(check_param(kSpecs[3], ParamValue(std::string("max"))), ParamError);
  EXPECT_EQ(std::get<double>(check_param(kSpecs[1], ParamValue(std::int64_t{1}))), 1.0);  // int accepted as real
  try {
    check_param(kSpecs[0], ParamValue(std::int64_t{0}));
    FAIL();
  } catch (const ParamError& e) {
    EXPECT_STREQ(e.what(), "n: 0 is out of range [1, 10]");
  }
}

TEST(Params, RealsWriteBackAsShortestRoundTrip) {
  EXPECT_EQ(to_toml(ParamValue(0.1)), "0.1");
  EXPECT_EQ(to_toml(ParamValue(1.0)), "1.0");
  EXPECT_EQ(to_toml(ParamValue(1e-4)), "0.0001");
  EXPECT_EQ(to_toml(ParamValue(std::string("a\"b"))), "\"a\\\"b\"");
}

TEST(Schedule, WarmupThenDecays) {
  TrainConfig c;
  c.lr = 1.0;
  c.steps = 110;
  c.warmup = 10;
  c.decay = Decay::linear;
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 9), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 10), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 60), 0.5);
  c.decay = Decay::cosine;
  EXPECT_NEAR(learning_rate_at(c, 60), 0.5, 1e-12);
  EXPECT_NEAR(learning_rate_at(c, 35), 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-12);
  c.decay = Decay::sqrt;
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 39), std::sqrt(10.0 / 40.0));
  c.decay = Decay::constant;
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 100), 1.0);
}

TEST(Metrics, MajorityRate) {
  EXPECT_DOUBLE_EQ(majority_rate(at::tensor({0, 1, 1, 2, 1}, at::kLong), 3), 0.6);
}

// --- the softmax plugin, loaded as the CLI loads it --------------------------------------------

const LoadedPlugin& softmax_plugin() {
  static PluginRegistry registry = [] {
    PluginRegistry r;
    r.load_folders(PluginRegistry::search_path({}));
    return r;
  }();
  const auto* p = registry.find(PluginKind::attention, "softmax");
  if (!p) throw std::runtime_error("softmax plugin not found");
  return *p;
}

std::shared_ptr<AttentionMethod> make_softmax() {
  return softmax_plugin().make_attention({2, 8, 16}, softmax_plugin().defaults());
}

TEST(Softmax, MatchesTheExplicitFormula) {
  at::manual_seed(0);
  auto q = at::randn({2, 2, 7, 8}, at::kDouble), k = at::randn({2, 2, 7, 8}, at::kDouble), v = at::randn({2, 2, 7, 8}, at::kDouble);
  auto valid = at::ones({2, 7}, at::kBool);
  auto out = make_softmax()->forward(q, k, v, valid);
  // softmax(Q Kᵀ/√p) V, written out element by element for one (batch, head, query)
  auto expected = at::softmax(at::matmul(q, k.transpose(-2, -1)) / std::sqrt(8.0), -1).matmul(v);
  EXPECT_TRUE(at::allclose(out, expected, 1e-10, 1e-12));
  double manual[8] = {};
  double weights[7], total = 0;
  for (int j = 0; j < 7; ++j) {
    weights[j] = std::exp((q[1][0][3] * k[1][0][j]).sum().item<double>() / std::sqrt(8.0));
    total += weights[j];
  }
  for (int j = 0; j < 7; ++j)
    for (int d = 0; d < 8; ++d) manual[d] += weights[j] / total * v[1][0][j][d].item<double>();
  for (int d = 0; d < 8; ++d) EXPECT_NEAR(out[1][0][3][d].item<double>(), manual[d], 1e-12);
}

TEST(Softmax, PaddingNeverChangesRealTokens) {
  at::manual_seed(1);
  const int n = 9, real = 5;
  auto q = at::randn({1, 2, n, 8}, at::kDouble), k = at::randn({1, 2, n, 8}, at::kDouble), v = at::randn({1, 2, n, 8}, at::kDouble);
  auto valid = at::arange(n).lt(real).unsqueeze(0);
  auto attention = make_softmax();
  auto padded = attention->forward(q, k, v, valid).slice(2, 0, real);
  // the same sequence without its padding
  auto unpadded = attention->forward(q.slice(2, 0, real), k.slice(2, 0, real), v.slice(2, 0, real),
                                     at::ones({1, real}, at::kBool));
  EXPECT_TRUE(at::allclose(padded, unpadded, 1e-10, 1e-12));
  // garbage at padded positions changes nothing on real ones
  auto k2 = k.clone(), v2 = v.clone();
  k2.slice(2, real, n).normal_().mul_(100);
  v2.slice(2, real, n).normal_().mul_(100);
  EXPECT_TRUE(at::equal(attention->forward(q, k2, v2, valid).slice(2, 0, real), padded));
}

// The fused kernel LibTorch 2 runs and the explicit formula (1.13's path, with its hand-written
// backward) against autograd through the formula written out, on the same float inputs with
// padding: outputs and the gradients of q, k and v.
TEST(Softmax, FusedAndExplicitPathsAgreeWithTheFormulaAndItsGradients) {
  at::manual_seed(2);
  const std::int64_t n = 37, real = 23;  // n not a multiple of a kernel's block
  auto valid = at::stack({at::ones({n}, at::kBool), at::arange(n).lt(real)});
  auto upstream = at::randn({2, 2, n, 16});
  auto draw = [&] { return at::randn({2, 2, n, 16}).requires_grad_(true); };
  const auto q = draw(), k = draw(), v = draw();
  struct Result { at::Tensor out, dq, dk, dv; };
  auto run = [&](auto attention) {
    for (const auto& t : {q, k, v}) t.mutable_grad() = at::Tensor();
    auto out = attention();
    (out * upstream).sum().backward();
    return Result{out.detach(), q.grad().clone(), k.grad().clone(), v.grad().clone()};
  };
  const auto formula = run([&] {
    auto scores = at::matmul(q, k.transpose(-2, -1)) / 4.0;  // √16
    return at::matmul(at::softmax(scores.masked_fill(valid.logical_not().unsqueeze(1).unsqueeze(2), -INFINITY), -1), v);
  });
  const auto fused = run([&] { return compat::scaled_dot_product_attention(q, k, v, valid, 0.0, true); });
  const auto explicit_path = run([&] { return compat::explicit_softmax_attention(q, k, v, valid, 0.0, true); });
  for (const auto* r : {&fused, &explicit_path}) {
    EXPECT_TRUE(at::allclose(r->out, formula.out, 1e-5, 1e-6)) << (r->out - formula.out).abs().max().item<float>();
    EXPECT_TRUE(at::allclose(r->dq, formula.dq, 1e-4, 1e-5)) << (r->dq - formula.dq).abs().max().item<float>();
    EXPECT_TRUE(at::allclose(r->dk, formula.dk, 1e-4, 1e-5)) << (r->dk - formula.dk).abs().max().item<float>();
    EXPECT_TRUE(at::allclose(r->dv, formula.dv, 1e-4, 1e-5)) << (r->dv - formula.dv).abs().max().item<float>();
  }
#if TORCH_VERSION_MAJOR >= 2
  // on the CPU, float and bf16 with a key mask go to the fused flash kernel; with dropout while
  // training, to LibTorch's math path (which the explicit one matches)
  const auto bf16 = [](const at::Tensor& t) { return t.to(at::kBFloat16); };
  EXPECT_EQ(compat::softmax_attention_kernel(q, k, v, valid, 0.0, true), "flash");
  EXPECT_EQ(compat::softmax_attention_kernel(bf16(q), bf16(k), bf16(v), valid, 0.0, true), "flash");
  EXPECT_EQ(compat::softmax_attention_kernel(q, k, v, valid, 0.1, true), "math");
  EXPECT_EQ(compat::softmax_attention_kernel(q, k, v, valid, 0.1, false), "flash");
#else
  EXPECT_EQ(compat::softmax_attention_kernel(q, k, v, valid, 0.0, true), "explicit");
#endif
}

// Dropout on the probabilities, on either path: seeded, active only while training, and an
// expectation unchanged (each kept probability is scaled by 1 / (1 − p)).
TEST(Softmax, DropoutIsSeededAndOnlyWhileTraining) {
  at::manual_seed(3);
  auto q = at::randn({1, 2, 64, 8}), k = at::randn({1, 2, 64, 8}), v = at::randn({1, 2, 64, 8});
  auto valid = at::ones({1, 64}, at::kBool);
  const auto exact = compat::scaled_dot_product_attention(q, k, v, valid, 0.5, /*training=*/false);
  EXPECT_TRUE(at::allclose(exact, compat::explicit_softmax_attention(q, k, v, valid, 0.0, false), 1e-5, 1e-6));
  auto dropped = [&](std::uint64_t seed) {
    at::manual_seed(seed);
    return compat::scaled_dot_product_attention(q, k, v, valid, 0.5, /*training=*/true);
  };
  EXPECT_TRUE(at::equal(dropped(7), dropped(7)));
  EXPECT_FALSE(at::allclose(dropped(7), exact, 1e-3, 1e-3));
  at::Tensor mean = at::zeros_like(exact);
  for (std::uint64_t seed = 0; seed < 400; ++seed) mean += dropped(seed) / 400;
  EXPECT_LT((mean - exact).abs().mean().item<double>(), 0.05);
}

// --- the model and a short seeded training run --------------------------------------------------

const auto toy_split = testing::first_token_split;

TEST(Model, PaddedTokensDoNotChangeTheLogits) {
  at::manual_seed(3);
  ModelConfig mc;
  TaskInfo task{10, 4, 12, 1};
  EncoderClassifier model(mc, task, [](const AttentionShape&) { return make_softmax(); });
  model->eval();
  auto tokens = at::randint(1, 10, {3, 1, 12}, at::kLong);
  auto lengths = at::tensor({12, 7, 3}, at::kLong).unsqueeze(1);
  auto logits = model->forward(tokens, lengths);
  EXPECT_EQ(logits.sizes(), (at::IntArrayRef{3, 4}));
  auto other = tokens.clone();
  other[1][0].slice(0, 7, 12).fill_(9);
  other[2][0].slice(0, 3, 12).fill_(0);
  EXPECT_TRUE(at::allclose(model->forward(other, lengths), logits, 1e-5, 1e-6));
}

// Attention that mixes nothing: each position's output is its own value, so with pooling = first
// (KL-Transformer App. E.2) the logits read the first token only, and with mean every token.
struct OwnValueAttention : AttentionMethod {
  at::Tensor forward(const at::Tensor&, const at::Tensor&, const at::Tensor& v, const at::Tensor&) override { return v; }
};

TEST(Model, FirstPoolingReadsTheFirstPositionOnly) {
  TaskInfo task{10, 4, 12, 1};
  auto tokens = at::randint(1, 10, {2, 1, 12}, at::kLong);
  const auto lengths = at::full({2, 1}, 12, at::kLong);
  auto changed = tokens.clone();
  changed.select(2, 5).fill_(0);  // not the first position
  for (const Pooling pooling : {Pooling::first, Pooling::mean}) {
    at::manual_seed(4);
    ModelConfig mc;
    mc.pooling = pooling;
    EncoderClassifier model(mc, task, [](const AttentionShape&) { return std::make_shared<OwnValueAttention>(); });
    model->eval();
    const bool same = at::allclose(model->forward(changed, lengths), model->forward(tokens, lengths), 1e-6, 1e-7);
    EXPECT_EQ(same, pooling == Pooling::first) << word(pooling);
  }
}

TEST(Model, PairTasksShareOneEncoder) {
  ModelConfig mc;
  TaskInfo task{10, 2, 8, 2};
  EncoderClassifier model(mc, task, [](const AttentionShape&) { return make_softmax(); });
  model->eval();
  auto tokens = at::randint(1, 10, {4, 2, 8}, at::kLong);
  auto lengths = at::full({4, 2}, 8, at::kLong);
  EXPECT_EQ(model->forward(tokens, lengths).sizes(), (at::IntArrayRef{4, 2}));
  // swapping the towers changes u - v only: logits differ, but the encoder is one module
  EXPECT_EQ(model->attention_methods().size(), 2u);
}

// The KL authors' model ([model] norm = "normed_input", attention_bias = false, init =
// "kl_authors", pair_head = "concat"), each against its formula.
ModelConfig kl_model_config() {
  ModelConfig mc;
  mc.layers = 1;
  mc.dim = 16;
  mc.ffn_dim = 24;
  mc.heads = 2;
  mc.head_dim = 8;
  mc.pooling = Pooling::cls;
  mc.norm = Norm::normed_input;
  mc.attention_bias = false;
  mc.init = Init::kl_authors;
  return mc;
}

at::Tensor param(const torch::nn::Module& m, const std::string& name) { return *m.named_parameters().find(name); }

// x' = s + FFN(LN2(s)), s = h + Out(Attn(QKV(h))), h = LN1(x): the residual starts from LN1(x).
TEST(Model, NormedInputLayerIsTheKLAuthorsLayer) {
  at::manual_seed(31);
  const auto mc = kl_model_config();
  EncoderBlock block(mc, make_softmax());
  block->eval();
  const auto x = at::randn({2 * 5, mc.dim}) * 3 + 1;
  const auto valid = at::ones({2, 5}, at::kBool);
  const auto ln = [&](const at::Tensor& t, const std::string& norm) {
    return at::layer_norm(t, {mc.dim}, param(*block, norm + ".weight"), param(*block, norm + ".bias"));
  };
  const auto h = ln(x, "norm1");
  const auto qkv = h.matmul(param(*block, "qkv.weight").t()).view({2, 5, 3, 2, 8}).permute({2, 0, 3, 1, 4});
  auto softmax = make_softmax();
  softmax->eval();
  const auto heads = softmax->forward(qkv[0], qkv[1], qkv[2], valid);
  const auto s = h + heads.transpose(1, 2).reshape({10, 16}).matmul(param(*block, "out.weight").t());
  const auto ffn = at::gelu(at::linear(ln(s, "norm2"), param(*block, "ffn_in.weight"), param(*block, "ffn_in.bias")));
  const auto expected = s + at::linear(ffn, param(*block, "ffn_out.weight"), param(*block, "ffn_out.bias"));
  EXPECT_LT((block->forward(x, valid) - expected).abs().max().item<double>(), 1e-5);
  // no biases in the attention's projections, and a gradient reaches every weight through them
  EXPECT_EQ(block->named_parameters().find("qkv.bias"), nullptr);
  EXPECT_EQ(block->named_parameters().find("out.bias"), nullptr);
  block->forward(x, valid).sum().backward();
  EXPECT_GT(param(*block, "qkv.weight").grad().abs().max().item<double>(), 0.0);
}

// Token embeddings N(0, 1), CLS zeros, the q, k, v thirds and the other attention and feed-forward
// weights Xavier-uniform (bound sqrt(6 / (fan_in + fan_out))), feed-forward biases N(0, 1e-6), the
// classifier's biases zero.
TEST(Model, KLAuthorsInitialisation) {
  at::manual_seed(32);
  const auto mc = kl_model_config();
  EncoderClassifier model(mc, TaskInfo{200, 3, 40, 1}, [](const AttentionShape&) { return make_softmax(); });
  EXPECT_NEAR(param(*model, "tokens.weight").std().item<double>(), 1.0, 0.05);
  EXPECT_EQ(param(*model, "cls").abs().max().item<double>(), 0.0);
  const double third = std::sqrt(6.0 / (16 + 16)), whole = std::sqrt(6.0 / (16 + 48));
  for (const auto& part : param(*model, "block0.qkv.weight").chunk(3, 0)) {
    EXPECT_LE(part.abs().max().item<double>(), third);
    EXPECT_GT(part.abs().max().item<double>(), whole);  // a third's own bound, not the fused matrix's
  }
  EXPECT_LE(param(*model, "block0.ffn_in.weight").abs().max().item<double>(), std::sqrt(6.0 / (16 + 24)));
  EXPECT_GT(param(*model, "block0.ffn_in.weight").abs().max().item<double>(), 0.9 * std::sqrt(6.0 / (16 + 24)));
  EXPECT_LT(param(*model, "block0.ffn_in.bias").abs().max().item<double>(), 1e-5);
  EXPECT_GT(param(*model, "block0.ffn_in.bias").abs().max().item<double>(), 0.0);
  EXPECT_EQ(param(*model, "head_in.bias").abs().max().item<double>(), 0.0);
  EXPECT_EQ(param(*model, "head_out.bias").abs().max().item<double>(), 0.0);
  // the default stays N(0, 0.02), with biases in the projections
  EncoderClassifier plain(ModelConfig{}, TaskInfo{200, 3, 40, 1}, [](const AttentionShape&) { return make_softmax(); });
  EXPECT_NEAR(param(*plain, "tokens.weight").std().item<double>(), 0.02, 0.002);
  EXPECT_NE(plain->named_parameters().find("block0.qkv.bias"), nullptr);
}

// pair_head = "concat": logits = W3 relu(W2 relu(W1 [u, v] + b1) + b2) + b3 (the KL authors'
// DualClassificationHead), widths ffn_dim and ffn_dim / 2.
TEST(Model, ConcatPairHeadIsTwoHiddenLayersOnBothEncodings) {
  at::manual_seed(33);
  auto mc = kl_model_config();
  mc.pair_head = PairHead::concat;
  EncoderClassifier model(mc, TaskInfo{10, 2, 8, 2}, [](const AttentionShape&) { return make_softmax(); });
  model->eval();
  EXPECT_EQ(param(*model, "head_in.weight").sizes(), (at::IntArrayRef{24, 32}));
  EXPECT_EQ(param(*model, "head_mid.weight").sizes(), (at::IntArrayRef{12, 24}));
  EXPECT_EQ(param(*model, "head_out.weight").sizes(), (at::IntArrayRef{2, 12}));
  const auto tokens = at::randint(1, 10, {3, 2, 8}, at::kLong);
  const auto lengths = at::tensor({8, 5, 8, 3, 6, 8}, at::kLong).view({3, 2});
  const auto u = model->encode(tokens.select(1, 0), lengths.select(1, 0));
  const auto v = model->encode(tokens.select(1, 1), lengths.select(1, 1));
  const auto layer = [&](const at::Tensor& x, const std::string& name) {
    return at::linear(x, param(*model, name + ".weight"), param(*model, name + ".bias"));
  };
  const auto expected = layer(at::relu(layer(at::relu(layer(at::cat({u, v}, 1), "head_in")), "head_mid")), "head_out");
  EXPECT_LT((model->forward(tokens, lengths) - expected).abs().max().item<double>(), 1e-5);
}

struct Recorder : TrainObserver {
  std::vector<MetricPoint> points;
  void on_metrics(const std::vector<MetricPoint>& p) override { points.insert(points.end(), p.begin(), p.end()); }
  void on_progress(const Progress&) override {}
};

// 40 steps of softmax on the toy task, validation every 20.
TrainJob short_job(std::uint64_t seed) {
  TrainJob job;
  job.model = testing::tiny_model(32);
  job.train.steps = 40;
  job.train.batch_size = 8;
  job.train.lr = 3e-3;
  job.train.warmup = 5;
  job.train.eval_every = 20;
  job.train.log_every = 10;
  job.task = {10, 4, 12, 1};
  job.seed = seed;
  job.make_attention = [](const AttentionShape&) { return make_softmax(); };
  return job;
}

RunOutcome short_run(const TrainJob& job, Recorder& recorder) {
  TrainSplits splits{toy_split(256, 12, 11), toy_split(64, 12, 12), toy_split(64, 12, 13)};
  return train_and_evaluate(job, splits, recorder);
}
RunOutcome short_run(std::uint64_t seed, Recorder& recorder) { return short_run(short_job(seed), recorder); }

double result(const RunOutcome& o, const std::string& name) {
  for (const auto& [n, v] : o.results)
    if (n == name) return v;
  return NAN;
}

TEST(Training, SameSeedSameNumbersOnCpu) {
  Recorder a, b, c;
  const auto first = short_run(7, a), second = short_run(7, b), other = short_run(8, c);
  ASSERT_EQ(first.status, TrainStatus::done) << first.error;
  ASSERT_EQ(a.points.size(), b.points.size());
  for (std::size_t i = 0; i < a.points.size(); ++i) {
    EXPECT_EQ(a.points[i].step, b.points[i].step);
    EXPECT_EQ(a.points[i].name, b.points[i].name);
    EXPECT_EQ(a.points[i].value, b.points[i].value) << a.points[i].split << " " << a.points[i].name << " step " << a.points[i].step;
  }
  EXPECT_EQ(result(first, "test_acc"), result(second, "test_acc"));
  EXPECT_EQ(result(first, "best_val_acc"), result(second, "best_val_acc"));
  // another seed gives another run (weights and data order differ)
  bool differs = false;
  for (std::size_t i = 0; i < a.points.size() && i < c.points.size(); ++i) differs |= a.points[i].value != c.points[i].value;
  EXPECT_TRUE(differs);
  // and the toy task is learnt well above chance (0.25) in 40 steps
  EXPECT_GT(result(first, "test_acc"), 0.5);
  EXPECT_EQ(result(first, "steps_done"), 40);
  EXPECT_GT(result(first, "peak_memory_bytes"), 1e6);
}

// [train] keep_best_after, Skyformer's rule: the best validation accuracy is tracked from the
// first validation, but a new best keeps its weights only after that share of the steps; a run
// that keeps none tests its final weights. Replayed on the run's own validation curve.
TEST(Training, KeepBestAfterKeepsOnlyLaterBestsAsSkyformersCodeDoes) {
  for (const double share : {0.0, 0.5, 0.9}) {
    TrainJob job = short_job(7);
    job.train.eval_every = 4;
    job.train.keep_best_after = share;
    Recorder r;
    const auto outcome = short_run(job, r);
    ASSERT_EQ(outcome.status, TrainStatus::done) << outcome.error;
    double seen = -1, kept_acc = -1, last = -1;
    std::int64_t kept_step = -1;
    for (const auto& p : r.points) {
      if (p.split != "val" || p.name != "acc") continue;
      last = p.value;
      if (p.value > seen) {
        seen = p.value;
        if (static_cast<double>(p.step) > share * static_cast<double>(job.train.steps)) kept_step = p.step, kept_acc = p.value;
      }
    }
    if (kept_step < 0) kept_step = job.train.steps, kept_acc = last;  // none kept: the final weights
    EXPECT_EQ(result(outcome, "best_step"), kept_step) << share;
    EXPECT_EQ(result(outcome, "best_val_acc"), kept_acc) << share;
    for (const auto& p : r.points) {
      if (p.split == "test") {
        EXPECT_EQ(p.step, kept_step) << share;
      }
    }
  }
}

// [train] eval_draw = "stream": each validation runs the next eval_batches batches of one pass
// through the reshuffled split after another. With the weights fixed (lr 0), the validations of
// one pass together are the whole split: their mean loss is the whole split's; and unlike "first",
// they differ from one another.
TEST(Training, AStreamedValidationGoesThroughTheShuffledSplitOneEvaluationAfterAnother) {
  TrainJob job = short_job(7);
  job.train.lr = 0;
  job.train.eval_every = 5;  // 8 validations of 2 batches of 8: two passes through the 64 examples
  job.train.eval_batches = 0;
  Recorder whole;
  ASSERT_EQ(short_run(job, whole).status, TrainStatus::done);
  auto val_losses = [](const Recorder& r) {
    std::vector<double> losses;
    for (const auto& p : r.points)
      if (p.split == "val" && p.name == "loss") losses.push_back(p.value);
    return losses;
  };
  const double split_loss = val_losses(whole).front();

  job.train.eval_batches = 2;
  Recorder first;
  ASSERT_EQ(short_run(job, first).status, TrainStatus::done);
  for (const double loss : val_losses(first)) EXPECT_EQ(loss, val_losses(first).front());

  job.train.eval_stream = true;
  Recorder stream;
  ASSERT_EQ(short_run(job, stream).status, TrainStatus::done);
  const auto losses = val_losses(stream);
  ASSERT_EQ(losses.size(), 8u);
  for (std::size_t pass = 0; pass < 2; ++pass) {
    double sum = 0;
    for (std::size_t i = 4 * pass; i < 4 * pass + 4; ++i) sum += losses[i];
    EXPECT_NEAR(sum / 4, split_loss, 1e-6 * split_loss) << "pass " << pass;  // float losses summed per batch
  }
  EXPECT_NE(losses[0], losses[1]);
  EXPECT_NE(losses[0], losses[4]);  // the second pass in another order
}

// [train] test_drop_last: 64 test examples in batches of 24 are tested as their first 48. The
// same seed trains the same weights whatever the test split, so the cut run's test figures are
// those of a run tested on the first 48 examples alone, to the bit.
TEST(Training, TestDropLastLeavesTheShortBatchOut) {
  TrainJob job = short_job(7);
  job.train.batch_size = 24;
  const SplitData test = toy_split(64, 12, 13);
  const SplitData first48{test.tokens.slice(0, 0, 48), test.lengths.slice(0, 0, 48), test.labels.slice(0, 0, 48), ""};
  Recorder a, b;
  const auto plain = train_and_evaluate(job, {toy_split(256, 12, 11), toy_split(64, 12, 12), first48}, a);
  job.train.test_drop_last = true;
  const auto cut = train_and_evaluate(job, {toy_split(256, 12, 11), toy_split(64, 12, 12), test}, b);
  ASSERT_EQ(cut.status, TrainStatus::done) << cut.error;
  EXPECT_EQ(result(cut, "test_acc"), result(plain, "test_acc"));
  EXPECT_EQ(result(cut, "test_loss"), result(plain, "test_loss"));
  EXPECT_NEAR(result(cut, "test_acc") * 48, std::round(result(cut, "test_acc") * 48), 1e-9);
}

// [train] accuracy_checkpoints: the first validation at or past each mark keeps its weights beside
// the best checkpoint and stores the point (step, val, accuracy_mark, mark); marks never reached
// keep nothing.
TEST(Training, AccuracyCheckpointsAreKeptWhereEachMarkIsFirstReached) {
  const auto dir = std::filesystem::temp_directory_path() / ("attnlab-acc-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  TrainJob job = short_job(7);
  job.train.eval_every = 5;
  job.train.accuracy_checkpoints = 0.2;
  job.checkpoint_path = (dir / "best.pt").string();
  Recorder r;
  const auto outcome = short_run(job, r);
  ASSERT_EQ(outcome.status, TrainStatus::done) << outcome.error;
  std::map<double, std::int64_t> marked;  // mark -> step
  for (const auto& p : r.points)
    if (p.name == "accuracy_mark") marked[p.value] = p.step;
  for (const double mark : accuracy_marks(0.2)) {
    std::int64_t first = -1;  // the first validation step at or past the mark
    for (const auto& p : r.points)
      if (p.split == "val" && p.name == "acc" && p.value + 1e-12 >= mark && first < 0) first = p.step;
    const bool kept = std::filesystem::exists(accuracy_checkpoint_path(job.checkpoint_path, mark));
    EXPECT_EQ(kept, first >= 0) << mark;
    if (first >= 0) EXPECT_EQ(marked.at(mark), first) << mark;
    else EXPECT_EQ(marked.count(mark), 0u) << mark;
  }
  EXPECT_EQ(marked.size(), 2u);  // validation accuracy passes 0.2 and 0.4 in 40 steps, never 0.6
  EXPECT_EQ(accuracy_checkpoint_path("x/run-3.pt", 0.4), "x/run-3.pt.acc40");
  EXPECT_EQ(accuracy_marks(0.2), (std::vector<double>{0.2, 0.4, 0.6, 0.8, 1.0}));  // 0.6, not 0.6000000000000001
  std::filesystem::remove_all(dir);
}

// The weights the last step left: a file of their own beside the best one (here the first
// validation's, lr 0 leaving every later one equal, never better), the same weights as the final
// model's; the best file itself when the last validation kept them; none after a divergence.
TEST(Training, TheLastStepsWeightsAreKeptBesideTheBest) {
  const auto dir = std::filesystem::temp_directory_path() / ("attnlab-last-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  TrainJob job = short_job(7);
  job.train.lr = 0;  // every validation as the first: the best stays at step 20
  job.checkpoint_path = (dir / "best.pt").string();
  Recorder r;
  const auto outcome = short_run(job, r);
  ASSERT_EQ(outcome.status, TrainStatus::done) << outcome.error;
  EXPECT_EQ(result(outcome, "best_step"), 20);
  EXPECT_EQ(outcome.last_checkpoint, last_checkpoint_path(job.checkpoint_path));
  EXPECT_EQ(outcome.last_checkpoint, (dir / "best.pt.last").string());
  ASSERT_TRUE(std::filesystem::exists(outcome.last_checkpoint));
  EXPECT_EQ(outcome.last_checksum.size(), 16u);
  EXPECT_EQ(outcome.last_checksum, outcome.checkpoint_checksum) << "lr 0: the last step's weights are the first validation's";

  job.train.lr = 3e-3;
  job.train.eval_every = 40;  // one validation, at the last step: it keeps the last weights as the best
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto kept = short_run(job, r);
  ASSERT_EQ(kept.status, TrainStatus::done) << kept.error;
  EXPECT_EQ(kept.last_checkpoint, job.checkpoint_path);
  EXPECT_EQ(kept.last_checksum, kept.checkpoint_checksum);
  EXPECT_FALSE(std::filesystem::exists(last_checkpoint_path(job.checkpoint_path)));
  std::filesystem::remove_all(dir);
}

TEST(Training, DivergenceEndsTheRunWithWhatWasMeasured) {
  Recorder r;
  TrainJob job;
  job.model = testing::tiny_model(16);
  job.train.steps = 30;
  job.train.batch_size = 8;
  job.train.lr = 1e30;  // guaranteed to blow up
  job.train.clip_norm = 0;
  job.train.warmup = 0;
  job.train.decay = Decay::constant;
  job.train.log_every = 5;
  job.train.eval_every = 100;
  job.task = {10, 4, 12, 1};
  job.make_attention = [](const AttentionShape&) { return make_softmax(); };
  TrainSplits splits{toy_split(64, 12, 1), toy_split(16, 12, 2), toy_split(16, 12, 3)};
  const auto outcome = train_and_evaluate(job, splits, r);
  EXPECT_EQ(outcome.status, TrainStatus::diverged);
  EXPECT_NE(outcome.error.find("training loss became"), std::string::npos);
  EXPECT_LT(result(outcome, "steps_done"), 30);
  EXPECT_FALSE(r.points.empty());  // the curve up to the divergence is kept
}

// A stochastic method that records, at every draw, how many forward passes it had made and the
// first number it drew: attention is the identity on v, so training itself is unaffected.
struct DrawRecorder : AttentionMethod {
  std::int64_t every;
  bool fresh;
  std::int64_t forwards = 0;
  std::vector<std::int64_t> draws_at;
  std::vector<double> drawn;
  DrawRecorder(std::int64_t every, bool fresh) : every(every), fresh(fresh) {}
  at::Tensor forward(const at::Tensor&, const at::Tensor&, const at::Tensor& v, const at::Tensor&) override {
    ++forwards;
    return v;
  }
  bool stochastic() const override { return true; }
  std::int64_t redraw_every() const override { return every; }
  bool fresh_draw_at_eval() const override { return fresh; }
  void redraw(at::Generator& generator) override {
    draws_at.push_back(forwards);
    drawn.push_back(at::rand({1}, generator).item<double>());
  }
};

std::shared_ptr<DrawRecorder> run_with_draws(std::int64_t every, bool fresh, std::uint64_t seed,
                                             std::int64_t variance_passes = 0, RunOutcome* outcome = nullptr) {
  auto recorder = std::make_shared<DrawRecorder>(every, fresh);
  TrainJob job;
  job.model = testing::tiny_model(32);
  job.model.layers = 1;
  job.train.steps = 10;
  job.train.batch_size = 8;
  job.train.eval_every = 100;  // one validation, after the last step
  job.train.eval_batches = 1;
  job.train.log_every = 5;
  job.train.variance_passes = variance_passes;
  job.task = {10, 4, 12, 1};
  job.seed = seed;
  job.make_attention = [recorder](const AttentionShape&) { return recorder; };
  TrainSplits splits{toy_split(64, 12, 11), toy_split(16, 12, 12), toy_split(8, 12, 13)};
  Recorder observer;
  RunOutcome result = train_and_evaluate(job, splits, observer);
  EXPECT_EQ(result.status, TrainStatus::done);
  if (outcome) *outcome = result;
  return recorder;
}

TEST(Training, StochasticAttentionIsRedrawnExactlyEveryNSteps) {
  // one draw before the first step, then after steps 3, 6 and 9 (one forward per step)
  const auto fixed = run_with_draws(3, false, 5);
  EXPECT_EQ(fixed->draws_at, (std::vector<std::int64_t>{0, 3, 6, 9}));
  // a fresh draw before the validation (after step 10's forward) and before the test pass
  // (after the one validation batch)
  const auto fresh = run_with_draws(3, true, 5);
  EXPECT_EQ(fresh->draws_at, (std::vector<std::int64_t>{0, 3, 6, 9, 10, 11}));
  // the draws come from the run's seed: the same seed repeats them, another changes them
  EXPECT_EQ(run_with_draws(3, false, 5)->drawn, fixed->drawn);
  EXPECT_NE(run_with_draws(3, false, 6)->drawn, fixed->drawn);
  EXPECT_EQ(run_with_draws(0, false, 5)->draws_at, (std::vector<std::int64_t>{0}));
}

TEST(Training, StochasticRunsEndWithVariancePassesAtTheBestCheckpoint) {
  RunOutcome outcome;
  const auto recorder = run_with_draws(3, false, 5, /*variance_passes=*/4, &outcome);
  // after the validation (forward 11) and test (forward 12) passes, four fresh draws, one per pass
  // over the 8 test examples (one batch each)
  EXPECT_EQ(recorder->draws_at, (std::vector<std::int64_t>{0, 3, 6, 9, 12, 13, 14, 15}));
  // the recorder's attention ignores its draws, so every pass gives the same logits
  EXPECT_EQ(result(outcome, "variance_passes"), 4);
  EXPECT_EQ(result(outcome, "rsd"), 0.0);
  EXPECT_EQ(result(outcome, "pi"), 0.0);
  EXPECT_EQ(result(outcome, "mean_pass_acc"), result(outcome, "test_acc"));
  EXPECT_EQ(result(outcome, "va"), result(outcome, "test_acc"));
  RunOutcome off;
  run_with_draws(3, false, 5, 0, &off);
  EXPECT_TRUE(std::isnan(result(off, "rsd")));
}

}  // namespace
}  // namespace attnlab
