#include "attnlab/torch_compat.hpp"

#include "attnlab/precision.hpp"

#include <sys/resource.h>

#include <cstdlib>
#include <cmath>
#include <fstream>
#include <limits>
#include <new>
#include <stdexcept>
#include <thread>

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#ifdef ATTNLAB_WITH_CUDA
#include <cuda_runtime_api.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace attnlab::compat {

std::string torch_version() { return TORCH_VERSION; }

bool built_with_cuda() {
#ifdef ATTNLAB_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef ATTNLAB_WITH_CUDA
  return static_cast<int>(c10::cuda::device_count());
#else
  return 0;
#endif
}

static std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "cpu";
}

std::string device_name(const c10::Device& device) {
#ifdef ATTNLAB_WITH_CUDA
  if (device.is_cuda()) return at::cuda::getDeviceProperties(device.index())->name;
#endif
  (void)device;
  return cpu_model_name();
}

std::int64_t device_memory_bytes(const c10::Device& device) {
#ifdef ATTNLAB_WITH_CUDA
  if (device.is_cuda()) return static_cast<std::int64_t>(at::cuda::getDeviceProperties(device.index())->totalGlobalMem);
#endif
  (void)device;
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("MemTotal:", 0) == 0) return std::atoll(line.c_str() + 9) * 1024;  // "MemTotal:  24000000 kB"
  return 0;
}

std::string cuda_versions() {
#ifdef ATTNLAB_WITH_CUDA
  const auto dotted = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::string cudnn = "none";
  try {
    cudnn = std::to_string(at::detail::getCUDAHooks().versionCuDNN());
  } catch (const std::exception&) {
  }
  // no driver (a machine without a GPU): cudaDriverGetVersion gives 0
  return "runtime " + dotted(runtime) + ", driver " + (driver > 0 ? dotted(driver) : "none") + ", cuDNN " + cudnn;
#else
  return "";
#endif
}

c10::Device parse_device(const std::string& text) {
  if (text == "cpu") return c10::Device(c10::kCPU);
  if (text.rfind("cuda", 0) == 0) {
    int index = 0;
    if (text.size() > 4) {
      if (text[4] != ':' || text.size() == 5) throw std::invalid_argument("device '" + text + "': expected cpu, cuda or cuda:N");
      std::size_t used = 0;
      try { index = std::stoi(text.substr(5), &used); } catch (const std::exception&) { used = 0; }
      if (used == 0 || used != text.size() - 5 || index < 0)
        throw std::invalid_argument("device '" + text + "': expected cpu, cuda or cuda:N");
    }
    const int count = cuda_device_count();
    if (index >= count)
      throw std::invalid_argument("device '" + text + "': this machine has " + std::to_string(count) +
                                  " CUDA device(s)" + (built_with_cuda() ? "" : " (this build has no CUDA)"));
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw std::invalid_argument("device '" + text + "': expected cpu, cuda or cuda:N");
}

void reset_peak_memory(const c10::Device& device) {
#ifdef ATTNLAB_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
  (void)device;  // CPU: the process peak is the job's peak, since every job has a process of its own
}

std::int64_t peak_memory_bytes(const c10::Device& device) {
#ifdef ATTNLAB_WITH_CUDA
  if (device.is_cuda()) {
    // allocated_bytes[0] is StatType::AGGREGATE in every LibTorch since 1.9 (the enum moved
    // namespaces in 2.x, the index did not).
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index()).allocated_bytes[0].peak;
  }
#endif
  (void)device;
  // VmHWM: the peak resident set of this address space. Not getrusage's ru_maxrss, which Linux
  // carries over execve: a job process would start at the peak of the parent that spawned it.
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;  // "VmHWM:  123456 kB"
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);  // no /proc: the best there is
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;
}

void synchronize(const c10::Device& device) {
#ifdef ATTNLAB_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#endif
  (void)device;
}

void release_cached_memory(const c10::Device& device) {
#ifdef ATTNLAB_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  (void)device;
}

bool is_out_of_memory(const std::exception& error) {
  if (dynamic_cast<const std::bad_alloc*>(&error)) return true;
  if (dynamic_cast<const c10::Error*>(&error)) {
    const std::string what = error.what();
    return what.find("out of memory") != std::string::npos || what.find("DefaultCPUAllocator: can't allocate") != std::string::npos;
  }
  return false;
}

int configure_threads(int requested) {
  int threads = requested;
  if (threads <= 0) {
    if (const char* env = std::getenv("ATTNLAB_THREADS")) threads = std::atoi(env);
  }
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  at::set_num_threads(threads);
  return threads;
}

}  // namespace attnlab::compat

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#if TORCH_VERSION_MAJOR >= 2
#include <ATen/SDPBackend.h>
#endif

namespace attnlab::compat {
namespace {
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Exact softmax attention with a hand-written backward. Autograd's generic backward holds three
// n×n tensors at once (dP, the softmax gradient and the saved P); this one needs dP only, written
// over in place: dS = P ∘ (dP − rowsum(dO ∘ O)), since rowsum(dP ∘ P) = rowsum(dO ∘ O) (the
// identity FlashAttention's backward uses).
struct ExactSoftmaxAttention : public torch::autograd::Function<ExactSoftmaxAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& mask) {
    NoAutocast one_type;  // P in the inputs' type, as the backward's matmuls need (precision.hpp)
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    auto scores = at::matmul(q * scale, k.transpose(-2, -1));
    scores.masked_fill_(mask.logical_not(), -std::numeric_limits<double>::infinity());
    auto probs = at::softmax(scores, -1);
    scores.reset();  // one n×n tensor kept: P
    auto out = at::matmul(probs, v);
    ctx->save_for_backward({q, k, v, probs, out});
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &probs = saved[3], &out = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const auto& g = grads[0];
    auto grad_v = at::matmul(probs.transpose(-2, -1), g);
    auto grad_scores = at::matmul(g, v.transpose(-2, -1));          // dP
    grad_scores.sub_((g * out).sum(-1, /*keepdim=*/true)).mul_(probs);  // dS, in place
    auto grad_q = at::matmul(grad_scores, k).mul_(scale);
    auto grad_k = at::matmul(grad_scores.transpose(-2, -1), q).mul_(scale);
    return {grad_q, grad_k, grad_v, at::Tensor()};
  }
};

at::Tensor key_mask(const at::Tensor& key_valid) { return key_valid.view({key_valid.size(0), 1, 1, key_valid.size(1)}); }
}  // namespace

at::Tensor explicit_softmax_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& key_valid, double dropout, bool training) {
  const auto mask = key_mask(key_valid);
  if (!(training && dropout > 0)) return ExactSoftmaxAttention::apply(q, k, v, mask);
  // with dropout on the probabilities: autograd's generic backward
  auto scores = at::matmul(q * (1.0 / std::sqrt(static_cast<double>(q.size(-1)))), k.transpose(-2, -1));
  scores.masked_fill_(mask.logical_not(), -std::numeric_limits<double>::infinity());
  return at::matmul(at::dropout(at::softmax(scores, -1), dropout, true), v);
}

at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& key_valid, double dropout, bool training) {
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v, key_mask(key_valid), training ? dropout : 0.0);
#else
  return explicit_softmax_attention(q, k, v, key_valid, dropout, training);
#endif
}

std::string softmax_attention_kernel([[maybe_unused]] const at::Tensor& q, [[maybe_unused]] const at::Tensor& k,
                                     [[maybe_unused]] const at::Tensor& v, [[maybe_unused]] const at::Tensor& key_valid,
                                     [[maybe_unused]] double dropout, [[maybe_unused]] bool training) {
#if TORCH_VERSION_MAJOR >= 2
  switch (static_cast<at::SDPBackend>(at::_fused_sdp_choice(q, k, v, key_mask(key_valid), training ? dropout : 0.0))) {
    case at::SDPBackend::flash_attention: return "flash";
    case at::SDPBackend::efficient_attention: return "memory-efficient";
    case at::SDPBackend::cudnn_attention: return "cudnn";
    case at::SDPBackend::math: return "math";
    default: return "other";
  }
#else
  return "explicit";  // no fused kernel in 1.13
#endif
}

}  // namespace attnlab::compat
