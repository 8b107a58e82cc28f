#pragma once
// Training precision: fp32, or mixed precision under autocast (bf16, fp16) with fp32 weights.
//
// Under autocast, matmuls and linear layers run in the reduced type and hand their results on in
// it; an attention method therefore sees bf16/fp16 q, k, v. A method with a step that reduced
// precision ruins (an iterative pseudo-inverse, a squared distance by ‖x‖² + ‖y‖² − 2xᵀy, the
// exponential of a random feature) runs that step in a FullPrecision scope on
// full_precision(...) copies of its inputs; conformance's "reduced precision" check holds every
// method to a stated tolerance against fp32.
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/ScalarType.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

namespace attnlab {

enum class Precision { fp32, bf16, fp16 };

// "fp32" | "bf16" | "fp16"; throws std::invalid_argument naming the text otherwise.
Precision parse_precision(const std::string& text);
const char* to_string(Precision precision);
// The autocast type of a mixed precision (kFloat for fp32).
c10::ScalarType reduced_type(Precision precision);

// Autocast on `device`'s kind (CPU or CUDA) at `precision` for the ops of this scope, the way
// `with torch.autocast(...)` is: the previous state comes back at the end, and the cache of cast
// weights is emptied when the outermost scope ends (cast copies of weights an optimiser step has
// since changed must not survive it). fp32: nothing is changed. Throws std::invalid_argument when
// this LibTorch cannot autocast that kind of device to that type (1.13's CPU autocast is bf16 only).
class AutocastScope {
 public:
  AutocastScope(const c10::Device& device, Precision precision);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType type_ = c10::DeviceType::CPU;
  bool was_enabled_ = false;
  c10::ScalarType was_type_ = c10::ScalarType::Float;
};

// The type autocast would run a matrix product of `t` in: its lower-precision type where autocast is
// on for t's device and t is float, bf16 or fp16; t's own type otherwise. What a hand-written
// autograd::Function computes its products in, under NoAutocast, to do what autocast would.
c10::ScalarType autocast_matmul_type(const at::Tensor& t);

// Whether AutocastScope can run `precision` on `device` with this LibTorch; when not, `why` says so.
bool autocast_supported(const c10::Device& device, Precision precision, std::string* why = nullptr);
// Whether some device this build can drive autocasts `precision` (the CPU, or CUDA when built
// with it: a job may be queued on a machine without the GPU its workers have); `why` as above.
bool autocast_possible(Precision precision, std::string* why = nullptr);

// The ops of this scope are not autocast: they run in their inputs' types, whatever the enclosing
// AutocastScope says. Two uses:
//  - a step that reduced precision ruins, on full_precision() copies of its inputs (FullPrecision);
//  - the forward of a torch::autograd::Function with a hand-written backward, on inputs of one
//    type. CUDA's autocast types op by op (matmul in bf16; softmax, exp, pow in fp32) and CUDA runs
//    the backward on a thread of its own where autocast is off: a forward left to autocast saves
//    tensors of mixed types, which the backward's matmuls refuse (PyTorch's custom_fwd does this).
class NoAutocast {
 public:
  NoAutocast() : no_autocast_(c10::autocast_dispatch_keyset) {}

 private:
  c10::impl::ExcludeDispatchKeyGuard no_autocast_;
};
using FullPrecision = NoAutocast;

// bf16 and fp16 tensors as float; float and double ones as they are (the conformance suite's
// double checks stay double).
inline at::Tensor full_precision(const at::Tensor& t) {
  const auto type = t.scalar_type();
  return type == c10::ScalarType::BFloat16 || type == c10::ScalarType::Half ? t.to(c10::ScalarType::Float) : t;
}

}  // namespace attnlab

namespace attnlab::compat {
// TF32 tensor cores for fp32 matmuls and convolutions on CUDA (no effect on the CPU).
void set_tf32(bool allowed);
bool tf32_allowed();
// Deterministic algorithms everywhere LibTorch has them; with `enabled`, an op without one throws
// (LibTorch's error names the op) rather than running nondeterministically. On CUDA this also
// sets CUBLAS_WORKSPACE_CONFIG=:4096:8 (cuBLAS's requirement) when the environment has none:
// call it before the first CUDA matmul.
void set_deterministic(bool enabled);
bool deterministic();
}  // namespace attnlab::compat
