#include "attnlab/precision.hpp"

#include <cstdlib>
#include <stdexcept>

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

// LibTorch 2.4 replaced the per-device autocast setters (set_cpu_enabled, set_autocast_gpu_dtype...)
// by ones taking the device type; the old ones are deprecated there and absent from later releases.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define ATTNLAB_AUTOCAST_BY_DEVICE_TYPE 1
#endif

namespace attnlab {
namespace {

bool autocast_enabled(c10::DeviceType type) {
#ifdef ATTNLAB_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(type);
#else
  return type == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

c10::ScalarType autocast_type(c10::DeviceType type) {
#ifdef ATTNLAB_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::get_autocast_dtype(type);
#else
  return type == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
#endif
}

void set_autocast(c10::DeviceType type, bool enabled, c10::ScalarType dtype) {
#ifdef ATTNLAB_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, enabled);
#else
  if (type == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(enabled);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(enabled);
  }
#endif
}

}  // namespace

Precision parse_precision(const std::string& text) {
  if (text == "fp32") return Precision::fp32;
  if (text == "bf16") return Precision::bf16;
  if (text == "fp16") return Precision::fp16;
  throw std::invalid_argument("precision '" + text + "': expected fp32, bf16 or fp16");
}

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    default: return "fp32";
  }
}

c10::ScalarType reduced_type(Precision precision) {
  switch (precision) {
    case Precision::bf16: return c10::ScalarType::BFloat16;
    case Precision::fp16: return c10::ScalarType::Half;
    default: return c10::ScalarType::Float;
  }
}

c10::ScalarType autocast_matmul_type(const at::Tensor& t) {
  const auto type = t.scalar_type();
  const bool reducible = type == c10::ScalarType::Float || type == c10::ScalarType::BFloat16 || type == c10::ScalarType::Half;
  const auto device = t.device().type();
  if (!reducible || (device != c10::DeviceType::CPU && device != c10::DeviceType::CUDA) || !autocast_enabled(device))
    return type;
  // inside a NoAutocast scope autocast is on but would not run: the inputs' type
  const auto key = device == c10::DeviceType::CPU ? c10::DispatchKey::AutocastCPU : c10::DispatchKey::AutocastCUDA;
  return c10::impl::tls_is_dispatch_key_excluded(key) ? type : autocast_type(device);
}

bool autocast_supported(const c10::Device& device, Precision precision, std::string* why) {
  auto refuse = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (precision == Precision::fp32) return true;
  if (!device.is_cpu() && !device.is_cuda())
    return refuse(std::string("precision ") + to_string(precision) + " needs a CPU or CUDA device, not " + device.str());
#if TORCH_VERSION_MAJOR < 2
  if (device.is_cpu() && precision == Precision::fp16)
    return refuse("precision fp16 on the CPU needs LibTorch 2 (this is " TORCH_VERSION
                  ", whose CPU autocast has bf16 only): use bf16, or a CUDA device");
#endif
  return true;
}

bool autocast_possible(Precision precision, std::string* why) {
  if (autocast_supported(c10::Device(c10::kCPU), precision, why)) return true;
#ifdef ATTNLAB_WITH_CUDA
  return true;  // CUDA autocasts to fp16 and bf16
#else
  return false;
#endif
}

AutocastScope::AutocastScope(const c10::Device& device, Precision precision) {
  if (precision == Precision::fp32) return;
  std::string why;
  if (!autocast_supported(device, precision, &why)) throw std::invalid_argument(why);
  type_ = device.type();
  was_enabled_ = autocast_enabled(type_);
  was_type_ = autocast_type(type_);
  set_autocast(type_, true, reduced_type(precision));
  at::autocast::increment_nesting();
  active_ = true;
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(type_, was_enabled_, was_type_);
}

}  // namespace attnlab

namespace attnlab::compat {

void set_tf32(bool allowed) {
  at::globalContext().setAllowTF32CuBLAS(allowed);
  at::globalContext().setAllowTF32CuDNN(allowed);
}

bool tf32_allowed() { return at::globalContext().allowTF32CuBLAS(); }

void set_deterministic(bool enabled) {
  // cuBLAS reads this when its first handle is made; an explicit setting of the user's wins
  if (enabled) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(enabled, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(enabled);
  if (enabled) at::globalContext().setBenchmarkCuDNN(false);
}

bool deterministic() { return at::globalContext().deterministicAlgorithms(); }

}  // namespace attnlab::compat
