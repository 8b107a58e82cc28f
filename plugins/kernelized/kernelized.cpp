// Kernelized attention (Chen et al., 2021, "Skyformer", eq. 3): C V with the Gaussian kernel
// C = κ(Q / p^¼, K / p^¼), κ(x, y) = exp(−‖x − y‖² / 2), p the head dimension; no row
// normalisation. Padded keys contribute nothing. O(n²): the exact reference Skyformer approximates.
//
// With dropout (the authors' attention_dropout, while training) C is replaced by D = dropout(C)
// and the same backward holds with D for C: dS = (dO Vᵀ) ∘ mask ∘ C = (dO Vᵀ) ∘ D, dV = Dᵀ dO.
//
// C_ij = exp(S_ij) with S_ij = q_i·k_j − ‖q_i‖²/2 − ‖k_j‖²/2 has softmax's shape, so the backward is
// written by hand as softmax's is (attnlab/torch_compat): one n×n buffer, dS = (dO Vᵀ) ∘ C in place,
// then dQ = dS K − rowsum(dS) ∘ Q, dK = dSᵀ Q − colsum(dS) ∘ K, dV = Cᵀ dO. Autograd's generic
// backward of the same expression holds several n×n tensors at once.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "attnlab/attention.hpp"
#include "attnlab/linalg.hpp"
#include "attnlab/precision.hpp"

namespace attnlab::kernelized {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const ParamSpec kParams[] = {
    {"dropout", ParamType::real, "0.0", 0, 0.99, nullptr, "dropout on the kernel matrix C while training (the authors' 0.1)"},
};

// out = dropout(κ(q, k)) v on rows already scaled by p^-¼ and zeroed at padding; `valid` [B, 1, N]
// masks the kernel's columns (exactly 0 there).
struct GaussianKernelAttention : public torch::autograd::Function<GaussianKernelAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& valid, double dropout) {
    auto c = linalg::gaussian_kernel(q, k, {}, valid);  // [B, H, N, N], the one n×n tensor kept
    if (dropout > 0) c = at::dropout(c, dropout, /*train=*/true);
    auto out = at::matmul(c, v);
    ctx->save_for_backward({q, k, v, c});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &c = saved[3];
    const auto& g = grads[0];
    auto grad_v = at::matmul(c.transpose(-2, -1), g);
    auto grad_s = at::matmul(g, v.transpose(-2, -1)).mul_(c);  // dS = dC ∘ C (where S was clamped, ∂ is ~0 anyway)
    auto grad_q = at::matmul(grad_s, k).sub_(grad_s.sum(-1, /*keepdim=*/true) * q);
    auto grad_k = at::matmul(grad_s.transpose(-2, -1), q).sub_(grad_s.sum(-2).unsqueeze(-1) * k);
    return {grad_q, grad_k, grad_v, at::Tensor(), at::Tensor()};
  }
};

class KernelizedAttention : public AttentionMethod {
 public:
  explicit KernelizedAttention(double dropout) : dropout_(dropout) {}
  at::Tensor forward(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, const at::Tensor& key_valid) override {
    // In fp32 inside autocast: κ's squared distance by expansion cancels in bf16, and the
    // hand-written backward wants one type throughout. The exact reference: precision before speed.
    FullPrecision full;
    const auto q = full_precision(q_in), k = full_precision(k_in), v = full_precision(v_in);
    const auto in = linalg::scale_and_mask(q, k, v, key_valid);  // padded keys' kernel columns are then 0
    return GaussianKernelAttention::apply(in.q, in.k, in.v, in.valid.unsqueeze(1), is_training() ? dropout_ : 0.0);
  }

 private:
  double dropout_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape&, const ParamValues& params) {
  return std::make_shared<KernelizedAttention>(params.real("dropout"));
}

}  // namespace attnlab::kernelized

ATTNLAB_PLUGIN_INFO(attention, "kernelized", "1.0",
                    "Gaussian-kernel attention exp(-|q-k|^2/(2 sqrt p)) V, Skyformer eq. 3 (exact, O(n^2), unnormalised)",
                    attnlab::kernelized::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::kernelized::create);
