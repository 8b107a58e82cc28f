#include "queue/supervisor.hpp"

#include <signal.h>

#include <algorithm>
#include <cstring>

#include "queue/worker.hpp"

namespace attnlab {

std::string device_worker_end(const ChildExit& exit) {
  if (!exit.signalled && exit.code > 128 && exit.code < 128 + NSIG)
    return "was stopped by signal " + std::to_string(exit.code - 128) + " (" + strsignal(exit.code - 128) + ")";
  return exit.describe();
}

SlotDecision after_exit(const ChildExit& exit, const std::string& device, int quick_deaths, double seconds_running,
                        bool stopping) {
  SlotDecision d;
  d.finished = true;
  d.quick_deaths = quick_deaths;
  const int code = exit.signalled ? -1 : exit.code;
  // A device worker stopped by a signal while the supervisor is not stopping (someone sent it
  // SIGTERM) is restarted like one that died: its work is not done.
  if (stopping || exit.ok()) return d;
  if (code == kDeviceWorkerDiskFull) {
    d.status = kDeviceWorkerError;  // it said why; another one would fill the disk again
  } else if (code == kDeviceWorkerDatabaseUnusable) {
    // the database is every slot's: the others stop too (their jobs go back when they can)
    d.status = kDeviceWorkerCannotRun;
    d.stop_every_slot = true;
    d.say = "the database cannot be used (see above); every device worker stops";
  } else if (code == kDeviceWorkerJobsNotDone) {
    d.jobs_not_done = true;  // a normal end; the jobs' states are the answer
  } else if (code == kDeviceWorkerCannotRun) {
    d.status = kDeviceWorkerCannotRun;
    d.say = "the device worker on " + device + " cannot run (see above); not restarted";
  } else {
    d.quick_deaths = (seconds_running > kHealthySeconds ? 0 : quick_deaths) + 1;
    if (d.quick_deaths > kQuickDeathsBeforeGivingUp) {
      d.status = kDeviceWorkerError;
      d.say = "the device worker on " + device + " " + device_worker_end(exit) + " " + std::to_string(d.quick_deaths) +
              " times in a row; giving up on " + device;
    } else {
      d.finished = false;
      d.restart_in = std::min(kRestartBackoffMax, 0.5 * (1 << std::min(d.quick_deaths - 1, 10)));
      d.say = "the device worker on " + device + " " + device_worker_end(exit) + "; restarting it in " +
              std::to_string(d.restart_in).substr(0, 4) + " s";
    }
  }
  return d;
}

}  // namespace attnlab
