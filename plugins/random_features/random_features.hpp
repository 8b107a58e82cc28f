#pragma once
// What the random-feature (linear) attention plugins share (KL-Transformer, Chowdhury et al. 2022,
// §2.1): the linear attention itself, the two ways of turning projections into features (RKS and
// positive random features), the fast Walsh-Hadamard transform, and a base class that owns the
// redraw schedule. Each method is its own plugin folder; this is a static library they link.
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include "attnlab/attention.hpp"
#include "attnlab/params.hpp"
#include "attnlab/plugin.hpp"

namespace attnlab::rf {

// ATTN_i = φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) / (φ(q_i)ᵀ Σ_j φ(k_j) + eps), sums over real keys only.
// phi_q, phi_k: [B, H, N, F]; v: [B, H, N, Dv]; key_valid: [B, N] bool. Returns [B, H, N, Dv].
at::Tensor linear_attention(const at::Tensor& phi_q, const at::Tensor& phi_k, const at::Tensor& v,
                            const at::Tensor& key_valid, double eps);

// Random kitchen sinks (Rahimi & Recht): u = ωᵀx, φ(x) = [cos u, sin u] / √M, so that
// φ(x)ᵀφ(y) estimates E_ω cos(ωᵀ(x − y)), the kernel whose spectral density ω is drawn from.
// u: [..., M] -> [..., 2M].
at::Tensor rks_features(const at::Tensor& u);

// Positive random features (Choromanski et al., FAVOR+): φ(x) = exp(ωᵀx − ‖x‖²/2) / √M, so that
// for ω ~ N(0, I) φ(x)ᵀφ(y) estimates exp(xᵀy). u: [..., M], x_sq_norm: [..., 1] = ‖x‖².
// `offset` (broadcastable to u, no gradient needed) is subtracted inside the exponent for
// numerical range; it cancels in the attention's ratio when it is constant per (batch, head).
at::Tensor prf_features(const at::Tensor& u, const at::Tensor& x_sq_norm, const at::Tensor& offset);

// The stabilising offset for prf_features, computed from e = u − ‖x‖²/2 ([..., N, M]) so that
// the largest feature is 1/√M: for queries (key_valid undefined) each row's own maximum over its
// M features, a per-query factor that cancels in the attention's ratio; for keys one value per
// (batch, head), the maximum over the real keys' features only ([B, H, 1, 1]), so that padding
// never moves it. Differentiable (no detach): the gradient is that of the function computed.
at::Tensor prf_offset(const at::Tensor& u, const at::Tensor& x_sq_norm, const at::Tensor& key_valid);

// prf_features with prf_offset, and for keys (key_valid defined) the exponent of every padded
// row set to the offset, so its features stay finite whatever sits there: a masked-out key's
// contribution and its gradient are then exactly zero (exp overflowing to inf would make both NaN).
at::Tensor stable_prf_features(const at::Tensor& u, const at::Tensor& x_sq_norm, const at::Tensor& key_valid);

// The feature count M when a plugin's `features` parameter is 0 ("auto"): the rule of the
// KL-Transformer's experiment code, which sets M from the head dimension d and the task's length:
// M = min(max_len, pow2cast(d ln d)), pow2cast rounding to a power of two (up when the bit below
// the leading one is set, i.e. at ≥ 1.5 · 2^k, else down): 32 at d = 16, 128 at d = 32, 256 at d = 64.
std::int64_t kl_feature_count(std::int64_t head_dim, std::int64_t max_len);
// `features` as configured, or kl_feature_count for 0, never below `minimum`.
std::int64_t resolve_feature_count(const ParamValues& params, const AttentionShape& shape, std::int64_t minimum = 1);

// The `kernel` parameter of the positive-feature methods (softmax|gaussian) as the factor of ‖x‖²
// in their exponent: 1 for exp(ωᵀx − ‖x‖²/2) (exp(xᵀy) at ω ~ N(0, I)), 2 for exp(ωᵀx − ‖x‖²)
// (the KL-Transformer authors' code). ParamError for any other value.
double prf_norm_factor(const ParamValues& params);

// The two feature maps on x [B, H, N, d] scaled by d^-¼ (the authors' softmax_temp = 1/√d, x · √temp),
// through frequencies given as columns w: [d, M], or [H, d, M] for one set per head.
// RKS: rks_features(u), u = (x / d^¼) w.
at::Tensor scaled_rks_features(const at::Tensor& x, const at::Tensor& w);
// Positive: stable_prf_features(u, norm_factor · ‖x / d^¼‖², key_valid) with, for keys (key_valid
// defined), the padded rows zeroed first so that the keys' offset sees real keys only.
at::Tensor scaled_prf_features(const at::Tensor& x, const at::Tensor& w, const at::Tensor& key_valid, double norm_factor);

// x [B, H, N, D] with the rows of padded keys (key_valid [B, N] false) set to zero, so that
// whatever sits there can neither overflow nor reach a statistic over the keys.
at::Tensor zero_padded_keys(const at::Tensor& x, const at::Tensor& key_valid);

// Unnormalised Walsh–Hadamard transform along the last dimension (a power of two): y = H x with H
// the Sylvester Hadamard matrix (H_{ij} = (−1)^{popcount(i & j)}); differentiable (H is its own
// transpose). Up to d = 256 one product with H (made once per size, type and device), above that
// O(d log d) butterflies: at a head's width the product is one op where the butterflies are sixty.
at::Tensor fwht(const at::Tensor& x);

// The KL-Transformer's generative spectral density: noise [M, noise_dim] -> frequencies
// [M, out_dim] through `layers` x (fully connected, batch norm, LeakyReLU 0.01), then a fully
// connected layer and tanh. Batch norm follows the module's train/eval mode.
class FrequencyGenerator : public torch::nn::Module {
 public:
  FrequencyGenerator(std::int64_t noise_dim, std::int64_t hidden, std::int64_t layers, std::int64_t out_dim);
  at::Tensor forward(at::Tensor noise);

 private:
  std::vector<torch::nn::Linear> fc_;
  std::vector<torch::nn::BatchNorm1d> bn_;
  torch::nn::Linear out_{nullptr};
};

// The parameters every random-feature plugin takes, appended to its own schema by the plugin:
//   redraw_every (integer, default 100): training steps between fresh draws; 0 = draw once.
//   eval_draw (string, fresh|fixed, default fixed): a fresh draw before every evaluation pass, or
//   the draw the training ended with.
//   eps (real, default 1e-6): the denominator's guard in linear_attention.
#define ATTNLAB_RF_COMMON_PARAMS                                                                             \
  {"redraw_every", ::attnlab::ParamType::integer, "100", 0, 1e9, nullptr,                                    \
   "training steps between fresh draws of the random features (the KL-Transformer code's GMM and generative maps: 1); 0 draws once"},        \
      {"eval_draw", ::attnlab::ParamType::string, "fixed", 0, 0, "fixed|fresh",                               \
       "evaluation with the last training draw (fixed) or a fresh draw per evaluation pass (fresh)"},        \
      {"eps", ::attnlab::ParamType::real, "1e-06", 0, 1, nullptr, "guard added to the linear attention's denominator"}

// Base of every stochastic feature-map attention: forward = linear_attention(φ(q), φ(k), v).
// A subclass implements features() and draw(); scaling of q and k, if any, is the subclass's.
class RandomFeatureAttention : public AttentionMethod {
 public:
  explicit RandomFeatureAttention(const ParamValues& params);
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const at::Tensor& key_valid) override;
  bool stochastic() const override { return true; }
  std::int64_t redraw_every() const override { return redraw_every_; }
  bool fresh_draw_at_eval() const override { return fresh_at_eval_; }
  void redraw(at::Generator& generator) override { draw(generator); }

 protected:
  // φ of queries (key_valid undefined) or of keys (key_valid [B, N] bool), x: [B, H, N, Dh] ->
  // [B, H, N, F]. linear_attention drops padded keys' features; they must only stay finite and
  // must not move the real keys' features (zero_padded_keys before any key-wide statistic).
  virtual at::Tensor features(const at::Tensor& x, const at::Tensor& key_valid) = 0;
  // New randomness from the run's generator (CPU); keep it in buffers on the module's device.
  virtual void draw(at::Generator& generator) = 0;
  // The denominator's guard, for a subclass that overrides forward.
  double eps() const { return eps_; }

 private:
  std::int64_t redraw_every_;
  bool fresh_at_eval_;
  double eps_;
};

// The KL-Transformer's generative methods: M frequencies ω_m = g(n_m), g a FrequencyGenerator
// (module "generator", widths from the parameters noise_dim, hidden, layers; 0 = the authors' d and
// 4d) on Gaussian noise n [M, noise_dim] (buffer "noise", redrawn); M from `features`, at least 2
// for batch norm. ω is computed once per forward call: queries and keys share it, and batch norm
// sees the noise once. A subclass is its feature map on frequency_columns().
class GenerativeAttention : public RandomFeatureAttention {
 public:
  GenerativeAttention(const AttentionShape& shape, const ParamValues& params);
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const at::Tensor& key_valid) override;

 protected:
  void draw(at::Generator& generator) override;
  // ω as columns [d, M], during a forward call.
  at::Tensor frequency_columns() const { return omega_.transpose(0, 1); }

 private:
  std::int64_t features_, noise_dim_;
  std::shared_ptr<FrequencyGenerator> generator_;
  at::Tensor noise_, omega_;
};

// The KL-Transformer's Gaussian-mixture methods, one mixture per head: C components of equal
// weight (`components`), M frequencies each (`features`), learnable means μ [H, C, d] (parameter
// "mu", starting at 0) and noise n [H, C, M, d] (buffer "noise", redrawn). The spread (parameter
// "sigma") and how it maps the noise to ω are the subclass's: its equation.
class MixtureAttention : public RandomFeatureAttention {
 public:
  MixtureAttention(const AttentionShape& shape, const ParamValues& params);

 protected:
  void draw(at::Generator& generator) override;
  // The frequencies ω [H, C, M, d] (rows) as columns per head: [H, d, C·M].
  at::Tensor as_columns(const at::Tensor& omega) const;

  std::int64_t heads_, dim_, components_, features_;
  at::Tensor mu_, noise_;
};

}  // namespace attnlab::rf
