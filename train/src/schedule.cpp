#include "attnlab/train/schedule.hpp"

#include <algorithm>
#include <cmath>

namespace attnlab {

namespace {

// PyTorch's OneCycleLR (Smith & Topor, 2017) with its defaults, two phases, as the LRA code of
// Skyformer and Nystromformer drives it: total_steps = steps, pct_start = warmup / steps, max_lr =
// lr; initial lr / 25, final lr / 25 / 1e4; momentum (Adam's beta1) from 0.95 down to 0.85 over
// the warm-up and back. Written as torch/optim/lr_scheduler.py computes it, step for step.
struct OneCycle {
  double lr, beta1;
};
OneCycle one_cycle_at(const TrainConfig& c, std::int64_t step) {
  constexpr double div_factor = 25, final_div_factor = 1e4, base_momentum = 0.85, max_momentum = 0.95;
  const double initial_lr = c.lr / div_factor, min_lr = initial_lr / final_div_factor;
  const double pct_start = static_cast<double>(c.warmup) / static_cast<double>(c.steps);
  const double warm_end = pct_start * static_cast<double>(c.steps) - 1, last = static_cast<double>(c.steps - 1);
  const bool cosine = c.decay == Decay::onecycle_cosine;
  const auto anneal = [cosine](double start, double end, double pct) {
    return cosine ? end + (start - end) / 2.0 * (std::cos(M_PI * pct) + 1) : (end - start) * pct + start;
  };
  const double s = static_cast<double>(step);
  if (s <= warm_end) {
    const double pct = s / warm_end;
    return {anneal(initial_lr, c.lr, pct), anneal(max_momentum, base_momentum, pct)};
  }
  const double pct = (s - warm_end) / (last - warm_end);
  return {anneal(c.lr, min_lr, pct), anneal(base_momentum, max_momentum, pct)};
}

}  // namespace

bool cycles_beta1(const TrainConfig& c) { return is_one_cycle(c.decay); }

double beta1_at(const TrainConfig& c, std::int64_t step) { return cycles_beta1(c) ? one_cycle_at(c, step).beta1 : c.beta1; }

void schedule_step(FusedAdamW& optimizer, const TrainConfig& c, std::int64_t step) {
  optimizer.set_lr(learning_rate_at(c, step));
  if (cycles_beta1(c)) optimizer.set_beta1(beta1_at(c, step));
}

double learning_rate_at(const TrainConfig& c, std::int64_t step) {
  if (cycles_beta1(c)) return one_cycle_at(c, step).lr;
  if (c.decay == Decay::sqrt_from_zero) {  // the KL authors' LambdaLR, min(1, s / W) / sqrt(max(s, W)), at its peak
    const double s = static_cast<double>(step), w = static_cast<double>(c.warmup);
    return c.lr * std::min(1.0, s / w) * std::sqrt(w / std::max(s, w));
  }
  if (step < c.warmup) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup);
  const double span = static_cast<double>(std::max<std::int64_t>(1, c.steps - c.warmup));
  const double progress = std::min(1.0, static_cast<double>(step - c.warmup) / span);
  if (c.decay == Decay::linear) return c.lr * (1.0 - progress);
  if (c.decay == Decay::cosine) return c.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
  if (c.decay == Decay::sqrt) return c.lr * std::sqrt(static_cast<double>(std::max<std::int64_t>(c.warmup, 1)) / (step + 1));
  return c.lr;
}

torch::optim::AdamWOptions adamw_options(const TrainConfig& tc) {
  return torch::optim::AdamWOptions(tc.lr).betas(std::make_tuple(tc.beta1, tc.beta2)).eps(tc.eps).weight_decay(tc.weight_decay);
}

}  // namespace attnlab
