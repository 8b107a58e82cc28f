#include "attnlab/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include <torch/serialize/output-archive.h>
#include <torch/utils.h>

#include "attnlab/train/data_loader.hpp"
#include "attnlab/train/instability.hpp"
#include "attnlab/train/loss_scaler.hpp"
#include "attnlab/train/step_runner.hpp"
#include "attnlab/train/weights.hpp"
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

// Loss and accuracy over up to max_batches (0: all) batches of `batches`; with drop_last, a batch
// shorter than batch_size ends the pass unused (the LRA authors' test loader).
Evaluation evaluate(EncoderClassifier& model, BatchIterator& batches, std::int64_t batch_size, c10::Device device,
                    std::int64_t max_batches, bool drop_last, Precision precision, const std::atomic<bool>* stop = nullptr) {
  c10::InferenceMode no_grad;
  model->eval();
  Batch batch;
  auto loss_sum = at::zeros({}, at::TensorOptions(device).dtype(at::kDouble));
  auto correct = at::zeros({}, at::TensorOptions(device).dtype(at::kLong));
  std::int64_t seen = 0, used = 0;
  while ((max_batches == 0 || used < max_batches) && batches.next(batch)) {
    if (drop_last && batch.labels.size(0) < batch_size) break;
    stop_if_requested(stop);
    auto logits = forward_logits(model, batch.tokens, batch.lengths, device, precision);
    loss_sum += at::cross_entropy_loss(logits, batch.labels, {}, at::Reduction::Sum).to(at::kDouble);
    correct += logits.argmax(1).eq(batch.labels).sum();
    seen += batch.labels.size(0);
    ++used;
  }
  model->train();
  return {loss_sum.item<double>() / seen, static_cast<double>(correct.item<std::int64_t>()) / seen};
}

// The same over a split's first max_batches batches, in order.
Evaluation evaluate(EncoderClassifier& model, const SplitData& split, std::int64_t batch_size, c10::Device device,
                    std::int64_t max_batches, bool drop_last, Precision precision, const std::atomic<bool>* stop = nullptr) {
  BatchIterator batches(split, batch_size, device, /*shuffle=*/false, 0);
  return evaluate(model, batches, batch_size, device, max_batches, drop_last, precision, stop);
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
  return logits.scalar_type() == at::kFloat ? logits : logits.to(at::kFloat);
}

bool apply_gradients(FusedAdamW& optimizer, const TrainConfig& train, LossScaler& scaler) {
  const bool finite = scaler.unscale(optimizer.gradients());
  if (finite) {
    if (train.clip_value > 0) optimizer.clip_grad_value(train.clip_value);
    if (train.clip_norm > 0) optimizer.clip_grad_norm(train.clip_norm);
    optimizer.step();
  }
  scaler.update(finite);
  return finite;
}

VarianceMetrics measure_variance(EncoderClassifier& model, const SplitData& split, std::int64_t batch_size,
                                 c10::Device device, std::int64_t passes, AttentionDraws& draws,
                                 const std::function<void(std::int64_t done)>& after_pass, Precision precision,
                                 const std::atomic<bool>* stop) {
  c10::InferenceMode no_grad;
  model->eval();
  std::vector<at::Tensor> logits;
  for (std::int64_t p = 0; p < passes; ++p) {
    draws.fresh_draw();
    BatchIterator batches(split, batch_size, device, /*shuffle=*/false, 0);
    Batch batch;
    std::vector<at::Tensor> pass;
    while (batches.next(batch)) {
      stop_if_requested(stop);
      pass.push_back(forward_logits(model, batch.tokens, batch.lengths, device, precision).cpu());
    }
    logits.push_back(at::cat(pass));
    if (after_pass) after_pass(p + 1);
  }
  model->train();
  return variance_metrics(at::stack(logits), split.labels);
}

namespace {

// The best-validation weights, kept in memory to evaluate the test split with them at the end.
std::vector<at::Tensor> snapshot(EncoderClassifier& model) {
  std::vector<at::Tensor> state;
  for (const auto& p : model->unique_parameters()) state.push_back(p.detach().clone());
  for (const auto& b : model->buffers()) state.push_back(b.detach().clone());
  return state;
}

void restore(EncoderClassifier& model, const std::vector<at::Tensor>& state) {
  c10::InferenceMode no_grad;
  std::size_t i = 0;
  for (auto& p : model->unique_parameters()) p.detach().copy_(state[i++]);
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

EncoderClassifier initial_model(const TrainJob& job) {
  torch::manual_seed(job.seed);  // the weights, then dropout's stream
  EncoderClassifier model(job.model, job.task, job.make_attention);
  if (!job.model.init_from.empty()) load_weights(model, job.model.init_from);
  model->to(job.device);
  return model;
}

std::string resume_file(const std::string& stem, std::int64_t steps_done) {
  return stem + ".step-" + std::to_string(steps_done) + ".resume.pt";
}

std::string accuracy_checkpoint_path(const std::string& checkpoint_path, double mark) {
  return checkpoint_path + ".acc" + std::to_string(std::lround(mark * 100));
}

std::string last_checkpoint_path(const std::string& checkpoint_path) { return checkpoint_path + ".last"; }

std::vector<double> accuracy_marks(double every) {
  std::vector<double> marks;
  if (every <= 0) return marks;
  // rounded to 1e-9: 3 x 0.2 is 0.6, the mark a user and the paper's tables write
  for (int k = 1; k * every <= 1 + 1e-9; ++k) marks.push_back(std::round(k * every * 1e9) / 1e9);
  return marks;
}

double majority_rate(const at::Tensor& labels, std::int64_t num_classes) {
  if (labels.numel() == 0) return kNaN;
  auto counts = at::bincount(labels.to(at::kLong).flatten(), {}, num_classes);
  return static_cast<double>(counts.max().item<std::int64_t>()) / static_cast<double>(labels.numel());
}

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Skyformer's instability score (job.train.instability_steps > 0, fresh runs only), its tau curves
// delivered at once. First of all: it reseeds the global generator, which the run then seeds afresh.
std::optional<double> instability_first(const TrainJob& job, const TrainSplits& data, TrainObserver& observer) {
  if (!job.resume_from.empty() || job.train.instability_steps <= 0 || !job.reference_attention) return std::nullopt;
  const auto score = instability_score(job, job.reference_attention, data.train, job.train.instability_steps);
  std::vector<MetricPoint> taus;
  for (std::size_t i = 0; i < score.tau.size(); ++i) {
    taus.push_back({static_cast<std::int64_t>(i + 1), "train", "tau", score.tau[i], 0.0});
    taus.push_back({static_cast<std::int64_t>(i + 1), "train", "tau_softmax", score.tau_reference[i], 0.0});
  }
  observer.on_metrics(taus);
  return score.ratio;
}

// One run, read top to bottom as train_and_evaluate drives it: built (fresh, or from a resume
// checkpoint), then per step: step, log, validate, checkpoint or stop; then finish. Every member
// is built in the order a fresh run needs (the seeds make the order part of the result).
class TrainLoop {
 public:
  TrainLoop(const TrainJob& job, const TrainSplits& data, TrainObserver& observer)
      : job_(job), tc_(job.train), data_(data), observer_(observer),
        job_key_(resume::job_key(job, data.train.size())),
        precision_(apply_precision_settings(job.train, job.device)),
        instability_ratio_(instability_first(job, data, observer)),
        model_(initial_model(job)),
        draws_(model_->attention_methods(), job.seed ^ kAttentionStream),
        optimizer_(model_->unique_parameters(), adamw_options(job.train), cycles_beta1(job.train)),
        train_batches_(data.train, job.train.batch_size, job.device, /*shuffle=*/true, job.seed ^ kDataStream),
        val_stream_(job.train.eval_stream ? std::make_optional<BatchIterator>(data.val, job.train.batch_size, job.device,
                                                                            /*shuffle=*/true, job.seed ^ kValidationStream)
                                          : std::nullopt),
        scaler_(precision_ == Precision::fp16),
        runner_(job.train, job.device, precision_),
        parts_{*model_, optimizer_, draws_, train_batches_, val_stream_ ? &*val_stream_ : nullptr, job.device, scaler_} {
    if (job.resume_from.empty()) {
      start_ = Clock::now();  // after the instability pre-pass: train_seconds counts training alone
      loop_.instability_ratio = instability_ratio_;
      // Training-curve accumulators stay on the device: reading them synchronises, so only at log steps.
      loop_.loss_sum = at::zeros({}, at::TensorOptions(job.device).dtype(at::kDouble));
      loop_.correct = at::zeros({}, at::TensorOptions(job.device).dtype(at::kLong));
    } else {
      // everything above was built as a fresh run builds it; the checkpoint overwrites its state
      loop_ = resume::load(job.resume_from, {job.resume_step, job.resume_checksum}, job_key_, parts_);
      start_ = Clock::now() - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(loop_.elapsed_seconds));
      take_over_accuracy_marks();
      observer.on_resumed(loop_.steps_done, job.resume_from);
    }
    if (loop_.instability_ratio) outcome_.results.push_back({"instability_ratio", *loop_.instability_ratio});
    compat::reset_peak_memory(job.device);
    outcome_.step_mode = runner_.mode();
    observer.on_step_mode(runner_.mode());
  }
  TrainLoop(const TrainLoop&) = delete;
  TrainLoop& operator=(const TrainLoop&) = delete;

  // A resumed run: the stopped attempt may have saved a later best after its last resume
  // checkpoint, so the best file goes back to the best as of the checkpoint, carried on from here.
  void begin() {
    if (job_.resume_from.empty() || loop_.best_step < 0 || job_.checkpoint_path.empty()) return;
    const auto current = snapshot(model_);
    restore(model_, loop_.best_state);
    outcome_.checkpoint_checksum = save_checkpoint(model_, job_.checkpoint_path);
    restore(model_, current);
  }

  bool steps_left() const { return loop_.steps_done < tc_.steps; }

  // One optimiser step over grad_accum micro-batches; the curve's sums stay on the device. With a
  // CUDA graph (StepRunner) the batch is copied into the one the graph reads, and the device's
  // part of the step (forward, backward, clip, update) is one replay.
  void step() {
    schedule_step(optimizer_, tc_, loop_.steps_done);
    lr_ = optimizer_.lr();
    if (runner_.graphed() || job_.static_inputs) {
      train_batches_.next(batch_);
      into_static_batch(batch_);
      runner_.run([this] {
        optimizer_.zero_grad();
        learn_from(static_batch_);
        apply_gradients(optimizer_, tc_, scaler_);
      });
      if (runner_.mode() != outcome_.step_mode) observer_.on_step_mode(outcome_.step_mode = runner_.mode());
    } else {
      optimizer_.zero_grad();
      for (std::int64_t micro = 0; micro < tc_.grad_accum; ++micro) {
        train_batches_.next(batch_);
        learn_from(batch_);
      }
      apply_gradients(optimizer_, tc_, scaler_);
    }
    loop_.seen += batch_.labels.size(0) * tc_.grad_accum;
    loop_.micro_batches += tc_.grad_accum;
    ++loop_.steps_done;
    draws_.after_step(loop_.steps_done);
  }

  bool last_step() const { return loop_.steps_done == tc_.steps; }
  bool log_due() const { return loop_.steps_done % tc_.log_every == 0 || last_step(); }
  bool validation_due() const { return loop_.steps_done % tc_.eval_every == 0 || last_step(); }

  // The training curve's point (the one synchronisation of a log step) and progress; false, the
  // run ended diverged, when the loss is not finite.
  bool log() {
    loop_.last_train_loss = loop_.loss_sum.item<double>() / static_cast<double>(loop_.micro_batches);
    loop_.last_train_acc = static_cast<double>(loop_.correct.item<std::int64_t>()) / static_cast<double>(loop_.seen);
    loop_.loss_sum.zero_();
    loop_.correct.zero_();
    loop_.seen = loop_.micro_batches = 0;
    const double wall = seconds_since(start_);
    add_point("train", "loss", loop_.last_train_loss, wall);
    add_point("train", "acc", loop_.last_train_acc, wall);
    add_point("train", "lr", lr_, wall);
    if (cycles_beta1(tc_)) add_point("train", "beta1", beta1_at(tc_, loop_.steps_done - 1), wall);  // OneCycleLR's
    if (scaler_.enabled()) add_point("train", "loss_scale", scaler_.current_scale(), wall);
    if (!std::isfinite(loop_.last_train_loss)) {
      outcome_.status = TrainStatus::diverged;
      outcome_.error = "training loss became " + std::to_string(loop_.last_train_loss) + " by step " + std::to_string(loop_.steps_done);
      return false;
    }
    if (wall - delivered_at_ >= kCurveDeliverySeconds) deliver_points(wall);
    const double train_seconds = wall - loop_.eval_seconds;
    observer_.on_progress({loop_.steps_done, tc_.steps, loop_.last_train_loss, loop_.last_train_acc, loop_.last_val,
                           loop_.steps_done / std::max(train_seconds, 1e-9), wall});
    return true;
  }

  // Validation: its curve point, the best weights (in memory and in the best file), the weights
  // at each accuracy mark; then every point so far goes to the observer. A stop during it rewinds
  // what it consumed and leaves it pending: the checkpoint written next resumes into it.
  void validate() {
    const auto eval_start = Clock::now();
    if (!loop_.validation_pending) draws_.before_evaluation();  // a pending one's draw was made
    loop_.validation_pending = false;
    const auto rewind_to = resume::validation_start(parts_);
    Evaluation val;
    try {
      val = val_stream_ ? evaluate(model_, *val_stream_, tc_.batch_size, job_.device, tc_.eval_batches, false, precision_, job_.stop)
                        : evaluate(model_, data_.val, tc_.batch_size, job_.device, tc_.eval_batches, false, precision_, job_.stop);
    } catch (const StopRequested&) {
      resume::rewind(rewind_to, parts_);
      loop_.validation_pending = true;
      loop_.eval_seconds += seconds_since(eval_start);
      return;
    }
    loop_.eval_seconds += seconds_since(eval_start);
    loop_.last_val = val.acc;
    const double wall = seconds_since(start_);
    add_point("val", "loss", val.loss, wall);
    add_point("val", "acc", val.acc, wall);
    if (val.acc > loop_.best_seen) {
      loop_.best_seen = val.acc;
      if (static_cast<double>(loop_.steps_done) > tc_.keep_best_after * static_cast<double>(tc_.steps)) keep_best(val.acc);
    }
    save_accuracy_marks(val.acc, wall);
    deliver_points(wall);
  }
  // The attempt this one resumes was stopped while validating its last step.
  bool validation_pending() const { return loop_.validation_pending; }

  // At the end of a step: a periodic resume checkpoint (none after the last step: the run is about
  // to end), or a stop, which checkpoints and leaves even after the last step. False: stopped.
  bool checkpoint_or_stop() {
    const bool stopping = job_.stop && job_.stop->load(std::memory_order_relaxed);
    // the last step's too: the test evaluation and variance passes that follow may be stopped, and
    // the next attempt evaluates again from it
    const bool periodic = tc_.checkpoint_every > 0 && (loop_.steps_done % tc_.checkpoint_every == 0 || last_step());
    if ((periodic || stopping) && !job_.resume_stem.empty()) {
      // the checkpoint covers every point up to this step: deliver them first
      if (!points_.empty()) observer_.on_metrics(points_);
      points_.clear();
      loop_.elapsed_seconds = seconds_since(start_);
      offer_resume_checkpoint(job_, job_key_, loop_, parts_, observer_, outcome_.resume_checkpoint);
    }
    if (!stopping) return true;
    outcome_.status = TrainStatus::interrupted;
    outcome_.error = (loop_.validation_pending ? "stopped while validating step " : "stopped after step ") +
                     std::to_string(loop_.steps_done);
    return false;
  }

  // An exception out of the loop (but a checkpoint the disk could not take): the method's failure.
  void failed(const std::exception& e) {
    outcome_.status = compat::is_out_of_memory(e) ? TrainStatus::oom : TrainStatus::failed;
    outcome_.error = one_line_error(e);
  }

  // The run's results: time, size, the best validation; after a run that ended done, the test split
  // with the best weights and (stochastic methods) the variance passes. Every point delivered.
  RunOutcome finish() {
    const double train_seconds = seconds_since(start_) - loop_.eval_seconds;
    keep_last();
    add_result("steps_done", static_cast<double>(loop_.steps_done));
    add_result("train_seconds", train_seconds);
    add_result("steps_per_second", loop_.steps_done / std::max(train_seconds, 1e-9));
    add_result("param_count", static_cast<double>(model_->parameter_count()));
    add_result("majority_rate", majority_rate(data_.test.labels, job_.task.num_classes));
    if (scaler_.enabled()) {
      add_result("skipped_steps", static_cast<double>(scaler_.skipped_steps()));
      add_result("loss_scale", scaler_.current_scale());
    }
    // keep_best_after: a best before it never beaten after it leaves the final weights, as Skyformer's code tests them
    if (outcome_.status == TrainStatus::done && loop_.best_step < 0 && loop_.best_seen >= 0) keep_best(loop_.last_val);
    if (loop_.best_step >= 0) {
      add_result("best_val_acc", loop_.best_val);
      add_result("best_step", static_cast<double>(loop_.best_step));
    }
    if (outcome_.status == TrainStatus::done && loop_.best_step >= 0) {
      try {
        test_with_best_weights();
      } catch (const StopRequested&) {
        outcome_.status = TrainStatus::interrupted;
        outcome_.error = "stopped while testing, after step " + std::to_string(loop_.steps_done);
      } catch (const std::exception& e) {
        outcome_.status = compat::is_out_of_memory(e) ? TrainStatus::oom : TrainStatus::failed;
        outcome_.error = "test evaluation: " + one_line_error(e);
      }
    }
    add_result("peak_memory_bytes", static_cast<double>(compat::peak_memory_bytes(job_.device)));
    add_result("wall_seconds", seconds_since(start_));
    outcome_.accuracy_marks = loop_.marks;
    if (!points_.empty()) observer_.on_metrics(points_);
    return std::move(outcome_);
  }

 private:
  // Forward, loss and backward of one micro-batch (its loss divided by grad_accum), and the
  // training curve's sums, on the device.
  void learn_from(const Batch& batch) {
    auto logits = forward_logits(model_, batch.tokens, batch.lengths, job_.device, precision_);
    auto loss = at::cross_entropy_loss(logits, batch.labels);
    scaler_.scale(tc_.grad_accum > 1 ? loss / static_cast<double>(tc_.grad_accum) : loss).backward();
    loop_.loss_sum.add_(loss.detach());
    loop_.correct.add_(logits.detach().argmax(1).eq(batch.labels).sum());
  }

  // The batch into the tensors a captured graph reads (made from the first batch).
  void into_static_batch(const Batch& batch) {
    if (!static_batch_.tokens.defined()) {
      static_batch_ = {batch.tokens.clone(), batch.lengths.clone(), batch.labels.clone()};
      return;
    }
    static_batch_.tokens.copy_(batch.tokens, /*non_blocking=*/true);
    static_batch_.lengths.copy_(batch.lengths, /*non_blocking=*/true);
    static_batch_.labels.copy_(batch.labels, /*non_blocking=*/true);
  }

  void add_point(const char* split, const char* name, double value, double wall) {
    points_.push_back({loop_.steps_done, split, name, value, wall});
  }
  void add_result(const char* name, double value) { outcome_.results.push_back({name, value}); }
  void deliver_points(double wall) {
    observer_.on_metrics(points_);
    points_.clear();
    delivered_at_ = wall;
  }

  // The first validation at or past each accuracy mark keeps its weights; a mark reached before
  // the resume checkpoint this run continues from was kept then (loop_.marks).
  void save_accuracy_marks(double val_acc, double wall) {
    if (job_.checkpoint_path.empty()) return;
    for (const double mark : accuracy_marks(tc_.accuracy_checkpoints)) {
      if (val_acc + 1e-12 < mark || reached(mark)) continue;
      const std::string path = accuracy_checkpoint_path(job_.checkpoint_path, mark);
      loop_.marks.push_back({mark, loop_.steps_done, path, save_checkpoint(model_, path)});
      add_point("val", "accuracy_mark", mark, wall);
    }
  }
  bool reached(double mark) const {
    for (const AccuracyMark& m : loop_.marks)
      if (m.mark == mark) return true;
    return false;
  }

  // A resumed run keeps the marks its predecessor reached under its own file names: each file read
  // back against the checksum it was written with (a damaged one is a ResumeCheckpointError: the
  // job starts afresh) and written again beside this run's best file.
  void take_over_accuracy_marks() {
    if (loop_.marks.empty() || job_.checkpoint_path.empty()) return;
    const auto current = snapshot(model_);
    for (AccuracyMark& m : loop_.marks) {
      const std::string path = accuracy_checkpoint_path(job_.checkpoint_path, m.mark);
      if (m.path == path) continue;
      torch::serialize::InputArchive archive;
      try {
        checkpoint_file::read(m.path, m.checksum, job_.device, archive);
      } catch (const std::exception& e) {
        throw ResumeCheckpointError(std::string("accuracy mark checkpoint ") + e.what());
      }
      model_->load(archive);
      m.path = path;
      m.checksum = save_checkpoint(model_, path);
    }
    restore(model_, current);
  }

  // The weights the last step left, once every step has run (not after a stop, a divergence or a
  // failure): the best file itself when the last validation kept them, else a file of their own.
  void keep_last() {
    if (outcome_.status != TrainStatus::done || loop_.steps_done != tc_.steps || job_.checkpoint_path.empty()) return;
    if (loop_.best_step == loop_.steps_done && !outcome_.checkpoint_checksum.empty()) {
      outcome_.last_checkpoint = job_.checkpoint_path;
      outcome_.last_checksum = outcome_.checkpoint_checksum;
      return;
    }
    outcome_.last_checkpoint = last_checkpoint_path(job_.checkpoint_path);
    outcome_.last_checksum = save_checkpoint(model_, outcome_.last_checkpoint);
  }

  // The weights tested at the end (in memory, and in the best file).
  void keep_best(double val_acc) {
    loop_.best_val = val_acc;
    loop_.best_step = loop_.steps_done;
    loop_.best_state = snapshot(model_);
    if (!job_.checkpoint_path.empty()) outcome_.checkpoint_checksum = save_checkpoint(model_, job_.checkpoint_path);
  }

  void test_with_best_weights() {
    restore(model_, loop_.best_state);
    draws_.before_evaluation();
    const auto test = evaluate(model_, data_.test, tc_.batch_size, job_.device, 0, tc_.test_drop_last, precision_, job_.stop);
    const double tested_at = seconds_since(start_);
    std::optional<VarianceMetrics> variance;
    if (tc_.variance_passes > 1 && draws_.any()) {
      const auto passes_start = Clock::now();
      variance = measure_variance(model_, tc_.variance_split == EvalSplit::val ? data_.val : data_.test, tc_.batch_size,
                                  job_.device, tc_.variance_passes, draws_, [&](std::int64_t done) {
                                    observer_.on_variance_pass(done, tc_.variance_passes, seconds_since(passes_start));
                                  }, precision_, job_.stop);
    }
    // only now, all or nothing: a stop above leaves no test point for the next attempt to repeat
    add_result("test_acc", test.acc);
    add_result("test_loss", test.loss);
    points_.push_back({loop_.best_step, "test", "acc", test.acc, tested_at});
    points_.push_back({loop_.best_step, "test", "loss", test.loss, tested_at});
    if (!variance) return;
    const VarianceMetrics& m = *variance;
    add_result("variance_passes", static_cast<double>(m.passes));
    add_result("rsd", m.rsd);
    add_result("pi", m.pi);
    add_result("va", m.va);
    add_result("agv", m.agv);
    add_result("mean_pass_acc", m.mean_acc);
  }

  const TrainJob& job_;
  const TrainConfig& tc_;
  const TrainSplits& data_;
  TrainObserver& observer_;
  Clock::time_point start_;  // set in the constructor: after the instability pre-pass, as peak memory
  const resume::JobKey job_key_;
  const Precision precision_;
  const std::optional<double> instability_ratio_;
  EncoderClassifier model_;
  AttentionDraws draws_;
  FusedAdamW optimizer_;
  BatchIterator train_batches_;
  std::optional<BatchIterator> val_stream_;  // the validation batches under eval_draw = "stream"
  LossScaler scaler_;
  StepRunner runner_;
  const resume::Parts parts_;
  resume::LoopState loop_;  // everything the loop carries between steps, as a resume checkpoint holds it
  RunOutcome outcome_;
  std::vector<MetricPoint> points_;  // curve points not yet delivered
  double delivered_at_ = 0;          // wall seconds of the last delivery of points to the observer
  double lr_ = 0;                    // of the last step
  Batch batch_;
  Batch static_batch_;  // what a captured step reads (StepRunner::graphed())
};

}  // namespace

RunOutcome train_and_evaluate(const TrainJob& job, const TrainSplits& data, TrainObserver& observer) {
  std::optional<TrainLoop> built;
  try {
    built.emplace(job, data, observer);
  } catch (const StopRequested&) {  // in the instability pre-pass: nothing trained, nothing to resume
    RunOutcome outcome;
    outcome.status = TrainStatus::interrupted;
    outcome.error = "stopped before the first step (instability pre-pass)";
    return outcome;
  }
  TrainLoop& run = *built;
  try {
    run.begin();
    bool going = true;
    if (run.validation_pending()) {  // first the validation a stop interrupted
      run.validate();
      going = run.checkpoint_or_stop();
    }
    while (going && run.steps_left()) {
      run.step();
      if (run.log_due() && !run.log()) break;    // diverged
      if (run.validation_due()) run.validate();  // a stop inside leaves it pending
      going = run.checkpoint_or_stop();          // false: stopped
    }
  } catch (const CheckpointWriteError&) {
    throw;  // the disk's fault, not the method's: the caller decides
  } catch (const std::exception& e) {
    run.failed(e);
  }
  return run.finish();
}

}  // namespace attnlab
