// Synthesizer, random + dot product (Tay et al., 2020, "Synthesizer: Rethinking Self-Attention in
// Transformer Models", §2.1.2 and §2.1.4, mixture of random and vanilla), the variant the LRA
// benchmark ran: a learned logit table R_h [L, L] per head (L = max_len, its top-left n × n block
// used), shared by every sequence, added to the dot-product logits,
//   out = dropout(softmax(Q Kᵀ/√p + R_h[:n, :n] + mask)) V,
// with padded keys masked out. O(n² · p) time and O(n²) memory, by design; R is H·L² parameters.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "attnlab/attention.hpp"
#include "attnlab/linalg.hpp"
#include "attnlab/precision.hpp"

namespace attnlab::synthesizer {

const ParamSpec kParams[] = {
    {"dropout", ParamType::real, "0.0", 0, 0.99, nullptr, "dropout on the attention probabilities while training"},
};

// softmax(qs ksᵀ + bias + mask) over [B, H, n, n] with the n×n products, one kept (the
// probabilities P).
at::Tensor probabilities(const at::Tensor& qs, const at::Tensor& ks, const at::Tensor& bias, const at::Tensor& padded_key) {
  auto scores = at::matmul(qs, ks.transpose(-2, -1));
  scores.add_(bias).masked_fill_(padded_key, masked_logit(qs.scalar_type()));
  return at::softmax(scores, -1);
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Without dropout: a hand-written backward that needs one n×n tensor besides P (autograd's
// holds several), as the softmax plugin's on LibTorch 1.13: dS = P ∘ (dP − rowsum(dO ∘ O)), the
// bias's gradient dS summed over the batch. Masked entries have P = 0 exactly, hence dS = 0.
struct BiasedSoftmaxAttention : public torch::autograd::Function<BiasedSoftmaxAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qs, const at::Tensor& ks, const at::Tensor& vs,
                            const at::Tensor& bias, const at::Tensor& padded_key) {
    NoAutocast one_type;  // P in the inputs' type, as the backward's matmuls need (precision.hpp)
    const auto probs = probabilities(qs, ks, bias, padded_key);
    auto out = at::matmul(probs, vs);
    ctx->save_for_backward({qs, ks, vs, probs, out});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &qs = saved[0], &ks = saved[1], &vs = saved[2], &probs = saved[3], &out = saved[4];
    const auto& g = grads[0];
    auto grad_v = at::matmul(probs.transpose(-2, -1), g);
    auto grad_scores = at::matmul(g, vs.transpose(-2, -1));               // dP
    grad_scores.sub_((g * out).sum(-1, /*keepdim=*/true)).mul_(probs);  // dS, in place
    auto grad_q = at::matmul(grad_scores, ks);
    auto grad_k = at::matmul(grad_scores.transpose(-2, -1), qs);
    auto grad_bias = grad_scores.sum(0);  // [H, n, n]: the bias is shared by the batch
    return {grad_q, grad_k, grad_v, grad_bias, at::Tensor()};
  }
};

class SynthesizerAttention : public AttentionMethod {
 public:
  SynthesizerAttention(const AttentionShape& shape, double dropout) : max_len_(shape.max_len), dropout_(dropout) {
    // Xavier-uniform as Flax's initializer (LRA) computes the fans of an [H, L, L] array: the last
    // two axes are in and out, the head axis a receptive field, so fan_in = fan_out = H·L.
    const double fans = 2.0 * static_cast<double>(shape.heads * shape.max_len);
    const double bound = std::sqrt(6.0 / fans);
    // from the global generator, which the host seeds before building the model
    r_ = register_parameter("R", at::empty({shape.heads, shape.max_len, shape.max_len}).uniform_(-bound, bound));
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const auto batch = q.size(0), n = q.size(2);
    if (n > max_len_)
      throw std::invalid_argument("synthesizer: a sequence of " + std::to_string(n) +
                                  " positions, longer than max_len = " + std::to_string(max_len_) + " (the size of R)");
    // q kᵀ/√p as (q/p^¼)(k/p^¼)ᵀ; padded rows zeroed, so nothing there reaches a real token.
    const auto [qs, ks, vs, valid] = linalg::scale_and_mask(q, k, v, key_valid);
    // R_h[:n, :n] [H, n, n]; at n = L, R itself (a slice's backward would allocate and fill an
    // [H, L, L] tensor per slice for nothing)
    const auto bias = (n == max_len_ ? r_ : r_.slice(1, 0, n).slice(2, 0, n)).to(q.scalar_type());
    const auto padded_key = valid.logical_not().view({batch, 1, 1, n});
    if (!(is_training() && dropout_ > 0)) return BiasedSoftmaxAttention::apply(qs, ks, vs, bias, padded_key);
    // with dropout on the probabilities: autograd's generic backward
    return at::matmul(at::dropout(probabilities(qs, ks, bias, padded_key), dropout_, /*train=*/true), vs);
  }

 private:
  std::int64_t max_len_;
  double dropout_;
  at::Tensor r_;  // R [H, L, L]
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<SynthesizerAttention>(shape, params.real("dropout"));
}

}  // namespace attnlab::synthesizer

ATTNLAB_PLUGIN_INFO(attention, "synthesizer", "1.0",
                    "Synthesizer (random + dot product, LRA's): softmax(Q K^T/sqrt(p) + R_h) V with a learned R [H, L, L]",
                    attnlab::synthesizer::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::synthesizer::create);
