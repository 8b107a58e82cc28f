#pragma once
// What a training run reports as it goes (TrainObserver, trainer.hpp): plain data, no LibTorch, so
// that the processes which print and store it need not compile against it.
#include <cstdint>
#include <string>

namespace attnlab {

struct MetricPoint {
  std::int64_t step;
  std::string split;  // train | val | test
  std::string name;   // loss | acc | lr
  double value;
  double wall_seconds;  // since the run started
};

struct Progress {
  std::int64_t step, total_steps;
  double train_loss, train_acc;
  double val_acc;  // NaN before the first validation
  double steps_per_second;
  double elapsed_seconds;
};

}  // namespace attnlab
