#pragma once
// The resume checkpoint of a training run (private to the trainer; format in train/README.md,
// "Resume checkpoints"): one LibTorch archive with everything the training loop needs to go on
// from the end of a step exactly as if it had never stopped.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include "attnlab/train/data_loader.hpp"
#include "attnlab/train/loss_scaler.hpp"
#include "attnlab/train/optimizer.hpp"
#include "attnlab/train/attention_draws.hpp"
#include "attnlab/train/job.hpp"

namespace attnlab::resume {

// What the training loop carries from one step to the next, besides the model, the optimiser
// and the generators.
struct LoopState {
  std::int64_t steps_done = 0;
  // training-curve accumulators since the last log step (on the device)
  at::Tensor loss_sum, correct;
  std::int64_t seen = 0, micro_batches = 0;
  double best_val = -1;                    // of the kept weights
  std::int64_t best_step = -1;
  double best_seen = -1;                   // the best validation so far, kept or not ([train] keep_best_after)
  std::vector<at::Tensor> best_state;  // the best-validation weights, parameters then buffers
  double last_val = std::numeric_limits<double>::quiet_NaN();
  double last_train_loss = std::numeric_limits<double>::quiet_NaN();
  double last_train_acc = std::numeric_limits<double>::quiet_NaN();
  double eval_seconds = 0;
  double elapsed_seconds = 0;              // wall time of the run so far, as of the checkpoint
  std::optional<double> instability_ratio;  // measured once, before the first step
  std::vector<AccuracyMark> marks;           // the accuracy marks reached, with their files
  // A stop came during this step's validation: the checkpoint holds the step's state as the
  // validation began (its draw made), and the next attempt validates before it steps on.
  bool validation_pending = false;
};

// What a checkpoint must match to be resumed from: written into it, compared when read.
struct JobKey {
  std::string identity;  // TrainJob::identity
  std::uint64_t seed = 0;
  std::string config;    // "section.key=value" lines: model, train (but checkpoint_every), task, data size
};
JobKey job_key(const TrainJob& job, std::int64_t train_examples);

// The objects whose state the checkpoint also holds, built for the job as a fresh run builds them.
struct Parts {
  torch::nn::Module& model;
  FusedAdamW& optimizer;
  AttentionDraws& draws;
  BatchIterator& batches;
  BatchIterator* val_stream;  // [train] eval_draw = "stream": where validation stands; else nullptr
  c10::Device device;
  LossScaler& scaler;  // fp16's loss scale; written always, read when present (older files: fp32 runs)
};

// What a validation pass consumes, taken as it begins: the validation stream's position and the
// default generators. A validation stopped halfway is rewound to it, so that the checkpoint then
// written resumes into the same validation.
struct ValidationStart {
  std::optional<BatchIteratorState> val_stream;
  at::Tensor rng_cpu, rng_device;
};
ValidationStart validation_start(const Parts& parts);
void rewind(const ValidationStart& start, const Parts& parts);

// Writes the checkpoint to `path` whole or not at all (checkpoint_file::write) and returns its
// checksum; CheckpointWriteError when it cannot.
std::string save(const std::string& path, const JobKey& key, const LoopState& loop, const Parts& parts);

// What a checkpoint to resume from was recorded as when it was written.
struct Expected {
  std::int64_t steps_done = -1;  // -1: not checked
  std::string checksum;          // "": not checked
};

// Restores `parts` (model, optimiser, every generator, the data position) and returns the loop
// state. A file that cannot be read, is damaged (its checksum), is not a resume checkpoint,
// belongs to another job or holds another step is a ResumeCheckpointError naming the file and
// what does not match; nothing is half-restored into a run that then goes on.
LoopState load(const std::string& path, const Expected& expected, const JobKey& key, const Parts& parts);

}  // namespace attnlab::resume
