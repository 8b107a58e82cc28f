#include "attnlab/train/variance.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

namespace attnlab {

VarianceMetrics variance_metrics(const at::Tensor& logits_in, const at::Tensor& labels_in) {
  if (logits_in.dim() != 3 || labels_in.dim() != 1 || logits_in.size(1) != labels_in.size(0) || logits_in.size(2) < 2)
    throw std::invalid_argument("variance_metrics: logits must be [R, N, C >= 2] and labels [N]");
  const std::int64_t passes = logits_in.size(0), n = logits_in.size(1), classes = logits_in.size(2);
  if (passes < 2) throw std::invalid_argument("variance_metrics: needs at least 2 passes, got " + std::to_string(passes));
  const auto logits = logits_in.to(at::kCPU, at::kDouble);
  const auto labels = labels_in.to(at::kCPU, at::kLong);

  // o [R, N]: the decisive pre-softmax score of each pass
  at::Tensor o;
  if (classes == 2) {
    o = logits.select(2, 1) - logits.select(2, 0);
  } else {
    const auto index = labels.view({1, n, 1}).expand({passes, n, 1});
    const auto true_score = logits.gather(2, index).squeeze(2);
    const auto others = logits.scatter(2, index, -std::numeric_limits<double>::infinity());
    o = true_score - std::get<0>(others.max(2));
  }
  const auto mean = o.mean(0), std = o.std(0, /*unbiased=*/true);
  const auto predictions = logits.argmax(2);  // [R, N]
  const auto votes_per_class = at::zeros({n, classes}, at::kLong).scatter_add_(1, predictions.t(), at::ones({n, passes}, at::kLong));
  const auto [top, vote] = votes_per_class.max(1);  // max returns the first index among ties
  const auto correct = predictions.eq(labels.unsqueeze(0)).to(at::kDouble);

  VarianceMetrics m;
  m.passes = passes;
  m.examples = n;
  const auto rsd = std / mean.abs();
  m.rsd = rsd.mean().item<double>();
  const auto pi = passes - top;
  m.pi = pi.to(at::kDouble).mean().item<double>();
  m.va = vote.eq(labels).to(at::kDouble).mean().item<double>();
  m.mean_acc = correct.mean().item<double>();
  m.agv = m.va / m.mean_acc;  // inf when no single pass is ever right, as the ratio says
  m.example_rsd.assign(rsd.data_ptr<double>(), rsd.data_ptr<double>() + n);
  const auto pi_c = pi.contiguous(), vote_c = vote.contiguous();
  m.example_pi.assign(pi_c.data_ptr<std::int64_t>(), pi_c.data_ptr<std::int64_t>() + n);
  m.example_vote.assign(vote_c.data_ptr<std::int64_t>(), vote_c.data_ptr<std::int64_t>() + n);
  return m;
}

}  // namespace attnlab
