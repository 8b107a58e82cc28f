#pragma once
// The jobs of an experiment, or of a queue, as attnlab estimate and --jobs-per-device auto read
// them: a job's length from its dataset's task, its forward-only batches from its splits' sizes,
// whether its method redraws for variance passes (LibTorch: the plugins are asked).
#include <cstdint>
#include <string>
#include <vector>

#include "attnlab/store/studies.hpp"
#include "experiment/experiment.hpp"
#include "studies/estimate.hpp"

namespace attnlab {

class PluginRegistry;

JobWork job_work(const JobPlan& plan, const PluginRegistry& registry, const std::string& cache_dir);

// --jobs-per-device auto: the fewest jobs_per_device_for gives over `devices` for these jobs (their
// peaks one at a time from `rows`, each device's memory, this machine's cores); `why` says what
// decided, or which figure is missing and the command that measures it.
std::int64_t auto_jobs_per_device(const std::vector<JobWork>& jobs, const std::vector<store::BenchResult>& rows,
                                  const std::vector<std::string>& devices, const std::string& bench_command,
                                  std::string* why);

// --jobs-per-device auto for the queue's jobs `ids` (every queued or running one when empty), from
// the bench figures in the same database; says on stderr what it chose and why.
std::int64_t auto_jobs_per_device_of_queue(store::ResultsReader& db, const std::vector<std::int64_t>& ids,
                                           const PluginRegistry& registry, const std::vector<std::string>& devices,
                                           const std::string& cache_dir);

}  // namespace attnlab
