// Performer, FAVOR+ (Choromanski et al., 2021, "Rethinking Attention with Performers", Lemma 1 and
// §2.4): softmax attention through positive orthogonal random features. With x = q / d^¼ (and
// y = k / d^¼), exp(qᵀk / √d) = exp(xᵀy) = E_ω[φ(x)ᵀφ(y)] for
//   φ(x) = exp(Ωx − ‖x‖²/2) / √M,   Ω = [ω_1 … ω_M]ᵀ, each ω_m ~ N(0, I_d),
// the rows drawn in blocks of d mutually orthogonal vectors (uniform directions from the QR of a
// Gaussian matrix, norms chi(d), so each row is still exactly N(0, I_d)); then linear attention
// (rf::linear_attention). A stabilising offset is subtracted inside the exponent (rf::prf_offset):
// each query row's own maximum, and for keys one maximum per (batch, head) over the real keys.
#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/ATen.h>

#include "attnlab/attention.hpp"
#include "attnlab/step_ops.hpp"
#include "random_features.hpp"

namespace attnlab::performer {

const ParamSpec kParams[] = {
    {"features", ParamType::integer, "128", 1, 65536, nullptr,
     "M, random features (rows of Omega); Skyformer's Performer setting rp_dim = 128"},
    ATTNLAB_RF_COMMON_PARAMS,
};

class PerformerAttention : public rf::RandomFeatureAttention {
 public:
  PerformerAttention(const ParamValues& params, std::int64_t dim)
      : rf::RandomFeatureAttention(params), features_(params.integer("features")), dim_(dim) {
    // Ω [M, d]; drawn by redraw() (the trainer draws before the first step); N(0, I) rows until then
    omega_ = register_buffer("omega", at::randn({features_, dim_}));
  }


 protected:
  // Padded keys are zeroed first: whatever sits there can neither overflow nor move the offset.
  at::Tensor features(const at::Tensor& x, const at::Tensor& key_valid) override {
    return key_valid.defined() ? phi(rf::zero_padded_keys(x, key_valid), key_valid) : phi(x, key_valid);
  }

  // Blocks of d orthogonal rows: Q of the QR of a d × d Gaussian matrix, its columns' signs fixed by
  // R's diagonal (so that Q is Haar-distributed), transposed; the last block keeps M mod d rows.
  // Row norms from the rows of a separate M × d Gaussian matrix (chi(d)). Drawn in double on the
  // CPU from the run's generator, then copied into the buffer (on the module's device).
  void draw(at::Generator& generator) override {
    const auto options = at::TensorOptions().dtype(at::kDouble);
    std::vector<at::Tensor> blocks;
    for (std::int64_t start = 0; start < features_; start += dim_) {
      const auto gaussian = at::randn({dim_, dim_}, generator, options);
      const auto qr = at::linalg_qr(gaussian);
      const auto q = std::get<0>(qr) * std::get<1>(qr).diagonal().sign().unsqueeze(0);
      blocks.push_back(q.t().slice(0, 0, std::min(dim_, features_ - start)));
    }
    const auto norms = at::randn({features_, dim_}, generator, options).norm(2, {1}, /*keepdim=*/true);
    at::NoGradGuard no_grad;
    omega_.copy_(at::cat(blocks, 0) * norms);
  }

 private:
  // φ(q) (key_valid undefined) or φ(k) (the offset over the real keys of each (batch, head)).
  at::Tensor phi(const at::Tensor& x_in, const at::Tensor& key_valid) const {
    const auto x = x_in * constant(std::pow(static_cast<double>(dim_), -0.25), x_in);  // x = q / d^¼: exp(xᵀy) = exp(qᵀk / √d)
    const auto u = at::matmul(x, as_type(omega_, x.scalar_type()).transpose(0, 1));        // [B, H, N, M]
    const auto sq = (x * x).sum(-1, /*keepdim=*/true);
    return rf::stable_prf_features(u, sq, key_valid);
  }

  std::int64_t features_, dim_;
  at::Tensor omega_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<PerformerAttention>(params, shape.head_dim);
}

}  // namespace attnlab::performer

ATTNLAB_PLUGIN_INFO(attention, "performer", "1.0",
                    "Performer FAVOR+: positive orthogonal random features for softmax attention (stochastic, O(n M))",
                    attnlab::performer::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::performer::create);
