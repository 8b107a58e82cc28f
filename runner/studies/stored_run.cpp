#include "studies/stored_run.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>

#include <torch/serialize.h>
#include <torch/utils.h>

#include "attnlab/checksum.hpp"
#include "attnlab/train/config.hpp"
#include "experiment/train_job.hpp"

namespace attnlab {

std::string locate_checkpoint(store::Database& db, std::int64_t run_id) {
  namespace fs = std::filesystem;
  const std::string where = "run " + std::to_string(run_id);
  std::string checkpoint = db.checkpoint_of_run(run_id);
  if (checkpoint.empty()) throw std::runtime_error(where + " has no checkpoint (it never reached a validation)");
  // stored as the run saw it: a relative path is relative to where `attnlab run` ran
  if (!fs::exists(checkpoint) && fs::path(checkpoint).is_relative()) {
    const auto db_path = fs::path(db.path());
    const auto candidate = db_path.parent_path() / (db_path.filename().string() + ".ckpt") / fs::path(checkpoint).filename();
    if (fs::exists(candidate)) checkpoint = candidate.string();
  }
  if (!fs::exists(checkpoint)) throw std::runtime_error(where + ": checkpoint " + checkpoint + " is missing");
  // a file whose bytes changed since it was written is not the run's weights
  if (const std::string recorded = db.checkpoint_checksum(run_id); !recorded.empty()) {
    std::ifstream in(checkpoint, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Checksum sum;
    sum.add(bytes.data(), bytes.size());
    if (const std::string actual = checksum_text(sum.value()); actual != recorded)
      throw std::runtime_error(where + ": checkpoint " + checkpoint + " is damaged (checksum " + actual + ", recorded " +
                               recorded + ")");
  }
  return checkpoint;
}

JobPlan stored_plan(const PluginRegistry& registry, store::Database& db, std::int64_t run_id) {
  std::optional<store::RunSummary> run;
  for (auto& r : db.run_summaries(std::nullopt))
    if (r.run_id == run_id) run = r;
  if (!run) throw std::runtime_error(db.path() + ": no run with id " + std::to_string(run_id));
  const store::Job job = db.job(run->job_id);
  return parse_job_config(job.config_toml, "run " + std::to_string(run_id) + "'s job " + std::to_string(job.id) + " config",
                          registry);
}

EncoderClassifier load_trained_model(const PluginRegistry& registry, const JobPlan& plan, const TaskInfo& task,
                                     const std::string& checkpoint, c10::Device device) {
  torch::manual_seed(static_cast<std::uint64_t>(plan.seed));
  EncoderClassifier model(model_config_from(plan.model), task,
                          attention_maker(*registry.find(PluginKind::attention, plan.method), plan.method_params));
  try {
    torch::load(model, checkpoint, c10::Device(c10::kCPU));
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw std::runtime_error("cannot load checkpoint " + checkpoint + ": " + what.substr(0, what.find('\n')));
  }
  model->to(device);
  model->eval();
  return model;
}

}  // namespace attnlab
