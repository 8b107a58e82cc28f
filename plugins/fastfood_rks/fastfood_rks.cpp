// Fastfood random kitchen sinks (KL-Transformer, Chowdhury et al. 2022, §2.1; Le et al. 2013):
// u = V x with the Fastfood projection V of fastfood.hpp (random_features), x = q / d^¼, and
//   φ(x) = [cos u, sin u] / √M,   φ(x)ᵀφ(y) ≈ exp(−‖x − y‖² / 2) = exp(−‖q − k‖² / (2√d)),
// then linear attention (rf::linear_attention). Stochastic: Π (and the fixed diagonals) redrawn.
#include "fastfood.hpp"

namespace attnlab::fastfood {

const ParamSpec kRksParams[] = {ATTNLAB_FASTFOOD_PARAMS};

class FastfoodRks : public FastfoodAttention {
 public:
  using FastfoodAttention::FastfoodAttention;

 protected:
  at::Tensor map(const at::Tensor& u, const at::Tensor&, const at::Tensor&) const override { return rf::rks_features(u); }
};

std::shared_ptr<AttentionMethod> create_rks(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<FastfoodRks>(params, shape);
}

}  // namespace attnlab::fastfood

ATTNLAB_PLUGIN_INFO(attention, "fastfood_rks", "1.0",
                    "Fastfood random Fourier features for the Gaussian kernel, learnable S, G, B (KL-Transformer; stochastic)",
                    attnlab::fastfood::kRksParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::fastfood::create_rks);
