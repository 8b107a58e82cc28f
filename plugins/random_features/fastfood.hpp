#pragma once
// The Fastfood projection (Le, Sarlós & Smola, 2013; KL-Transformer, Chowdhury et al. 2022, §2.1)
// shared by the fastfood_rks and fastfood_prf plugins (header-only, part of attnlab::random_features).
// With D the head dimension d rounded up to a power of two (inputs zero-padded to D), one block is
// the D × D matrix
//   V = (1/√D) · diag(S / ‖G‖) · H · diag(G) · Π · H · diag(B),
// H the unnormalised Walsh–Hadamard transform (rf::fwht), Π a random
// permutation ((Πz)_i = z_{π(i)}), G ~ N(0, I), B random ±1, S ~ chi(D). Row i of H diag(G) Π H
// diag(B) has norm √D ‖G‖ exactly, so row i of V has norm S_i: S holds the rows' norms directly
// (Le et al.'s S_ii = s_i / ‖G‖_F with the 1/‖G‖_F written out), and every projection (Vx)_i is
// exactly N(0, ‖x‖²) over the draw. ceil(M / D) independent blocks are stacked and the first M
// rows kept: u = V x ∈ R^M, with x = q / d^¼ (the authors' softmax_temp = 1/√d).
//
// learn = sgb: S, G, B are parameters (the KL-Transformer's SGB variant), initialised at
// construction from their distributions above with the global generator, like any weight;
// learn = s: only S is; learn = none: all fixed. redraw() draws Π and whatever is not learnable
// (sgb: Π only; s: Π, G, B; none: Π, G, B, S); it never touches a learned diagonal.
#include <cmath>
#include <cstdint>
#include <string>

#include <ATen/ATen.h>

#include "attnlab/attention.hpp"
#include "attnlab/step_ops.hpp"
#include "random_features.hpp"

namespace attnlab::fastfood {

#define ATTNLAB_FASTFOOD_PARAMS                                                                                \
  {"features", ::attnlab::ParamType::integer, "0", 0, 65536, nullptr,                                         \
   "M, projections (ceil(M / D) Fastfood blocks of D = head dim rounded up to a power of two); 0 = auto: "    \
   "min(max_len, pow2cast(d ln d)) as for the other KL-Transformer methods (the authors' Fastfood: M = d)"},    \
      {"learn", ::attnlab::ParamType::string, "sgb", 0, 0, "sgb|s|none",                                      \
       "learnable diagonals: S, G and B (KL-Transformer's SGB), only S, or none (fixed random Fastfood)"},     \
      ATTNLAB_RF_COMMON_PARAMS

inline std::int64_t power_of_two_at_least(std::int64_t d) {
  std::int64_t p = 1;
  while (p < d) p *= 2;
  return p;
}

class FastfoodAttention : public rf::RandomFeatureAttention {
 public:
  FastfoodAttention(const ParamValues& params, const AttentionShape& shape)
      : rf::RandomFeatureAttention(params),
        features_(rf::resolve_feature_count(params, shape)),
        dim_(shape.head_dim),
        padded_(power_of_two_at_least(shape.head_dim)),
        blocks_((features_ + padded_ - 1) / padded_) {
    enum class Learn { sgb, s, none };
    const Learn learn = params.choice<Learn>("learn", {{"sgb", Learn::sgb}, {"s", Learn::s}, {"none", Learn::none}});
    learn_s_ = learn != Learn::none;
    learn_gb_ = learn == Learn::sgb;
    // Initial values from the global generator (learnable ones keep them until trained).
    const auto diagonal = std::vector<std::int64_t>{blocks_, padded_};
    const auto b = at::randint(0, 2, diagonal, at::kDouble) * 2 - 1;
    const auto g = at::randn(diagonal, at::kDouble);
    const auto s = at::randn({blocks_, padded_, padded_}, at::kDouble).norm(2, {2});
    b_ = hold("B", b.to(at::kFloat), learn_gb_);
    g_ = hold("G", g.to(at::kFloat), learn_gb_);
    s_ = hold("S", s.to(at::kFloat), learn_s_);
    perm_ = register_buffer("perm", at::arange(padded_, at::kLong).repeat({blocks_, 1}));
  }

  // u = V x for x = q / d^¼: [..., d] -> [..., M].
  at::Tensor project(const at::Tensor& x) const {
    const auto dtype = x.scalar_type();
    const auto xp = padded_ > dim_ ? at::constant_pad_nd(x, {0, padded_ - dim_}) : x;
    auto h = rf::fwht(xp.unsqueeze(-2) * as_type(b_, dtype));  // H B x, per block: [..., blocks, D]
    const auto sizes = h.sizes().vec();
    const auto offsets = at::arange(0, blocks_ * padded_, padded_, perm_.options()).unsqueeze(1);
    h = h.flatten(-2).index_select(-1, (perm_ + offsets).flatten()).view(sizes);  // Π H B x
    const auto g = as_type(g_, dtype);
    h = rf::fwht(h * g);                                                           // H G Π H B x
    const auto norms = g.norm(2, {1}, /*keepdim=*/true) * constant(std::sqrt(static_cast<double>(padded_)), g);  // norm keeps its output for its backward: no in-place
    return (h * (as_type(s_, dtype) / norms)).flatten(-2).slice(-1, 0, features_);
  }

 protected:
  // The feature map on u = V x (RKS or PRF); x_sq = ‖x‖², key_valid undefined for queries.
  virtual at::Tensor map(const at::Tensor& u, const at::Tensor& x_sq, const at::Tensor& key_valid) const = 0;

  // Padded keys are zeroed first: whatever sits there can neither overflow nor move an offset.
  at::Tensor features(const at::Tensor& x, const at::Tensor& key_valid) override {
    return key_valid.defined() ? phi(rf::zero_padded_keys(x, key_valid), key_valid) : phi(x, key_valid);
  }

  // Drawn in double on the CPU from the run's generator, then copied into the buffers.
  void draw(at::Generator& generator) override {
    const auto options = at::TensorOptions().dtype(at::kDouble);
    std::vector<at::Tensor> perms;
    for (std::int64_t i = 0; i < blocks_; ++i) perms.push_back(at::randperm(padded_, generator, options.dtype(at::kLong)));
    at::NoGradGuard no_grad;
    perm_.copy_(at::stack(perms));
    if (!learn_gb_) {
      b_.copy_(at::randint(0, 2, {blocks_, padded_}, generator, options) * 2 - 1);
      g_.copy_(at::randn({blocks_, padded_}, generator, options));
    }
    if (!learn_s_) s_.copy_(at::randn({blocks_, padded_, padded_}, generator, options).norm(2, {2}));
  }

 private:
  at::Tensor hold(const std::string& name, const at::Tensor& value, bool learnable) {
    return learnable ? register_parameter(name, value) : register_buffer(name, value);
  }

  at::Tensor phi(const at::Tensor& x_in, const at::Tensor& key_valid) const {
    const auto x = x_in * constant(std::pow(static_cast<double>(dim_), -0.25), x_in);
    return map(project(x), (x * x).sum(-1, /*keepdim=*/true), key_valid);
  }

  std::int64_t features_, dim_, padded_, blocks_;
  bool learn_s_ = true, learn_gb_ = true;
  at::Tensor b_, g_, s_, perm_;
};

}  // namespace attnlab::fastfood
