#pragma once
// Running one stored job, in the process that calls it. `attnlab run` starts a fresh process per
// job (attnlab exec-job), so a crash fails that job only and the CPU peak-memory figure (the
// process's peak resident set) belongs to that job alone.
#include <cstdint>
#include <string>

#include "plugin_host.hpp"

namespace attnlab {

struct JobExecOptions {
  std::string db_path;
  std::int64_t job_id = 0;
  std::string device = "cpu";
  int threads = 0;  // 0: ATTNLAB_THREADS or every core
  std::string cache_dir;
  std::string checkpoint_dir;  // "" = <db>.ckpt
};

// Returns the run's status (done, failed, diverged, oom). Errors before the run could be
// recorded (unknown job, unreadable database) throw.
std::string execute_job(const JobExecOptions& options, const PluginRegistry& registry);

std::string default_cache_dir();

}  // namespace attnlab
