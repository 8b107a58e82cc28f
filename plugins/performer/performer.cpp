// Performer, FAVOR+ (Choromanski et al., 2021, "Rethinking Attention with Performers", Lemma 1 and
// §2.4): softmax attention through positive orthogonal random features. With x = q / d^¼ (and
// y = k / d^¼), exp(qᵀk / √d) = exp(xᵀy) = E_ω[φ(x)ᵀφ(y)] for
//   φ(x) = exp(Ωx − ‖x‖²/2) / √M,   Ω = [ω_1 … ω_M]ᵀ, each ω_m ~ N(0, I_d),
// the rows drawn in blocks of d mutually orthogonal vectors (uniform directions from the QR of a
// Gaussian matrix, norms chi(d), so each row is still exactly N(0, I_d)); then linear attention
// (rf::linear_attention). A stabilising offset is subtracted inside the exponent (rf::prf_offset):
// each query row's own maximum, and for keys one maximum per (batch, head) over the real keys.
// form = "performer_pytorch" is instead that library's FastAttention as the Skyformer and
// Nystromformer LRA code calls it (performer_pytorch_forward).
#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/ATen.h>

#include "attnlab/attention.hpp"
#include "attnlab/precision.hpp"
#include "attnlab/step_ops.hpp"
#include "random_features.hpp"

namespace attnlab::performer {

const ParamSpec kParams[] = {
    {"features", ParamType::integer, "128", 1, 65536, nullptr,
     "M, random features (rows of Omega); Skyformer's Performer setting rp_dim = 128"},
    {"form", ParamType::string, "favor", 0, 0, "favor|performer_pytorch",
     "favor: exp(q.k / sqrt(d)) through the features, padded keys left out (the paper); performer_pytorch: that "
     "library's FastAttention as the Skyformer and Nystromformer LRA code calls it (q and k scaled by d^-1/4 twice, "
     "so exp(q.k / d); 1e-4 added to every feature; one key offset for the whole batch; padded keys, zeroed, in the "
     "normaliser; no guard)"},
    ATTNLAB_RF_COMMON_PARAMS,
};

class PerformerAttention : public rf::RandomFeatureAttention {
 public:
  enum class Form { favor, performer_pytorch };

  PerformerAttention(const ParamValues& params, std::int64_t dim)
      : rf::RandomFeatureAttention(params),
        features_(params.integer("features")),
        dim_(dim),
        form_(params.choice<Form>("form", {{"favor", Form::favor}, {"performer_pytorch", Form::performer_pytorch}})) {
    // Ω [M, d]; drawn by redraw() (the trainer draws before the first step); N(0, I) rows until then
    omega_ = register_buffer("omega", at::randn({features_, dim_}));
  }


  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    if (form_ == Form::favor) return rf::RandomFeatureAttention::forward(q, k, v, key_valid);
    FullPrecision full;  // as the base's forward: the exponentials in fp32
    return performer_pytorch_forward(full_precision(q), full_precision(k), full_precision(v), key_valid);
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

  // performer_pytorch's FastAttention(dim_heads = d, nb_features = M) on Q / d^¼, K · mask / d^¼,
  // V · mask (the LRA code's PerformerAttention), its softmax_kernel scaling by d^-¼ again:
  //   x = q / √d, y = k·m / √d, u = Ωx, w = Ωy,
  //   φ(x) = (exp(u − ‖x‖²/2 − max_m u) + 1e-4) / √M,  φ(y) = (exp(w − ‖y‖²/2 − max w) + 1e-4) / √M,
  // the key maximum taken over the whole batch (every head, key and feature, padding included);
  //   out_i = φ(x_i)ᵀ Σ_j φ(y_j) (v_j m_j)ᵀ / φ(x_i)ᵀ Σ_j φ(y_j), every j, padded ones included.
  at::Tensor performer_pytorch_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                       const at::Tensor& key_valid) const {
    constexpr double kFeatureEps = 1e-4;  // softmax_kernel's eps
    const auto mask = key_valid.view({key_valid.size(0), 1, key_valid.size(1), 1}).to(q.scalar_type());
    const auto scale = constant(1.0 / std::sqrt(static_cast<double>(dim_)), q);
    const auto omega_t = as_type(omega_, q.scalar_type()).transpose(0, 1);
    const auto root_m = constant(1.0 / std::sqrt(static_cast<double>(features_)), q);
    const auto x = q * scale, y = k * mask * scale;
    const auto u = at::matmul(x, omega_t), w = at::matmul(y, omega_t);  // [B, H, N, M]
    const auto phi_q = (at::exp(u - 0.5 * (x * x).sum(-1, true) - std::get<0>(u.max(-1, true))) + kFeatureEps) * root_m;
    const auto phi_k = (at::exp(w - 0.5 * (y * y).sum(-1, true) - w.max()) + kFeatureEps) * root_m;
    const auto context = at::matmul(phi_k.transpose(-2, -1), v * mask);                     // [B, H, M, Dv]
    const auto normaliser = at::matmul(phi_q, phi_k.sum(-2).unsqueeze(-1));                 // [B, H, N, 1]
    return at::matmul(phi_q, context) / normaliser;
  }

  std::int64_t features_, dim_;
  Form form_;
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
