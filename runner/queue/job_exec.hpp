#pragma once
// One attempt of one stored job, in the process that calls it (`attnlab exec-job`, started by a
// device worker for each job it claims: a crash fails that attempt only, and the CPU peak-memory
// figure, the process's peak resident set, belongs to that job alone).
//
// The attempt is the run a claim created; it writes only while that run holds the job's lease.
// If an earlier attempt left a resume checkpoint, this one continues from it.
#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/variables_map.hpp>

#include "attnlab/store.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {

// exec-job's exit status when the run lost its lease (expired and taken, or the job cancelled):
// the attempt is no longer ours and wrote nothing more.
inline constexpr int kExitLeaseLost = 4;
// exec-job's exit status when a checkpoint could not be written because the disk is full
// (ENOSPC, EDQUOT): the attempt ended `lost` (the infrastructure's), and its device worker
// claims nothing more. Any other end exits 0.
inline constexpr int kExitDiskFull = 5;
// exec-job's exit status when the database refused a write for the machine's reasons (locked past
// the busy timeout, its disk full, read-only, damaged): the attempt ended `lost` if it could still
// say so; its device worker says so otherwise, or the lease's end does.
inline constexpr int kExitDatabaseFault = 6;

// The job process's command line (`attnlab exec-job`): the device worker writes it (to_args), the
// job process reads it (options, from), one type at both ends.
struct JobExecOptions {
  std::string db_path;
  std::int64_t job_id = 0;
  std::int64_t run_id = 0;  // the run of this attempt; it must hold the job's lease
  std::string device = "cpu";
  int threads = 0;  // 0: ATTNLAB_THREADS or every core
  std::string cache_dir;
  std::string checkpoint_dir;  // "" = <db>.ckpt
  std::vector<std::string> plugin_dirs;  // searched after the job's own folders (jobs.plugin_dirs)

  static boost::program_options::options_description options();
  static JobExecOptions from(const boost::program_options::variables_map& vm);
  std::vector<std::string> to_args() const;  // the words after "exec-job" that from() reads back
};

// Returns exec-job's exit status: 0 when the attempt ended and was recorded (done, failed,
// diverged, oom, interrupted, rejected, or lost when a checkpoint could not be written),
// kExitLeaseLost when the lease was lost (nothing more was written), kExitDiskFull. Plugins are
// searched in the job's own folders (jobs.plugin_dirs) first, then options.plugin_dirs and the
// usual search path. A ConfigError, ParamError or DataError (plugin not found, configuration or
// data refused) ends the attempt 'rejected' and blocks the job: trying again cannot help. Errors
// before the run could be recorded (an unreadable database) throw.
int execute_job(const JobExecOptions& options);

// The stem of a run's resume checkpoints (TrainJob::resume_stem): one file per attempt and step,
// "<dir>/job-J.run-R.step-S.resume.pt", so no attempt ever overwrites a file another one reads.
std::string resume_checkpoint_stem(const std::string& checkpoint_dir, std::int64_t job_id, std::int64_t run_id);

}  // namespace attnlab
