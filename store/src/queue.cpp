// The job queue (schema v4): claims with leases, heartbeats, expiry, and the bookkeeping of
// attempts and failures. Semantics: store/README.md, "The queue".
#include <algorithm>
#include <utility>

#include "attempts.hpp"
#include "access.hpp"
#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "sqlite.hpp"

namespace attnlab::store {
namespace {

template <typename T>
void bind_list_or_null(sql::Statement& st, int index, const std::vector<T>& values) {
  if (values.empty())
    st.bind_null(index);
  else
    st.bind(index, sql::json_array(values));
}

// `sql` (one job, its id ?1) run for each of `ids` in one transaction: the ids it changed.
std::vector<std::int64_t> update_each(sqlite3* db, const std::string& path, const char* sql,
                                      const std::vector<std::int64_t>& ids) {
  sql::Transaction tx(db, path);
  std::vector<std::int64_t> changed;
  sql::Statement st(db, path, sql);
  for (const std::int64_t id : ids) {
    st.bind(1, id);
    st.run();
    if (sqlite3_changes(db) > 0) changed.push_back(id);
    st.reset();
  }
  tx.commit();
  return changed;
}

}  // namespace

namespace attempts {

namespace {

struct LeaseState {
  bool found = false;
  std::int64_t job_id = 0;
  RunStatus run_status = RunStatus::running;
  JobState job_state = JobState::queued;
  std::int64_t lease_run_id = 0;  // 0: none
};

LeaseState lease_state(sqlite3* db, const std::string& path, std::int64_t run_id) {
  sql::Statement st(db, path,
                    "SELECT r.job_id, r.status, j.state, coalesce(j.lease_run_id, 0) "
                    "FROM runs r JOIN jobs j ON j.id = r.job_id WHERE r.id = ?1");
  st.bind(1, run_id);
  LeaseState s;
  if (!st.step()) return s;
  s.found = true;
  s.job_id = st.column_int64(0);
  s.run_status = parse_run_status(st.column_text(1));
  s.job_state = parse_job_state(st.column_text(2));
  s.lease_run_id = st.column_int64(3);
  return s;
}

bool holds(const LeaseState& s, std::int64_t run_id) {
  return s.found && s.run_status == RunStatus::running && s.lease_run_id == run_id;
}

}  // namespace

std::int64_t require_lease(sqlite3* db, const std::string& path, std::int64_t run_id) {
  const LeaseState s = lease_state(db, path, run_id);
  if (!s.found) throw StoreError(path + ": no run with id " + std::to_string(run_id));
  if (holds(s, run_id)) return s.job_id;
  std::string why;
  if (s.run_status != RunStatus::running)
    why = std::string("the run is '") + to_string(s.run_status) + "'";
  else if (s.lease_run_id != 0)
    why = "run " + std::to_string(s.lease_run_id) + " holds it now";
  else
    why = std::string("the job is '") + to_string(s.job_state) + "'";
  throw LeaseLost(path + ": run " + std::to_string(run_id) + " no longer holds the lease of job " +
                  std::to_string(s.job_id) + " (" + why + "); nothing written");
}

std::int64_t job_if_holding_lease(sqlite3* db, const std::string& path, std::int64_t run_id) {
  const LeaseState s = lease_state(db, path, run_id);
  return holds(s, run_id) ? s.job_id : 0;
}

namespace {

// The job's state after its attempt ended `status`, unless that is counted (failed, lost: the
// counts decide) or the attempt never ended (running).
std::optional<JobState> state_after(RunStatus status) {
  switch (status) {
    case RunStatus::done: return JobState::done;
    case RunStatus::diverged: return JobState::diverged;
    case RunStatus::oom: return JobState::oom;
    case RunStatus::interrupted: return JobState::queued;
    case RunStatus::rejected: return JobState::blocked;
    case RunStatus::running:
    case RunStatus::failed:
    case RunStatus::lost: break;
  }
  return std::nullopt;
}

// Whether the job's attempt before `run_id` failed with `error` too.
bool failed_alike_before(sqlite3* db, const std::string& path, std::int64_t run_id, std::int64_t job_id,
                         const std::string& error) {
  sql::Statement st(db, path,
                    "SELECT status = 'failed' AND error IS ?1 FROM runs WHERE job_id = ?2 AND id <> ?3 "
                    "ORDER BY attempt DESC LIMIT 1");
  st.bind_text_or_null(1, error).bind(2, job_id).bind(3, run_id);
  return st.step() && st.column_int64(0) != 0;
}

// end_attempt, or with `cancelled` (status interrupted) cancel_attempt.
void end(sqlite3* db, const std::string& path, std::int64_t run_id, std::int64_t job_id, RunStatus status,
         const std::string& error, bool cancelled, double now, bool repeatable = false) {
  const bool own_failure = !cancelled && status == RunStatus::failed;  // the method's (or its process's) own crash
  const bool infra_failure = !cancelled && status == RunStatus::lost;   // ended from outside: expiry, a kill, a requeued task
  const std::optional<JobState> takes = cancelled ? JobState::cancelled : state_after(status);  // the job's new state
  if (status == RunStatus::running || (!own_failure && !infra_failure && !takes))
    throw StoreError(path + ": '" + to_string(status) + "' is not a way for an attempt to end");
  {
    sql::Statement st(db, path,
                      "UPDATE runs SET status = ?1, finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), error = ?2 "
                      "WHERE id = ?3");
    st.bind(1, to_string(status)).bind_text_or_null(2, error).bind(3, run_id);
    st.run();
  }
  {
    sql::Statement st(db, path, "DELETE FROM run_phases WHERE run_id = ?1");  // it is in none now
    st.bind(1, run_id);
    st.run();
  }
  // Each statement releases the lease in the same write that leaves 'running' (the table's CHECK
  // wants both together).
  if (own_failure) {
    const bool again = repeatable && failed_alike_before(db, path, run_id, job_id, error);  // read before the update
    sql::Statement st(db, path,
                      "UPDATE jobs SET failures = failures + 1, "
                      "state = CASE WHEN failures + 1 >= max_attempts OR ?3 THEN 'failed' ELSE 'queued' END, "
                      "error = CASE WHEN failures + 1 >= max_attempts OR ?3 "
                      "  THEN (failures + 1) || CASE WHEN failures = 0 THEN ' attempt' ELSE ' attempts' END || "
                      "       ' failed; last: ' || coalesce(?1, 'no error recorded') "
                      "  ELSE ?1 END, "
                      "lease_run_id = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE id = ?2");
    st.bind_text_or_null(1, error).bind(2, job_id).bind(3, static_cast<std::int64_t>(again));
    st.run();
  } else if (infra_failure) {
    // A job fails for its own faults, not for a hostile machine: an attempt ended from outside
    // puts it back in the queue after a back-off. Only attempts in a row that ended before a
    // checkpoint of their own (no progress at all) count towards failing it.
    bool progressed = false;
    {
      sql::Statement st(db, path, "SELECT resume_checkpoint IS NOT NULL FROM runs WHERE id = ?1");
      st.bind(1, run_id);
      progressed = st.step() && st.column_int64(0) != 0;
    }
    sql::Statement st(db, path,
                      "UPDATE jobs SET infra_failures = infra_failures + 1, "
                      "lost_in_a_row = CASE WHEN ?3 THEN 0 ELSE lost_in_a_row + 1 END, "
                      "state = CASE WHEN NOT ?3 AND lost_in_a_row + 1 >= max_infra_failures THEN 'failed' ELSE 'queued' END, "
                      "error = CASE WHEN NOT ?3 AND lost_in_a_row + 1 >= max_infra_failures "
                      "  THEN (lost_in_a_row + 1) || ' attempts in a row ended from outside (killed, lease expired) "
                      "before a checkpoint of their own; last: ' || coalesce(?1, 'no error recorded') "
                      "  ELSE ?1 END, "
                      "retry_after = CASE WHEN ?3 THEN NULL ELSE ?4 + min(?5, ?6 * (1 << min(lost_in_a_row, 20))) END, "
                      "lease_run_id = NULL, lease_owner = NULL, lease_expires_at = NULL WHERE id = ?2");
    st.bind_text_or_null(1, error).bind(2, job_id).bind(3, std::int64_t{progressed}).bind(4, now);
    st.bind(5, kLostBackoffMaxSeconds).bind(6, kLostBackoffSeconds);
    st.run();
  } else {
    const JobState state = *takes;
    sql::Statement st(db, path,
                      "UPDATE jobs SET state = ?1, error = ?2, lease_run_id = NULL, lease_owner = NULL, "
                      "lease_expires_at = NULL WHERE id = ?3");
    st.bind(1, to_string(state)).bind_text_or_null(2, error).bind(3, job_id);
    st.run();
  }
}

}  // namespace

void end_attempt(sqlite3* db, const std::string& path, std::int64_t run_id, std::int64_t job_id, RunStatus status,
                 const std::string& error, double now, bool repeatable) {
  end(db, path, run_id, job_id, status, error, false, now, repeatable);
}

void cancel_attempt(sqlite3* db, const std::string& path, std::int64_t run_id, std::int64_t job_id) {
  end(db, path, run_id, job_id, RunStatus::interrupted, "cancelled", true, 0);
}

std::int64_t end_leases(sqlite3* db, const std::string& path, double now, const std::string& why, bool every) {
  struct Held {
    std::int64_t job_id, run_id;
    std::string owner;
  };
  std::vector<Held> ending;
  {
    // The running jobs come from the (state, id) index; there are as many as busy workers.
    sql::Statement st(db, path,
                      "SELECT id, lease_run_id, coalesce(lease_owner, '') FROM jobs "
                      "WHERE state = 'running' AND (?1 OR lease_expires_at < ?2) ORDER BY id");
    st.bind(1, std::int64_t{every}).bind(2, now);
    while (st.step()) ending.push_back({st.column_int64(0), st.column_int64(1), st.column_text(2)});
  }
  for (const Held& h : ending) {
    const std::string error =
        !why.empty() ? why
                     : "lease expired: " + (h.owner.empty() ? std::string("its worker") : "worker " + h.owner) +
                           " stopped renewing it";
    end_attempt(db, path, h.run_id, h.job_id, RunStatus::lost, error, now);
  }
  return static_cast<std::int64_t>(ending.size());
}

}  // namespace attempts

Queue::Queue(Database& db) : database_(db), db_(sqlite_handle(db)), path_(db.path()) {}

std::optional<Lease> Queue::claim_next_job(const Claimer& claimer, double lease_seconds,
                                              const std::vector<std::int64_t>& only) {
  if (!(lease_seconds > 0)) throw StoreError(path_ + ": a lease must last more than 0 seconds");
  sql::Transaction tx(db_, path_);
  const double now = database_.now();  // read under the write lock: no claim is older than its expiry check
  attempts::end_leases(db_, path_, now, "");

  Lease lease;
  {
    sql::Statement st(db_, path_,
                      "SELECT id FROM jobs WHERE state = 'queued' AND (retry_after IS NULL OR retry_after <= ?2) "
                      "AND (?1 IS NULL OR id IN (SELECT value FROM json_each(?1))) ORDER BY id LIMIT 1");
    bind_list_or_null(st, 1, only);
    st.bind(2, now);
    if (!st.step()) {
      tx.commit();  // keep the expiries
      return std::nullopt;
    }
    lease.job_id = st.column_int64(0);
  }
  {
    // From the runs, not jobs.attempts: merged shard runs take attempt numbers too.
    sql::Statement st(db_, path_, "SELECT coalesce(max(attempt), 0) + 1 FROM runs WHERE job_id = ?1");
    st.bind(1, lease.job_id);
    st.step();
    lease.attempt = st.column_int64(0);
  }
  {
    sql::Statement st(db_, path_,
                      "INSERT INTO runs (job_id, attempt, status, worker, host, device, pid, started_at, heartbeat_at, uid) "
                      "VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6, strftime('%Y-%m-%dT%H:%M:%fZ', ?7, 'unixepoch'), "
                      "strftime('%Y-%m-%dT%H:%M:%fZ', ?7, 'unixepoch'), lower(hex(randomblob(16))))");
    st.bind(1, lease.job_id)
        .bind(2, lease.attempt)
        .bind_text_or_null(3, claimer.worker)
        .bind_text_or_null(4, claimer.host)
        .bind_text_or_null(5, claimer.device);
    if (claimer.pid > 0)
      st.bind(6, claimer.pid);
    else
      st.bind_null(6);
    st.bind(7, now);  // the claim's time, and its first heartbeat: the queue's clock
    st.run();
    lease.run_id = sqlite3_last_insert_rowid(db_);
  }
  lease.worker = claimer.worker;
  lease.expires_at = now + lease_seconds;
  sql::Statement st(db_, path_,
                    "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_run_id = ?1, lease_owner = ?2, "
                    "lease_expires_at = ?3 WHERE id = ?4");
  st.bind(1, lease.run_id).bind_text_or_null(2, claimer.worker).bind(3, lease.expires_at).bind(4, lease.job_id);
  st.run();
  tx.commit();
  return lease;
}

bool Queue::renew_lease(std::int64_t run_id, double lease_seconds) {
  if (!(lease_seconds > 0)) throw StoreError(path_ + ": a lease must last more than 0 seconds");
  sql::Transaction tx(db_, path_);
  const std::int64_t job_id = attempts::job_if_holding_lease(db_, path_, run_id);
  if (job_id == 0) return false;  // nothing written; the guard rolls back
  {
    sql::Statement st(db_, path_, "UPDATE jobs SET lease_expires_at = ?1 WHERE id = ?2");
    st.bind(1, database_.now() + lease_seconds).bind(2, job_id);
    st.run();
  }
  sql::Statement st(db_, path_, "UPDATE runs SET heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', ?2, 'unixepoch') WHERE id = ?1");
  st.bind(1, run_id).bind(2, database_.now());
  st.run();
  tx.commit();
  return true;
}

std::int64_t expire_leases(Database& database) {
  sqlite3* const db = sqlite_handle(database);
  sql::Transaction tx(db, database.path());
  const std::int64_t ended = attempts::end_leases(db, database.path(), database.now(), "");
  tx.commit();
  return ended;
}

std::int64_t Queue::abandon_leases(const std::string& why) {
  sql::Transaction tx(db_, path_);
  std::int64_t ended = attempts::end_leases(db_, path_, database_.now(), why, /*every=*/true);
  // A running run that holds no lease cannot be written by anyone any more: end it too.
  sql::Statement st(db_, path_,
                    "UPDATE runs SET status = 'lost', finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), error = ?1 "
                    "WHERE status = 'running'");
  st.bind_text_or_null(1, why);
  st.run();
  ended += sqlite3_changes(db_);
  tx.commit();
  return ended;
}

std::vector<QueuedJob> ResultsReader::list_jobs(const JobFilter& filter) {
  sql::Statement st(db_, path_,
                    "SELECT j.id, j.experiment_id, j.method, j.dataset, j.seed, j.config_toml, j.config_hash, j.state, "
                    "j.attempts, j.failures, j.max_attempts, coalesce(j.lease_run_id, 0), coalesce(j.lease_owner, ''), "
                    "coalesce(j.lease_expires_at, 0), coalesce(j.error, ''), j.created_at, e.name, j.infra_failures, "
                    "j.max_infra_failures, coalesce(j.plugin_dirs, '[]'), j.lost_in_a_row, coalesce(j.retry_after, 0) "
                    "FROM jobs j JOIN experiments e ON e.id = j.experiment_id "
                    "WHERE (?1 IS NULL OR j.state IN (SELECT value FROM json_each(?1))) "
                    "AND (?2 IS NULL OR j.method IN (SELECT value FROM json_each(?2))) "
                    "AND (?3 IS NULL OR j.dataset IN (SELECT value FROM json_each(?3))) "
                    "AND (?4 IS NULL OR j.id IN (SELECT value FROM json_each(?4))) ORDER BY j.id");
  std::vector<std::string> states;
  for (const JobState state : filter.states) states.push_back(to_string(state));
  bind_list_or_null(st, 1, states);
  bind_list_or_null(st, 2, filter.methods);
  bind_list_or_null(st, 3, filter.datasets);
  bind_list_or_null(st, 4, filter.ids);
  std::vector<QueuedJob> out;
  while (st.step()) {
    QueuedJob q;
    q.job.id = st.column_int64(0);
    q.job.experiment_id = st.column_int64(1);
    q.job.method = st.column_text(2);
    q.job.dataset = st.column_text(3);
    q.job.seed = st.column_int64(4);
    q.job.config_toml = st.column_text(5);
    q.job.config_hash = st.column_text(6);
    q.job.state = parse_job_state(st.column_text(7));
    q.attempts = st.column_int64(8);
    q.failures = st.column_int64(9);
    q.max_attempts = st.column_int64(10);
    q.lease_run_id = st.column_int64(11);
    q.lease_owner = st.column_text(12);
    q.lease_expires_at = st.column_double(13);
    q.error = st.column_text(14);
    q.created_at = st.column_text(15);
    q.experiment = st.column_text(16);
    q.infra_failures = st.column_int64(17);
    q.max_infra_failures = st.column_int64(18);
    q.plugin_dirs = sql::json_text_list(db_, path_, st.column_text(19));
    q.lost_in_a_row = st.column_int64(20);
    q.retry_after = st.column_double(21);
    out.push_back(std::move(q));
  }
  return out;
}

namespace {

constexpr const char* kAttemptColumns =
    "SELECT id, attempt, status, coalesce(worker, ''), coalesce(host, ''), coalesce(device, ''), "
    "coalesce(pid, 0), started_at, coalesce(finished_at, ''), coalesce(heartbeat_at, ''), "
    "coalesce(error, ''), coalesce(resume_checkpoint, ''), coalesce(resume_step, 0), coalesce(checkpoint_path, ''), "
    "job_id FROM runs ";

RunAttempt read_attempt(const sql::Statement& st) {
  RunAttempt a;
  a.run_id = st.column_int64(0);
  a.attempt = st.column_int64(1);
  a.status = parse_run_status(st.column_text(2));
  a.worker = st.column_text(3);
  a.host = st.column_text(4);
  a.device = st.column_text(5);
  a.pid = st.column_int64(6);
  a.started_at = st.column_text(7);
  a.finished_at = st.column_text(8);
  a.heartbeat_at = st.column_text(9);
  a.error = st.column_text(10);
  a.resume_checkpoint = st.column_text(11);
  a.resume_step = st.column_int64(12);
  a.checkpoint_path = st.column_text(13);
  return a;
}

}  // namespace

std::vector<RunAttempt> ResultsReader::attempts_of_job(std::int64_t job_id) {
  sql::Statement st(db_, path_, (std::string(kAttemptColumns) + "WHERE job_id = ?1 ORDER BY attempt").c_str());
  st.bind(1, job_id);
  std::vector<RunAttempt> out;
  while (st.step()) out.push_back(read_attempt(st));
  return out;
}

RunAttempt ResultsReader::run_attempt(std::int64_t run_id, std::int64_t* job_id) {
  sql::Statement st(db_, path_, (std::string(kAttemptColumns) + "WHERE id = ?1").c_str());
  st.bind(1, run_id);
  if (!st.step()) throw StoreError(path_ + ": no run with id " + std::to_string(run_id));
  if (job_id) *job_id = st.column_int64(14);
  return read_attempt(st);
}

std::vector<std::int64_t> Queue::cancel_jobs(const std::vector<std::int64_t>& ids) {
  sql::Transaction tx(db_, path_);
  std::vector<std::int64_t> changed;
  for (const std::int64_t id : ids) {
    JobState state = JobState::queued;
    std::int64_t lease_run = 0;
    {
      sql::Statement st(db_, path_, "SELECT state, coalesce(lease_run_id, 0) FROM jobs WHERE id = ?1");
      st.bind(1, id);
      if (!st.step()) continue;
      state = parse_job_state(st.column_text(0));
      lease_run = st.column_int64(1);
    }
    if (state == JobState::running) {
      // The holder's next write or heartbeat finds the lease gone and stops the attempt.
      attempts::cancel_attempt(db_, path_, lease_run, id);
    } else if (state == JobState::queued || state == JobState::submitted || state == JobState::blocked) {
      sql::Statement st(db_, path_, "UPDATE jobs SET state = 'cancelled' WHERE id = ?1");
      st.bind(1, id);
      st.run();
    } else {
      continue;
    }
    if (std::find(changed.begin(), changed.end(), id) == changed.end()) changed.push_back(id);
  }
  tx.commit();
  return changed;
}

std::vector<std::int64_t> Queue::retry_jobs(const std::vector<std::int64_t>& ids) {
  // a submitted job's array task is gone (or never started): queued again as it was
  return update_each(db_, path_,
                     "UPDATE jobs SET state = 'queued', retry_after = NULL, "
                     "failures = CASE state WHEN 'submitted' THEN failures ELSE 0 END, "
                     "infra_failures = CASE state WHEN 'submitted' THEN infra_failures ELSE 0 END, "
                     "lost_in_a_row = CASE state WHEN 'submitted' THEN lost_in_a_row ELSE 0 END "
                     "WHERE id = ?1 AND state IN ('failed', 'cancelled', 'diverged', 'oom', 'blocked', 'submitted')",
                     ids);
}

std::vector<std::pair<JobState, std::int64_t>> ResultsReader::queue_counts() {
  std::vector<std::pair<JobState, std::int64_t>> counts;
  for (const JobState state : kJobStates) counts.emplace_back(state, 0);
  sql::Statement st(db_, path_, "SELECT state, count(*) FROM jobs GROUP BY state");
  while (st.step()) {
    const JobState state = parse_job_state(st.column_text(0));
    for (auto& [s, n] : counts)
      if (s == state) n = st.column_int64(1);
  }
  return counts;
}

std::vector<std::int64_t> Queue::mark_submitted(const std::vector<std::int64_t>& ids) {
  return update_each(db_, path_, "UPDATE jobs SET state = 'submitted' WHERE id = ?1 AND state = 'queued'", ids);
}

void Queue::requeue_job(std::int64_t job_id) {
  sql::Transaction tx(db_, path_);
  JobState state = JobState::queued;
  {
    sql::Statement st(db_, path_, "SELECT state FROM jobs WHERE id = ?1");
    st.bind(1, job_id);
    if (!st.step()) throw StoreError(path_ + ": no job with id " + std::to_string(job_id));
    state = parse_job_state(st.column_text(0));
  }
  if (state == JobState::queued) return;  // nothing to do; the guard rolls the empty transaction back
  // A running or submitted job belongs to its lease holder or its SLURM task: taking it back here
  // would let two attempts write.
  if (state == JobState::running || state == JobState::submitted)
    throw StoreError(path_ + ": job " + std::to_string(job_id) + " is " + to_string(state) +
                     "; cancel it first to run it again");
  sql::Statement st(db_, path_, "UPDATE jobs SET state = 'queued', failures = 0, infra_failures = 0 WHERE id = ?1");
  st.bind(1, job_id);
  st.run();
  tx.commit();
}

}  // namespace attnlab::store
