#pragma once
// How a training step runs (the trainer's and bench's): eagerly, or on a GPU as a CUDA graph
// ([train] cuda_graphs): the first steps eagerly on a side stream while the work warms up, then one
// capture, then one replay a step, with no host work between the device's ops. The step must read
// its batch from tensors that stay where they are (static inputs) and its learning rate from the
// optimiser's device tensor, and make no host synchronisation; what cannot (fp16's loss scaling,
// several micro-batches a step) runs eagerly, and mode() says why.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "attnlab/precision.hpp"
#include "attnlab/train/config.hpp"

namespace attnlab {

class CudaGraph;

class StepRunner {
 public:
  // [train] cuda_graphs: "on" that cannot be on is std::invalid_argument in one line; "auto"
  // that cannot is eager, saying why in mode().
  StepRunner(const TrainConfig& train, const c10::Device& device, Precision precision);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // "cuda graph", or "eager" with why not a graph: "eager (cuda graphs off: fp16 loss scaling skips
  // steps on the host)". Changes once if a capture fails under "auto".
  const std::string& mode() const { return mode_; }
  // Whether steps go through a graph (or will, once warmed up): the work's inputs must be static.
  bool graphed() const { return graph_ != nullptr; }
  // One step of `work`. Under "auto" a capture that fails (a host synchronisation in a method, say)
  // runs the step eagerly and every later one too, and mode() says so; under "on" it throws.
  void run(const std::function<void()>& work);
  // Eager steps before the capture: cuBLAS, the allocator and autograd's device threads warmed up.
  static constexpr std::int64_t kWarmupSteps = 3;

 private:
  std::unique_ptr<CudaGraph> graph_;
  c10::Device device_;
  bool required_ = false;  // "on"
  std::int64_t steps_ = 0;
  std::string mode_;
};

// Why a run with these settings steps eagerly ("" when a CUDA graph can run it), in the words
// StepRunner::mode() uses after "cuda graphs off: ".
std::string why_no_cuda_graph(const TrainConfig& train, const c10::Device& device, Precision precision);

}  // namespace attnlab
