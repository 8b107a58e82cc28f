// Generative PRF (KL-Transformer, Chowdhury et al. 2022, §2.1, "generative" spectral distribution):
// positive random features whose frequencies are the output of a learnable generator network g
// applied to Gaussian noise, ω_m = g(n_m), n_m ~ N(0, I_noise_dim), one generator shared by the
// heads of the attention module, and
//   φ(x) = exp(ωᵀx − ‖x‖²/2) / √M,   φ(x)ᵀφ(y) = (1/M) Σ_m exp(ω_mᵀ(x + y)) e^{−(‖x‖² + ‖y‖²)/2},
// an unbiased estimate of E_ω exp(ωᵀ(x + y)) e^{−(‖x‖² + ‖y‖²)/2} for the law of g(n) (exp(xᵀy)
// were ω standard normal; `kernel = gaussian` subtracts ‖x‖², the authors' choice).
// g: `layers` × (fully connected → batch norm → LeakyReLU(0.01)), then fully connected → tanh.
// Batch norm normalises over the M noise samples (training) or uses its running statistics
// (evaluation), following the module's train/eval mode. Queries and keys are scaled by d^-¼.
//
// Numerical range: each query row's features are divided by their largest value, the keys' by the
// largest over the real keys of the (batch, head); both factors cancel in the attention's ratio.
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "random_features.hpp"

namespace attnlab::generative_prf {

const ParamSpec kParams[] = {
    {"features", ParamType::integer, "0", 0, 65536, nullptr,
     "M, frequencies generated per draw (feature dimension M), at least 2 (batch norm); 0 = auto: min(max_len, pow2cast(d ln d)), the KL-Transformer code's rule"},
    {"noise_dim", ParamType::integer, "0", 0, 65536, nullptr, "dimension of the generator's Gaussian input; 0 = head dimension (authors)"},
    {"hidden", ParamType::integer, "0", 0, 65536, nullptr, "width of the generator's hidden layers; 0 = 4 x head dimension (authors)"},
    {"layers", ParamType::integer, "4", 1, 64, nullptr,
     "hidden layers (fully connected, batch norm, LeakyReLU) before the fully connected tanh output layer"},
    {"kernel", ParamType::string, "softmax", 0, 0, "softmax|gaussian",
     "norm term of the features: exp(w.x - |x|^2/2) (softmax) or exp(w.x - |x|^2) (gaussian, the authors' code)"},
    ATTNLAB_RF_COMMON_PARAMS,
};

class GenerativePrfAttention : public rf::RandomFeatureAttention {
 public:
  GenerativePrfAttention(const AttentionShape& shape, const ParamValues& params)
      : rf::RandomFeatureAttention(params), dim_(shape.head_dim), features_(rf::resolve_feature_count(params, shape, 2)) {
    const auto& kernel = params.string("kernel");
    if (kernel != "softmax" && kernel != "gaussian") throw ParamError("kernel: expected softmax or gaussian, got '" + kernel + "'");
    norm_factor_ = kernel == "softmax" ? 1.0 : 2.0;
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

  at::Tensor features(const at::Tensor& x_in, const at::Tensor& key_valid) override {
    auto x = x_in * std::pow(static_cast<double>(dim_), -0.25);
    if (key_valid.defined()) x = rf::zero_padded_keys(x, key_valid);  // the keys' offset sees real keys only
    const auto u = at::matmul(x, omega_.transpose(0, 1));                 // [B, H, N, M]
    const auto sq = norm_factor_ * (x * x).sum(-1, /*keepdim=*/true);    // [B, H, N, 1]
    return rf::stable_prf_features(u, sq, key_valid);  // offsets: rf::prf_offset
  }

 private:
  std::int64_t dim_, features_, noise_dim_;
  double norm_factor_ = 1.0;
  std::shared_ptr<rf::FrequencyGenerator> generator_;
  at::Tensor noise_, omega_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<GenerativePrfAttention>(shape, params);
}

}  // namespace attnlab::generative_prf

ATTNLAB_PLUGIN_INFO(attention, "generative_prf", "1.0",
                    "Generative PRF (KL-Transformer): positive random features with frequencies from a learnable generator network",
                    attnlab::generative_prf::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::generative_prf::create);
