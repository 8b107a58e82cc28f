// Job states and run statuses: their stored names (store.hpp, "Job states and run statuses").
#include <ostream>

#include "attnlab/store.hpp"

namespace attnlab::store {

const char* to_string(JobState state) {
  switch (state) {
    case JobState::queued: return "queued";
    case JobState::running: return "running";
    case JobState::done: return "done";
    case JobState::failed: return "failed";
    case JobState::diverged: return "diverged";
    case JobState::oom: return "oom";
    case JobState::blocked: return "blocked";
    case JobState::cancelled: return "cancelled";
    case JobState::submitted: return "submitted";
  }
  return "?";  // not a JobState (a cast from a bad integer)
}

const char* to_string(RunStatus status) {
  switch (status) {
    case RunStatus::running: return "running";
    case RunStatus::done: return "done";
    case RunStatus::failed: return "failed";
    case RunStatus::diverged: return "diverged";
    case RunStatus::oom: return "oom";
    case RunStatus::interrupted: return "interrupted";
    case RunStatus::lost: return "lost";
    case RunStatus::rejected: return "rejected";
  }
  return "?";
}

namespace {

template <typename Enum, std::size_t N>
Enum parse(const std::string& name, const Enum (&values)[N], const char* what) {
  std::string all;
  for (const Enum value : values) {
    if (name == to_string(value)) return value;
    all += (all.empty() ? "" : ", ") + std::string(to_string(value));
  }
  throw StoreError(std::string("unknown ") + what + " '" + name + "' (one of " + all + ")");
}

}  // namespace

JobState parse_job_state(const std::string& name) { return parse(name, kJobStates, "job state"); }
RunStatus parse_run_status(const std::string& name) { return parse(name, kRunStatuses, "run status"); }

std::ostream& operator<<(std::ostream& out, JobState state) { return out << to_string(state); }
std::ostream& operator<<(std::ostream& out, RunStatus status) { return out << to_string(status); }

}  // namespace attnlab::store
