#pragma once
// The run's optimiser: AdamW (Loshchilov & Hutter, 2019, Alg. 2, as torch.optim.AdamW computes it),
// with gradient clipping, as few ops a step as LibTorch allows.
//
// On LibTorch 2 the parameters, their gradients and AdamW's two moments each live in one flat
// buffer (a parameter is a view of its slice): zeroing the gradients is one fill, the clip's norm one
// reduction, the update one fused kernel (at::_fused_adamw_, CPU and CUDA) instead of about twenty
// ops per parameter tensor. A parameter whose storage someone replaced (Module::load does) is
// copied back into its slice at the next zero_grad(). Unlike torch::optim::AdamW, which skips a
// parameter without a gradient, every parameter takes every step (an unused one with a zero
// gradient); the LRA model and the bundled methods use all of theirs.
//
// On 1.13, and for parameters that cannot share one buffer (several dtypes or devices),
// torch::optim::AdamW's own step, tensor by tensor.
//
// Checkpoints are torch::optim::AdamW's archive either way: a checkpoint either writes resumes on
// the other. The learning rate lives in a device tensor too, set before each step and read there by
// the fused update (a captured CUDA graph replays with the value of the step it replays). Where
// beta1 changes every step (OneCycleLR's cycled momentum) it lives in a device tensor as well, and
// the flat update is written out in ops that read it there (as torch.optim.AdamW's capturable
// update), since the fused kernel takes beta1 as a host number.
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/adamw.h>

namespace attnlab {

class FusedAdamW {
 public:
  // The parameters that require a gradient are optimised (on 2.x moved into the flat buffer now).
  // `varying_beta1`: set_beta1 will be called before steps (the update reads beta1 on the device).
  FusedAdamW(const std::vector<at::Tensor>& parameters, const torch::optim::AdamWOptions& options,
             bool varying_beta1 = false);
  FusedAdamW(const FusedAdamW&) = delete;
  FusedAdamW& operator=(const FusedAdamW&) = delete;
  ~FusedAdamW();

  // Whether the flat buffers and the fused update are in use (LibTorch 2, one dtype and device).
  bool fused() const { return flat_ != nullptr; }
  void set_lr(double lr);  // of the steps from now on
  double lr() const;
  void set_beta1(double beta1);  // of the steps from now on; bias correction 1 - beta1^t with this beta1, as PyTorch's
  // Before a step's backward passes: flat, the gradient buffer zeroed (backward adds into it);
  // otherwise every gradient dropped.
  void zero_grad();
  // The gradients as they are held: the flat buffer, or each defined gradient.
  std::vector<at::Tensor> gradients() const;
  // Every gradient scaled by min(1, max_norm / (‖g‖ + 1e-6)), ‖g‖ the 2-norm of all of them, on the
  // device (nothing read back), as torch.nn.utils.clip_grad_norm_.
  void clip_grad_norm(double max_norm);
  // Every gradient element clamped to [-limit, limit], on the device, as torch.nn.utils.clip_grad_value_.
  void clip_grad_value(double limit);
  void step();
  // torch::optim::AdamW's archive: moments and step count per parameter, and the options.
  void save(torch::serialize::OutputArchive& archive) const;
  // Throws std::invalid_argument, one line, for an archive whose parameters took different numbers
  // of steps (the flat update counts one for all).
  void load(torch::serialize::InputArchive& archive);

 private:
  struct Flat;
  void keep_in_place();  // flat: each parameter and gradient a view of its slice
  void step_reading_beta1();  // flat, beta1 in a device tensor

  std::vector<at::Tensor> parameters_;  // those that require a gradient
  torch::optim::AdamWOptions options_;
  std::unique_ptr<Flat> flat_;                          // LibTorch 2
  std::unique_ptr<torch::optim::AdamW> per_tensor_;     // otherwise
};

}  // namespace attnlab
