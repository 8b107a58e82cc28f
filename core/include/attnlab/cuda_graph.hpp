#pragma once
// A CUDA graph of a piece of device work (a training step): run eagerly on a side stream while it
// warms up (cuBLAS handles, the caching allocator, the autograd engine's device threads), captured
// once, then replayed: one launch where the work is hundreds. LibTorch 2 with CUDA only; elsewhere
// CudaGraph::available() says why not. The work must read its inputs from tensors that stay where
// they are (copy each batch into them), make no host synchronisation, and draw its randomness from
// generators registered at capture (the device's default one is).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace attnlab {

class CudaGraph {
 public:
  // Whether this build can capture on `device`; when not, `why` says so ("the device is the CPU",
  // "this build has no CUDA").
  static bool available(const c10::Device& device, std::string* why = nullptr);

  explicit CudaGraph(const c10::Device& device);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // `work` eagerly on a side stream, which the current stream then waits for.
  void warm_up(const std::function<void()>& work);
  // `work` captured on a side stream, the generators registered first; nothing runs until replay().
  void capture(const std::function<void()>& work, const std::vector<at::Generator>& generators);
  bool captured() const;
  // The captured work, launched on the current stream.
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnlab
