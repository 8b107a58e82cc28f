// GMM-RKS (KL-Transformer, Chowdhury et al. 2022, §2.1): random kitchen sinks whose spectral
// density is a learnable Gaussian mixture, one per head. With C components of equal weight and M
// samples each, ω_{c,m} = Σ_c n_{c,m} + μ_c, n ~ N(0, I_d), and
//   φ(x) = [cos(ωᵀx), sin(ωᵀx)] / √(C M)   over all C·M frequencies,
// so that φ(x)ᵀφ(y) = (1/C) Σ_c (1/M) Σ_m cos(ω_{c,m}ᵀ(x − y)), an unbiased estimate of
//   k(x − y) = (1/C) Σ_c exp(−‖Σ_cᵀ(x − y)‖² / 2) cos(μ_cᵀ(x − y))
// (for ω ~ N(μ, Σ Σᵀ): E cos(ωᵀz) = Re E e^{iωᵀz} = Re e^{iμᵀz − zᵀΣΣᵀz/2}). Queries and keys are
// scaled by d^-¼ first (the authors' softmax_temp = 1/√d, x · √softmax_temp). With smoothing s > 0
// a constant feature s is appended (the authors' SmoothedGaussianMixtureFourierFeatures, s = 1), so
// the estimate is k̂ + s²: RKS estimates can be negative, and the added constant keeps the linear
// attention's normaliser Σ_j k̂(q, k_j) away from zero.
#include <ATen/ATen.h>

#include "random_features.hpp"
#include "attnlab/step_ops.hpp"

namespace attnlab::gmm_rks {

const ParamSpec kParams[] = {
    {"features", ParamType::integer, "0", 0, 65536, nullptr,
     "M, frequencies drawn per mixture component (feature dimension 2 * components * M); 0 = auto: min(max_len, pow2cast(d ln d)), the KL-Transformer code's rule"},
    {"components", ParamType::integer, "2", 1, 256, nullptr, "C, Gaussian components of the spectral mixture (equal weights)"},
    {"smoothing", ParamType::real, "0", 0, 100, nullptr,
     "s, a constant feature appended to phi: the kernel estimate becomes k + s^2 (the authors' code: 1; 0 = none)"},
    ATTNLAB_RF_COMMON_PARAMS,
};

// μ, the noise and the redraws: rf::MixtureAttention.
class GmmRksAttention : public rf::MixtureAttention {
 public:
  GmmRksAttention(const AttentionShape& shape, const ParamValues& params)
      : rf::MixtureAttention(shape, params), smoothing_(params.real("smoothing")) {
    // Σ = I (and μ = 0): the mixture starts as the Gaussian kernel exp(−‖x − y‖²/2).
    sigma_ = register_parameter("sigma", at::eye(dim_, at::TensorOptions().dtype(at::kFloat))
                                             .expand({heads_, components_, dim_, dim_})
                                             .contiguous());
  }

 protected:
  at::Tensor features(const at::Tensor& x, const at::Tensor& /*key_valid*/) override {
    const auto dtype = x.scalar_type();
    // ω_{h,c,m} = Σ_{h,c} n_{h,c,m} + μ_{h,c}, as rows: [H, C, M, d]
    const auto omega = at::matmul(as_type(noise_, dtype), as_type(sigma_, dtype).transpose(-2, -1)) + as_type(mu_, dtype).unsqueeze(-2);
    auto phi = rf::scaled_rks_features(x, as_columns(omega));  // 1/√(C·M): the equal-weight mixture of the C estimates
    if (smoothing_ == 0) return phi;
    auto sizes = phi.sizes().vec();
    sizes.back() = 1;
    return at::cat({phi, at::full(sizes, smoothing_, phi.options())}, -1);
  }

 private:
  at::Tensor sigma_;
  double smoothing_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<GmmRksAttention>(shape, params);
}

}  // namespace attnlab::gmm_rks

ATTNLAB_PLUGIN_INFO(attention, "gmm_rks", "1.0",
                    "GMM-RKS (KL-Transformer): random Fourier features of a learnable Gaussian-mixture spectral density",
                    attnlab::gmm_rks::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::gmm_rks::create);
