#include "experiment/cache_dir.hpp"
#include "queue/job_exec.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "attnlab/precision.hpp"
#include "attnlab/train/config.hpp"
#include "attnlab/store.hpp"
#include "attnlab/store/run_writer.hpp"
#include "attnlab/torch_compat.hpp"
#include "attnlab/train/trainer.hpp"
#include "attnlab/train/weights.hpp"
#include "build_info.hpp"
#include "base/child_process.hpp"
#include "cli/provenance.hpp"
#include "experiment/experiment.hpp"
#include "experiment/train_job.hpp"
#include "plugin_host/hashing.hpp"
#include "plugin_host/scripted_method.hpp"
#include "queue/progress.hpp"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

constexpr double kPhaseWriteSeconds = 5.0;

// Writes the attempt's curve points and resume checkpoints to the database and shows progress.
// A write refused because the lease is gone asks the trainer to stop at the end of the step and
// writes nothing more: the attempt is no longer ours.
class StoreObserver : public TrainObserver {
 public:
  StoreObserver(store::RunWriter& run, std::string label) : run_(run), printer_(std::move(label)) {}

  void on_metrics(const std::vector<MetricPoint>& points) override {
    std::vector<store::CurvePoint> rows;
    rows.reserve(points.size());
    for (const auto& p : points) rows.push_back({p.step, p.split, p.name, p.value, p.wall_seconds});
    write([&] { run_.append_curve(rows); });
  }
  void on_progress(const Progress& progress) override { printer_.update(progress); }
  // The passes go to the database too (the queue's ETA counts them): after the first, and then at
  // most every kPhaseWriteSeconds.
  void on_variance_pass(std::int64_t done, std::int64_t passes, double seconds) override {
    printer_.variance_pass(done, passes, seconds);
    if (done > 1 && seconds - phase_written_at_ < kPhaseWriteSeconds) return;
    phase_written_at_ = seconds;
    write([&] { run_.set_phase({"variance passes", done, passes, seconds}); });
  }
  void on_resumed(std::int64_t steps_done, const std::string& /*path*/) override {
    std::cout << printer_.label() << " resumes run " << resumes_run_ << " from step " << steps_done << std::endl;
  }
  void on_step_mode(const std::string& mode) override {
    std::cout << printer_.label() << " steps: " << mode << std::endl;
    write([&] { run_.set_step_mode(mode); });
  }
  bool on_checkpoint(std::int64_t steps_done, const std::string& path, const std::string& checksum) override {
    if (!write([&] { run_.set_resume_checkpoint(path, steps_done, checksum); })) return false;
    // the predecessor's checkpoint is no longer the job's resume point: ours is
    if (!superseded_.empty() && superseded_ != path) {
      std::error_code ignored;
      fs::remove(superseded_, ignored);
      superseded_.clear();
    }
    return true;
  }

  // The resume checkpoint this attempt starts from (run `run`'s), removed once this attempt has one
  // of its own.
  void supersedes(const std::string& path, std::int64_t run = 0) {
    superseded_ = path;
    resumes_run_ = run;
  }
  const std::string& superseded() const { return superseded_; }
  bool lease_lost() const { return !lost_reason_.empty(); }
  const std::string& lost_reason() const { return lost_reason_; }
  void lost(const std::string& why) {
    if (lost_reason_.empty()) lost_reason_ = why;
    request_stop();
  }
  // A write the database refused for the machine's reasons (locked past the busy timeout, its
  // disk full, read-only, damaged): the attempt stops at the end of its step, the machine's failure.
  store::DatabaseFault database_fault() const { return fault_; }
  const std::string& fault_error() const { return fault_error_; }
  void faulted(store::DatabaseFault fault, const std::string& error) {
    if (fault_ == store::DatabaseFault::none) fault_ = fault, fault_error_ = error;
    request_stop();
  }
  ProgressPrinter& printer() { return printer_; }

 private:
  // Once a write was refused, nothing more is written: a resume checkpoint adopted after curve
  // points that never reached the database would leave a hole no later attempt fills.
  template <class Write>
  bool write(Write&& write_rows) {
    if (lease_lost() || fault_ != store::DatabaseFault::none) return false;
    try {
      write_rows();
      return true;
    } catch (const store::LeaseLost& e) {
      lost(e.what());
      return false;
    } catch (const store::StoreError& e) {
      const auto fault = store::database_fault(e);
      if (fault == store::DatabaseFault::none) throw;
      faulted(fault, e.what());
      return false;
    }
  }

  store::RunWriter& run_;
  ProgressPrinter printer_;
  std::string superseded_;
  std::int64_t resumes_run_ = 0;
  std::string lost_reason_;
  store::DatabaseFault fault_ = store::DatabaseFault::none;
  std::string fault_error_;
  double phase_written_at_ = 0;  // seconds into the variance passes of the last phase write
};

// The run's status for how its training ended (the same names).
store::RunStatus run_status(TrainStatus status) {
  switch (status) {
    case TrainStatus::done: return store::RunStatus::done;
    case TrainStatus::diverged: return store::RunStatus::diverged;
    case TrainStatus::oom: return store::RunStatus::oom;
    case TrainStatus::failed: return store::RunStatus::failed;
    case TrainStatus::interrupted: return store::RunStatus::interrupted;
  }
  return store::RunStatus::failed;
}

// The job cannot run as configured, here or anywhere, until someone changes something: its plugin
// is not found, its configuration or a parameter is refused, its data is missing or malformed.
// Trying again would fail the same way, so the attempt ends 'rejected' and the job waits
// 'blocked' for `attnlab queue retry`, instead of using up attempts meant for crashes.
bool is_deterministic_refusal(const std::exception& e) {
  return dynamic_cast<const ConfigError*>(&e) || dynamic_cast<const ParamError*>(&e) ||
         dynamic_cast<const DataError*>(&e) || dynamic_cast<const WeightsFileError*>(&e);
}

// The plugins the job was queued with come first: a worker started without the --plugins folder
// the job was queued with still finds them.
PluginRegistry job_registry(const std::vector<std::string>& job_dirs, const std::vector<std::string>& cli_dirs) {
  std::vector<std::string> folders = job_dirs;
  for (const auto& d : PluginRegistry::search_path(cli_dirs)) folders.push_back(d);
  PluginRegistry registry;
  registry.load_folders(folders);
  return registry;
}

// What the first step would refuse, found before it: a ConfigError blocks the job at once
// (trying again fails the same way) instead of using up its attempts.
void refuse_what_cannot_run(const TrainJob& job, std::int64_t train_examples) {
  if (job.train.batch_size > train_examples)
    throw ConfigError("[train] batch_size = " + std::to_string(job.train.batch_size) + " is more than the " +
                      std::to_string(train_examples) + " training examples");
  if (std::string why; !autocast_supported(job.device, parse_precision(job.train.precision), &why))
    throw ConfigError("[train] precision = \"" + job.train.precision + "\": " + why);
  // the weights file the job was queued with, byte for byte (a changed file is another job)
  if (const std::string& file = job.model.init_from; !file.empty()) {
    const std::string now = sha256_of_file(file);
    if (now.empty()) throw ConfigError("[model] init_from " + file + " is gone or unreadable");
    if (now != job.model.init_from_sha256)
      throw ConfigError("[model] init_from " + file + " changed since the job was queued (sha256 " +
                        job.model.init_from_sha256.substr(0, 16) + ", now " + now.substr(0, 16) + ")");
  }
}

// Why the attempt cannot continue from `point` ("" if it can): the file is gone, or a plugin
// file differs from the one that trained the steps it holds (a resume never mixes two builds).
std::string why_not_resume(store::ResultsReader& db, const store::ResumePoint& point,
                           const std::vector<store::PluginFile>& plugins_now) {
  if (!fs::exists(point.path)) return "its resume checkpoint " + point.path + " is gone";
  for (const auto& before : db.run_plugins(point.run_id))
    for (const auto& now : plugins_now)
      if (now.kind == before.kind && now.name == before.name && now.sha256 != before.sha256)
        return "its " + now.kind + " plugin '" + now.name + "' changed since (sha256 " + before.sha256.substr(0, 16) +
               ", now " + now.sha256.substr(0, 16) + " at " + now.path + ")";
  return "";
}

// A resume checkpoint that cannot be used is moved aside (kept for a look, never read again)
// as PATH.damaged; returns the new name, or "" if it could not be moved.
std::string set_aside(const std::string& path) {
  std::error_code error;
  const std::string aside = path + ".damaged";
  fs::rename(path, aside, error);
  return error ? "" : aside;
}

// What runs the attempt: host, device, versions, this process, the plugin files and their hashes,
// and what a scripted method's file is worth a warning for (kept with the run).
store::RunEnvironment environment_of(const c10::Device& device, const std::vector<const LoadedPlugin*>& plugins) {
  store::RunEnvironment env;
  stamp_provenance(env, device);
  env.host = host_name();
  env.attnlab_version = build_info::kVersion;
  env.pid = getpid();
  for (const auto* p : plugins) {
    env.plugins.push_back({to_string(p->kind()), p->name(), p->info->version, p->path, p->sha256});
    if (p->scripted()) env.warnings = scripted_warnings(p->path);
  }
  return env;
}

// A script's own exception (its forward or redraw raised) comes back on the same input: the
// second attempt in a row that ends with it ends the job (store::RunWriter::finish).
bool script_raised(const std::vector<store::PluginFile>& plugins, const std::string& error) {
  for (const auto& p : plugins)
    if (p.version == "torchscript")
      for (const char* what : {": forward raised ", ": redraw raised "})
        if (error.rfind(p.path + what, 0) == 0) return true;
  return false;
}

// One attempt at a job, read top to bottom by execute_job: prepare (the job as this attempt trains
// it, its data loaded, the run's environment recorded), continue from the job's resume point
// where it can, train, record the end. It reads the database, and writes only as its run.
class Attempt {
 public:
  Attempt(store::ResultsReader& db, store::RunWriter& run, const store::Job& stored, std::string label, StoreObserver& observer)
      : db_(db), run_(run), stored_(stored), label_(std::move(label)), observer_(observer) {}

  void prepare(const JobExecOptions& options, const PluginRegistry& registry, const std::string& checkpoint_dir) {
    const JobPlan plan = parse_job_config(stored_.config_toml, "job " + std::to_string(stored_.id) + " config", registry);
    const auto* method = registry.find(PluginKind::attention, plan.method);
    const auto* dataset_plugin = registry.find(PluginKind::dataset, plan.dataset);
    compat::configure_threads(options.threads);
    const c10::Device device = compat::parse_device(options.device);

    const store::RunEnvironment env = environment_of(device, {method, dataset_plugin});
    run_.set_environment(env);
    plugins_ = env.plugins;
    fs::create_directories(checkpoint_dir);

    DatasetContext context{dataset_cache_dir(options.cache_dir)};
    auto dataset = dataset_plugin->make_dataset(context, plan.dataset_params);
    splits_ = {load_checked(plan.dataset, *dataset, Split::train), load_checked(plan.dataset, *dataset, Split::val),
               load_checked(plan.dataset, *dataset, Split::test)};
    job_ = make_train_job(plan, registry, dataset->info(), device);
    job_.checkpoint_path = checkpoint_dir + "/run-" + std::to_string(run_.run_id()) + ".pt";
    job_.resume_stem = resume_checkpoint_stem(checkpoint_dir, stored_.id, run_.run_id());
    job_.identity = stored_.config_hash;
    job_.stop = &stop_flag();
    refuse_what_cannot_run(job_, splits_.train.size());
    if (const auto* softmax = registry.find(PluginKind::attention, "softmax"))
      job_.reference_attention = attention_maker(*softmax, softmax->defaults());
  }

  // The job set to continue from its resume point when it can, with that run's curve up to its
  // step copied; otherwise why not is said (the file is gone, a plugin changed) and the point
  // discarded. Returns the run it continues (0: a fresh start).
  std::int64_t continue_from_resume_point() {
    const auto point = db_.resume_point(stored_.id);
    if (!point || point->run_id == run_.run_id()) return 0;
    if (const std::string why = why_not_resume(db_, *point, plugins_); !why.empty()) {
      std::cerr << "attnlab: " << label_ << " does not resume run " << point->run_id << ": " << why << "; starting afresh\n";
      run_.discard_resume_point(point->run_id);
      return 0;
    }
    job_.resume_from = point->path;
    job_.resume_step = point->step;
    job_.resume_checksum = point->checksum;
    observer_.supersedes(point->path, point->run_id);  // it says "resumes" once the checkpoint has loaded
    run_.copy_curve_from(point->run_id, point->step);
    return point->run_id;
  }

  // Trains the job. A resume checkpoint that cannot be resumed from (damaged, unreadable) is not
  // the method's fault, and no attempt will ever resume from it: it is set aside and this attempt
  // starts again from step 0, uncounted.
  RunOutcome train(std::int64_t previous_run) {
    try {
      return train_and_evaluate(job_, splits_, observer_);
    } catch (const ResumeCheckpointError& e) {
      const std::string aside = set_aside(job_.resume_from);
      std::cerr << "attnlab: " << label_ << " " << e.what() << "; "
                << (aside.empty() ? "no longer used" : "set aside as " + aside) << "; starting afresh from step 0\n";
      run_.discard_resume_point(previous_run);
      observer_.supersedes("");
      job_.resume_from.clear();
      job_.resume_step = -1;
      job_.resume_checksum.clear();
      return train_and_evaluate(job_, splits_, observer_);
    }
  }

  // The run's end in the database (a `lost` one only if nothing ended it first), with the
  // best-validation checkpoint a run that ended early may still have saved. A lease lost meanwhile
  // is the observer's to say.
  void record_end(store::RunStatus status, const RunOutcome& outcome) {
    try {
      const bool saved = !job_.checkpoint_path.empty() && fs::exists(job_.checkpoint_path);
      if (status == store::RunStatus::lost) {
        run_.fail_if_unfinished(status, outcome.error);
        return;
      }
      std::vector<store::AccuracyMarkFile> marks;
      for (const AccuracyMark& m : outcome.accuracy_marks) marks.push_back({m.mark, m.step, m.path, m.checksum});
      if (!marks.empty()) run_.record_accuracy_marks(marks);
      if (!outcome.last_checkpoint.empty()) run_.record_last_weights(outcome.last_checkpoint, outcome.last_checksum);
      run_.finish(status, outcome.results, outcome.error, saved ? job_.checkpoint_path : "",
                  saved ? outcome.checkpoint_checksum : "", script_raised(plugins_, outcome.error));
    } catch (const store::LeaseLost& e) {
      observer_.lost(e.what());
    } catch (const store::StoreError& e) {
      const auto fault = store::database_fault(e);
      if (fault == store::DatabaseFault::none) throw;
      observer_.faulted(fault, e.what());  // the run stays running; its worker, or its lease's end, ends it
    }
  }

 private:
  store::ResultsReader& db_;
  store::RunWriter& run_;
  const store::Job& stored_;
  const std::string label_;
  StoreObserver& observer_;
  TrainJob job_;
  TrainSplits splits_;
  std::vector<store::PluginFile> plugins_;  // the files that ran it, with their hashes
};

// The attempt's last line: its status, test accuracy, error, and for a rejected job how to retry it.
std::string end_summary(store::RunStatus status, const RunOutcome& outcome, std::int64_t job_id) {
  std::string summary = to_string(status);
  for (const auto& [name, value] : outcome.results)
    if (name == "test_acc") summary += "  test acc " + std::to_string(value).substr(0, 6);
  if (!outcome.error.empty()) summary += ": " + outcome.error;
  if (status == store::RunStatus::rejected)
    summary += " (not retried: job " + std::to_string(job_id) + " is blocked until `attnlab queue retry " +
               std::to_string(job_id) + "`)";
  return summary;
}

}  // namespace

std::string resume_checkpoint_stem(const std::string& checkpoint_dir, std::int64_t job_id, std::int64_t run_id) {
  return checkpoint_dir + "/job-" + std::to_string(job_id) + ".run-" + std::to_string(run_id);
}

int execute_job(const JobExecOptions& options) {
  store::Database db(options.db_path, store::Database::Open::supervised);
  store::JobFilter this_job;
  this_job.ids = {options.job_id};
  const auto found = db.list_jobs(this_job);
  if (found.empty()) throw std::runtime_error(options.db_path + ": no job with id " + std::to_string(options.job_id));
  const store::Job& stored = found.front().job;
  const std::int64_t run_id = options.run_id;
  const std::string label = "[" + stored.method + "/" + stored.dataset + " seed " + std::to_string(stored.seed) +
                            " run " + std::to_string(run_id) + "]";
  store::RunWriter run(db, run_id);
  StoreObserver observer(run, label);
  if (found.front().lease_run_id != run_id) {
    observer.lost("job " + std::to_string(stored.id) + " is not leased to run " + std::to_string(run_id));
    std::cerr << "attnlab: " << label << " " << observer.lost_reason() << "; nothing written\n";
    return kExitLeaseLost;
  }

  const PluginRegistry registry = job_registry(found.front().plugin_dirs, options.plugin_dirs);
  const std::string checkpoint_dir = options.checkpoint_dir.empty() ? options.db_path + ".ckpt" : options.checkpoint_dir;
  Attempt attempt(db, run, stored, label, observer);
  RunOutcome outcome;  // its status is the trainer's; `status` is what the run ends as
  int disk_error = 0;  // errno of a checkpoint write that failed
  store::RunStatus status = store::RunStatus::done;
  try {
    attempt.prepare(options, registry, checkpoint_dir);
    const std::int64_t previous_run = attempt.continue_from_resume_point();
    if (stop_flag().load()) {
      // stopped before the first step: nothing to checkpoint; the earlier attempt's file stays the resume point
      status = store::RunStatus::interrupted;
    } else {
      outcome = attempt.train(previous_run);
      status = run_status(outcome.status);
    }
  } catch (const store::LeaseLost& e) {
    observer.lost(e.what());
  } catch (const CheckpointWriteError& e) {
    // The disk's fault, not the method's: the attempt ends as the infrastructure's (`lost`),
    // and the exit status tells the device worker when the disk is full.
    disk_error = e.error_number;
    status = store::RunStatus::lost;
    outcome.error = e.what();
  } catch (const std::exception& e) {
    if (const auto fault = store::database_fault(e); fault != store::DatabaseFault::none) observer.faulted(fault, e.what());
    std::string what = e.what();
    status = compat::is_out_of_memory(e)  ? store::RunStatus::oom
             : is_deterministic_refusal(e) ? store::RunStatus::rejected
                                           : store::RunStatus::failed;
    outcome.error = what.substr(0, what.find('\n'));  // c10 errors append a backtrace
  }

  if (observer.database_fault() != store::DatabaseFault::none) {
    // The machine's failure, never the method's: `lost`, and the job backed off.
    status = store::RunStatus::lost;
    outcome.error = "the database could not be written: " + observer.fault_error();
  }
  if (!observer.lease_lost()) attempt.record_end(status, outcome);
  if (observer.lease_lost()) {
    observer.printer().finish("lost its lease (" + observer.lost_reason() + "); this attempt wrote nothing more");
    return kExitLeaseLost;
  }
  const bool recorded = observer.database_fault() == store::DatabaseFault::none;
  if (recorded && store::ends_its_job(status)) {  // nothing will resume this job again
    std::error_code ignored;
    if (!outcome.resume_checkpoint.empty()) fs::remove(outcome.resume_checkpoint, ignored);
    if (!observer.superseded().empty()) fs::remove(observer.superseded(), ignored);
  }

  observer.printer().finish(end_summary(status, outcome, stored.id));
  if (observer.database_fault() != store::DatabaseFault::none) return kExitDatabaseFault;
  return disk_error == ENOSPC || disk_error == EDQUOT ? kExitDiskFull : 0;
}

}  // namespace attnlab
