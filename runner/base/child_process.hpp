#pragma once
// Child processes of this same binary (job processes, device workers, bench measurements): a crash
// ends that child only, and on the CPU its peak memory is its own. Every child dies with the
// process that started it (PR_SET_PDEATHSIG), so a killed parent leaves no orphan writing.
//
// Stop requests: SIGINT and SIGTERM are caught, counted and forwarded to the child named with
// forward_stops_to, so a caller can finish what it is doing and stop after it.
#include <sys/types.h>

#include <atomic>
#include <optional>
#include <string>
#include <vector>

namespace attnlab {

struct ChildExit {
  bool signalled = false;
  int code = 0;  // exit status, or the signal that ended it
  bool ok() const { return !signalled && code == 0; }
  bool stopped_by_request() const;  // ended by SIGINT or SIGTERM
  // Ended by a signal its own code raised (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS,
  // SIGTRAP): the program crashed. Any other signal (SIGKILL, SIGTERM, SIGHUP, SIGPIPE, ...) came
  // from outside: a person, its parent's death, the system.
  bool crashed_itself() const;
  std::string describe() const;  // "killed by signal 9 (Killed)" / "exited with status 3"
};

// Starts argv[0] with argv (fork + exec), inheriting stdout/stderr. The child gets
// `death_signal` when this process dies. `what` names the child in errors ("job process").
pid_t start_child(const std::vector<std::string>& argv, const std::string& what, int death_signal);
// The child's exit if it has ended (and reaps it), without waiting.
std::optional<ChildExit> poll_child(pid_t pid);
// Waits for the child to end (signals do not cut the wait short).
ChildExit wait_child(pid_t pid);

// Installs the stop handlers (once), starts the child, forwards stop requests to it while it runs,
// and returns its exit.
ChildExit run_child(const std::vector<std::string>& argv, const std::string& what);

// Installs the SIGINT/SIGTERM handlers (once; idempotent). They do not restart interrupted calls,
// so a sleep ends early when a stop is requested.
void install_stop_handlers();
// The first signal (SIGINT, SIGTERM) that asked this process to stop, or 0.
int stop_signal();
// How many stop requests arrived so far.
int stop_requests();
// Set by the handlers: for code that polls (the trainer's stop flag).
const std::atomic<bool>& stop_flag();
// Sets stop_flag() from inside the program (a job whose lease is gone stops like a signalled one).
void request_stop();
// The child that receives every stop request from now on (0: none). Set it before the child can
// matter; a request that came earlier is the caller's to pass on.
void forward_stops_to(pid_t child);

// Sleeps `seconds`, or less if a signal arrives.
void sleep_seconds(double seconds);

// This machine's name (gethostname), as the queue records who claimed a job and where it ran.
std::string host_name();

}  // namespace attnlab
