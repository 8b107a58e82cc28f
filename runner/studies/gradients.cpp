#include "studies/gradients.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <ATen/ATen.h>

namespace attnlab {

GradientSpread measure_gradient_spread(EncoderClassifier& model, const SplitData& split, std::int64_t examples,
                                       std::int64_t repeats, AttentionDraws& draws, const std::string& parameter,
                                       c10::Device device) {
  at::Tensor weight;
  for (const auto& p : model->named_parameters())
    if (p.key() == parameter) weight = p.value();
  if (!weight.defined()) throw std::invalid_argument("the model has no parameter '" + parameter + "'");
  const std::int64_t n = std::min(examples, split.size());
  const auto tokens = split.tokens.slice(0, 0, n).to(device, at::kLong);
  const auto lengths = split.lengths.slice(0, 0, n).to(device);
  const auto labels = split.labels.slice(0, 0, n).to(device, at::kLong);
  model->eval();
  std::vector<at::Tensor> grads;
  for (std::int64_t r = 0; r < repeats; ++r) {
    draws.fresh_draw();
    model->zero_grad();
    at::cross_entropy_loss(model->forward(tokens, lengths), labels).backward();
    grads.push_back(weight.grad().detach().flatten().to(at::kCPU, at::kDouble));
  }
  const auto g = at::stack(grads);  // [repeats, neurons]
  GradientSpread out;
  out.neurons = g.size(1);
  out.abs_mean = g.abs().mean(0).mean().item<double>();
  out.std = g.std(0, /*unbiased=*/true).mean().item<double>();
  return out;
}

namespace {
// Chowdhury et al. (TMLR 2022), App. E.3, Table 14, as printed.
struct Table14Row {
  double sparsity, mark;
  PublishedGradients rks, prf;
};
constexpr Table14Row kTable14[] = {
    {0.1, 0.2, {0.083064, 0.144132}, {0.079822, 0.139948}}, {0.1, 0.4, {0.094528, 0.16609}, {0.11077, 0.193444}},
    {0.1, 0.6, {0.099791, 0.176456}, {0.116044, 0.201462}}, {0.1, 0.8, {0.131252, 0.228456}, {0.154802, 0.275594}},
    {0.5, 0.2, {0.069646, 0.121306}, {0.434024, 0.53019}},  {0.5, 0.4, {0.11552, 0.201468}, {6.432806, 12.17245}},
    {0.5, 0.6, {0.142631, 0.249917}, {3.752173, 5.886064}}, {0.5, 0.8, {0.166899, 0.295308}, {22.46943, 42.14157}},
    {0.9, 0.2, {0.059153, 0.102415}, {0.065438, 0.115866}}, {0.9, 0.4, {0.108255, 0.186704}, {0.123171, 0.211465}},
    {0.9, 0.6, {0.119243, 0.206855}, {0.126247, 0.217067}}, {0.9, 0.8, {0.136816, 0.240525}, {0.168633, 0.295976}},
};
}  // namespace

std::vector<std::pair<double, std::int64_t>> marks_reached(const std::vector<std::pair<std::int64_t, double>>& curve,
                                                           double every) {
  auto points = curve;
  std::sort(points.begin(), points.end());
  std::vector<std::pair<double, std::int64_t>> reached;
  for (const double mark : accuracy_marks(every))
    for (const auto& [step, highest] : points)
      if (highest + 1e-9 >= mark) {
        reached.emplace_back(mark, step);
        break;
      }
  return reached;
}

const PublishedGradients* published_table14(const std::string& method, double sparsity, double mark) {
  if (method != "gmm_rks" && method != "gmm_prf") return nullptr;
  for (const auto& row : kTable14)
    if (std::abs(row.sparsity - sparsity) < 1e-9 && std::abs(row.mark - mark) < 1e-9)
      return method == "gmm_rks" ? &row.rks : &row.prf;
  return nullptr;
}

}  // namespace attnlab
