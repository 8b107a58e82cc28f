#pragma once
// The queue: who runs which job. A claim takes a queued job and leases it to one new run; the
// lease names the only run allowed to write (store::RunWriter), is renewed by its worker's
// heartbeat and ends with the run (RunWriter::finish) or when it expires and someone claims again.
// The states a user moves jobs between (cancel, retry, requeue) and the SLURM hand-off are here
// too. What the queue holds is read through ResultsReader (list_jobs, queue_counts).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/store.hpp"

namespace attnlab::store {

class Queue {
 public:
  explicit Queue(Database& db);

  // One BEGIN IMMEDIATE transaction: first every expired lease is ended (its run 'lost', its job
  // queued again, or failed once failures reach max_attempts), then the queued job with the
  // lowest id (restricted to `only` when not empty) is taken: attempts + 1, a new run row
  // (status running, the claimer's worker/host/device/pid), state running, lease to this run
  // until now + lease_seconds. nullopt: nothing queued.
  std::optional<Lease> claim_next_job(const Claimer& claimer, double lease_seconds,
                                      const std::vector<std::int64_t>& only = {});
  // Extends the lease to now + lease_seconds; false if the run no longer holds it (nothing written).
  bool renew_lease(std::int64_t run_id, double lease_seconds);
  // Ends every 'running' run of this database as 'lost' with `why`, whatever its lease's expiry
  // (counted as a failure, as an expired lease is): for a requeued SLURM array task reopening its
  // own shard, whose previous incarnation is dead. Returns how many runs it ended.
  std::int64_t abandon_leases(const std::string& why);

  // queued, running, submitted or blocked -> cancelled (a running attempt loses its lease: its run ends
  // 'interrupted', "cancelled"); returns the ids changed.
  std::vector<std::int64_t> cancel_jobs(const std::vector<std::int64_t>& ids);
  // failed, cancelled, diverged, oom or blocked -> queued with both failure counts reset;
  // submitted (its SLURM task died or never ran) -> queued as it was; returns the ids changed.
  std::vector<std::int64_t> retry_jobs(const std::vector<std::int64_t>& ids);
  // Sets a finished job back to 'queued' with its failure count reset (to run it again).
  void requeue_job(std::int64_t job_id);
  // Marks jobs handed to a SLURM array: queued -> submitted (other states are left alone);
  // returns the ids changed.
  std::vector<std::int64_t> mark_submitted(const std::vector<std::int64_t>& ids);

 private:
  Database& database_;
  sqlite3* db_;
  std::string path_;
};

}  // namespace attnlab::store
