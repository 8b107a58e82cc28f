#pragma once
// A finished run brought back from the database: its resolved job, its checkpoint, and the model
// as it was at the best validation step. For measurements taken after training (approx,
// variance).
#include <cstdint>
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "attnlab/dataset.hpp"
#include "attnlab/train/model.hpp"
#include "attnlab/store.hpp"
#include "experiment/experiment.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {

// The checkpoint file of a run: the stored path, or, for a relative path that is not found from
// here, the same file name in the default layout beside the database (<db>.ckpt/). Throws
// std::runtime_error naming the run when it has none or the file is missing.
std::string locate_checkpoint(store::ResultsReader& db, std::int64_t run_id);
// The weights file the run kept at accuracy mark `mark` (schema 13: as recorded, its checksum
// checked; a run stored before: beside its best file, unchecked). Throws std::runtime_error
// naming the run and the mark when the file is missing or damaged.
std::string locate_accuracy_mark(store::ResultsReader& db, std::int64_t run_id, double mark);

// The weights file the run's last training step left (schema 16), its checksum checked. Throws
// std::runtime_error naming the run when it kept none (it did not finish its steps) or the file is
// missing or damaged.
std::string locate_last_weights(store::ResultsReader& db, std::int64_t run_id);

// The run's job, parsed against the plugins loaded now. Throws std::runtime_error (no such run,
// or a config that no longer parses).
JobPlan stored_plan(const PluginRegistry& registry, store::ResultsReader& db, std::int64_t run_id);

// The model `plan` describes for `task`, with the weights of `checkpoint`, on `device`, in eval
// mode. The seed initialises whatever the checkpoint does not hold (nothing, for our models).
EncoderClassifier load_trained_model(const PluginRegistry& registry, const JobPlan& plan, const TaskInfo& task,
                                     const std::string& checkpoint, c10::Device device);

}  // namespace attnlab
