// GMM-RKS (KL-Transformer, Chowdhury et al. 2022, §2.1): random kitchen sinks whose spectral
// density is a learnable Gaussian mixture, one per head. With C components of equal weight and M
// samples each, ω_{c,m} = Σ_c n_{c,m} + μ_c, n ~ N(0, I_d), and
//   φ(x) = [cos(ωᵀx), sin(ωᵀx)] / √(C M)   over all C·M frequencies,
// so that φ(x)ᵀφ(y) = (1/C) Σ_c (1/M) Σ_m cos(ω_{c,m}ᵀ(x − y)), an unbiased estimate of
//   k(x − y) = (1/C) Σ_c exp(−‖Σ_cᵀ(x − y)‖² / 2) cos(μ_cᵀ(x − y))
// (for ω ~ N(μ, Σ Σᵀ): E cos(ωᵀz) = Re E e^{iωᵀz} = Re e^{iμᵀz − zᵀΣΣᵀz/2}). Queries and keys are
// scaled by d^-¼ first (the authors' softmax_temp = 1/√d, x · √softmax_temp).
#include <cmath>
#include <cstdint>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "random_features.hpp"

namespace attnlab::gmm_rks {

const ParamSpec kParams[] = {
    {"features", ParamType::integer, "0", 0, 65536, nullptr,
     "M, frequencies drawn per mixture component (feature dimension 2 * components * M); 0 = auto: min(max_len, pow2cast(d ln d)), the KL-Transformer code's rule"},
    {"components", ParamType::integer, "2", 1, 256, nullptr, "C, Gaussian components of the spectral mixture (equal weights)"},
    ATTNLAB_RF_COMMON_PARAMS,
};

class GmmRksAttention : public rf::RandomFeatureAttention {
 public:
  GmmRksAttention(const AttentionShape& shape, const ParamValues& params)
      : rf::RandomFeatureAttention(params),
        heads_(shape.heads),
        dim_(shape.head_dim),
        components_(params.integer("components")),
        features_(rf::resolve_feature_count(params, shape)) {
    const auto opts = at::TensorOptions().dtype(at::kFloat);
    // μ = 0, Σ = I: the mixture starts as the Gaussian kernel exp(−‖x − y‖²/2).
    mu_ = register_parameter("mu", at::zeros({heads_, components_, dim_}, opts));
    sigma_ = register_parameter(
        "sigma", at::eye(dim_, opts).expand({heads_, components_, dim_, dim_}).contiguous());
    noise_ = register_buffer("noise", at::zeros({heads_, components_, features_, dim_}, opts));
  }

 protected:
  void draw(at::Generator& generator) override {
    at::NoGradGuard no_grad;
    const auto n = at::randn({heads_, components_, features_, dim_}, generator, at::TensorOptions().dtype(at::kFloat));
    noise_.copy_(n);
  }

  at::Tensor features(const at::Tensor& x, const at::Tensor& /*key_valid*/) override {
    const auto dtype = x.scalar_type();
    // ω_{h,c,m} = Σ_{h,c} n_{h,c,m} + μ_{h,c}, as rows: [H, C, M, d]
    const auto omega = at::matmul(noise_.to(dtype), sigma_.to(dtype).transpose(-2, -1)) + mu_.to(dtype).unsqueeze(-2);
    const auto w = omega.reshape({heads_, components_ * features_, dim_}).transpose(-2, -1);  // [H, d, C·M]
    const auto u = at::matmul(x * std::pow(static_cast<double>(dim_), -0.25), w);              // [B, H, N, C·M]
    return rf::rks_features(u);  // 1/√(C·M): the equal-weight mixture of the C estimates
  }

 private:
  std::int64_t heads_, dim_, components_, features_;
  at::Tensor mu_, sigma_, noise_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<GmmRksAttention>(shape, params);
}

}  // namespace attnlab::gmm_rks

ATTNLAB_PLUGIN_INFO(attention, "gmm_rks", "1.0",
                    "GMM-RKS (KL-Transformer): random Fourier features of a learnable Gaussian-mixture spectral density",
                    attnlab::gmm_rks::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::gmm_rks::create);
