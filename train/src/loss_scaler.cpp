#include "attnlab/train/loss_scaler.hpp"

#include <ATen/ATen.h>

namespace attnlab {

bool LossScaler::unscale(const std::vector<at::Tensor>& gradients) const {
  if (!enabled_) return true;
  at::Tensor finite;
  for (auto grad : gradients) {
    grad.mul_(1.0 / scale_);
    auto all_finite = grad.isfinite().all();
    finite = finite.defined() ? finite.logical_and_(all_finite) : all_finite;
  }
  return !finite.defined() || finite.item<bool>();
}

void LossScaler::update(bool finite) {
  if (!enabled_) return;
  if (!finite) {
    scale_ *= 0.5;
    clean_ = 0;
    ++skipped_;
  } else if (++clean_ == growth_interval_) {
    scale_ *= 2.0;
    clean_ = 0;
  }
}

}  // namespace attnlab
