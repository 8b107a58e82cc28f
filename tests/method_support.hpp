#pragma once
// What the per-method numerics suites share (methods_test.cpp, baselines/*_test.cpp): a method
// built through the plugin host (so the .so files are what is tested), seeded forwards, padded
// batches, and exact softmax attention written out in double as the reference.
#include <cstdint>
#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "attnlab/attention.hpp"
#include "test_support.hpp"

namespace attnlab::testing {

inline const LoadedPlugin& attention_plugin(const std::string& name) {
  const auto* p = built_plugins().find(PluginKind::attention, name);
  if (!p) throw std::runtime_error("attention plugin '" + name + "' not found");
  return *p;
}

using Overrides = std::vector<std::pair<const char*, ParamValue>>;

// The method's defaults with `overrides`, built for `shape` (heads, head_dim, max_len), in eval
// mode (no dropout).
inline std::shared_ptr<AttentionMethod> make_method(const std::string& name, const Overrides& overrides = {},
                                                    AttentionShape shape = {2, 8, 64}) {
  ParamValues params = attention_plugin(name).defaults();
  for (const auto& [key, value] : overrides) params.set(key, value);
  auto m = attention_plugin(name).make_attention(shape, params);
  m->eval();
  return m;
}

inline at::Generator seeded_generator(std::uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

// Forward with the method's randomness drawn from a generator seeded with `seed`.
inline at::Tensor seeded_forward(AttentionMethod& m, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const at::Tensor& valid, std::uint64_t seed = 7) {
  auto g = seeded_generator(seed);
  if (m.stochastic()) m.redraw(g);
  return m.forward(q, k, v, valid);
}

struct Batch {
  at::Tensor q, k, v, valid;
};

// B sequences of n positions, sequence b having real[b] real tokens followed by padding; q and k
// are N(0, spread²), v is N(0, 1), all double.
inline Batch make_batch(std::vector<std::int64_t> real, std::int64_t heads, std::int64_t n, std::int64_t dim,
                        std::uint64_t seed, double spread = 0.5) {
  auto g = seeded_generator(seed);
  const auto b = static_cast<std::int64_t>(real.size());
  Batch x;
  x.q = at::randn({b, heads, n, dim}, g, at::kDouble) * spread;
  x.k = at::randn({b, heads, n, dim}, g, at::kDouble) * spread;
  x.v = at::randn({b, heads, n, dim}, g, at::kDouble);
  x.valid = at::zeros({b, n}, at::kBool);
  for (std::int64_t i = 0; i < b; ++i) x.valid[i].slice(0, 0, real[i]).fill_(true);
  return x;
}

// Sequence b of a batch without its padding, as a batch of one.
inline Batch alone(const Batch& x, std::int64_t b, std::int64_t real) {
  return {x.q.slice(0, b, b + 1).slice(2, 0, real), x.k.slice(0, b, b + 1).slice(2, 0, real),
          x.v.slice(0, b, b + 1).slice(2, 0, real), at::ones({1, real}, at::kBool)};
}

// The same batch with `value` at every padded position of q, k and v.
inline Batch fill_padding(const Batch& x, double value) {
  Batch y{x.q.clone(), x.k.clone(), x.v.clone(), x.valid};
  const auto padded = x.valid.logical_not().unsqueeze(1).unsqueeze(-1);
  for (auto* t : {&y.q, &y.k, &y.v}) t->masked_fill_(padded, value);
  return y;
}

inline double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// softmax(q kᵀ/√p + bias) v with key j allowed for query i where `allowed[b, h, i, j]` (bool,
// broadcastable to [B, H, N, N]); a row with no allowed key gives 0. Written out as the formula,
// for tests in double.
inline at::Tensor reference_softmax_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                              const at::Tensor& allowed) {
  const auto scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  const auto e = at::where(allowed, (scores - scores.amax(-1, true)).exp(), at::zeros_like(scores));
  const auto z = e.sum(-1, true);
  return at::matmul(e / at::where(z > 0, z, at::ones_like(z)), v);
}

// The allowed-key mask of plain softmax attention: every real key, [B, 1, 1, N].
inline at::Tensor real_keys(const at::Tensor& valid) { return valid.unsqueeze(1).unsqueeze(1); }

// Largest difference on real query positions (padded queries' outputs are unspecified).
inline double real_rows_diff(const at::Tensor& a, const at::Tensor& b, const at::Tensor& valid) {
  return ((a - b).abs() * valid.unsqueeze(1).unsqueeze(-1).to(a.scalar_type())).max().item<double>();
}

// The same against the reference on the first, middle and last 100 queries of a long sequence
// (the reference is computed for those rows only), for one sequence padded at the end.
inline double rows_diff_from_reference(const at::Tensor& out, const Batch& x, const at::Tensor& allowed) {
  const auto n = x.q.size(2);
  const auto real = x.valid.sum().item<std::int64_t>();
  double worst = 0;
  for (std::int64_t first : {std::int64_t{0}, n / 2 - 50, real - 100}) {
    const auto expected = reference_softmax_attention(x.q.narrow(2, first, 100), x.k, x.v, allowed.narrow(2, first, 100));
    worst = std::max(worst, max_diff(out.narrow(2, first, 100), expected));
  }
  return worst;
}

}  // namespace attnlab::testing
