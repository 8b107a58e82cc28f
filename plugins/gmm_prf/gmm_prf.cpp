// GMM-PRF (KL-Transformer, Chowdhury et al. 2022, §2.1): positive random features whose frequencies
// come from a learnable Gaussian mixture with diagonal covariance, one per head. With C components
// of equal weight and M samples each, ω_{c,m} = σ_c ⊙ n_{c,m} + μ_c, n ~ N(0, I_d), and
//   φ(x) = exp(ωᵀx − ‖x‖²/2) / √(C M)   over all C·M frequencies,
// so that φ(x)ᵀφ(y) is an unbiased estimate of
//   (1/C) Σ_c E exp(ω_cᵀ(x + y)) e^{−(‖x‖² + ‖y‖²)/2}
//     = (1/C) Σ_c exp(μ_cᵀ(x + y) + ‖σ_c ⊙ (x + y)‖²/2 − (‖x‖² + ‖y‖²)/2),
// which is exp(xᵀy), the softmax kernel, for μ = 0, σ = 1 (`kernel = gaussian` subtracts ‖x‖² instead,
// the authors' choice, giving exp(−‖x − y‖²/2) there). Queries and keys are scaled by d^-¼ first.
//
// Numerical range: each query row's features are divided by their largest value, the keys' by the
// largest over the real keys of the (batch, head); both factors cancel in the attention's ratio.
#include <ATen/ATen.h>

#include "random_features.hpp"
#include "attnlab/step_ops.hpp"

namespace attnlab::gmm_prf {

const ParamSpec kParams[] = {
    {"features", ParamType::integer, "0", 0, 65536, nullptr,
     "M, frequencies drawn per mixture component (feature dimension components * M); 0 = auto: min(max_len, pow2cast(d ln d)), the KL-Transformer code's rule"},
    {"components", ParamType::integer, "2", 1, 256, nullptr, "C, Gaussian components of the mixture (equal weights)"},
    {"kernel", ParamType::string, "softmax", 0, 0, "softmax|gaussian",
     "norm term of the features: exp(w.x - |x|^2/2) (softmax: exp(x.y) at mu = 0, sigma = 1) or exp(w.x - |x|^2) "
     "(gaussian, the authors' code: exp(-|x-y|^2/2))"},
    ATTNLAB_RF_COMMON_PARAMS,
};

// μ, the noise and the redraws: rf::MixtureAttention.
class GmmPrfAttention : public rf::MixtureAttention {
 public:
  GmmPrfAttention(const AttentionShape& shape, const ParamValues& params)
      : rf::MixtureAttention(shape, params), norm_factor_(rf::prf_norm_factor(params)) {
    // standard deviations, 1 (and μ = 0): the softmax kernel to start with
    sigma_ = register_parameter("sigma", at::ones({heads_, components_, dim_}, at::TensorOptions().dtype(at::kFloat)));
  }

 protected:
  // offsets: rf::prf_offset, over the real keys only
  at::Tensor features(const at::Tensor& x, const at::Tensor& key_valid) override {
    const auto dtype = x.scalar_type();
    // ω_{h,c,m} = σ_{h,c} ⊙ n_{h,c,m} + μ_{h,c}, as rows: [H, C, M, d]
    const auto omega = as_type(noise_, dtype) * as_type(sigma_, dtype).unsqueeze(-2) + as_type(mu_, dtype).unsqueeze(-2);
    return rf::scaled_prf_features(x, as_columns(omega), key_valid, norm_factor_);
  }

 private:
  double norm_factor_;
  at::Tensor sigma_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<GmmPrfAttention>(shape, params);
}

}  // namespace attnlab::gmm_prf

ATTNLAB_PLUGIN_INFO(attention, "gmm_prf", "1.0",
                    "GMM-PRF (KL-Transformer): positive random features of a learnable diagonal Gaussian mixture",
                    attnlab::gmm_prf::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::gmm_prf::create);
