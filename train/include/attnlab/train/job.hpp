#pragma once
// A training run as the trainer takes it (TrainJob, its data) and what comes back (RunOutcome), with
// the errors a run's files raise and the stop it obeys: below the training loop (trainer.hpp), so
// that its parts (resume checkpoints, checkpoint files, the instability score) need not include it.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/Device.h>

#include "attnlab/attention.hpp"
#include "attnlab/dataset.hpp"
#include "attnlab/train/config.hpp"
#include "attnlab/train/model.hpp"  // AttentionMaker

namespace attnlab {

// Streams derived from a run's seed (seed ^ stream), so that data order and attention randomness
// are independent of each other and of the weights, yet all fixed by the one seed.
inline constexpr std::uint64_t kDataStream = 0x9E3779B97F4A7C15ULL;
inline constexpr std::uint64_t kAttentionStream = 0xD1B54A32D192ED03ULL;
inline constexpr std::uint64_t kValidationStream = 0x94D049BB133111EBULL;  // [train] eval_draw = "stream"

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
  std::string last_checkpoint, last_checksum;  // the weights its last step left, once every step ran ("" if not)
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

}  // namespace attnlab
