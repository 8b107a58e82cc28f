#include "experiment/train_job.hpp"

#include "attnlab/attention.hpp"
#include "experiment/cache_dir.hpp"

namespace attnlab {

TrainJob make_train_job(const JobPlan& plan, const PluginRegistry& registry, const TaskInfo& task, c10::Device device) {
  const auto* method = registry.find(PluginKind::attention, plan.method);
  if (!method) throw ConfigError("no attention plugin named '" + plan.method + "'");
  TrainJob job;
  job.model = model_config_from(plan.model);
  job.train = train_config_from(plan.train);
  job.task = task;
  job.seed = static_cast<std::uint64_t>(plan.seed);
  job.device = device;
  job.make_attention = attention_maker(*method, plan.method_params);
  return job;
}

TaskInfo job_task(const JobPlan& plan, const PluginRegistry& registry, const std::string& cache_dir) {
  const auto* dataset = registry.find(PluginKind::dataset, plan.dataset);
  if (!dataset) throw ConfigError("no dataset plugin named '" + plan.dataset + "'");
  return dataset->make_dataset({dataset_cache_dir(cache_dir), /*describe_only=*/true}, plan.dataset_params)->info();
}

}  // namespace attnlab
