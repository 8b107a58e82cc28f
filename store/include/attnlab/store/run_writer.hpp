#pragma once
// What one attempt (run) may write, and nothing else: its environment, curves, phase, resume
// checkpoints, accuracy marks and its end. Every write requires the run to hold its job's lease
// (LeaseLost otherwise, nothing written), so that an attempt whose lease was taken from it can
// never write over its successor. The job process holds one; its worker holds one to end an
// attempt whose process died.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attnlab/store.hpp"

namespace attnlab::store {

class RunWriter {
 public:
  RunWriter(Database& db, std::int64_t run_id);
  std::int64_t run_id() const { return run_id_; }

  void set_environment(const RunEnvironment& env);
  // The process that runs the attempt (its job process), written by the device worker as it starts
  // it: an attempt killed before it recorded its environment names that process, not the worker.
  void set_pid(std::int64_t pid);
  // How the run's training steps run: "cuda graph", or "eager" and why not a graph (schema 11).
  void set_step_mode(const std::string& mode);
  void append_curve(const std::vector<CurvePoint>& points);
  // The phase the attempt is in after its training steps (the queue's ETA counts it); the row
  // goes when the attempt ends.
  void set_phase(const RunPhase& phase);

  // Adopts the file `path`, holding `step` steps, with `checksum`, as the run's resume checkpoint.
  void set_resume_checkpoint(const std::string& path, std::int64_t step, const std::string& checksum = "");
  // Stops anyone resuming from run `earlier`'s checkpoint (damaged, or written by another build of
  // a plugin; this run holds the lease of `earlier`'s job), and drops the curve points it had
  // copied from it: it starts afresh.
  void discard_resume_point(std::int64_t earlier);
  // Copies the curve points of run `from` up to `max_step` (a resumed attempt continues its
  // predecessor's curves), and its instability tau points, which are measured before training
  // whatever their step numbers.
  void copy_curve_from(std::int64_t from, std::int64_t max_step);
  // The weights files the run kept at its accuracy marks ([train] accuracy_checkpoints), with their
  // checksums (schema 13), recorded before the run ends; read by `attnlab gradients`.
  void record_accuracy_marks(const std::vector<AccuracyMarkFile>& marks);
  // The weights file the run's last training step left (`run-R.pt.last`) and its checksum (schema
  // 16), recorded before the run ends; read by `attnlab export --weights last`.
  void record_last_weights(const std::string& path, const std::string& checksum);

  // Final status and results, in one transaction that also releases the lease and moves the job:
  // done | diverged | oom -> the job takes that state; failed -> queued again, or failed once
  // failures reach max_attempts; lost -> the same against max_infra_failures; rejected ->
  // blocked; interrupted -> queued (not counted as a failure).
  // `repeatable`: the error is one the job's same input raises again (a script's own exception),
  // so that a failed attempt whose error is the job's previous attempt's, failed, fails the job
  // now instead of trying a third time.
  void finish(RunStatus status, const std::vector<std::pair<std::string, double>>& results, const std::string& error,
              const std::string& checkpoint_path, const std::string& checkpoint_checksum = "", bool repeatable = false);
  // For the worker whose job process died: ends the run as `status` with `error` (as finish, or
  // `lost` when a signal from outside killed the process) only if it is still 'running' and holds
  // the lease; returns whether it changed anything.
  bool fail_if_unfinished(RunStatus status, const std::string& error);

 private:
  Database& database_;
  sqlite3* db_;
  std::string path_;
  std::int64_t run_id_;
};

}  // namespace attnlab::store
