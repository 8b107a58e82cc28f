#pragma once
// The KL-Transformer's variance metrics (Chowdhury et al. 2022, §4.1) of a stochastic model: R
// inference passes over the same examples, each with a fresh draw of the attention's randomness.
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace attnlab {

struct VarianceMetrics {
  std::int64_t passes = 0, examples = 0;
  // Means over examples:
  double rsd = 0;       // relative standard deviation std(o) / |mean(o)| of the output o
  double pi = 0;        // prediction inconsistency: passes disagreeing with the majority vote
  double va = 0;        // voting accuracy: accuracy of the majority vote over the R passes
  double mean_acc = 0;  // mean single-pass accuracy
  double agv = 0;       // accuracy gain from voting: va / mean_acc
  // Per example (same order as the labels):
  std::vector<double> example_rsd;
  std::vector<std::int64_t> example_pi;
  std::vector<std::int64_t> example_vote;
};

// logits: [R, N, C] from R passes, labels: [N]. The output o of a pass is the score before the
// final softmax that decides the example: for C = 2 the logit margin z1 - z0 (the paper's
// pre-sigmoid output); for C > 2 the margin of the true class over the best other class,
// z_y - max_{c != y} z_c. std is the sample standard deviation over the R passes (R - 1 in the
// denominator); an example whose mean output is exactly 0 has an infinite RSD.
// PI = R - (passes predicting the majority class), which for C = 2 is min(x, R - x) with x the
// passes predicting class 1. The majority vote breaks ties towards the smaller class index.
// Throws std::invalid_argument for R < 2 or mismatched shapes.
VarianceMetrics variance_metrics(const at::Tensor& logits, const at::Tensor& labels);

}  // namespace attnlab
