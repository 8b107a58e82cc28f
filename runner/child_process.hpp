#pragma once
// Running a job or a measurement in a child process of its own (this same binary): a crash ends
// that child only, and on the CPU its peak memory is its own. SIGINT and SIGTERM received while a
// child runs are forwarded to it and remembered, so the caller can stop after it.
#include <string>
#include <vector>

namespace attnlab {

struct ChildExit {
  bool signalled = false;
  int code = 0;  // exit status, or the signal that ended it
  bool ok() const { return !signalled && code == 0; }
  std::string describe() const;  // "killed by signal 9 (Killed)" / "exited with status 3"
};

// Installs the forwarding handlers (once) and runs argv[0] with argv, inheriting stdout/stderr.
// `what` names the child in errors ("job process", "bench process").
ChildExit run_child(const std::vector<std::string>& argv, const std::string& what);

// The signal (SIGINT, SIGTERM) that asked this process to stop, or 0.
int stop_signal();

}  // namespace attnlab
