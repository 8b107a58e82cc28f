#include "child_process.hpp"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace attnlab {
namespace {

volatile std::sig_atomic_t g_child = 0;
volatile std::sig_atomic_t g_stop_signal = 0;

void forward_signal(int sig) {
  g_stop_signal = sig;
  if (g_child > 0) kill(g_child, sig);
}

}  // namespace

std::string ChildExit::describe() const {
  return signalled ? "killed by signal " + std::to_string(code) + " (" + strsignal(code) + ")"
                   : "exited with status " + std::to_string(code);
}

int stop_signal() { return g_stop_signal; }

ChildExit run_child(const std::vector<std::string>& argv_strings, const std::string& what) {
  static const bool installed = [] {
    std::signal(SIGINT, forward_signal);
    std::signal(SIGTERM, forward_signal);
    return true;
  }();
  (void)installed;
  std::vector<char*> argv;
  for (const auto& a : argv_strings) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (int err = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ))
    throw std::runtime_error("cannot start the " + what + " " + argv_strings[0] + ": " + std::strerror(err));
  g_child = pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  }
  g_child = 0;
  if (WIFSIGNALED(status)) return {true, WTERMSIG(status)};
  return {false, WEXITSTATUS(status)};
}

}  // namespace attnlab
