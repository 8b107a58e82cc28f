// The conformance suite every attention plugin runs (in the spirit of llama.cpp's test-backend-ops):
// shapes and dtypes, padding invariance, finite-difference gradients, seeded determinism for
// stochastic methods, and each method's exactness limit where it converges to exact attention.
// A new plugin is picked up automatically: every attention plugin the host finds is tested.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include "plugin_host.hpp"

namespace attnlab {
namespace {

const PluginRegistry& registry() { return testing::built_plugins(); }

std::vector<std::string> attention_plugins() { return registry().names(PluginKind::attention); }

struct Inputs {
  at::Tensor q, k, v, valid;
};

// B = 2 sequences of n positions; the second has `real` real tokens, the rest padding.
Inputs make_inputs(std::int64_t n, std::int64_t real, std::int64_t heads, std::int64_t dim, at::ScalarType dtype,
                   std::uint64_t seed) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto opts = at::TensorOptions().dtype(dtype);
  Inputs in;
  in.q = at::randn({2, heads, n, dim}, g, opts) * 0.5;
  in.k = at::randn({2, heads, n, dim}, g, opts) * 0.5;
  in.v = at::randn({2, heads, n, dim}, g, opts);
  in.valid = at::ones({2, n}, at::kBool);
  in.valid[1].slice(0, real, n).fill_(false);
  return in;
}

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  const LoadedPlugin& plugin() const { return *registry().find(PluginKind::attention, GetParam()); }

  std::shared_ptr<AttentionMethod> make(const AttentionShape& shape, const ParamValues& params) const {
    at::manual_seed(0);  // methods with weights of their own (Nyströmformer's conv) start alike
    auto m = plugin().make_attention(shape, params);
    m->eval();  // no dropout: the checks compare exact outputs
    return m;
  }
  std::shared_ptr<AttentionMethod> make(const AttentionShape& shape) const { return make(shape, plugin().defaults()); }

  // Forward with the method's randomness drawn from a generator seeded with `seed`, so that two
  // calls with the same seed see the same landmarks or features.
  static at::Tensor run(AttentionMethod& m, const Inputs& in, std::uint64_t seed = 5) {
    auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
    if (m.stochastic()) m.redraw(g);
    return m.forward(in.q, in.k, in.v, in.valid);
  }
};

TEST_P(Conformance, OutputShapeAndDtypeFollowTheInputs) {
  for (auto dtype : {at::kFloat, at::kDouble}) {
    auto in = make_inputs(24, 17, 2, 8, dtype, 1);
    auto m = make({2, 8, 24});
    at::Tensor out;
    {
      c10::InferenceMode guard;
      out = run(*m, in);
    }
    EXPECT_EQ(out.sizes(), in.q.sizes());
    EXPECT_EQ(out.scalar_type(), dtype);
    EXPECT_TRUE(out.slice(0, 0, 1).isfinite().all().item<bool>());
    EXPECT_TRUE(out[1].slice(1, 0, 17).isfinite().all().item<bool>());
  }
}

TEST_P(Conformance, PaddingNeverChangesRealTokens) {
  const std::int64_t n = 24, real = 13;
  auto in = make_inputs(n, real, 2, 8, at::kDouble, 2);
  auto m = make({2, 8, n});
  c10::InferenceMode guard;
  const auto base = run(*m, in)[1].slice(1, 0, real);
  // whatever sits at padded positions (queries, keys and values) must not matter
  Inputs garbage = in;
  garbage.q = in.q.clone();
  garbage.k = in.k.clone();
  garbage.v = in.v.clone();
  for (auto* t : {&garbage.q, &garbage.k, &garbage.v}) (*t)[1].slice(1, real, n).normal_().mul_(50);
  EXPECT_TRUE(at::allclose(run(*m, garbage)[1].slice(1, 0, real), base, 1e-9, 1e-10)) << GetParam();
  // and the padded sequence gives what the same sequence gives without its padding (the same
  // model: max_len is the task's, and some methods size themselves by it)
  Inputs alone{in.q[1].slice(1, 0, real).unsqueeze(0), in.k[1].slice(1, 0, real).unsqueeze(0),
               in.v[1].slice(1, 0, real).unsqueeze(0), at::ones({1, real}, at::kBool)};
  auto m_alone = make({2, 8, n});
  EXPECT_TRUE(at::allclose(run(*m_alone, alone)[0], base, 1e-7, 1e-9)) << GetParam();
}

TEST_P(Conformance, GradientsMatchFiniteDifferences) {
  const std::int64_t n = 6, dim = 4;
  auto in = make_inputs(n, 4, 1, dim, at::kDouble, 3);
  auto m = make({1, dim, n});
  auto weights = at::randn({2, 1, n, dim}, at::kDouble);
  weights[1].slice(1, 4, n).zero_();  // padded query rows are unspecified: leave them out of the loss
  auto loss_of = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return (run(*m, {q, k, v, in.valid}) * weights).sum();
  };
  auto q = in.q.clone().requires_grad_(true), k = in.k.clone().requires_grad_(true), v = in.v.clone().requires_grad_(true);
  loss_of(q, k, v).backward();
  const double eps = 1e-6;
  std::vector<std::pair<const char*, std::pair<at::Tensor, at::Tensor>>> checks = {
      {"q", {in.q, q.grad()}}, {"k", {in.k, k.grad()}}, {"v", {in.v, v.grad()}}};
  c10::InferenceMode guard;
  for (std::size_t which = 0; which < checks.size(); ++which) {
    const auto& [name, pair] = checks[which];
    const auto& [point, grad] = pair;
    ASSERT_TRUE(grad.defined()) << GetParam() << ": no gradient for " << name;
    EXPECT_GT(grad.abs().sum().item<double>(), 0) << GetParam() << ": zero gradient for " << name;
    auto flat = point.flatten();
    for (std::int64_t i = 0; i < flat.numel(); i += 3) {  // every third coordinate keeps it quick
      auto plus = point.clone(), minus = point.clone();
      plus.view(-1)[i] += eps;
      minus.view(-1)[i] -= eps;
      at::Tensor lp, lm;
      if (which == 0) lp = loss_of(plus, in.k, in.v), lm = loss_of(minus, in.k, in.v);
      else if (which == 1) lp = loss_of(in.q, plus, in.v), lm = loss_of(in.q, minus, in.v);
      else lp = loss_of(in.q, in.k, plus), lm = loss_of(in.q, in.k, minus);
      const double numeric = (lp.item<double>() - lm.item<double>()) / (2 * eps);
      EXPECT_NEAR(grad.view(-1)[i].item<double>(), numeric, 1e-5 * std::max(1.0, std::abs(numeric)))
          << GetParam() << ": d loss / d " << name << "[" << i << "]";
    }
  }
}

TEST_P(Conformance, StochasticMethodsAreDeterministicGivenTheSeed) {
  auto in = make_inputs(40, 40, 2, 8, at::kDouble, 4);
  ParamValues params = plugin().defaults();
  // fewer landmarks/features than tokens, so that the draw matters
  for (const char* name : {"landmarks", "features"})
    if (params.has(name)) params.set(name, std::int64_t{8});
  auto m = make({2, 8, 40}, params);
  c10::InferenceMode guard;
  const auto a = run(*m, in, 11), b = run(*m, in, 11);
  EXPECT_TRUE(at::equal(a, b)) << GetParam() << ": same seed, different output";
  if (!m->stochastic()) return;
  EXPECT_FALSE(at::allclose(a, run(*m, in, 12))) << GetParam() << ": a new seed drew nothing new";
}

INSTANTIATE_TEST_SUITE_P(EveryAttentionPlugin, Conformance, ::testing::ValuesIn(attention_plugins()),
                         [](const auto& info) { return info.param; });

// --- exactness limits: (method, parameters that make it exact) -> reference method -----------

struct Limit {
  const char* method;
  std::vector<std::pair<const char*, ParamValue>> params;  // `landmarks` = n is set by the test
  const char* reference;
};

const std::vector<Limit>& limits() {
  static const std::vector<Limit> table = {
      // Nyströmformer with one segment per token and an exact pseudo-inverse is softmax attention.
      {"nystromformer", {{"pinv", std::string("exact")}, {"conv_kernel", std::int64_t{0}}}, "softmax"},
      // Skyformer with every row of [Q; K] a landmark, no ridge and an exact pseudo-inverse is
      // kernelized attention.
      {"skyformer", {{"sampling", std::string("all")}, {"gamma", 0.0}, {"pinv", std::string("exact")}}, "kernelized"},
  };
  return table;
}

TEST(ExactnessLimits, MethodsConvergeToExactAttention) {
  int checked = 0;
  for (const auto& limit : limits()) {
    const auto* method = registry().find(PluginKind::attention, limit.method);
    const auto* reference = registry().find(PluginKind::attention, limit.reference);
    if (!method || !reference) continue;  // checked once both plugins exist
    const std::int64_t n = 16, real = 11;
    auto in = make_inputs(n, real, 2, 8, at::kDouble, 9);
    ParamValues params = method->defaults();
    for (const auto& [name, value] : limit.params) params.set(name, value);
    if (params.has("landmarks")) params.set("landmarks", n);
    auto m = method->make_attention({2, 8, n}, params);
    auto r = reference->make_attention({2, 8, n}, reference->defaults());
    m->eval();
    r->eval();
    c10::InferenceMode guard;
    auto g = at::make_generator<at::CPUGeneratorImpl>(1);
    if (m->stochastic()) m->redraw(g);
    auto got = m->forward(in.q, in.k, in.v, in.valid), want = r->forward(in.q, in.k, in.v, in.valid);
    EXPECT_TRUE(at::allclose(got[0], want[0], 1e-6, 1e-8)) << limit.method << " vs " << limit.reference << ": max diff "
                                                           << (got[0] - want[0]).abs().max().item<double>();
    EXPECT_TRUE(at::allclose(got[1].slice(1, 0, real), want[1].slice(1, 0, real), 1e-6, 1e-8)) << limit.method << " (padded)";
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no method with a known exactness limit is built";
}

}  // namespace
}  // namespace attnlab
