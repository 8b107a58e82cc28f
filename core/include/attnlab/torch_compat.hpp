#pragma once
// The few places where LibTorch 1.13 (Debian, CPU) and 2.x (PyTorch's, CUDA) differ, or where CUDA
// may be absent from the build. Everything version- or CUDA-specific stays behind these helpers.
#include <cstdint>
#include <exception>
#include <string>

#include <c10/core/Device.h>

namespace attnlab::compat {

std::string torch_version();  // "1.13.0"
bool built_with_cuda();
int cuda_device_count();       // 0 without CUDA
std::string device_name(const c10::Device& device);  // GPU name, or the CPU model
std::int64_t device_memory_bytes(const c10::Device& device);  // a GPU's total memory, or the machine's (MemTotal)
// "runtime 13.0, driver 13.0, cuDNN 91900" in a CUDA build ("driver none" where no GPU driver is); "" without CUDA.
std::string cuda_versions();

// Parses "cpu", "cuda", "cuda:N"; throws std::invalid_argument naming the device when it is
// malformed or not present on this machine.
c10::Device parse_device(const std::string& text);

// Memory peak of the current job: CUDA caching-allocator peak on a GPU; on the CPU the peak
// resident set (VmHWM) of this process (each job runs in a process of its own, see runner/).
void reset_peak_memory(const c10::Device& device);
std::int64_t peak_memory_bytes(const c10::Device& device);
void synchronize(const c10::Device& device);
// Gives the CUDA caching allocator's unused blocks back to the device, so that the next
// measurement in this process starts from an empty cache (nothing on the CPU).
void release_cached_memory(const c10::Device& device);

// True for CUDA out-of-memory errors (c10::OutOfMemoryError on 2.x, a c10::Error saying so on
// 1.13) and std::bad_alloc.
bool is_out_of_memory(const std::exception& error);

// Intra-op threads: `requested` > 0, else ATTNLAB_THREADS, else every core. Returns what is set.
int configure_threads(int requested);

}  // namespace attnlab::compat

#include <ATen/core/Tensor.h>

namespace attnlab::compat {
// The optimiser's part of a step as a few ops over all the parameters at once where LibTorch has
// the kernels (2.x: foreach and fused ops, CPU and CUDA), op by op where it has not (1.13).
//
// Every gradient scaled by min(1, max_norm / (‖g‖ + 1e-6)), ‖g‖ the 2-norm of all of them together,
// as torch.nn.utils.clip_grad_norm_ does, on their device: nothing is read back.
void clip_grad_norm(c10::ArrayRef<at::Tensor> grads, double max_norm);
// Whether fused_adamw runs with this LibTorch (its CPU kernel came with 2.4).
bool fused_adamw_available();
// One AdamW step of every parameter (torch.optim.AdamW's formula, `steps` each parameter's count
// as a [] float tensor on its device, incremented first), the learning rate read from `lr` ([] float
// on the device). Throws std::logic_error where !fused_adamw_available().
void fused_adamw(c10::ArrayRef<at::Tensor> parameters, c10::ArrayRef<at::Tensor> grads, c10::ArrayRef<at::Tensor> exp_avgs,
                 c10::ArrayRef<at::Tensor> exp_avg_sqs, c10::ArrayRef<at::Tensor> steps, const at::Tensor& lr, double beta1,
                 double beta2, double weight_decay, double eps);

// softmax(q kᵀ / √Dh + mask) v over [B, H, N, Dh] with key_valid [B, N] (true = real token), dropout
// on the probabilities while training. LibTorch ≥ 2 runs at::scaled_dot_product_attention, which
// picks a fused kernel where it has one for the inputs (the CPU's flash kernel for float and bf16
// with a mask; on CUDA one of its own, of which flash takes no mask) and its math path otherwise
// (double, dropout on the CPU). LibTorch 1.13 runs explicit_softmax_attention.
at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& key_valid, double dropout, bool training);
// Which kernel scaled_dot_product_attention runs for these inputs: "flash", "memory-efficient",
// "cudnn" or "math" (LibTorch's choice on 2.x), "explicit" on 1.13.
std::string softmax_attention_kernel(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& key_valid, double dropout, bool training);
// The same formula written out (two matmuls and a softmax, one n×n tensor kept for the backward),
// on every LibTorch: 1.13's only path, and on 2.x the reference the fused kernels are tested against.
at::Tensor explicit_softmax_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& key_valid, double dropout, bool training);
}  // namespace attnlab::compat
