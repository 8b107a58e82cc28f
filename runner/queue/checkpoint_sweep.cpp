#include "queue/checkpoint_sweep.hpp"

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <system_error>

namespace attnlab {
namespace fs = std::filesystem;
namespace {

// run-R.pt[.accNN|.last][.partial[.PID]] (the best weights, those kept at accuracy mark NN/100 and
// those of the last step),
// job-J.run-R[.step-S].resume.pt[.partial.PID] (without a step: older builds)
const std::regex kBestFile(R"(run-(\d+)\.pt(\.acc\d+|\.last)?(\.partial(\.\d+)?)?)");
const std::regex kResumeFile(R"(job-(\d+)\.run-(\d+)(\.step-\d+)?\.resume\.pt(\.partial\.\d+)?)");

bool ended_with_result(store::RunStatus status) {
  return status == store::RunStatus::done || status == store::RunStatus::diverged || status == store::RunStatus::oom;
}
bool ended_with_result(store::JobState state) {
  return state == store::JobState::done || state == store::JobState::diverged || state == store::JobState::oom;
}

struct JobFiles {
  store::JobState state = store::JobState::queued;
  std::set<std::string> keep;  // file names of use
  std::int64_t resume_run = 0;  // the run whose resume checkpoint is the job's resume point: its marks' files are read on resume
};

}  // namespace

std::string checkpoint_dir_of(const std::string& db_path) { return db_path + ".ckpt"; }

CheckpointSweep sweep_checkpoints(store::ResultsReader& db, const std::string& dir, std::optional<std::int64_t> job_id,
                                  bool dry_run) {
  CheckpointSweep sweep;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return sweep;

  // What the database says, read once per run and per job.
  std::map<std::int64_t, std::optional<std::pair<std::int64_t, store::RunAttempt>>> runs;  // run -> (job, attempt)
  std::map<std::int64_t, JobFiles> jobs;
  auto run_of = [&](std::int64_t run_id) -> const std::optional<std::pair<std::int64_t, store::RunAttempt>>& {
    auto it = runs.find(run_id);
    if (it != runs.end()) return it->second;
    std::optional<std::pair<std::int64_t, store::RunAttempt>> found;
    try {
      std::int64_t job = 0;
      store::RunAttempt attempt = db.run_attempt(run_id, &job);
      found.emplace(job, std::move(attempt));
    } catch (const store::StoreError&) {
      // no such run here
    }
    return runs.emplace(run_id, std::move(found)).first->second;
  };
  auto job_of = [&](std::int64_t id) -> const JobFiles& {
    auto it = jobs.find(id);
    if (it != jobs.end()) return it->second;
    JobFiles files;
    files.state = db.job(id).state;
    for (const auto& attempt : db.attempts_of_job(id))
      if (ended_with_result(attempt.status) && !attempt.checkpoint_path.empty())
        files.keep.insert(fs::path(attempt.checkpoint_path).filename().string());
    if (!ended_with_result(files.state)) {
      if (const auto resume = db.resume_point(id)) {
        files.keep.insert(fs::path(resume->path).filename().string());
        files.resume_run = resume->run_id;
      }
    }
    return jobs.emplace(id, std::move(files)).first->second;
  };

  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string name = entry.path().filename().string();
    std::smatch m;
    std::int64_t run_id = 0;
    bool mark = false;  // the weights of an accuracy mark: of use as long as its run's best file, or
                        // while its run wrote the job's resume point (a resumed run reads them)
    if (std::regex_match(name, m, kBestFile)) {
      run_id = std::stoll(m[1].str());
      mark = m[2].matched && !m[3].matched;
    } else if (std::regex_match(name, m, kResumeFile)) {
      run_id = std::stoll(m[2].str());
    } else {
      continue;  // not ours
    }
    const auto& run = run_of(run_id);
    if (!run) {
      ++sweep.unknown;
      continue;
    }
    const auto& [owner, attempt] = *run;
    if (job_id && owner != *job_id) continue;
    const JobFiles& files = job_of(owner);
    const bool of_use = files.keep.count(name) ||
                        (mark && (files.keep.count("run-" + std::to_string(run_id) + ".pt") || files.resume_run == run_id));
    if (files.state == store::JobState::running || attempt.status == store::RunStatus::running || of_use) {
      ++sweep.kept;
      continue;
    }
    const std::uintmax_t size = entry.file_size(ec);
    if (!dry_run && !fs::remove(entry.path(), ec)) continue;
    ++sweep.removed;
    sweep.bytes += ec ? 0 : size;
  }
  return sweep;
}

}  // namespace attnlab
