#include "attnlab/train/instability.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include "attnlab/train/optimizer.hpp"
#include "attnlab/train/schedule.hpp"
#include <torch/utils.h>

#include "attnlab/train/data_loader.hpp"
#include "attnlab/train/weights.hpp"

namespace attnlab {
namespace {

at::Tensor flat_parameters(EncoderClassifier& model) {
  std::vector<at::Tensor> parts;
  for (const auto& p : model->unique_parameters()) parts.push_back(p.detach().flatten());
  return at::cat(parts).to(at::kDouble);
}

// f(x, W): pooled encoder output, eval mode, the method's randomness drawn from `seed`.
at::Tensor features(EncoderClassifier& model, const Batch& batch, std::uint64_t seed) {
  c10::InferenceMode no_grad;
  model->eval();
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& method : model->attention_methods())
    if (method->stochastic()) method->redraw(generator);
  auto f = model->encode(batch.tokens.select(1, 0), batch.lengths.select(1, 0)).to(at::kDouble);
  model->train();
  return f;
}

std::vector<double> taus(EncoderClassifier& model, const std::vector<Batch>& batches, const TrainJob& job) {
  const auto& tc = job.train;
  FusedAdamW optimizer(model->unique_parameters(), adamw_options(tc), cycles_beta1(tc));
  std::vector<double> out;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    stop_if_requested(job.stop);
    const auto& batch = batches[i];
    const std::uint64_t draw_seed = job.seed * 1000003ULL + i;
    const auto w_before = flat_parameters(model);
    const auto f_before = features(model, batch, draw_seed);

    schedule_step(optimizer, tc, static_cast<std::int64_t>(i));
    torch::manual_seed(draw_seed);  // the same dropout masks in both models
    optimizer.zero_grad();
    auto loss = at::cross_entropy_loss(model->forward(batch.tokens, batch.lengths), batch.labels);
    loss.backward();
    if (tc.clip_value > 0) optimizer.clip_grad_value(tc.clip_value);
    if (tc.clip_norm > 0) optimizer.clip_grad_norm(tc.clip_norm);
    optimizer.step();

    const auto f_after = features(model, batch, draw_seed);
    const double weight_change = (flat_parameters(model) - w_before).pow(2).sum().item<double>();
    const double output_change = (f_after - f_before).pow(2).sum().item<double>();
    out.push_back(output_change / weight_change);
  }
  return out;
}

}  // namespace

InstabilityScore instability_score(const TrainJob& job, const AttentionMaker& reference, const SplitData& train,
                                   std::int64_t steps) {
  torch::manual_seed(job.seed);
  EncoderClassifier reference_model(job.model, job.task, reference);
  torch::manual_seed(job.seed);
  EncoderClassifier model(job.model, job.task, job.make_attention);
  if (!job.model.init_from.empty()) {  // the method's file: its own weights too, the reference's all but those
    load_weights(reference_model, job.model.init_from, WeightsScope::without_attention);
    load_weights(model, job.model.init_from);
  }

  InstabilityScore score;
  {
    c10::InferenceMode no_grad;
    const auto shared = reference_model->named_parameters();
    for (auto& p : model->named_parameters()) {
      const auto* source = shared.find(p.key());
      if (source && source->sizes() == p.value().sizes()) {
        p.value().copy_(*source);
        ++score.shared_parameters;
      }
    }
  }
  reference_model->to(job.device);
  model->to(job.device);

  BatchIterator iterator(train, job.train.batch_size, job.device, /*shuffle=*/true, job.seed);
  std::vector<Batch> batches(static_cast<std::size_t>(steps));
  for (auto& batch : batches) iterator.next(batch);

  score.tau_reference = taus(reference_model, batches, job);
  score.tau = taus(model, batches, job);
  double sum = 0;
  for (std::size_t i = 0; i < score.tau.size(); ++i) sum += score.tau[i] / score.tau_reference[i];
  score.ratio = sum / static_cast<double>(score.tau.size());
  return score;
}

}  // namespace attnlab
