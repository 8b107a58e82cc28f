// GET /api/queue: the queue now. Per state its count; each running job with its attempt's device,
// worker and heartbeat, its progress (the last logged training step of `train.steps`, then its
// variance passes) and an ETA at the rate they went; each job that ended badly (failed, diverged,
// out of memory, blocked) with its state and every attempt's error.
#include <cmath>

#include "attnlab/query.hpp"
#include "serve/params.hpp"

namespace attnlab::serve {
namespace {

using json = nlohmann::ordered_json;

json job_fields(const store::Job& job) {
  return {{"job", job.id}, {"method", job.method}, {"dataset", job.dataset}, {"seed", job.seed}};
}

// step, steps, phase and eta_seconds of a running attempt, null where unknown. In training the
// rate is that of the logged steps (the ETA leaves out the validations, the test and the variance
// passes to come); in the variance passes, that of the passes so far; between the last step and
// the first pass (the test evaluation), unknown.
void add_progress(store::ResultsReader& db, const store::Job& job, std::int64_t run_id, json& out) {
  out["step"] = nullptr;
  out["steps"] = nullptr;
  out["phase"] = nullptr;
  out["eta_seconds"] = nullptr;
  const auto steps = store::config_values(db, {job.id}, "train.steps");
  std::int64_t total = 0;
  if (steps.size() == 1) {
    total = std::stoll(steps.front());
    out["steps"] = total;
  }
  const auto loss = db.curve(run_id, "train", "loss");
  if (!loss.empty()) out["step"] = loss.back().step;
  if (const auto phase = db.run_phase(run_id)) {
    out["phase"] = {{"name", phase->phase}, {"done", phase->done}, {"total", phase->total}};
    if (phase->done > 0 && phase->seconds > 0)
      out["eta_seconds"] = double(std::max<std::int64_t>(phase->total - phase->done, 0)) * phase->seconds / double(phase->done);
    return;
  }
  if (loss.empty()) return;
  const auto& first = loss.front();
  const auto& last = loss.back();
  // before the second logged step, the rate since the run began (wall_seconds counts from 0)
  const double seconds = loss.size() > 1 ? last.wall_seconds - first.wall_seconds : last.wall_seconds;
  const double steps_done = loss.size() > 1 ? double(last.step - first.step) : double(last.step);
  if (total > 0 && last.step < total && seconds > 0 && steps_done > 0)
    out["eta_seconds"] = double(total - last.step) * seconds / steps_done;
}

}  // namespace

Reply queue_json(store::ResultsReader& db, const Params& params) {
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
    const std::vector<store::JobState> ended_badly = {store::JobState::failed, store::JobState::diverged,
                                                      store::JobState::oom, store::JobState::blocked};
    for (const auto& queued : db.list_jobs({ended_badly, {}, {}, {}})) {
      json entry = job_fields(queued.job);
      entry["state"] = store::to_string(queued.job.state);
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
