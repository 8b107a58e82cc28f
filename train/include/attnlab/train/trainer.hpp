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
#include "attnlab/train/variance.hpp"

namespace attnlab {

// Streams derived from a run's seed (seed ^ stream), so that data order and attention randomness
// are independent of each other and of the weights, yet all fixed by the one seed.
inline constexpr std::uint64_t kDataStream = 0x9E3779B97F4A7C15ULL;
inline constexpr std::uint64_t kAttentionStream = 0xD1B54A32D192ED03ULL;
inline constexpr std::uint64_t kValidationStream = 0x94D049BB133111EBULL;  // [train] eval_draw = "stream"

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

struct TrainSplits {
  SplitData train, val, test;
};

struct TrainJob {
  ModelConfig model;
  TrainConfig train;
  TaskInfo task;
  std::uint64_t seed = 0;
  c10::Device device = c10::Device(c10::kCPU);
  AttentionMaker make_attention;
  AttentionMaker reference_attention;  // softmax: the reference of the instability score
  std::string checkpoint_path;  // best-validation weights are saved here (and accuracy checkpoints beside it)

  // Resume checkpoints: every train.checkpoint_every steps and when `stop` is seen, one is
  // written to resume_file(resume_stem, step), a name of its own, and offered to
  // TrainObserver::on_checkpoint. Empty: none at all.
  std::string resume_stem;
  // The resume checkpoint to continue from (empty: a fresh run), with the step and checksum
  // recorded when it was written (-1 and "": not checked). One that cannot be resumed from
  // (unreadable, damaged, another job's, another step) makes train_and_evaluate throw
  // ResumeCheckpointError naming the file, before anything is delivered to the observer.
  std::string resume_from;
  std::int64_t resume_step = -1;
  std::string resume_checksum;
  std::string identity;  // what names the job beyond its model and train config (e.g. its config hash)
  // Checked once per step (relaxed load): when set, the run checkpoints at the end of that step
  // and returns status `interrupted` with what it measured so far. The long phases outside the
  // steps check it once per batch: the instability pre-pass (the run ends before its first step),
  // the test evaluation and the variance passes (the run ends with the resume checkpoint of its
  // last step, from which the next attempt evaluates again). May be null.
  const std::atomic<bool>* stop = nullptr;
  // The step as a CUDA graph replays it (each batch copied into static inputs first) even where it
  // runs eagerly: the tests hold that path to the plain one on the CPU.
  bool static_inputs = false;
};

// How a training run ended. The runner stores it as the run's status (store::RunStatus, same
// names); train/ does not know the store.
enum class TrainStatus { done, diverged, oom, failed, interrupted };

inline const char* to_string(TrainStatus status) {
  switch (status) {
    case TrainStatus::done: return "done";
    case TrainStatus::diverged: return "diverged";
    case TrainStatus::oom: return "oom";
    case TrainStatus::failed: return "failed";
    case TrainStatus::interrupted: return "interrupted";
  }
  return "?";
}
inline std::ostream& operator<<(std::ostream& out, TrainStatus status) { return out << to_string(status); }

// The weights a run kept at an accuracy mark ([train] accuracy_checkpoints): the first validation at
// or past `mark`, at `step`, in `path`, whose bytes have `checksum`.
struct AccuracyMark {
  double mark = 0;
  std::int64_t step = 0;
  std::string path;
  std::string checksum;
};

struct RunOutcome {
  TrainStatus status = TrainStatus::done;
  std::string error;
  std::vector<std::pair<std::string, double>> results;  // test_acc, best_val_acc, ... (store/README.md)
  std::string resume_checkpoint;    // the last resume checkpoint adopted ("" if none)
  std::string step_mode;            // how the steps ran (StepRunner::mode()), as it was at the end
  std::string checkpoint_checksum;  // of the best-validation weights file as last written ("" if none)
  std::vector<AccuracyMark> accuracy_marks;  // the marks reached, with their files (a resumed run's included)
};

// The file of the resume checkpoint at `steps_done` of a run whose stem is `stem`.
std::string resume_file(const std::string& stem, std::int64_t steps_done);

// A resume checkpoint that cannot be resumed from (unreadable, damaged, not a checkpoint, another
// job's or another step's); the message is one line naming the file.
struct ResumeCheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A checkpoint file that could not be written: `error_number` is the errno (ENOSPC: the disk is
// full). The disk's fault, not the method's; the partial file was removed.
struct CheckpointWriteError : std::runtime_error {
  CheckpointWriteError(const std::string& file, int error)
      : std::runtime_error("cannot write checkpoint " + file + ": " + std::strerror(error)), path(file), error_number(error) {}
  std::string path;
  int error_number;
};

// Thrown from inside a long phase (the instability pre-pass, an evaluation, the variance passes)
// when TrainJob::stop is set: train_and_evaluate ends the run `interrupted`.
struct StopRequested : std::runtime_error {
  StopRequested() : std::runtime_error("stopped") {}
};
inline void stop_if_requested(const std::atomic<bool>* stop) {
  if (stop && stop->load(std::memory_order_relaxed)) throw StopRequested();
}

// The seed fixes weights, data order, dropout and any randomness of the attention method.
// Throws ResumeCheckpointError for a resume checkpoint that cannot be resumed from and
// CheckpointWriteError for a checkpoint that cannot be written; everything else that goes wrong
// while training ends up in the outcome.
RunOutcome train_and_evaluate(const TrainJob& job, const TrainSplits& data, TrainObserver& observer);

// Where a run whose best checkpoint is `checkpoint_path` keeps its weights from the validation
// at which accuracy first reached `mark` ([train] accuracy_checkpoints): "<path>.acc40" for 0.4.
// The trainer also stores the curve point (step, "val", "accuracy_mark", mark) then.
std::string accuracy_checkpoint_path(const std::string& checkpoint_path, double mark);
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

// Share of the most frequent label: the accuracy of always guessing the majority class.
double majority_rate(const at::Tensor& labels, std::int64_t num_classes);

class AttentionDraws;
// The KL-Transformer's variance metrics of the model as it is (eval mode): `passes` passes over
// `split`, each after a fresh draw of every stochastic attention method; `after_pass(done)`, if
// given, after each pass (progress); the forward passes autocast at `precision` (the run's).
VarianceMetrics measure_variance(EncoderClassifier& model, const SplitData& split, std::int64_t batch_size,
                                 c10::Device device, std::int64_t passes, AttentionDraws& draws,
                                 const std::function<void(std::int64_t done)>& after_pass = {},
                                 Precision precision = Precision::fp32, const std::atomic<bool>* stop = nullptr);

// The draws of the model's stochastic attention methods, from one generator seeded by the run:
// once at construction, after every method->redraw_every() training steps, and before each
// evaluation pass for methods whose fresh_draw_at_eval() is true.
class AttentionDraws {
 public:
  AttentionDraws(std::vector<std::shared_ptr<AttentionMethod>> methods, std::uint64_t seed);
  void after_step(std::int64_t steps_done);
  void before_evaluation();
  void fresh_draw();                        // every stochastic method, now
  bool any() const { return !methods_.empty(); }
  // The generator's state, for resume checkpoints (the draws themselves live in the methods).
  at::Tensor generator_state() const;
  void set_generator_state(const at::Tensor& state);

 private:
  at::Generator generator_;
  std::vector<std::shared_ptr<AttentionMethod>> methods_;
};

}  // namespace attnlab
