// Full softmax attention (Vaswani et al., 2017, eq. 1): softmax(Q Kᵀ / √p) V, padded keys masked
// out. The exact reference every approximation is measured against.
#include <torch/version.h>

#include "attnlab/attention.hpp"
#include "attnlab/torch_compat.hpp"

namespace attnlab::softmax {

const ParamSpec kParams[] = {
    {"dropout", ParamType::real, "0.0", 0, 0.99, nullptr, "dropout on the attention probabilities while training"},
};

class SoftmaxAttention : public AttentionMethod {
 public:
  explicit SoftmaxAttention(double dropout) : dropout_(dropout) {}
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    return compat::scaled_dot_product_attention(q, k, v, key_valid, dropout_, is_training());
  }

 private:
  double dropout_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape&, const ParamValues& params) {
  return std::make_shared<SoftmaxAttention>(params.real("dropout"));
}

}  // namespace attnlab::softmax

ATTNLAB_PLUGIN_INFO(attention, "softmax", "1.0", "Full scaled dot-product softmax attention (exact, O(n^2))",
                    attnlab::softmax::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::softmax::create);
