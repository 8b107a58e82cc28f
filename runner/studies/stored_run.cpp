#include "studies/stored_run.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <torch/serialize.h>
#include <torch/utils.h>

#include "attnlab/checksum.hpp"
#include "attnlab/train/config.hpp"
#include "attnlab/train/trainer.hpp"
#include "experiment/train_job.hpp"

namespace attnlab {

namespace {

std::string mark_text(double mark) {
  std::ostringstream text;
  text << mark;
  return text.str();
}

// A file a run stored by path: as stored, or, for a relative path not found from here, the same
// file name in the default layout beside the database (<db>.ckpt/); its bytes checked against the
// checksum recorded when it was written (none recorded: not checked). `what` names it in errors.
std::string verified_file(const store::ResultsReader& db, std::string file, const std::string& recorded, const std::string& what) {
  namespace fs = std::filesystem;
  // stored as the run saw it: a relative path is relative to where `attnlab run` ran
  if (!fs::exists(file) && fs::path(file).is_relative()) {
    const auto db_path = fs::path(db.path());
    const auto candidate = db_path.parent_path() / (db_path.filename().string() + ".ckpt") / fs::path(file).filename();
    if (fs::exists(candidate)) file = candidate.string();
  }
  if (!fs::exists(file)) throw std::runtime_error(what + " " + file + " is missing");
  // a file whose bytes changed since it was written is not the run's weights
  if (!recorded.empty()) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Checksum sum;
    sum.add(bytes.data(), bytes.size());
    if (const std::string actual = checksum_text(sum.value()); actual != recorded)
      throw std::runtime_error(what + " " + file + " is damaged (checksum " + actual + ", recorded " + recorded + ")");
  }
  return file;
}

}  // namespace

std::string locate_checkpoint(store::ResultsReader& db, std::int64_t run_id) {
  const std::string where = "run " + std::to_string(run_id);
  const std::string checkpoint = db.checkpoint_of_run(run_id);
  if (checkpoint.empty()) throw std::runtime_error(where + " has no checkpoint (it never reached a validation)");
  return verified_file(db, checkpoint, db.checkpoint_checksum(run_id), where + ": checkpoint");
}

std::string locate_accuracy_mark(store::ResultsReader& db, std::int64_t run_id, double mark) {
  const std::string where = "run " + std::to_string(run_id);
  for (const store::AccuracyMarkFile& kept : db.accuracy_marks(run_id))
    if (kept.mark == mark) return verified_file(db, kept.path, kept.checksum, where + ": accuracy mark " + mark_text(mark));
  // a run stored before schema 13 recorded no files: its best file's name and the mark's, unchecked
  return verified_file(db, accuracy_checkpoint_path(locate_checkpoint(db, run_id), mark), "",
                       where + ": accuracy mark " + mark_text(mark));
}

std::string locate_last_weights(store::ResultsReader& db, std::int64_t run_id) {
  const std::string where = "run " + std::to_string(run_id);
  const store::WeightsFile last = db.last_weights_of_run(run_id);
  if (last.path.empty())
    throw std::runtime_error(where + " kept no last weights (it did not finish its steps, or ran before attnlab kept them)");
  return verified_file(db, last.path, last.checksum, where + ": last weights");
}

JobPlan stored_plan(const PluginRegistry& registry, store::ResultsReader& db, std::int64_t run_id) {
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
