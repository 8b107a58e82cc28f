#pragma once
// A planned job (experiment.hpp) as the trainer runs it: written once for the queue's job
// process, `attnlab instability` and whatever else trains or rebuilds a job's model.
#include <string>

#include <c10/core/Device.h>

#include "attnlab/train/trainer.hpp"
#include "experiment/experiment.hpp"
#include "plugin_host/attention_maker.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {

// The job's model, training settings, task, seed, device and attention method. Checkpoints, the
// resume point, the stop flag and the instability score's reference are the caller's to add.
// Throws ConfigError when the method's plugin is not in `registry`.
TrainJob make_train_job(const JobPlan& plan, const PluginRegistry& registry, const TaskInfo& task, c10::Device device);

// The task the job's dataset plugin describes (vocabulary, classes, length, inputs), its data here
// or not: nothing is loaded or generated. Throws ConfigError when the plugin is not in `registry`.
TaskInfo job_task(const JobPlan& plan, const PluginRegistry& registry, const std::string& cache_dir);

}  // namespace attnlab
