#include "studies/estimate_jobs.hpp"

#include <iostream>
#include <thread>

#include "attnlab/store.hpp"
#include "attnlab/torch_compat.hpp"
#include "experiment/train_job.hpp"
#include "plugin_host/plugin_host.hpp"
#include "results/bench_measured.hpp"
#include "attnlab/train/config.hpp"

namespace attnlab {
namespace {

std::int64_t batches(std::int64_t examples, std::int64_t batch) { return (examples + batch - 1) / batch; }

}  // namespace

JobWork job_work(const JobPlan& plan, const PluginRegistry& registry, const std::string& cache_dir) {
  const auto* method = registry.find(PluginKind::attention, plan.method);
  if (!method) throw std::invalid_argument("estimate: no attention method named '" + plan.method + "'");
  const TaskInfo task = job_task(plan, registry, cache_dir);
  const ModelConfig model = model_config_from(plan.model);
  const TrainConfig train = train_config_from(plan.train);

  JobWork w;
  w.label = plan.method + " x " + plan.dataset + ", seed " + std::to_string(plan.seed);
  w.method = plan.method;
  w.dataset = plan.dataset;
  w.precision = train.precision;
  w.model = results::config_table(plan.config_toml, "model");
  w.method_params = results::config_table(plan.config_toml, "methods." + plan.method);
  w.length = task.max_len;
  w.batch = train.batch_size;
  w.steps = train.steps * train.grad_accum;  // a bench step is one batch
  // Forward-only batches: each validation's (eval_batches, else the whole validation split) and
  // the test pass's, where the split sizes are parameters (val_size, test_size); a split read from
  // files has a size only its data knows, and its passes are then left out and said so.
  auto split_batches = [&](const std::string& key, const std::string& pass) -> std::int64_t {
    if (plan.dataset_params.has(key)) return batches(plan.dataset_params.integer(key), w.batch);
    w.uncounted.push_back(pass);
    return 0;
  };
  const std::int64_t validations = train.steps / train.eval_every + (train.steps % train.eval_every ? 1 : 0);
  w.forward_batches = validations * (train.eval_batches > 0 ? train.eval_batches : split_batches("val_size", "validation"));
  w.forward_batches += split_batches("test_size", "test");
  if (train.variance_passes > 1) {
    const auto attention = attention_maker(*method, plan.method_params)({model.heads, model.head_dim, task.max_len});
    if (attention->stochastic())
      w.forward_batches += train.variance_passes *
                           split_batches(train.variance_split == EvalSplit::val ? "val_size" : "test_size", "variance");
  }
  return w;
}

std::int64_t auto_jobs_per_device(const std::vector<JobWork>& jobs, const std::vector<store::BenchResult>& rows,
                                  const std::vector<std::string>& devices, const std::string& bench_command,
                                  std::string* why) {
  std::int64_t fewest = 0;
  for (const auto& device : devices) {
    std::vector<double> peaks;
    for (const auto& job : jobs) {
      const auto figure = step_figure(rows, job, device, 1);
      if (!figure.found) {
        if (why) *why = "no bench figure for " + figure.missing + ": " + bench_commands_for({job}, device, 1, bench_command)[0];
        return 1;
      }
      peaks.push_back(figure.peak_bytes);
    }
    std::string reason;
    const auto n = jobs_per_device_for(peaks, static_cast<double>(compat::device_memory_bytes(compat::parse_device(device))),
                                       static_cast<int>(std::thread::hardware_concurrency()), static_cast<int>(devices.size()),
                                       &reason);
    if (fewest == 0 || n < fewest) {
      fewest = n;
      if (why) *why = device + ": " + reason;
    }
  }
  return std::max<std::int64_t>(fewest, 1);
}

std::int64_t auto_jobs_per_device_of_queue(store::ResultsReader& db, const std::vector<std::int64_t>& ids,
                                           const PluginRegistry& registry, const std::vector<std::string>& devices,
                                           const std::string& cache_dir) {
  store::JobFilter filter;
  filter.ids = ids;
  filter.states = {store::JobState::queued, store::JobState::running};
  std::vector<JobWork> jobs;
  for (const auto& queued : db.list_jobs(filter))
    jobs.push_back(job_work(parse_job_config(queued.job.config_toml, "job " + std::to_string(queued.job.id), registry),
                            registry, cache_dir));
  std::string why;
  const auto n = jobs.empty() ? 1 : auto_jobs_per_device(jobs, store::bench_results(db), devices,
                                                          "attnlab bench --db " + db.path(), &why);
  std::cerr << "attnlab: --jobs-per-device auto: " << n << " (" << (jobs.empty() ? "no jobs to run" : why) << ")\n";
  return n;
}

}  // namespace attnlab
