// Generative RKS (KL-Transformer, Chowdhury et al. 2022, §2.1, "generative" spectral distribution):
// the frequencies are the output of a learnable generator network g applied to Gaussian noise,
// ω_m = g(n_m), n_m ~ N(0, I_noise_dim), one generator shared by the heads of the attention module,
// and
//   φ(x) = [cos(ωᵀx), sin(ωᵀx)] / √M,   φ(x)ᵀφ(y) = (1/M) Σ_m cos(ω_mᵀ(x − y)),
// an unbiased estimate of the shift-invariant kernel whose spectral density is the law of g(n).
// g: `layers` × (fully connected → batch norm → LeakyReLU(0.01)), then fully connected → tanh.
// Batch norm normalises over the M noise samples (training) or uses its running statistics
// (evaluation), following the module's train/eval mode. Queries and keys are scaled by d^-¼.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "random_features.hpp"

namespace attnlab::generative_rks {

const ParamSpec kParams[] = {
    {"features", ParamType::integer, "0", 0, 65536, nullptr,
     "M, frequencies generated per draw (feature dimension 2M), at least 2 (batch norm); 0 = auto: min(max_len, pow2cast(d ln d)), the KL-Transformer code's rule"},
    {"noise_dim", ParamType::integer, "0", 0, 65536, nullptr, "dimension of the generator's Gaussian input; 0 = head dimension (authors)"},
    {"hidden", ParamType::integer, "0", 0, 65536, nullptr, "width of the generator's hidden layers; 0 = 4 x head dimension (authors)"},
    {"layers", ParamType::integer, "4", 1, 64, nullptr,
     "hidden layers (fully connected, batch norm, LeakyReLU) before the fully connected tanh output layer"},
    ATTNLAB_RF_COMMON_PARAMS,
};

class GenerativeRksAttention : public rf::RandomFeatureAttention {
 public:
  GenerativeRksAttention(const AttentionShape& shape, const ParamValues& params)
      : rf::RandomFeatureAttention(params), dim_(shape.head_dim), features_(rf::resolve_feature_count(params, shape, 2)) {
    noise_dim_ = params.integer("noise_dim") > 0 ? params.integer("noise_dim") : dim_;
    const auto hidden = params.integer("hidden") > 0 ? params.integer("hidden") : 4 * dim_;
    generator_ = register_module("generator", std::make_shared<rf::FrequencyGenerator>(noise_dim_, hidden, params.integer("layers"), dim_));
    noise_ = register_buffer("noise", at::zeros({features_, noise_dim_}, at::TensorOptions().dtype(at::kFloat)));
  }

  // The frequencies once per call (queries and keys share them; batch norm sees the noise once).
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    omega_ = generator_->forward(noise_).to(q.scalar_type());  // [M, d]
    auto out = rf::RandomFeatureAttention::forward(q, k, v, key_valid);
    omega_ = at::Tensor();
    return out;
  }

 protected:
  void draw(at::Generator& generator) override {
    at::NoGradGuard no_grad;
    noise_.copy_(at::randn({features_, noise_dim_}, generator, at::TensorOptions().dtype(at::kFloat)));
  }

  at::Tensor features(const at::Tensor& x, const at::Tensor& /*key_valid*/) override {
    const auto u = at::matmul(x * std::pow(static_cast<double>(dim_), -0.25), omega_.transpose(0, 1));  // [B, H, N, M]
    return rf::rks_features(u);
  }

 private:
  std::int64_t dim_, features_, noise_dim_;
  std::shared_ptr<rf::FrequencyGenerator> generator_;
  at::Tensor noise_, omega_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<GenerativeRksAttention>(shape, params);
}

}  // namespace attnlab::generative_rks

ATTNLAB_PLUGIN_INFO(attention, "generative_rks", "1.0",
                    "Generative RKS (KL-Transformer): random Fourier features with frequencies from a learnable generator network",
                    attnlab::generative_rks::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::generative_rks::create);
