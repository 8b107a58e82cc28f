#pragma once
// One training run: seeded model and data order, AdamW with warm-up and decay, periodic
// validation with the best checkpoint kept, test accuracy at that checkpoint, and the run's
// measurements. Divergence and out-of-memory end the run with what was measured up to then.
// A run can be stopped, and resumed from its resume checkpoint with the same numbers as if it had
// never stopped (train/README.md, "Resume checkpoints").
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <torch/optim/adamw.h>

#include "attnlab/attention.hpp"
#include "attnlab/precision.hpp"
#include "attnlab/train/config.hpp"
#include "attnlab/train/loss_scaler.hpp"
#include "attnlab/train/measurements.hpp"
#include "attnlab/dataset.hpp"
#include "attnlab/train/model.hpp"
#include "attnlab/train/optimizer.hpp"
#include "attnlab/train/attention_draws.hpp"
#include "attnlab/train/job.hpp"
#include "attnlab/train/schedule.hpp"
#include "attnlab/train/variance.hpp"

namespace attnlab {

// Receives measurements as the run goes: curve points in batches (at each validation and at the
// end), progress at each logging step. Called on the training thread, outside the timed step.
class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_metrics(const std::vector<MetricPoint>& points) = 0;
  virtual void on_progress(const Progress& progress) = 0;
  // After a resume checkpoint holding the first `steps_done` steps was written to `path`, a file
  // of its own, with `checksum`. Every curve point up to and including that step was delivered
  // to on_metrics before it. Returns whether it was adopted as the run's resume point (the
  // runner records it; false once the attempt lost its lease): an adopted one replaces the run's
  // previous one, which is removed; one not adopted is removed at once.
  virtual bool on_checkpoint(std::int64_t /*steps_done*/, const std::string& /*path*/, const std::string& /*checksum*/) {
    return true;
  }
  // After the resume checkpoint TrainJob::resume_from, holding `steps_done` steps, was read,
  // before anything else is delivered: this attempt's curve continues the one that wrote it
  // after that step.
  virtual void on_resumed(std::int64_t /*steps_done*/, const std::string& /*path*/) {}
  // After each of the variance passes that follow a stochastic run's test evaluation
  // ([train] variance_passes; they can take as long as training): `done` of `passes`, and the
  // seconds since the passes began.
  virtual void on_variance_pass(std::int64_t /*done*/, std::int64_t /*passes*/, double /*elapsed_seconds*/) {}
  // How the training steps run (StepRunner::mode()): once before the first, and again if that
  // changes (a CUDA graph whose capture failed under cuda_graphs = "auto").
  virtual void on_step_mode(const std::string& /*mode*/) {}
};

// The seed fixes weights, data order, dropout and any randomness of the attention method.
// Throws ResumeCheckpointError for a resume checkpoint that cannot be resumed from and
// CheckpointWriteError for a checkpoint that cannot be written; everything else that goes wrong
// while training ends up in the outcome.
RunOutcome train_and_evaluate(const TrainJob& job, const TrainSplits& data, TrainObserver& observer);

// The model a run starts from, on the job's device: the seed's weights, with [model] init_from's
// file (weights.hpp) loaded over them when it names one; the global generator then stands where a
// run from the seed's weights would have it. WeightsFileError when the file does not fit the model.
EncoderClassifier initial_model(const TrainJob& job);

// Where a run whose best checkpoint is `checkpoint_path` keeps its weights from the validation
// at which accuracy first reached `mark` ([train] accuracy_checkpoints): "<path>.acc40" for 0.4.
// The trainer also stores the curve point (step, "val", "accuracy_mark", mark) then.
std::string accuracy_checkpoint_path(const std::string& checkpoint_path, double mark);
// Where such a run keeps the weights its last training step left: "<path>.last" (written once
// every step has run, before the test evaluation, unless the last validation kept them as the best;
// RunOutcome::last_checkpoint names the file; `attnlab export --weights last`).
std::string last_checkpoint_path(const std::string& checkpoint_path);
// The marks of `every` (0.2: 0.2, 0.4, ..., 1.0), computed as k·every, k = 1, 2, ...
std::vector<double> accuracy_marks(double every);

// [train] precision, tf32 and deterministic put in force for a run on `device` (the last two are
// process-wide switches, set every time); the precision, or std::runtime_error in one line when this
// LibTorch cannot autocast that device to it.
Precision apply_precision_settings(const TrainConfig& train, const c10::Device& device);
// The model's logits in fp32, its forward pass autocast at `precision` (AutocastScope).
at::Tensor forward_logits(EncoderClassifier& model, const at::Tensor& tokens, const at::Tensor& lengths,
                          const c10::Device& device, Precision precision);
// After the backward pass: fp16's gradients unscaled, clipped element-wise to [train] clip_value
// then in norm to clip_norm (each where not 0; on the device, FusedAdamW's clips), the optimiser's
// step, the loss scale updated. A step whose gradients hold an inf or NaN is skipped (returns
// false); without loss scaling every step is taken.
bool apply_gradients(FusedAdamW& optimizer, const TrainConfig& train, LossScaler& scaler);

// Share of the most frequent label: the accuracy of always guessing the majority class.
double majority_rate(const at::Tensor& labels, std::int64_t num_classes);

// The KL-Transformer's variance metrics of the model as it is (eval mode): `passes` passes over
// `split`, each after a fresh draw of every stochastic attention method; `after_pass(done)`, if
// given, after each pass (progress); the forward passes autocast at `precision` (the run's).
VarianceMetrics measure_variance(EncoderClassifier& model, const SplitData& split, std::int64_t batch_size,
                                 c10::Device device, std::int64_t passes, AttentionDraws& draws,
                                 const std::function<void(std::int64_t done)>& after_pass = {},
                                 Precision precision = Precision::fp32, const std::atomic<bool>* stop = nullptr);

}  // namespace attnlab
