#pragma once
// Dynamic loss scaling for fp16 training (Micikevicius et al. 2018, "Mixed Precision Training",
// §3.2): the loss is multiplied by S before the backward pass so that small gradients do not flush
// to zero in fp16; the gradients are divided by S before clipping and the optimiser step. A step
// whose gradients hold an inf or a NaN is skipped and S halved; after `growth_interval` clean steps
// in a row S doubles. The defaults are torch.cuda.amp.GradScaler's (2¹⁶, ×2 / ×½, 2,000 steps).
// Disabled (fp32, bf16) it does nothing, and costs nothing.
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace attnlab {

class LossScaler {
 public:
  explicit LossScaler(bool enabled, double initial_scale = 65536.0, std::int64_t growth_interval = 2000)
      : enabled_(enabled), scale_(initial_scale), growth_interval_(growth_interval) {}

  bool enabled() const { return enabled_; }
  // What to call backward() on.
  at::Tensor scale(const at::Tensor& loss) const { return enabled_ ? loss * scale_ : loss; }
  // Divides the gradients by the scale and returns whether all are finite (one host
  // synchronisation). Disabled: true, touching nothing.
  bool unscale(const std::vector<at::Tensor>& gradients) const;
  // After a step: skipped (halve the scale) or taken (count towards growth).
  void update(bool finite);

  double current_scale() const { return scale_; }
  std::int64_t skipped_steps() const { return skipped_; }
  std::int64_t clean_steps() const { return clean_; }  // in a row, towards the next growth
  // For resume checkpoints.
  void restore(double scale, std::int64_t clean_steps, std::int64_t skipped_steps) {
    scale_ = scale;
    clean_ = clean_steps;
    skipped_ = skipped_steps;
  }

 private:
  bool enabled_;
  double scale_;
  std::int64_t growth_interval_;
  std::int64_t clean_ = 0, skipped_ = 0;
};

}  // namespace attnlab
