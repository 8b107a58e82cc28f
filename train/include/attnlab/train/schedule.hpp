#pragma once
// The optimiser's schedule: AdamW's options from [train], the learning rate and beta1 of each step
// (warm-up and decay, or PyTorch's OneCycleLR as the LRA code drives it).
#include <cstdint>

#include <torch/optim/adamw.h>

#include "attnlab/train/config.hpp"
#include "attnlab/train/optimizer.hpp"

namespace attnlab {

// [train] lr, beta1, beta2, eps and weight_decay as AdamW's options (the trainer's optimiser, FusedAdamW).
torch::optim::AdamWOptions adamw_options(const TrainConfig& train);

// Learning rate at `step` (0-based): linear warm-up to lr, then constant, linear, sqrt or cosine
// decay; or PyTorch's OneCycleLR (decay = onecycle, onecycle_cosine) as it sets the rate of step `step`.
double learning_rate_at(const TrainConfig& config, std::int64_t step);
// AdamW's beta1 at `step`: [train] beta1, or under onecycle OneCycleLR's cycled momentum.
double beta1_at(const TrainConfig& config, std::int64_t step);
// Whether beta1 changes from step to step (onecycle).
bool cycles_beta1(const TrainConfig& config);
// The optimiser's learning rate and beta1 set for step `step` (0-based), as the schedule says.
void schedule_step(FusedAdamW& optimizer, const TrainConfig& config, std::int64_t step);

}  // namespace attnlab
