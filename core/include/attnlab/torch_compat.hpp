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
// "runtime 12.4, driver 12.6, cuDNN 90100" in a CUDA build; "" without CUDA.
std::string cuda_versions();

// Parses "cpu", "cuda", "cuda:N"; throws std::invalid_argument naming the device when it is
// malformed or not present on this machine.
c10::Device parse_device(const std::string& text);

// Memory peak of the current job: CUDA caching-allocator peak on a GPU; on the CPU the peak
// resident set (VmHWM) of this process (each job runs in a process of its own, see runner/).
void reset_peak_memory(const c10::Device& device);
std::int64_t peak_memory_bytes(const c10::Device& device);
void synchronize(const c10::Device& device);

// True for CUDA out-of-memory errors (c10::OutOfMemoryError on 2.x, a c10::Error saying so on
// 1.13) and std::bad_alloc.
bool is_out_of_memory(const std::exception& error);

// Intra-op threads: `requested` > 0, else ATTNLAB_THREADS, else every core. Returns what is set.
int configure_threads(int requested);

}  // namespace attnlab::compat

#include <ATen/core/Tensor.h>

namespace attnlab::compat {
// softmax(q kᵀ / √Dh + mask) v over [B, H, N, Dh] with key_valid [B, N] (true = real token).
// LibTorch ≥ 2 runs the fused scaled_dot_product_attention kernel; 1.13 the explicit formula.
at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& key_valid, double dropout, bool training);
}  // namespace attnlab::compat
