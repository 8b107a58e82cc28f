// Generative RKS (KL-Transformer, Chowdhury et al. 2022, §2.1, "generative" spectral distribution):
// the frequencies are the output of a learnable generator network g applied to Gaussian noise,
// ω_m = g(n_m), n_m ~ N(0, I_noise_dim), one generator shared by the heads of the attention module,
// and
//   φ(x) = [cos(ωᵀx), sin(ωᵀx)] / √M,   φ(x)ᵀφ(y) = (1/M) Σ_m cos(ω_mᵀ(x − y)),
// an unbiased estimate of the shift-invariant kernel whose spectral density is the law of g(n).
// g: `layers` × (fully connected → batch norm → LeakyReLU(0.01)), then fully connected → tanh.
// Batch norm normalises over the M noise samples (training) or uses its running statistics
// (evaluation), following the module's train/eval mode. Queries and keys are scaled by d^-¼.
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

// The generator, its noise and the redraws: rf::GenerativeAttention.
class GenerativeRksAttention : public rf::GenerativeAttention {
 public:
  using rf::GenerativeAttention::GenerativeAttention;

 protected:
  at::Tensor features(const at::Tensor& x, const at::Tensor& /*key_valid*/) override {
    return rf::scaled_rks_features(x, frequency_columns());
  }
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<GenerativeRksAttention>(shape, params);
}

}  // namespace attnlab::generative_rks

ATTNLAB_PLUGIN_INFO(attention, "generative_rks", "1.0",
                    "Generative RKS (KL-Transformer): random Fourier features with frequencies from a learnable generator network",
                    attnlab::generative_rks::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::generative_rks::create);
