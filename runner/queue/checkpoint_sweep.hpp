#pragma once
// Checkpoint files nothing can use any more. A queue's checkpoint folder (<db>.ckpt/) holds, per
// run R of job J, `run-R.pt` (best-validation weights), `run-R.pt.accNN` (the weights at accuracy
// mark NN/100), `run-R.pt.last` (the weights of its last step) and `job-J.run-R.step-S.resume.pt` (the resume checkpoints R wrote; the one the
// database adopted last is where the next attempt resumes), plus `.partial.PID` files of writes a
// kill cut short. What can still be used:
//   - the best checkpoint, the marks' files and the last weights of a run that ended done,
//     diverged or oom (variance, approx, gradients, inspect, export and resumed studies read them);
//   - the job's resume point (ResultsReader::resume_point), and the marks' files of the run that
//     wrote it (a resumed run takes them over), while the job has not ended done, diverged or
//     oom: a queued, failed, blocked or cancelled job may run again and resume;
//   - anything of a job that is running, or of a run this database does not know (yet).
// Everything else is removed: the files of failed, lost and interrupted attempts once a later
// attempt superseded them, checkpoints an attempt wrote but never got adopted (it lost its lease
// first), and partial writes. A checkpoint set aside as damaged (`.damaged`) is left alone.
#include <cstdint>
#include <optional>
#include <string>

#include "attnlab/store.hpp"

namespace attnlab {

struct CheckpointSweep {
  std::int64_t removed = 0;      // files removed (or, in a dry run, that would be)
  std::uintmax_t bytes = 0;      // their size
  std::int64_t kept = 0;         // checkpoint files still of use
  std::int64_t unknown = 0;      // files naming a run this database does not have: left alone
};

// Sweeps `dir` (a missing folder sweeps nothing), for every job or only for `job_id`.
CheckpointSweep sweep_checkpoints(store::ResultsReader& db, const std::string& dir,
                                  std::optional<std::int64_t> job_id = std::nullopt, bool dry_run = false);

// "<db>.ckpt": where job processes write (job_exec.cpp).
std::string checkpoint_dir_of(const std::string& db_path);

}  // namespace attnlab
