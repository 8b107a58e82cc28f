// The optimiser's part of a training step (attnlab/torch_compat.hpp): gradient clipping and AdamW's
// update over every parameter at once on LibTorch 2, op by op on 1.13.
#include <stdexcept>
#include <vector>

#include <ATen/ATen.h>
#include <torch/version.h>

#include "attnlab/torch_compat.hpp"

// 2.4: at::_fused_adamw_ has a CPU kernel beside CUDA's, and the foreach ops take a tensor scalar
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define ATTNLAB_FUSED_STEP 1
#endif

namespace attnlab::compat {

void clip_grad_norm(c10::ArrayRef<at::Tensor> grads, double max_norm) {
  if (grads.empty()) return;
#ifdef ATTNLAB_FUSED_STEP
  const auto norms = at::_foreach_norm(grads);
  auto total = norms.size() == 1 ? norms[0] : at::linalg_vector_norm(at::stack(norms));
  // min(1, max_norm / (‖g‖ + 1e-6)), in place on the norm's own tensor; the constants as tensors of
  // its type (a scalar operand is an op of its own to become one)
  const auto max_over = at::scalar_tensor(1.0 / max_norm, total.options());
  at::_foreach_mul_(grads, total.mul_(max_over).add_(max_over, 1e-6).reciprocal_().clamp_max_(1.0));
#else
  std::vector<at::Tensor> norms;
  for (const auto& g : grads) norms.push_back(g.norm(2));
  const auto total = norms.size() == 1 ? norms[0] : at::stack(norms).norm(2);
  const auto coefficient = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (auto g : grads) g.mul_(coefficient);
#endif
}

bool fused_adamw_available() {
#ifdef ATTNLAB_FUSED_STEP
  return true;
#else
  return false;
#endif
}

void fused_adamw([[maybe_unused]] c10::ArrayRef<at::Tensor> parameters, [[maybe_unused]] c10::ArrayRef<at::Tensor> grads,
                 [[maybe_unused]] c10::ArrayRef<at::Tensor> exp_avgs, [[maybe_unused]] c10::ArrayRef<at::Tensor> exp_avg_sqs,
                 [[maybe_unused]] c10::ArrayRef<at::Tensor> steps, [[maybe_unused]] const at::Tensor& lr,
                 [[maybe_unused]] double beta1, [[maybe_unused]] double beta2, [[maybe_unused]] double weight_decay,
                 [[maybe_unused]] double eps) {
#ifdef ATTNLAB_FUSED_STEP
  // the kernel takes the counts of the step it takes
  if (steps.size() == 1) steps[0].add_(at::ones({}, steps[0].options()));
  else at::_foreach_add_(steps, 1);
  at::_fused_adamw_(parameters, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr, beta1, beta2,
                    weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
#else
  throw std::logic_error("fused AdamW needs LibTorch 2.4 or later (this is " TORCH_VERSION ")");
#endif
}

}  // namespace attnlab::compat
