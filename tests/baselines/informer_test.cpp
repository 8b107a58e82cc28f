// Informer's ProbSparse attention: c = ⌈budget / ln max_len⌉, U = u = min(c ⌈ln L⌉, L); each query
// samples U real keys, M̄ = max_t q·k_s − Σ_t q·k_s / L ranks the queries, the top u attend exactly
// over the real keys, the others output the mean of the real V rows. Against the formula written
// out with the plugin's own draw (padding and a mask with holes in the batch), its exactness limit
// (u = L: masked softmax), the lazy queries, padding, the seed, gradients and the LRA figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>
#include <vector>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "attnlab/seed_stream.hpp"
#include "method_support.hpp"

namespace attnlab::testing {
namespace {

std::int64_t factor(double budget, std::int64_t max_len) {
  return static_cast<std::int64_t>(std::ceil(budget / std::log(static_cast<double>(std::max<std::int64_t>(max_len, 2)))));
}
std::int64_t count(std::int64_t c, std::int64_t len) {
  return len <= 1 ? 0 : std::min(c * static_cast<std::int64_t>(std::ceil(std::log(static_cast<double>(len)))), len);
}

// The plugin's output written out with loops, in double, from the uniforms the plugin draws in
// evaluation after redraw with a generator seeded `seed`: [max(max_len, N), U_cap], row i for query i.
at::Tensor written_out(const Batch& x, std::int64_t max_len, double budget, std::uint64_t seed) {
  const auto batch = x.q.size(0), heads = x.q.size(1), n = x.q.size(2), dim = x.q.size(3);
  const auto c = factor(budget, max_len);
  const auto span = std::max(max_len, n), cap = count(c, span);
  SeedStream stream;
  auto g = seeded_generator(seed);
  stream.reseed(g);
  auto draw = stream.next(c10::Device(at::kCPU), /*training=*/false);
  const auto uniform = at::rand({span, cap}, draw, at::kDouble);
  const auto u = uniform.accessor<double, 2>();
  const auto q = x.q.accessor<double, 4>(), k = x.k.accessor<double, 4>(), v = x.v.accessor<double, 4>();
  auto out = at::zeros_like(x.q);
  auto o = out.accessor<double, 4>();
  auto qk = [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
    double s = 0;
    for (std::int64_t e = 0; e < dim; ++e) s += q[b][h][i][e] * k[b][h][j][e];
    return s;
  };
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<std::int64_t> real;  // the real positions, in order
    for (std::int64_t j = 0; j < n; ++j)
      if (x.valid[b][j].item<bool>()) real.push_back(j);
    const auto len = static_cast<std::int64_t>(real.size()), samples = count(c, len);
    for (std::int64_t h = 0; h < heads; ++h) {
      std::vector<std::pair<double, std::int64_t>> measure;  // (M̄, query)
      for (auto i : real) {
        double top = -INFINITY, sum = 0;
        for (std::int64_t t = 0; t < samples; ++t) {
          const auto rank = std::min(static_cast<std::int64_t>(std::floor(u[i][t] * len)), len - 1);
          const double s = qk(b, h, i, real[rank]);
          top = std::max(top, s);
          sum += s;
        }
        measure.push_back({top - sum / len, i});
      }
      std::sort(measure.begin(), measure.end(), [](auto& a, auto& z) { return a.first > z.first; });
      for (std::int64_t r = 0; r < len; ++r) {
        const auto i = measure[r].second;
        std::vector<double> w(len, 1.0 / len);  // lazy: the mean of the real V rows
        if (r < samples) {  // active: softmax over the real keys
          double top = -INFINITY, z = 0;
          for (std::int64_t j = 0; j < len; ++j) top = std::max(top, w[j] = qk(b, h, i, real[j]) / std::sqrt(double(dim)));
          for (auto& p : w) z += p = std::exp(p - top);
          for (auto& p : w) p /= z;
        }
        for (std::int64_t e = 0; e < dim; ++e) {
          double s = 0;
          for (std::int64_t j = 0; j < len; ++j) s += w[j] * v[b][h][real[j]][e];
          o[b][h][i][e] = s;
        }
      }
    }
  }
  return out;
}

// Largest difference over the real query positions.
double real_diff(const at::Tensor& a, const at::Tensor& b, const at::Tensor& valid) {
  const auto m = valid.view({valid.size(0), 1, valid.size(1), 1});
  return (a - b).masked_fill(m.logical_not(), 0.0).abs().max().item<double>();
}

// A padded batch whose second sequence also has holes inside (the plugin takes any key mask).
Batch batch_with_holes(std::int64_t n, std::int64_t dim, std::uint64_t seed) {
  auto x = make_batch({n, n - 3, 7}, 2, n, dim, seed);
  x.valid[1][2] = false;
  x.valid[1][9] = false;
  return x;
}

TEST(Informer, IsTheFormulaWithTheSameDrawPaddingAndHoles) {
  // budget 8, max_len 24: c = 3, U_cap = 12; L = 20, 15, 7 → U = u = 9, 9, 6 (some queries lazy)
  const std::int64_t n = 20, max_len = 24;
  const auto x = batch_with_holes(n, 8, 1);
  const auto expected = written_out(x, max_len, 8.0, 5);
  for (const char* measure : {"auto", "gather"}) {
    auto m = make_method("informer", {{"budget", 8.0}, {"measure", std::string(measure)}}, {2, 8, max_len});
    ASSERT_TRUE(m->stochastic());
    const auto out = seeded_forward(*m, x.q, x.k, x.v, x.valid, 5);
    EXPECT_LT(real_diff(out, expected, x.valid), 1e-12) << measure;
    // garbage at the padded positions and in the holes changes nothing
    for (double garbage : {1e6, double(INFINITY), double(NAN)}) {
      const auto y = fill_padding(x, garbage);
      const auto again = seeded_forward(*m, y.q, y.k, y.v, y.valid, 5);
      EXPECT_EQ(real_diff(again, out, x.valid), 0.0) << measure << " " << garbage;
    }
  }
}

TEST(Informer, EveryQueryActiveIsMaskedSoftmax) {
  // u ≥ L for every length: softmax over the real keys, to float64 precision, and no randomness
  const auto x = batch_with_holes(16, 8, 2);
  auto m = make_method("informer", {{"budget", 1e6}}, {2, 8, 16});
  EXPECT_FALSE(m->stochastic());
  const auto out = seeded_forward(*m, x.q, x.k, x.v, x.valid);
  const auto want = reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid));
  EXPECT_LT(real_diff(out, want, x.valid), 1e-12);
  // at the defaults a short max_len leaves every query active too; a long one samples
  EXPECT_FALSE(make_method("informer", {}, {2, 8, 64})->stochastic());
  EXPECT_TRUE(make_method("informer", {}, {2, 8, 1024})->stochastic());
}

TEST(Informer, LazyQueriesGetExactlyTheMeanOfTheRealValues) {
  // budget 4, max_len 64: c = 1; L = 40 → u = 4 active, 36 lazy; L = 25 → u = 4; L = 7 → u = 2
  const std::int64_t n = 40;
  const auto x = make_batch({n, 25, 7}, 2, n, 8, 3);
  auto m = make_method("informer", {{"budget", 4.0}}, {2, 8, 64});
  const auto out = seeded_forward(*m, x.q, x.k, x.v, x.valid);
  const std::int64_t lens[] = {n, 25, 7}, active[] = {4, 4, 2};
  for (std::int64_t b = 0; b < 3; ++b) {
    const auto mean = x.v[b].slice(1, 0, lens[b]).mean(1, /*keepdim=*/true);  // [H, 1, d]
    const auto gap = (out[b].slice(1, 0, lens[b]) - mean).abs().amax(-1);  // [H, L]
    for (std::int64_t h = 0; h < 2; ++h) {
      EXPECT_EQ(gap[h].le(1e-14).sum().item<std::int64_t>(), lens[b] - active[b]) << b << " " << h;
      EXPECT_EQ(gap[h].gt(1e-6).sum().item<std::int64_t>(), active[b]) << b << " " << h;
    }
  }
}

TEST(Informer, PaddedQueriesNeverAttendAndASequenceIsItselfAlone) {
  // huge padded queries would win every slot if they competed; they must not
  const std::int64_t n = 24, max_len = 32;
  const auto x = make_batch({n, 13, 5}, 2, n, 8, 4);
  for (const char* measure : {"auto", "gather"}) {
    auto m = make_method("informer", {{"budget", 6.0}, {"measure", std::string(measure)}}, {2, 8, max_len});
    const auto base = seeded_forward(*m, x.q, x.k, x.v, x.valid);
    auto y = fill_padding(x, 0.0);
    y.q.masked_fill_(x.valid.logical_not().view({3, 1, n, 1}), 1e3);
    EXPECT_EQ(real_diff(seeded_forward(*m, y.q, y.k, y.v, y.valid), base, x.valid), 0.0) << measure;
    for (std::int64_t b : {1, 2}) {
      const std::int64_t len = b == 1 ? 13 : 5;
      const auto one = alone(x, b, len);
      const auto single = seeded_forward(*m, one.q, one.k, one.v, one.valid)[0];
      EXPECT_LT(max_diff(single, base[b].slice(1, 0, len)), 1e-12) << measure << " sequence " << b;
    }
  }
}

TEST(Informer, SampleCountsAtTheLraLengths) {
  // Skyformer's LRA settings (in_nb_features = 128, max_len = N): (c, u) = (19, 133), (17, 136), (16, 144)
  const std::int64_t lengths[] = {1024, 2048, 4096}, cs[] = {19, 17, 16}, us[] = {133, 136, 144};
  for (int i = 0; i < 3; ++i) {
    const auto n = lengths[i];
    EXPECT_EQ(factor(128, n), cs[i]);
    EXPECT_EQ(count(factor(128, n), n), us[i]);
    // and the plugin: exactly u rows of each head differ from the mean of V
    const auto x = make_batch({n}, 2, n, 4, 20 + i);
    auto m = make_method("informer", {}, {2, 4, n});
    at::Tensor out;
    {
      c10::InferenceMode guard;
      out = seeded_forward(*m, x.q, x.k, x.v, x.valid);
    }
    const auto gap = (out[0] - x.v[0].mean(1, /*keepdim=*/true)).abs().amax(-1);  // [H, N]
    for (std::int64_t h = 0; h < 2; ++h) EXPECT_EQ(gap[h].gt(1e-9).sum().item<std::int64_t>(), us[i]) << n;
  }
}

TEST(Informer, GatheredAndLoopedMeasuresAgreeOverChunks) {
  // U_cap = 144 at max_len 4096: the gathered path takes two chunks of queries here
  const std::int64_t n = 300;
  const auto x = make_batch({n, 210}, 2, n, 32, 6);
  auto looped = make_method("informer", {}, {2, 32, 4096});
  auto gathered = make_method("informer", {{"measure", std::string("gather")}}, {2, 32, 4096});
  c10::InferenceMode guard;
  const auto a = seeded_forward(*looped, x.q, x.k, x.v, x.valid), b = seeded_forward(*gathered, x.q, x.k, x.v, x.valid);
  EXPECT_LT(real_diff(a, b, x.valid), 1e-12);
}

TEST(Informer, SameSeedSameOutputNewSeedNewSamples) {
  const auto x = make_batch({40, 31}, 2, 40, 8, 7);
  const Overrides few{{"budget", 8.0}};
  auto a = make_method("informer", few, {2, 8, 40}), b = make_method("informer", few, {2, 8, 40});
  const auto first = seeded_forward(*a, x.q, x.k, x.v, x.valid, 21);
  EXPECT_TRUE(at::equal(first, seeded_forward(*b, x.q, x.k, x.v, x.valid, 21)));
  EXPECT_TRUE(at::equal(first, a->forward(x.q, x.k, x.v, x.valid)));  // evaluation: one fixed draw
  EXPECT_FALSE(at::allclose(first, seeded_forward(*a, x.q, x.k, x.v, x.valid, 22)));
  // training: a fresh draw every call, the same sequence of them after the same redraw, and the
  // stream's place travels with the module's archive
  a->train();
  b->train();
  auto g1 = seeded_generator(21), g2 = seeded_generator(21);
  a->redraw(g1);
  b->redraw(g2);
  const auto t1 = a->forward(x.q, x.k, x.v, x.valid);
  torch::serialize::OutputArchive saved;
  a->save(saved);
  const auto t2 = a->forward(x.q, x.k, x.v, x.valid);
  EXPECT_FALSE(at::allclose(t1, t2));
  EXPECT_TRUE(at::equal(t1, b->forward(x.q, x.k, x.v, x.valid)));
  EXPECT_TRUE(at::equal(t2, b->forward(x.q, x.k, x.v, x.valid)));
  std::stringstream bytes;
  saved.save_to(bytes);
  torch::serialize::InputArchive loaded;
  loaded.load_from(bytes);
  auto c = make_method("informer", few, {2, 8, 40});
  c->train();
  c->load(loaded);
  EXPECT_TRUE(at::equal(t2, c->forward(x.q, x.k, x.v, x.valid)));
}

TEST(Informer, GradientsThroughActiveAndLazyQueries) {
  // budget 4, max_len 12: c = 2, L = 10 → u = 6 of 10, L = 7 → 4 of 7; the selection is locally constant
  const std::int64_t n = 10;
  const auto x = make_batch({n, 7}, 1, n, 4, 8);
  auto m = make_method("informer", {{"budget", 4.0}}, {1, 4, 12});
  auto g = seeded_generator(9);
  m->redraw(g);
  auto weights = at::randn_like(x.q).masked_fill(x.valid.logical_not().view({2, 1, n, 1}), 0.0);
  auto loss = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return (m->forward(q, k, v, x.valid) * weights).sum();
  };
  auto q = x.q.clone().requires_grad_(true), k = x.k.clone().requires_grad_(true), v = x.v.clone().requires_grad_(true);
  loss(q, k, v).backward();
  const at::Tensor* point[] = {&x.q, &x.k, &x.v};
  const at::Tensor grad[] = {q.grad(), k.grad(), v.grad()};
  at::NoGradGuard no_grad;
  for (int w = 0; w < 3; ++w) {
    ASSERT_GT(grad[w].abs().sum().item<double>(), 0.0) << w;
    for (std::int64_t i = 0; i < point[w]->numel(); i += 2) {
      at::Tensor moved[2] = {point[w]->clone(), point[w]->clone()};
      moved[0].view(-1)[i] += 1e-6;
      moved[1].view(-1)[i] -= 1e-6;
      double l[2];
      for (int s = 0; s < 2; ++s)
        l[s] = (w == 0 ? loss(moved[s], x.k, x.v) : w == 1 ? loss(x.q, moved[s], x.v) : loss(x.q, x.k, moved[s]))
                   .item<double>();
      EXPECT_NEAR(grad[w].view(-1)[i].item<double>(), (l[0] - l[1]) / 2e-6, 1e-7) << w << " " << i;
    }
  }
}

TEST(Informer, LargeInputsAndAnEmptySequenceStayFinite) {
  // float, |q|, |k| ~ 30, some queries lazy, and a sequence without a single real token
  auto x = make_batch({24, 17, 0}, 2, 24, 8, 10);
  auto q = (x.q * 60).to(at::kFloat).requires_grad_(true), k = (x.k * 60).to(at::kFloat).requires_grad_(true);
  auto v = x.v.to(at::kFloat).requires_grad_(true);
  auto m = make_method("informer", {{"budget", 6.0}}, {2, 8, 24});
  auto g = seeded_generator(3);
  m->redraw(g);
  const auto out = m->forward(q, k, v, x.valid);
  EXPECT_TRUE(out.isfinite().all().item<bool>());
  out.sum().backward();
  for (const auto* t : {&q, &k, &v}) EXPECT_TRUE(t->grad().isfinite().all().item<bool>());
}

TEST(Informer, RefusesBadParameters) {
  const auto& info = *attention_plugin("informer").info;
  const auto* budget = find_param(info.params, info.param_count, "budget");
  const auto* measure = find_param(info.params, info.param_count, "measure");
  ASSERT_TRUE(budget && measure);
  EXPECT_THROW(check_param(*budget, ParamValue{0.0}), ParamError);
  EXPECT_THROW(check_param(*budget, ParamValue{-1.0}), ParamError);
  EXPECT_THROW(check_param(*budget, ParamValue{2e9}), ParamError);
  EXPECT_NO_THROW(check_param(*budget, ParamValue{std::int64_t{128}}));
  EXPECT_THROW(check_param(*measure, ParamValue{std::string("fast")}), ParamError);
  EXPECT_THROW(make_method("informer", {{"measure", std::string("fast")}}), ParamError);
}

}  // namespace
}  // namespace attnlab::testing
