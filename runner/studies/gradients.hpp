#pragma once
// The KL-Transformer's gradient study (App. E.3, Table 14): how much the gradient reaching the
// classifier varies with the attention's random features. The model as it is (eval mode: no
// dropout) gets the same examples `repeats` times, each after a fresh draw of every stochastic
// attention method; per neuron of `parameter`, the mean |gradient| and the sample standard
// deviation over the repeats, each averaged over the neurons.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attnlab/dataset.hpp"
#include "attnlab/train/model.hpp"
#include "attnlab/train/trainer.hpp"

namespace attnlab {

struct GradientSpread {
  std::int64_t neurons = 0;
  double abs_mean = 0, std = 0;
};

// The first `examples` examples of `split`; the gradient of their mean cross-entropy with respect
// to `parameter` (a name of model->named_parameters(), e.g. "head_in.bias": one value per hidden
// neuron of the classifier). Throws std::invalid_argument for an unknown parameter.
GradientSpread measure_gradient_spread(EncoderClassifier& model, const SplitData& split, std::int64_t examples,
                                       std::int64_t repeats, AttentionDraws& draws, const std::string& parameter,
                                       c10::Device device);

// When each accuracy mark was first reached, from a run's `val/accuracy_mark` curve: (mark, step) in
// the order of `accuracy_marks(every)`. One validation can pass several marks and keeps a checkpoint
// for each, but the curve holds one point per step, the highest mark: every lower mark not reached
// before is read as reached there too.
std::vector<std::pair<double, std::int64_t>> marks_reached(const std::vector<std::pair<std::int64_t, double>>& curve,
                                                           double every);

// The KL-Transformer's Table 14 as printed, or nullptr: (sparsity, mark) -> std and abs mean for
// GMM-RKS and GMM-PRF ("gmm_rks", "gmm_prf").
struct PublishedGradients {
  double std, abs_mean;
};
const PublishedGradients* published_table14(const std::string& method, double sparsity, double mark);

}  // namespace attnlab
