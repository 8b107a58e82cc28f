#pragma once
// How an attempt (a run) ends and what that does to its job: shared by the queue (expiry,
// cancel, abandon) and the run's own writes (RunWriter::finish). Every function here runs inside a
// transaction the caller opened.
#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "attnlab/store.hpp"

namespace attnlab::store::attempts {

// The job of run `run_id` if the run holds its job's lease (jobs.lease_run_id = run and the run
// is 'running'). LeaseLost naming why otherwise; StoreError if there is no such run.
std::int64_t require_lease(sqlite3* db, const std::string& path, std::int64_t run_id);

// Same check without throwing LeaseLost: 0 when the run does not hold its lease.
std::int64_t job_if_holding_lease(sqlite3* db, const std::string& path, std::int64_t run_id);

// The back-off of a job after an attempt ended from outside without a checkpoint of its own:
// kLostBackoffSeconds x 2^(k-1) for the k-th such attempt in a row, at most kLostBackoffMaxSeconds.
inline constexpr double kLostBackoffSeconds = 0.5;
inline constexpr double kLostBackoffMaxSeconds = 60;

// Ends run `run_id` of job `job_id`, which holds the job's lease, as `status` with `error`, and
// releases the lease: done | diverged | oom -> the job takes that state; failed (the method's own
// crash) -> one more failure, then queued, or failed once failures reach max_attempts ("N
// attempts failed; last: ERROR"); lost (ended from outside) -> queued, not claimed again before
// its back-off (none if the attempt adopted a checkpoint of its own), or failed once
// max_infra_failures attempts in a row were lost before a checkpoint of their own; rejected
// (cannot run as configured) -> blocked, not counted; interrupted -> queued, not counted.
// `running` is a StoreError. A failed attempt whose error is `repeatable` (the same input raises it
// again) and the same as the job's previous attempt's, which failed too, fails the job at once.
void end_attempt(sqlite3* db, const std::string& path, std::int64_t run_id, std::int64_t job_id,
                 RunStatus status, const std::string& error, double now, bool repeatable = false);
// Ends it for `attnlab queue cancel`: the run ends 'interrupted' ("cancelled"), the job is cancelled.
void cancel_attempt(sqlite3* db, const std::string& path, std::int64_t run_id, std::int64_t job_id);

// Ends as 'lost' the lease of every running job whose lease expired before `now` (every one with
// `every`), with `why`, or "lease expired: ..." when `why` is empty. Returns how many.
std::int64_t end_leases(sqlite3* db, const std::string& path, double now, const std::string& why, bool every = false);

}  // namespace attnlab::store::attempts
