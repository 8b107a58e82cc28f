// Fastfood positive random features (KL-Transformer, Chowdhury et al. 2022, §2.1, "FastFood-PRF"):
// u = V x with the Fastfood projection V of fastfood.hpp (random_features), x = q / d^¼, and
//   φ(x) = exp(u − ‖x‖²/2 − offset) / √M,   φ(x)ᵀφ(y) ≈ exp(xᵀy) = exp(qᵀk / √d)
// (rf::prf_features; the offset from rf::prf_offset: each query row's maximum, and one maximum per
// (batch, head) over the real keys), then linear attention. Stochastic like fastfood_rks.
#include "fastfood.hpp"

namespace attnlab::fastfood {

const ParamSpec kPrfParams[] = {ATTNLAB_FASTFOOD_PARAMS};

class FastfoodPrf : public FastfoodAttention {
 public:
  using FastfoodAttention::FastfoodAttention;

 protected:
  at::Tensor map(const at::Tensor& u, const at::Tensor& x_sq, const at::Tensor& key_valid) const override {
    return rf::stable_prf_features(u, x_sq, key_valid);
  }
};

std::shared_ptr<AttentionMethod> create_prf(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<FastfoodPrf>(params, shape);
}

}  // namespace attnlab::fastfood

ATTNLAB_PLUGIN_INFO(attention, "fastfood_prf", "1.0",
                    "Fastfood positive random features for the softmax kernel, learnable S, G, B (KL-Transformer; stochastic)",
                    attnlab::fastfood::kPrfParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::fastfood::create_prf);
