#include "attnlab/train/attention_draws.hpp"

#include <ATen/CPUGeneratorImpl.h>

namespace attnlab {

AttentionDraws::AttentionDraws(std::vector<std::shared_ptr<AttentionMethod>> methods, std::uint64_t seed)
    : generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
  for (auto& method : methods)
    if (method->stochastic()) {
      method->redraw(generator_);
      methods_.push_back(std::move(method));
    }
}

void AttentionDraws::after_step(std::int64_t steps_done) {
  for (auto& method : methods_)
    if (method->redraw_every() > 0 && steps_done % method->redraw_every() == 0) method->redraw(generator_);
}

at::Tensor AttentionDraws::generator_state() const { return generator_.get_state(); }

void AttentionDraws::set_generator_state(const at::Tensor& state) { generator_.set_state(state); }

void AttentionDraws::fresh_draw() {
  for (auto& method : methods_) method->redraw(generator_);
}

void AttentionDraws::before_evaluation() {
  for (auto& method : methods_)
    if (method->fresh_draw_at_eval()) method->redraw(generator_);
}

}  // namespace attnlab
