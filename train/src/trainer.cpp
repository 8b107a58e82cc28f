#include "attnlab/train/trainer.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize/output-archive.h>
#include <torch/utils.h>

#include "attnlab/train/data_loader.hpp"
#include "attnlab/train/instability.hpp"
#include "attnlab/train/loss_scaler.hpp"
#include "attnlab/precision.hpp"
#include "attnlab/torch_compat.hpp"
#include "checkpoint_file.hpp"
#include "resume.hpp"

namespace attnlab {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Training-curve points reach the observer (the database) at each validation, and between two at
// most this long after they were logged: a live view (attnlab serve, curves on a running job) sees
// the step and the loss within seconds, for one small write this often.
constexpr double kCurveDeliverySeconds = 10.0;

struct Evaluation {
  double loss = kNaN, acc = kNaN;
};

Evaluation evaluate(EncoderClassifier& model, const SplitData& split, std::int64_t batch_size, c10::Device device,
                    std::int64_t max_batches, Precision precision) {
  c10::InferenceMode no_grad;
  model->eval();
  BatchIterator batches(split, batch_size, device, /*shuffle=*/false, 0);
  Batch batch;
  auto loss_sum = at::zeros({}, at::TensorOptions(device).dtype(at::kDouble));
  auto correct = at::zeros({}, at::TensorOptions(device).dtype(at::kLong));
  std::int64_t seen = 0, used = 0;
  while ((max_batches == 0 || used < max_batches) && batches.next(batch)) {
    auto logits = forward_logits(model, batch.tokens, batch.lengths, device, precision);
    loss_sum += at::cross_entropy_loss(logits, batch.labels, {}, at::Reduction::Sum).to(at::kDouble);
    correct += logits.argmax(1).eq(batch.labels).sum();
    seen += batch.labels.size(0);
    ++used;
  }
  model->train();
  return {loss_sum.item<double>() / seen, static_cast<double>(correct.item<std::int64_t>()) / seen};
}

// The first line of a failure (c10 errors append a backtrace). LibTorch's refusal of an op under
// deterministic algorithms names the op, then suggests Python switches: the op and our setting.
std::string one_line_error(const std::exception& e) {
  std::string what = e.what();
  what = what.substr(0, what.find('\n'));
  const auto refusal = what.find(" does not have a deterministic implementation");
  if (refusal != std::string::npos) what = what.substr(0, refusal) + " has no deterministic implementation ([train] deterministic = true)";
  return what;
}

}  // namespace

Precision apply_precision_settings(const TrainConfig& train, const c10::Device& device) {
  const Precision precision = parse_precision(train.precision);
  if (std::string why; !autocast_supported(device, precision, &why)) throw std::runtime_error(why);
  // process-wide switches, set for every run (each job has a process of its own in the runner)
  compat::set_tf32(train.tf32);
  compat::set_deterministic(train.deterministic);
  return precision;
}

at::Tensor forward_logits(EncoderClassifier& model, const at::Tensor& tokens, const at::Tensor& lengths,
                          const c10::Device& device, Precision precision) {
  at::Tensor logits;
  {
    AutocastScope autocast(device, precision);
    logits = model->forward(tokens, lengths);
  }
  return logits.to(at::kFloat);  // the same tensor when it is fp32 already
}

bool apply_gradients(torch::optim::Optimizer& optimizer, const std::vector<at::Tensor>& parameters, double clip_norm,
                     LossScaler& scaler) {
  const bool finite = scaler.unscale(parameters);
  if (finite) {
    if (clip_norm > 0) torch::nn::utils::clip_grad_norm_(parameters, clip_norm);
    optimizer.step();
  }
  scaler.update(finite);
  return finite;
}

AttentionDraws::AttentionDraws(std::vector<std::shared_ptr<AttentionMethod>> methods, std::uint64_t seed)
    : generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
  for (auto& method : methods)
    if (method->stochastic()) {
      method->redraw(generator_);
      methods_.push_back(std::move(method));
    }
}

void AttentionDraws::after_step(std::int64_t steps_done) {
  for (auto& method : methods_)
    if (method->redraw_every() > 0 && steps_done % method->redraw_every() == 0) method->redraw(generator_);
}

at::Tensor AttentionDraws::generator_state() const { return generator_.get_state(); }

void AttentionDraws::set_generator_state(const at::Tensor& state) { generator_.set_state(state); }

void AttentionDraws::fresh_draw() {
  for (auto& method : methods_) method->redraw(generator_);
}

VarianceMetrics measure_variance(EncoderClassifier& model, const SplitData& split, std::int64_t batch_size,
                                 c10::Device device, std::int64_t passes, AttentionDraws& draws,
                                 const std::function<void(std::int64_t done)>& after_pass, Precision precision) {
  c10::InferenceMode no_grad;
  model->eval();
  std::vector<at::Tensor> logits;
  for (std::int64_t p = 0; p < passes; ++p) {
    draws.fresh_draw();
    BatchIterator batches(split, batch_size, device, /*shuffle=*/false, 0);
    Batch batch;
    std::vector<at::Tensor> pass;
    while (batches.next(batch)) pass.push_back(forward_logits(model, batch.tokens, batch.lengths, device, precision).cpu());
    logits.push_back(at::cat(pass));
    if (after_pass) after_pass(p + 1);
  }
  model->train();
  return variance_metrics(at::stack(logits), split.labels);
}

void AttentionDraws::before_evaluation() {
  for (auto& method : methods_)
    if (method->fresh_draw_at_eval()) method->redraw(generator_);
}

namespace {

// The best-validation weights, kept in memory to evaluate the test split with them at the end.
std::vector<at::Tensor> snapshot(EncoderClassifier& model) {
  std::vector<at::Tensor> state;
  for (const auto& p : model->parameters()) state.push_back(p.detach().clone());
  for (const auto& b : model->buffers()) state.push_back(b.detach().clone());
  return state;
}

void restore(EncoderClassifier& model, const std::vector<at::Tensor>& state) {
  c10::InferenceMode no_grad;
  std::size_t i = 0;
  for (auto& p : model->parameters()) p.detach().copy_(state[i++]);
  for (auto& b : model->buffers()) b.detach().copy_(state[i++]);
}

// The model's weights as torch::save writes them (torch::load reads them), whole or not at all;
// returns the file's checksum.
std::string save_checkpoint(EncoderClassifier& model, const std::string& path) {
  torch::serialize::OutputArchive archive;
  model->save(archive);
  return checkpoint_file::write(archive, path);
}

// Writes a resume checkpoint under a name of its own and offers it to the observer. Adopted, it
// replaces the run's previous one; refused (the attempt lost its lease), it is removed at once:
// no later attempt can read a file whose step the database does not know.
void offer_resume_checkpoint(const TrainJob& job, const resume::JobKey& key, const resume::LoopState& loop,
                             const resume::Parts& parts, TrainObserver& observer, std::string& adopted) {
  const std::string path = resume_file(job.resume_stem, loop.steps_done);
  const std::string checksum = resume::save(path, key, loop, parts);
  std::error_code ignored;
  if (!observer.on_checkpoint(loop.steps_done, path, checksum)) {
    std::filesystem::remove(path, ignored);
    return;
  }
  if (!adopted.empty() && adopted != path) std::filesystem::remove(adopted, ignored);
  adopted = path;
}

}  // namespace

std::string resume_file(const std::string& stem, std::int64_t steps_done) {
  return stem + ".step-" + std::to_string(steps_done) + ".resume.pt";
}

std::string accuracy_checkpoint_path(const std::string& checkpoint_path, double mark) {
  return checkpoint_path + ".acc" + std::to_string(std::lround(mark * 100));
}

std::vector<double> accuracy_marks(double every) {
  std::vector<double> marks;
  if (every <= 0) return marks;
  // rounded to 1e-9: 3 x 0.2 is 0.6, the mark a user and the paper's tables write
  for (int k = 1; k * every <= 1 + 1e-9; ++k) marks.push_back(std::round(k * every * 1e9) / 1e9);
  return marks;
}

double learning_rate_at(const TrainConfig& c, std::int64_t step) {
  if (step < c.warmup) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup);
  const double span = static_cast<double>(std::max<std::int64_t>(1, c.steps - c.warmup));
  const double progress = std::min(1.0, static_cast<double>(step - c.warmup) / span);
  if (c.decay == "linear") return c.lr * (1.0 - progress);
  if (c.decay == "cosine") return c.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
  if (c.decay == "sqrt") return c.lr * std::sqrt(static_cast<double>(std::max<std::int64_t>(c.warmup, 1)) / (step + 1));
  return c.lr;
}

double majority_rate(const at::Tensor& labels, std::int64_t num_classes) {
  if (labels.numel() == 0) return kNaN;
  auto counts = at::bincount(labels.to(at::kLong).flatten(), {}, num_classes);
  return static_cast<double>(counts.max().item<std::int64_t>()) / static_cast<double>(labels.numel());
}

RunOutcome train_and_evaluate(const TrainJob& job, const TrainSplits& data, TrainObserver& observer) {
  const auto& tc = job.train;
  auto start = Clock::now();
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  const bool resuming = !job.resume_from.empty();
  const auto job_key = resume::job_key(job, data.train.size());
  const Precision precision = apply_precision_settings(tc, job.device);

  RunOutcome outcome;
  resume::LoopState loop;  // everything the loop carries between steps, as a resume checkpoint holds it
  if (!resuming && tc.instability_steps > 0 && job.reference_attention) {
    // before anything else: it reseeds the global generator, which the run then seeds afresh
    const auto score = instability_score(job, job.reference_attention, data.train, tc.instability_steps);
    loop.instability_ratio = score.ratio;
    std::vector<MetricPoint> taus;
    for (std::size_t i = 0; i < score.tau.size(); ++i) {
      taus.push_back({static_cast<std::int64_t>(i + 1), "train", "tau", score.tau[i], 0.0});
      taus.push_back({static_cast<std::int64_t>(i + 1), "train", "tau_softmax", score.tau_reference[i], 0.0});
    }
    observer.on_metrics(taus);
  }

  torch::manual_seed(job.seed);  // weights and dropout
  EncoderClassifier model(job.model, job.task, job.make_attention);
  model->to(job.device);
  AttentionDraws draws(model->attention_methods(), job.seed ^ kAttentionStream);

  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(tc.lr)
                                                         .betas(std::make_tuple(tc.beta1, tc.beta2))
                                                         .eps(tc.eps)
                                                         .weight_decay(tc.weight_decay));
  BatchIterator train_batches(data.train, tc.batch_size, job.device, /*shuffle=*/true, job.seed ^ kDataStream);
  LossScaler scaler(precision == Precision::fp16);
  const auto parameters = model->parameters();
  const resume::Parts parts{*model, optimizer, draws, train_batches, job.device, scaler};
  if (resuming) {
    // everything above was built as a fresh run builds it; the checkpoint overwrites its state
    loop = resume::load(job.resume_from, {job.resume_step, job.resume_checksum}, job_key, parts);
    start = Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(loop.elapsed_seconds));
    observer.on_resumed(loop.steps_done, job.resume_from);
  } else {
    // Training-curve accumulators stay on the device: reading them synchronises, so only at log steps.
    loop.loss_sum = at::zeros({}, at::TensorOptions(job.device).dtype(at::kDouble));
    loop.correct = at::zeros({}, at::TensorOptions(job.device).dtype(at::kLong));
  }
  if (loop.instability_ratio) outcome.results.push_back({"instability_ratio", *loop.instability_ratio});
  compat::reset_peak_memory(job.device);

  std::vector<MetricPoint> points;
  double delivered_at = 0;  // wall seconds of the last delivery of points to the observer
  Batch batch;

  try {
    if (resuming && loop.best_step >= 0 && !job.checkpoint_path.empty()) {
      // the stopped attempt may have saved a later best after its last resume checkpoint: the
      // best file goes back to the best as of the checkpoint, which this attempt carries on from
      const auto current = snapshot(model);
      restore(model, loop.best_state);
      outcome.checkpoint_checksum = save_checkpoint(model, job.checkpoint_path);
      restore(model, current);
    }
    for (std::int64_t step = loop.steps_done; step < tc.steps; ++step) {
      const double lr = learning_rate_at(tc, step);
      for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
      optimizer.zero_grad();
      for (std::int64_t micro = 0; micro < tc.grad_accum; ++micro) {
        train_batches.next(batch);
        auto logits = forward_logits(model, batch.tokens, batch.lengths, job.device, precision);
        auto loss = at::cross_entropy_loss(logits, batch.labels);
        scaler.scale(tc.grad_accum > 1 ? loss / static_cast<double>(tc.grad_accum) : loss).backward();
        loop.loss_sum += loss.detach().to(at::kDouble);
        loop.correct += logits.detach().argmax(1).eq(batch.labels).sum();
        loop.seen += batch.labels.size(0);
        ++loop.micro_batches;
      }
      apply_gradients(optimizer, parameters, tc.clip_norm, scaler);
      loop.steps_done = step + 1;
      draws.after_step(loop.steps_done);

      const bool last = loop.steps_done == tc.steps;
      if (loop.steps_done % tc.log_every == 0 || last) {
        loop.last_train_loss = loop.loss_sum.item<double>() / static_cast<double>(loop.micro_batches);
        loop.last_train_acc = static_cast<double>(loop.correct.item<std::int64_t>()) / static_cast<double>(loop.seen);
        loop.loss_sum.zero_();
        loop.correct.zero_();
        loop.seen = loop.micro_batches = 0;
        const double wall = seconds_since(start);
        points.push_back({loop.steps_done, "train", "loss", loop.last_train_loss, wall});
        points.push_back({loop.steps_done, "train", "acc", loop.last_train_acc, wall});
        points.push_back({loop.steps_done, "train", "lr", lr, wall});
        if (scaler.enabled()) points.push_back({loop.steps_done, "train", "loss_scale", scaler.current_scale(), wall});
        if (!std::isfinite(loop.last_train_loss)) {
          outcome.status = TrainStatus::diverged;
          outcome.error = "training loss became " + std::to_string(loop.last_train_loss) + " by step " + std::to_string(loop.steps_done);
          break;
        }
        if (wall - delivered_at >= kCurveDeliverySeconds) {
          observer.on_metrics(points);
          points.clear();
          delivered_at = wall;
        }
        const double train_seconds = wall - loop.eval_seconds;
        observer.on_progress({loop.steps_done, tc.steps, loop.last_train_loss, loop.last_train_acc, loop.last_val,
                              loop.steps_done / std::max(train_seconds, 1e-9), wall});
      }
      if (loop.steps_done % tc.eval_every == 0 || last) {
        const auto eval_start = Clock::now();
        draws.before_evaluation();
        const auto val = evaluate(model, data.val, tc.batch_size, job.device, tc.eval_batches, precision);
        loop.eval_seconds += seconds_since(eval_start);
        loop.last_val = val.acc;
        const double wall = seconds_since(start);
        points.push_back({loop.steps_done, "val", "loss", val.loss, wall});
        points.push_back({loop.steps_done, "val", "acc", val.acc, wall});
        if (val.acc > loop.best_val) {
          loop.best_val = val.acc;
          loop.best_step = loop.steps_done;
          loop.best_state = snapshot(model);
          if (!job.checkpoint_path.empty()) outcome.checkpoint_checksum = save_checkpoint(model, job.checkpoint_path);
        }
        // The first validation at or past each accuracy mark keeps its weights. A file already
        // there was kept before a resume: the mark was reached then.
        for (const double mark : job.checkpoint_path.empty() ? std::vector<double>{} : accuracy_marks(tc.accuracy_checkpoints)) {
          const std::string path = accuracy_checkpoint_path(job.checkpoint_path, mark);
          if (val.acc + 1e-12 < mark || std::filesystem::exists(path)) continue;
          save_checkpoint(model, path);
          points.push_back({loop.steps_done, "val", "accuracy_mark", mark, wall});
        }
        observer.on_metrics(points);
        points.clear();
        delivered_at = wall;
      }

      // At the end of a step: a periodic resume checkpoint (none after the last step: the run is
      // about to end), or a stop, which checkpoints and leaves even after the last step.
      const bool stopping = job.stop && job.stop->load(std::memory_order_relaxed);
      const bool periodic = tc.checkpoint_every > 0 && loop.steps_done % tc.checkpoint_every == 0 && !last;
      if ((periodic || stopping) && !job.resume_stem.empty()) {
        // the checkpoint covers every point up to this step: deliver them first
        if (!points.empty()) observer.on_metrics(points);
        points.clear();
        loop.elapsed_seconds = seconds_since(start);
        offer_resume_checkpoint(job, job_key, loop, parts, observer, outcome.resume_checkpoint);
      }
      if (stopping) {
        outcome.status = TrainStatus::interrupted;
        outcome.error = "stopped after step " + std::to_string(loop.steps_done);
        break;
      }
    }
  } catch (const CheckpointWriteError&) {
    throw;  // the disk's fault, not the method's: the caller decides
  } catch (const std::exception& e) {
    outcome.status = compat::is_out_of_memory(e) ? TrainStatus::oom : TrainStatus::failed;
    outcome.error = one_line_error(e);
  }

  const double train_seconds = seconds_since(start) - loop.eval_seconds;
  auto& r = outcome.results;
  r.push_back({"steps_done", static_cast<double>(loop.steps_done)});
  r.push_back({"train_seconds", train_seconds});
  r.push_back({"steps_per_second", loop.steps_done / std::max(train_seconds, 1e-9)});
  r.push_back({"param_count", static_cast<double>(model->parameter_count())});
  r.push_back({"majority_rate", majority_rate(data.test.labels, job.task.num_classes)});
  if (scaler.enabled()) {
    r.push_back({"skipped_steps", static_cast<double>(scaler.skipped_steps())});
    r.push_back({"loss_scale", scaler.current_scale()});
  }
  if (loop.best_step >= 0) {
    r.push_back({"best_val_acc", loop.best_val});
    r.push_back({"best_step", static_cast<double>(loop.best_step)});
  }
  if (outcome.status == TrainStatus::done && loop.best_step >= 0) {
    try {
      restore(model, loop.best_state);
      draws.before_evaluation();
      const auto test = evaluate(model, data.test, tc.batch_size, job.device, 0, precision);
      r.push_back({"test_acc", test.acc});
      r.push_back({"test_loss", test.loss});
      points.push_back({loop.best_step, "test", "acc", test.acc, seconds_since(start)});
      points.push_back({loop.best_step, "test", "loss", test.loss, seconds_since(start)});
      if (tc.variance_passes > 1 && draws.any()) {
        const auto passes_start = Clock::now();
        const auto m = measure_variance(model, tc.variance_split == "val" ? data.val : data.test, tc.batch_size,
                                        job.device, tc.variance_passes, draws, [&](std::int64_t done) {
                                          observer.on_variance_pass(done, tc.variance_passes, seconds_since(passes_start));
                                        }, precision);
        r.push_back({"variance_passes", static_cast<double>(m.passes)});
        r.push_back({"rsd", m.rsd});
        r.push_back({"pi", m.pi});
        r.push_back({"va", m.va});
        r.push_back({"agv", m.agv});
        r.push_back({"mean_pass_acc", m.mean_acc});
      }
    } catch (const std::exception& e) {
      outcome.status = compat::is_out_of_memory(e) ? TrainStatus::oom : TrainStatus::failed;
      outcome.error = "test evaluation: " + one_line_error(e);
    }
  }
  r.push_back({"peak_memory_bytes", static_cast<double>(compat::peak_memory_bytes(job.device))});
  r.push_back({"wall_seconds", seconds_since(start)});
  if (!points.empty()) observer.on_metrics(points);
  return outcome;
}

}  // namespace attnlab
