#pragma once
// The ops a piece of code runs, counted as LibTorch's profiler records them: every RecordFunction
// scope (each ATen op, the ops it calls through the dispatcher, autograd's nodes), on every thread
// (a CUDA backward runs on the autograd engine's device thread). What `attnlab bench --ops` reports:
// at the LRA model's shapes a step's time on a GPU is its ops' launch time, not their arithmetic.
#include <cstdint>

#include <ATen/record_function.h>

namespace attnlab {

// Counts from construction to destruction; one at a time in a process (the count is global).
// Counting slows every op down: count a step of its own, never a timed one.
class OpCounter {
 public:
  OpCounter();
  ~OpCounter();
  OpCounter(const OpCounter&) = delete;
  OpCounter& operator=(const OpCounter&) = delete;
  std::int64_t count() const;

 private:
  at::CallbackHandle handle_;
};

}  // namespace attnlab
