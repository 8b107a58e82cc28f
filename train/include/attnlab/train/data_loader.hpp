#pragma once
// Seeded batching of a SplitData: a fresh permutation per epoch from the run's generator for
// training, in order for evaluation. Batches are moved to the device as int64 ids.
#include <cstdint>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "attnlab/dataset.hpp"

namespace attnlab {

struct Batch {
  at::Tensor tokens;   // [B, inputs, L] int64 on the device
  at::Tensor lengths;  // [B, inputs] int64 on the device
  at::Tensor labels;   // [B] int64 on the device
};

// Where a training iterator stands, for resume checkpoints: its generator, this epoch's order and
// the position in it. Restoring it continues with exactly the batches the iterator would have given.
struct BatchIteratorState {
  at::Tensor generator;  // the generator's state (uint8, CPU)
  at::Tensor order;      // this epoch's permutation (int64, CPU)
  std::int64_t position = 0;
  std::int64_t epoch = 0;
};

class BatchIterator {
 public:
  // shuffle: draw a new permutation each epoch (training; drops the last incomplete batch).
  // Without shuffle, batches follow the split's order and the last one may be short.
  BatchIterator(const SplitData& data, std::int64_t batch_size, c10::Device device, bool shuffle, std::uint64_t seed);
  // Fills `batch`; returns false at the end of an epoch without shuffle (never with shuffle).
  bool next(Batch& batch);
  std::int64_t epoch() const { return epoch_; }
  BatchIteratorState state() const;
  // Continues from `state`; std::invalid_argument if it cannot belong to this split.
  void restore(const BatchIteratorState& state);

 private:
  void new_epoch();
  const SplitData& data_;
  std::int64_t batch_size_;
  c10::Device device_;
  bool shuffle_;
  at::Generator generator_;
  at::Tensor order_;
  std::int64_t position_ = 0;
  std::int64_t epoch_ = 0;
};

}  // namespace attnlab
