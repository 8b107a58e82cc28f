#pragma once
// A planned job (experiment.hpp) as the trainer runs it: written once for the queue's job
// process, `attnlab instability` and whatever else trains or rebuilds a job's model.
#include <c10/core/Device.h>

#include "attnlab/train/trainer.hpp"
#include "experiment/experiment.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {

// A plugin's factory with the parameters a job gives it, or a TorchScript method's file
// (scripted_method.hpp) loaded once per layer: what the model calls for each layer, and what every
// other maker of a method (the checks, the studies) calls, so that the two kinds never part.
AttentionMaker attention_maker(const LoadedPlugin& method, const ParamValues& params);

// The job's model, training settings, task, seed, device and attention method. Checkpoints, the
// resume point, the stop flag and the instability score's reference are the caller's to add.
// Throws ConfigError when the method's plugin is not in `registry`.
TrainJob make_train_job(const JobPlan& plan, const PluginRegistry& registry, const TaskInfo& task, c10::Device device);

}  // namespace attnlab
