#include "attnlab/train/data_loader.hpp"

#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace attnlab {
namespace {
// Rows gathered on the host, to the device. To a GPU from page-locked memory, without waiting: a
// copy from pageable memory returns only once done, after every kernel queued before it (the last
// step's), which would make each batch a synchronisation.
at::Tensor to_device(const at::Tensor& rows, const c10::Device& device) {
  if (!device.is_cuda()) return rows.to(device);
  return rows.pin_memory().to(device, /*non_blocking=*/true);
}
}  // namespace

BatchIterator::BatchIterator(const SplitData& data, std::int64_t batch_size, c10::Device device, bool shuffle, std::uint64_t seed)
    : data_(data), batch_size_(batch_size), device_(device), shuffle_(shuffle),
      generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
  if (data.size() == 0) throw std::invalid_argument("empty split");
  if (shuffle && data.size() < batch_size)
    throw std::invalid_argument("a shuffled split of " + std::to_string(data.size()) + " examples, fewer than batch_size " +
                                std::to_string(batch_size));
  new_epoch();
}

void BatchIterator::new_epoch() {
  order_ = shuffle_ ? at::randperm(data_.size(), generator_, at::kLong) : at::arange(data_.size(), at::kLong);
  position_ = 0;
}

BatchIteratorState BatchIterator::state() const {
  return {generator_.get_state(), order_, position_, epoch_};
}

void BatchIterator::restore(const BatchIteratorState& state) {
  const std::int64_t n = data_.size();
  if (!state.order.defined() || state.order.dim() != 1 || state.order.size(0) != n)
    throw std::invalid_argument("data position: an order of " +
                                (state.order.defined() ? std::to_string(state.order.numel()) : std::string("no")) +
                                " examples for a split of " + std::to_string(n));
  if (state.position < 0 || state.position > n || state.epoch < 0)
    throw std::invalid_argument("data position: position " + std::to_string(state.position) + " in a split of " +
                                std::to_string(n));
  generator_.set_state(state.generator.cpu());
  order_ = state.order.to(at::kCPU, at::kLong).contiguous();
  position_ = state.position;
  epoch_ = state.epoch;
}

bool BatchIterator::next(Batch& batch) {
  const std::int64_t n = data_.size();
  if (position_ >= n || (shuffle_ && position_ + batch_size_ > n)) {
    ++epoch_;
    new_epoch();
    if (!shuffle_) return false;
  }
  const std::int64_t end = std::min(position_ + batch_size_, n);
  auto index = order_.slice(0, position_, end);
  position_ = end;
  batch.tokens = to_device(data_.tokens.index_select(0, index).to(at::kLong), device_);
  batch.lengths = to_device(data_.lengths.index_select(0, index), device_);
  batch.labels = to_device(data_.labels.index_select(0, index), device_);
  return true;
}

}  // namespace attnlab
