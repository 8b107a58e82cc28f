// Kernelized attention (Chen et al., 2021, "Skyformer", eq. 3): C V with the Gaussian kernel
// C = κ(Q / p^¼, K / p^¼), κ(x, y) = exp(−‖x − y‖² / 2), p the head dimension; no row
// normalisation. Padded keys contribute nothing. O(n²): the exact reference Skyformer approximates.
#include <ATen/ATen.h>

#include "attnlab/attention.hpp"
#include "attnlab/linalg.hpp"

namespace attnlab::kernelized {

class KernelizedAttention : public AttentionMethod {
 public:
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const auto in = linalg::scale_and_mask(q, k, v, key_valid);  // padded keys' kernel columns are then 0
    const auto c = linalg::gaussian_kernel(in.q, in.k, {}, in.valid.unsqueeze(1));  // [B, H, N, N]
    return at::matmul(c, in.v);
  }
};

std::shared_ptr<AttentionMethod> create(const AttentionShape&, const ParamValues&) {
  return std::make_shared<KernelizedAttention>();
}

}  // namespace attnlab::kernelized

ATTNLAB_PLUGIN_INFO(attention, "kernelized", "1.0",
                    "Gaussian-kernel attention exp(-|q-k|^2/(2 sqrt p)) V, Skyformer eq. 3 (exact, O(n^2), unnormalised)",
                    nullptr);
ATTNLAB_ATTENTION_FACTORY(attnlab::kernelized::create);
