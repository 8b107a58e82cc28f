#pragma once
// Skyformer's instability score (Chen et al., 2021, App. F, Table 3): how much the encoder's output
// moves per unit of weight change in the first training steps, relative to softmax attention.
#include <cstdint>
#include <vector>

#include "attnlab/train/data_loader.hpp"
#include "attnlab/train/job.hpp"

namespace attnlab {

struct InstabilityScore {
  std::vector<double> tau;            // τᵢ of the method, i = 1..steps
  std::vector<double> tau_reference;  // τᵢ of the reference (softmax) model
  double ratio = 0;                   // mean over i of τᵢ / τᵢ(reference)
  std::int64_t shared_parameters = 0; // tensors copied from the reference so both start equal
};

// Trains `steps` steps of the job's model and of the same model around `reference` attention,
// from the same initial weights (every parameter the two share by name and shape is copied from
// the reference model) on the same batches with the same dropout masks, and records
//   τᵢ = ‖f(xᵢ, Wᵢ) − f(xᵢ, Wᵢ₋₁)‖²_F / ‖Wᵢ − Wᵢ₋₁‖²_F
// with f the pooled encoder output (of the first input for pair tasks), measured in eval mode
// with the method's randomness fixed per step. Touches the global RNG: call before training.
InstabilityScore instability_score(const TrainJob& job, const AttentionMaker& reference, const SplitData& train,
                                   std::int64_t steps);

}  // namespace attnlab
