#include "attnlab/train/step_runner.hpp"

#include <stdexcept>

#include "attnlab/cuda_graph.hpp"
#include "attnlab/seed_stream.hpp"

namespace attnlab {

std::string why_no_cuda_graph(const TrainConfig& train, const c10::Device& device, Precision precision) {
  if (train.cuda_graphs == CudaGraphs::off) return "[train] cuda_graphs = \"off\"";
  if (std::string why; !CudaGraph::available(device, &why)) return why;
  if (precision == Precision::fp16) return "fp16 loss scaling skips steps on the host";
  if (train.grad_accum > 1) return "grad_accum " + std::to_string(train.grad_accum) + " takes several batches a step";
  return "";
}

StepRunner::StepRunner(const TrainConfig& train, const c10::Device& device, Precision precision)
    : device_(device), required_(train.cuda_graphs == CudaGraphs::on) {
  const std::string why = why_no_cuda_graph(train, device, precision);
  if (why.empty()) {
    graph_ = std::make_unique<CudaGraph>(device);
    mode_ = "cuda graph";
  } else if (required_) {
    throw std::invalid_argument("[train] cuda_graphs = \"on\", but " + why);
  } else {
    mode_ = "eager (cuda graphs off: " + why + ")";
  }
}

StepRunner::~StepRunner() = default;

void StepRunner::run(const std::function<void()>& work) {
  if (!graph_) return work();
  if (steps_ < kWarmupSteps) {
    ++steps_;
    return graph_->warm_up(work);
  }
  if (!graph_->captured()) {
    try {
      // the SeedStreams' training generators (made by the warm-up steps), in the model's order
      graph_->capture(work, stream_generators(device_));
    } catch (const std::exception& e) {
      if (required_) throw;
      graph_.reset();
      std::string what = e.what();
      mode_ = "eager (cuda graphs off: the capture failed: " + what.substr(0, what.find('\n')) + ")";
      return work();
    }
  }
  ++steps_;
  graph_->replay();
}

}  // namespace attnlab
