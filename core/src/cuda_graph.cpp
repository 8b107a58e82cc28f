#include "attnlab/cuda_graph.hpp"

#include <stdexcept>

#include <torch/version.h>

#if defined(ATTNLAB_WITH_CUDA) && TORCH_VERSION_MAJOR >= 2
#define ATTNLAB_CUDA_GRAPHS 1
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace attnlab {

#ifdef ATTNLAB_CUDA_GRAPHS
struct CudaGraph::Impl {
  explicit Impl(const c10::Device& device) : side(c10::cuda::getStreamFromPool(false, device.index())) {}
  // the side stream waits for the current one before the work, the current for the side after
  template <class Work>
  void on_side_stream(const Work& work) {
    const auto current = c10::cuda::getCurrentCUDAStream(side.device_index());
    c10::cuda::CUDAEvent before, after;
    before.record(current);
    before.block(side);
    {
      c10::cuda::CUDAStreamGuard on_side(side);
      work();
    }
    after.record(side);
    after.block(current);
  }
  c10::cuda::CUDAStream side;
  at::cuda::CUDAGraph graph;
  bool captured = false;
};
#else
struct CudaGraph::Impl {};
#endif

bool CudaGraph::available(const c10::Device& device, std::string* why) {
  auto refuse = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (!device.is_cuda()) return refuse("the device is " + device.str() + ", not a GPU");
#ifdef ATTNLAB_CUDA_GRAPHS
  return true;
#else
  return refuse("this build (LibTorch " TORCH_VERSION ") has no CUDA graphs");
#endif
}

CudaGraph::CudaGraph(const c10::Device& device) {
  std::string why;
  if (!available(device, &why)) throw std::invalid_argument("CUDA graph: " + why);
#ifdef ATTNLAB_CUDA_GRAPHS
  impl_ = std::make_unique<Impl>(device);
#endif
}

CudaGraph::~CudaGraph() = default;

void CudaGraph::warm_up([[maybe_unused]] const std::function<void()>& work) {
#ifdef ATTNLAB_CUDA_GRAPHS
  impl_->on_side_stream(work);
#endif
}

void CudaGraph::capture([[maybe_unused]] const std::function<void()>& work,
                        [[maybe_unused]] const std::vector<at::Generator>& generators) {
#ifdef ATTNLAB_CUDA_GRAPHS
  impl_->on_side_stream([&] {
    for (const auto& generator : generators) impl_->graph.register_generator_state(generator);
    impl_->graph.capture_begin();
    try {
      work();
    } catch (...) {
      try {
        impl_->graph.capture_end();  // ends the stream's capture; the graph is discarded
      } catch (...) {
      }
      impl_->graph.reset();
      throw;
    }
    impl_->graph.capture_end();
  });
  impl_->captured = true;
#endif
}

bool CudaGraph::captured() const {
#ifdef ATTNLAB_CUDA_GRAPHS
  return impl_->captured;
#else
  return false;
#endif
}

void CudaGraph::replay() {
#ifdef ATTNLAB_CUDA_GRAPHS
  impl_->graph.replay();
#endif
}

}  // namespace attnlab
