#include "base/child_process.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <stdexcept>

namespace attnlab {
namespace {

// Touched by the signal handlers: lock-free atomics only.
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free);
std::atomic<int> g_first_stop_signal{0};
std::atomic<int> g_stop_requests{0};
std::atomic<bool> g_stop_flag{false};
std::atomic<pid_t> g_forward_to{0};

void on_stop_signal(int sig) {
  int none = 0;
  g_first_stop_signal.compare_exchange_strong(none, sig);
  g_stop_requests.fetch_add(1);
  g_stop_flag.store(true);
  const pid_t child = g_forward_to.load();
  if (child > 0) kill(child, sig);
}

ChildExit exit_of(int status) {
  if (WIFSIGNALED(status)) return {true, WTERMSIG(status)};
  return {false, WEXITSTATUS(status)};
}

}  // namespace

bool ChildExit::stopped_by_request() const { return signalled && (code == SIGINT || code == SIGTERM); }

bool ChildExit::crashed_itself() const {
  if (!signalled) return false;
  for (const int own : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP})
    if (code == own) return true;
  return false;
}

std::string ChildExit::describe() const {
  return signalled ? "killed by signal " + std::to_string(code) + " (" + strsignal(code) + ")"
                   : "exited with status " + std::to_string(code);
}

void install_stop_handlers() {
  static const bool installed = [] {
    struct sigaction action = {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: a sleeping loop wakes up and looks at the request
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    return true;
  }();
  (void)installed;
}

int stop_signal() { return g_first_stop_signal.load(); }
int stop_requests() { return g_stop_requests.load(); }
const std::atomic<bool>& stop_flag() { return g_stop_flag; }
void request_stop() { g_stop_flag.store(true); }
void forward_stops_to(pid_t child) { g_forward_to.store(child); }

void sleep_seconds(double seconds) {
  if (seconds <= 0) return;
  timespec t;
  t.tv_sec = static_cast<time_t>(seconds);
  t.tv_nsec = static_cast<long>((seconds - static_cast<double>(t.tv_sec)) * 1e9);
  nanosleep(&t, nullptr);  // EINTR: a signal came, the caller looks at it
}

pid_t start_child(const std::vector<std::string>& argv_strings, const std::string& what, int death_signal) {
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed (this process may have other threads).
  std::vector<char*> argv;
  for (const auto& a : argv_strings) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int exec_error[2];  // the child writes errno here if exec fails; closed by a successful exec
  if (pipe2(exec_error, O_CLOEXEC) != 0) throw std::runtime_error("cannot start the " + what + ": pipe: " + std::strerror(errno));

  // Stop signals stay blocked across fork so that the child never runs this process's handlers.
  sigset_t stops, previous;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stops, &previous);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    struct sigaction fallback = {};
    fallback.sa_handler = SIG_DFL;
    sigaction(SIGINT, &fallback, nullptr);
    sigaction(SIGTERM, &fallback, nullptr);
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    // Die with the parent; if it died before prctl took effect, we are already an orphan.
    if (prctl(PR_SET_PDEATHSIG, death_signal) != 0 || getppid() != parent) _exit(127);
    execv(argv[0], argv.data());
    const int error = errno;
    (void)!write(exec_error[1], &error, sizeof error);
    _exit(127);
  }
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  close(exec_error[1]);
  if (pid < 0) {
    close(exec_error[0]);
    throw std::runtime_error("cannot start the " + what + ": fork: " + std::strerror(fork_errno));
  }
  int error = 0;
  ssize_t got;
  while ((got = read(exec_error[0], &error, sizeof error)) < 0 && errno == EINTR) {
  }
  close(exec_error[0]);
  if (got == static_cast<ssize_t>(sizeof error)) {
    waitpid(pid, nullptr, 0);
    throw std::runtime_error("cannot start the " + what + " " + argv_strings[0] + ": " + std::strerror(error));
  }
  return pid;
}

std::optional<ChildExit> poll_child(pid_t pid) {
  int status = 0;
  pid_t got;
  while ((got = waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (got < 0) throw std::runtime_error("waitpid " + std::to_string(pid) + ": " + std::strerror(errno));
  if (got == 0) return std::nullopt;
  return exit_of(status);
}

ChildExit wait_child(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error("waitpid " + std::to_string(pid) + ": " + std::strerror(errno));
  return exit_of(status);
}

ChildExit run_child(const std::vector<std::string>& argv, const std::string& what) {
  install_stop_handlers();
  const pid_t pid = start_child(argv, what, SIGKILL);
  forward_stops_to(pid);
  const ChildExit exit = wait_child(pid);
  forward_stops_to(0);
  return exit;
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

}  // namespace attnlab
