// The supervisor's decisions (`attnlab worker`, `attnlab run`): what follows when one of its device
// workers ends, apart from the processes themselves (worker.cpp starts, signals and polls them), so
// that every rule is tested without a fork (tests/queue_test.cpp, Supervisor.*).
#pragma once

#include <string>

#include "base/child_process.hpp"

namespace attnlab {

inline constexpr double kRestartBackoffMax = 30.0;  // seconds, the longest wait before a restart
inline constexpr int kQuickDeathsBeforeGivingUp = 10;
inline constexpr double kHealthySeconds = 60.0;  // a device worker that ran this long starts its back-off afresh

// What became of a device slot whose worker process ended.
struct SlotDecision {
  bool finished = false;         // it is not started again
  int status = 0;                // its part of the supervisor's exit status (kDeviceWorker*), when finished
  double restart_in = 0;         // seconds before it is started again, when not finished
  bool jobs_not_done = false;    // it ended normally, with a job it ran not done
  bool stop_every_slot = false;  // the database cannot be used: every other slot stops too
  int quick_deaths = 0;          // ends in a row before kHealthySeconds of running, this one counted
  std::string say;               // a line for the log ("" for none)
};

// `exit`: how the worker on `device` ended, after `seconds_running`, with `quick_deaths` short runs
// before it; `stopping`: the supervisor was asked to stop, or the database is known unusable.
SlotDecision after_exit(const ChildExit& exit, const std::string& device, int quick_deaths, double seconds_running,
                        bool stopping);

// How a device worker ended, in words: its exit, or the stop signal it was sent (it exits with
// 128 + the signal after releasing its job).
std::string device_worker_end(const ChildExit& exit);

}  // namespace attnlab
