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

// The generator, its noise and the redraws: rf::GenerativeAttention.
class GenerativePrfAttention : public rf::GenerativeAttention {
 public:
  GenerativePrfAttention(const AttentionShape& shape, const ParamValues& params)
      : rf::GenerativeAttention(shape, params), norm_factor_(rf::prf_norm_factor(params)) {}

 protected:
  // offsets: rf::prf_offset, over the real keys only
  at::Tensor features(const at::Tensor& x, const at::Tensor& key_valid) override {
    return rf::scaled_prf_features(x, frequency_columns(), key_valid, norm_factor_);
  }

 private:
  double norm_factor_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<GenerativePrfAttention>(shape, params);
}

}  // namespace attnlab::generative_prf

ATTNLAB_PLUGIN_INFO(attention, "generative_prf", "1.0",
                    "Generative PRF (KL-Transformer): positive random features with frequencies from a learnable generator network",
                    attnlab::generative_prf::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::generative_prf::create);
