#pragma once
// The draws of a model's stochastic attention methods (random features, landmarks), from one
// generator of the run's: what a resume checkpoint keeps of them besides the methods' own buffers.
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "attnlab/attention.hpp"

namespace attnlab {

// The draws of the model's stochastic attention methods, from one generator seeded by the run:
// once at construction, after every method->redraw_every() training steps, and before each
// evaluation pass for methods whose fresh_draw_at_eval() is true.
class AttentionDraws {
 public:
  AttentionDraws(std::vector<std::shared_ptr<AttentionMethod>> methods, std::uint64_t seed);
  void after_step(std::int64_t steps_done);
  void before_evaluation();
  void fresh_draw();                        // every stochastic method, now
  bool any() const { return !methods_.empty(); }
  // The generator's state, for resume checkpoints (the draws themselves live in the methods).
  at::Tensor generator_state() const;
  void set_generator_state(const at::Tensor& state);

 private:
  at::Generator generator_;
  std::vector<std::shared_ptr<AttentionMethod>> methods_;
};

}  // namespace attnlab
