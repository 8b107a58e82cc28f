// GET /api/queue: the queue now. Per state its count; each running job with its attempt's device,
// worker and heartbeat, its progress (the last logged training step of `train.steps`) and an ETA
// at the rate its logged steps went; each failed job with every attempt's error.
#include <cmath>

#include "attnlab/query.hpp"
#include "serve/params.hpp"

namespace attnlab::serve {
namespace {

using json = nlohmann::ordered_json;

json job_fields(const store::Job& job) {
  return {{"job", job.id}, {"method", job.method}, {"dataset", job.dataset}, {"seed", job.seed}};
}

// step, steps and eta_seconds of a running attempt, null where unknown (no step logged yet; a
// configuration without train.steps). The rate is that of the logged steps, so the ETA leaves out
// the validations and the test still to come.
void add_progress(store::Database& db, const store::Job& job, std::int64_t run_id, json& out) {
  out["step"] = nullptr;
  out["steps"] = nullptr;
  out["eta_seconds"] = nullptr;
  const auto steps = store::config_values(db, {job.id}, "train.steps");
  std::int64_t total = 0;
  if (steps.size() == 1) {
    total = std::stoll(steps.front());
    out["steps"] = total;
  }
  const auto loss = db.curve(run_id, "train", "loss");
  if (loss.empty()) return;
  const auto& first = loss.front();
  const auto& last = loss.back();
  out["step"] = last.step;
  // before the second logged step, the rate since the run began (wall_seconds counts from 0)
  const double seconds = loss.size() > 1 ? last.wall_seconds - first.wall_seconds : last.wall_seconds;
  const double steps_done = loss.size() > 1 ? double(last.step - first.step) : double(last.step);
  if (total > 0 && seconds > 0 && steps_done > 0)
    out["eta_seconds"] = std::max(0.0, double(total - last.step) * seconds / steps_done);
}

}  // namespace

Reply queue_json(store::Database& db, const Params& params) {
  return answer_with(db, params, {}, [&] {
    json counts = json::object();
    for (const auto& [state, count] : db.queue_counts()) counts[store::to_string(state)] = count;
    json running = json::array();
    for (const auto& queued : db.list_jobs({{store::JobState::running}, {}, {}, {}})) {
      const auto attempts = db.attempts_of_job(queued.job.id);
      if (attempts.empty()) continue;
      const auto& run = attempts.back();
      json entry = job_fields(queued.job);
      entry.update({{"run", run.run_id}, {"attempt", run.attempt}, {"device", run.device}, {"worker", run.worker},
                    {"host", run.host}, {"started_at", run.started_at}, {"heartbeat_at", run.heartbeat_at}});
      add_progress(db, queued.job, run.run_id, entry);
      running.push_back(std::move(entry));
    }
    json failed = json::array();
    for (const auto& queued : db.list_jobs({{store::JobState::failed}, {}, {}, {}})) {
      json entry = job_fields(queued.job);
      entry["attempts"] = json::array();
      for (const auto& run : db.attempts_of_job(queued.job.id))
        entry["attempts"].push_back({{"run", run.run_id}, {"attempt", run.attempt},
                                     {"status", store::to_string(run.status)}, {"device", run.device},
                                     {"error", run.error}});
      failed.push_back(std::move(entry));
    }
    return dump({{"counts", counts}, {"running", running}, {"failed", failed}});
  });
}

}  // namespace attnlab::serve
