#include "studies/op_count.hpp"

#include <atomic>
#include <memory>
#include <stdexcept>

namespace attnlab {
namespace {

std::atomic<std::int64_t> ops{0};
std::atomic<bool> counting{false};

std::unique_ptr<at::ObserverContext> count_op(const at::RecordFunction&) {
  ops.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

}  // namespace

OpCounter::OpCounter() {
  if (counting.exchange(true)) throw std::logic_error("OpCounter: one counter at a time");
  ops = 0;
  handle_ = at::addGlobalCallback(at::RecordFunctionCallback(count_op));  // every scope, as the profiler
}

OpCounter::~OpCounter() {
  at::removeCallback(handle_);
  counting = false;
}

std::int64_t OpCounter::count() const { return ops.load(std::memory_order_relaxed); }

}  // namespace attnlab
