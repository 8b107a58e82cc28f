#pragma once
// The results database: experiments, jobs, runs, curves and final results in one SQLite file.
// Schema and migrations: store/README.md. Every write is one transaction; every value is bound.
#include <cstdint>
#include <functional>
#include <limits>
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

struct sqlite3;

namespace attnlab::store {

struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a store error says of the machine rather than of the caller's input or the method: the
// file locked by another process past the busy timeout, its disk full, the file read-only, damaged,
// or an I/O error. An attempt that meets one is the machine's failure (`lost`), never the method's.
enum class DatabaseFault { none, locked, full, read_only, damaged, io };
DatabaseFault database_fault(const std::exception& e);

// The write of a run that no longer holds its job's lease (it expired and the job was claimed
// again, or the job was cancelled): nothing was written. The worker stops that attempt.
struct LeaseLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Job states and run statuses, as stored (schema v6).
// jobs.state: queued | running | done | failed | diverged | oom | blocked | cancelled | submitted
//   (submitted: handed to a SLURM array; `slurm collect` sets the final state;
//    blocked: cannot run as configured, waits for `attnlab queue retry`)
// runs.status: running | done | failed | diverged | oom | interrupted | lost | rejected
//   (failed: the method's own crash, counted against max_attempts;
//    lost: ended from outside (its lease expired, its process was killed by a signal it did not
//          raise itself, its SLURM task was requeued), counted against max_infra_failures;
//    rejected: its plugin, configuration or data was refused; the job is blocked, not counted;
//    interrupted: stopped by a signal and released, not counted)
// A run is an attempt. The job's lease names the one run allowed to write (jobs.lease_run_id):
// curve points and the final status of any other run are refused with LeaseLost. A lease past
// its expiry time still holds until someone ends it (a claim): a late heartbeat
// that comes first keeps it. Lease times are unix seconds from the writer's clock.

// In C++ they are enums; the database stores their names (to_string), and reading a row parses
// them back (an unknown name is a StoreError).
enum class JobState { queued, running, done, failed, diverged, oom, blocked, cancelled, submitted };
enum class RunStatus { running, done, failed, diverged, oom, interrupted, lost, rejected };

// Every value, in the order `attnlab queue status` counts them (job states) or as declared (run statuses).
inline constexpr JobState kJobStates[] = {JobState::queued, JobState::running,  JobState::submitted,
                                          JobState::done,   JobState::failed,   JobState::diverged,
                                          JobState::oom,    JobState::blocked,  JobState::cancelled};
inline constexpr RunStatus kRunStatuses[] = {RunStatus::running, RunStatus::done,        RunStatus::failed,
                                             RunStatus::diverged, RunStatus::oom,        RunStatus::interrupted,
                                             RunStatus::lost,    RunStatus::rejected};

// A job whose outcome is known: no worker claims it again unless someone retries it.
inline constexpr bool is_final(JobState state) {
  return state == JobState::done || state == JobState::failed || state == JobState::diverged ||
         state == JobState::oom || state == JobState::blocked;
}
// A job that ended without results: the method failed (failed, diverged, oom) or was refused (blocked).
inline constexpr bool is_failed(JobState state) {
  return state == JobState::failed || state == JobState::diverged || state == JobState::oom || state == JobState::blocked;
}
// A run after which its job is never resumed: it ended with results (done) or with a verdict on the
// method (diverged, oom). A failed attempt may be retried, and resumes from its checkpoint.
inline constexpr bool ends_its_job(RunStatus status) {
  return status == RunStatus::done || status == RunStatus::diverged || status == RunStatus::oom;
}

const char* to_string(JobState state);    // "queued", ...: the stored name
const char* to_string(RunStatus status);  // "running", ...
// The value of a stored name; a StoreError for any other text: "unknown job state 'x' (one of
// queued, running, ...)" / "unknown run status 'x' (one of running, done, ...)".
JobState parse_job_state(const std::string& name);
RunStatus parse_run_status(const std::string& name);
std::ostream& operator<<(std::ostream& out, JobState state);
std::ostream& operator<<(std::ostream& out, RunStatus status);

struct JobSpec {
  std::int64_t experiment_id = 0;
  std::string method;
  std::string dataset;
  std::int64_t seed = 0;
  std::string config_toml;   // the fully resolved configuration of this job
  std::string config_hash;   // identity of (resolved config, seed): unique among jobs
  std::vector<std::pair<std::string, std::string>> params;  // flattened config: "train.lr" -> "0.0001"
  std::vector<std::string> plugin_dirs;  // folders of the job's plugins (absolute), searched first by its worker
};

struct Job {
  std::int64_t id = 0;
  std::int64_t experiment_id = 0;
  std::string method;
  std::string dataset;
  std::int64_t seed = 0;
  std::string config_toml;
  std::string config_hash;
  JobState state = JobState::queued;
};

// A job with its queue bookkeeping, as `attnlab queue list|show` prints it.
struct QueuedJob {
  Job job;
  std::string experiment;         // the name of the experiment that first asked for it
  std::int64_t attempts = 0;      // runs started
  std::int64_t failures = 0;      // attempts that ended failed: the method's own crashes (retry resets it)
  std::int64_t max_attempts = 3;  // failures allowed before the job ends failed
  std::int64_t infra_failures = 0;       // attempts that ended lost: killed from outside, lease expired
  std::int64_t max_infra_failures = 10;  // lost attempts in a row without progress allowed before the job ends failed
  std::int64_t lost_in_a_row = 0;        // lost attempts in a row that ended before a checkpoint of their own
  double retry_after = 0;                // unix seconds: not claimed before (the back-off after a lost attempt); 0: none
  std::vector<std::string> plugin_dirs;  // folders of its plugins when it was queued (absolute)
  std::int64_t lease_run_id = 0;  // 0: no lease
  std::string lease_owner;        // worker id of the lease holder
  double lease_expires_at = 0;    // unix seconds
  std::string error;              // the last attempt's error
  std::string created_at;
};

// One attempt (run) of a job with its queue bookkeeping, as `attnlab queue show` prints it.
struct RunAttempt {
  std::int64_t run_id = 0;
  std::int64_t attempt = 0;
  RunStatus status = RunStatus::running;
  std::string worker, host, device;
  std::int64_t pid = 0;
  std::string started_at, finished_at, heartbeat_at;  // "" when not set
  std::string error;
  std::string resume_checkpoint;  // "" if it left none
  std::int64_t resume_step = 0;
  std::string checkpoint_path;    // its best-validation checkpoint, "" if none was recorded
};

struct JobFilter {
  std::vector<JobState> states;                  // empty: any
  std::vector<std::string> methods, datasets;    // empty: any
  std::vector<std::int64_t> ids;                       // empty: any
};

// The right to run one attempt of one job: the run row the claim created.
struct Lease {
  std::int64_t job_id = 0;
  std::int64_t run_id = 0;
  std::int64_t attempt = 0;
  std::string worker;
  double expires_at = 0;  // unix seconds
};

// What the claim records about the claimer on the new run row (the job process adds the rest
// with RunWriter::set_environment).
struct Claimer {
  std::string worker;  // unique per worker process, e.g. "host:pid:cpu"
  std::string host;
  std::string device;
  std::int64_t pid = 0;
};

struct MergeReport {
  std::int64_t runs_added = 0;
  std::int64_t runs_present = 0;  // already merged (same run uid): left alone
  std::int64_t runs_unfinished = 0;  // still 'running' in the shard: left for a later merge
  std::int64_t jobs_added = 0;
};

struct AddedJob {
  std::int64_t job_id = 0;
  bool existed = false;  // a job with the same config_hash was already there
  JobState state = JobState::queued;  // its state now
};

struct PluginFile {
  std::string kind;  // attention | dataset
  std::string name;
  std::string version;
  std::string path;
  std::string sha256;
};

// Where and with what a measurement was taken. Every run, bench row and study row carries it,
// stamped by one function of the runner (stamp_provenance) and bound and read by one pair in the
// store (store/src/provenance.hpp), in the same five columns of every table that has it.
struct Provenance {
  std::string device;         // cpu, cuda:0, ...
  std::string device_name;    // the GPU's name, or the CPU model
  std::string torch_version;  // the LibTorch it ran against
  std::string git_revision;   // of the attnlab build
  std::int64_t threads = 0;   // intra-op threads
};

struct RunEnvironment : Provenance {
  std::string host;
  std::string attnlab_version;
  std::vector<PluginFile> plugins;
  std::int64_t pid = 0;  // the process that trains (0: keep the claimer's pid)
  std::string step_mode;  // read back only (RunWriter::set_step_mode writes it): "cuda graph", "eager (…)"
  std::vector<std::string> warnings;  // one line each, about its method file (schema 12)
};

struct CurvePoint {
  std::int64_t step = 0;
  std::string split;  // train | val | test
  std::string name;   // loss | acc | lr | ...
  double value = 0;
  double wall_seconds = 0;
};

// What a running attempt is doing after its training steps (schema 14): `done` of `total` units
// of `phase` ("variance passes") in `seconds` since the phase began.
struct RunPhase {
  std::string phase;
  std::int64_t done = 0, total = 0;
  double seconds = 0;
};

// A weights file kept at an accuracy mark: the first validation at or past `mark` (schema 13).
struct AccuracyMarkFile {
  double mark = 0;
  std::int64_t step = 0;
  std::string path;
  std::string checksum;
};

// A weights file a run kept, and the checksum of its bytes as written ("" and "" for none).
struct WeightsFile {
  std::string path;
  std::string checksum;
};

// An experiment file as it was enqueued.
struct ExperimentFile {
  std::int64_t id = 0;
  std::string name, source_path, config_text;
};

// One run with its job and its final results, as `attnlab results` prints it.
struct RunSummary {
  std::int64_t run_id = 0;
  std::int64_t job_id = 0;
  std::string experiment;
  std::string method;
  std::string dataset;
  std::int64_t seed = 0;
  std::int64_t attempt = 0;
  RunStatus status = RunStatus::running;
  std::string device;
  std::string error;
  std::string started_at;
  std::string finished_at;  // empty while unfinished
  std::vector<std::pair<std::string, double>> results;  // name -> value, sorted by name
  std::optional<double> result(const std::string& name) const;
};

// Where the resume checkpoint of a job's next attempt is: the newest one an earlier attempt left,
// the run that wrote it, the step it holds and its checksum ("" if none was recorded).
struct ResumePoint {
  std::string path;
  std::int64_t run_id = 0;
  std::int64_t step = 0;
  std::string checksum;
};

// The database as the commands that only read see it (results, curves, tables, serve, queue list):
// opened SQLITE_OPEN_READONLY, and a type with no write. Database, a writer's connection, is one
// too: a worker reads what it writes through the same methods.
class ResultsReader {
 public:
  static constexpr int kSchemaVersion = 17;
  static constexpr std::uintmax_t kReadersCheckBytes = 64ull << 20;
  enum class Check { at_open, none };  // none: `attnlab db check`, which runs the full check itself

  // Opens an existing file read-only, at exactly kSchemaVersion (else a StoreError saying to run
  // `attnlab db migrate --db FILE`), leaving its journal mode as the file has it; a file up to
  // kReadersCheckBytes is checked (quick_check) at open unless `check` is none. In a folder it
  // cannot write, a WAL file with no pending log is opened immutable.
  explicit ResultsReader(const std::string& path, Check check = Check::at_open);
  ~ResultsReader();
  ResultsReader(const ResultsReader&) = delete;
  ResultsReader& operator=(const ResultsReader&) = delete;

  const std::string& path() const { return path_; }
  int schema_version();

  // Every experiment as enqueued (name, file, text), by id: the same name enqueued with another
  // text is a row of its own.
  std::vector<ExperimentFile> experiments();
  // The experiments (as enqueued: name, file, text) that own any of these jobs, by id.
  std::vector<ExperimentFile> experiments_of_jobs(const std::vector<std::int64_t>& job_ids);
  // The oldest experiment with this name and text (an experiment file enqueued again), if any.
  std::optional<std::int64_t> find_experiment(const std::string& name, const std::string& config_text);
  Job job(std::int64_t job_id);
  // The job whose config_hash this is, if any.
  std::optional<Job> job_by_hash(const std::string& config_hash);
  // The run that counts for the job (job_outcomes: a done job's newest done run, ...), if any.
  std::optional<std::int64_t> counting_run(std::int64_t job_id);

  // --- the queue as it stands ---
  std::vector<QueuedJob> list_jobs(const JobFilter& filter);  // in id order
  // Counts per job state (every state present, zero included).
  std::vector<std::pair<JobState, std::int64_t>> queue_counts();  // in kJobStates order
  // Every attempt of the job, oldest first.
  std::vector<RunAttempt> attempts_of_job(std::int64_t job_id);
  // One attempt, with its job's id in `job_id`; StoreError if there is no such run.
  RunAttempt run_attempt(std::int64_t run_id, std::int64_t* job_id = nullptr);
  // The phase a running attempt reported after its training steps; nullopt: none (training,
  // testing, or ended).
  std::optional<RunPhase> run_phase(std::int64_t run_id);
  // Where the job's next attempt resumes (RunWriter::set_resume_checkpoint wrote it): only attempts
  // after the job's last done/diverged/oom run count (a job run again, --rerun or retry, starts
  // afresh). nullopt: none.
  std::optional<ResumePoint> resume_point(std::int64_t job_id);

  // --- runs and their results ---
  // Every run, or the runs of the jobs an experiment owns; `experiment` is each job's first.
  std::vector<RunSummary> run_summaries(std::optional<std::int64_t> experiment_id = std::nullopt);
  std::optional<RunSummary> run_summary(std::int64_t run_id);  // std::nullopt: no such run
  std::vector<CurvePoint> curve(std::int64_t run_id);  // every curve of the run, by split, name, step
  // One curve by step; with `after_step`, only its points past that step (what a poll lacks).
  std::vector<CurvePoint> curve(std::int64_t run_id, const std::string& split, const std::string& name,
                                std::int64_t after_step = std::numeric_limits<std::int64_t>::min());
  std::vector<PluginFile> run_plugins(std::int64_t run_id);
  // What RunWriter::set_environment and the claim recorded, with the plugins; empty strings where
  // nothing was (a run that never started its job process). Throws StoreError for an unknown run id.
  RunEnvironment run_environment(std::int64_t run_id);
  // The run's best-validation checkpoint file ("" if none); StoreError if there is no such run.
  std::string checkpoint_of_run(std::int64_t run_id);
  // The checksum of that file as recorded ("" if none).
  std::string checkpoint_checksum(std::int64_t run_id);
  // The weights the run ended its training steps with, and their checksum (schema 16); both ""
  // when it kept none (it never finished its steps). StoreError if there is no such run.
  WeightsFile last_weights_of_run(std::int64_t run_id);
  // The weights files the run kept at its accuracy marks (schema 13), with their checksums, by mark.
  std::vector<AccuracyMarkFile> accuracy_marks(std::int64_t run_id);

  // --- the file's integrity ---
  // PRAGMA quick_check: a StoreError in one line naming the file and the first problem unless the
  // file is intact.
  void require_intact();
  // PRAGMA quick_check, given at most `seconds`: false when it could not finish in that time (a
  // large file: not checked), true when the file is intact; a StoreError as require_intact's when
  // it is damaged. A worker runs it before each claim.
  bool quick_check_within(double seconds);
  // PRAGMA integrity_check: the problems found (at most `limit`), and SQLite's error after them
  // when the check itself stopped on a damaged page; empty when the file is intact.
  std::vector<std::string> integrity_problems(int limit = 100);

  // The unix time the queue reads (lease expiries, back-offs): the system clock unless a test
  // gives its own (store/src/access.hpp).
  double now() const { return clock_ ? clock_() : system_unix_seconds(); }
  static double system_unix_seconds();

 protected:
  // How a connection opens: the reader's two ways and Database's three.
  enum class Mode { read_only, unchecked, migrate, existing, supervised };
  ResultsReader(const std::string& path, Mode mode);

  std::string path_;
  sqlite3* db_ = nullptr;
  int migrated_from_ = 0;

 private:
  void open(Mode mode, const std::string& uri_query);  // sqlite3_open_v2 + configure; db_ null on failure
  std::vector<RunSummary> summaries(std::optional<std::int64_t> experiment_id, std::optional<std::int64_t> run_id);

  std::function<double()> clock_;
  friend struct DatabaseAccess;  // the store's own free functions (query.hpp, store/studies.hpp) and its tests
};

// The file as a writer opens it: the connection and its migrations, and what is written outside a
// job's attempt (experiments and jobs as enqueued, shards merged, studies' results of a run). The
// queue's claims and leases are store::Queue's (store/queue.hpp); an attempt's own writes are
// store::RunWriter's (store/run_writer.hpp). Reads are the ResultsReader's.
class Database : public ResultsReader {
 public:
  enum class Open {
    migrate,     // create the file if needed and apply forward migrations (run, queue add, db migrate)
    existing,    // commands that write an existing file (queue cancel/retry, worker, slurm): it must
                 // exist at exactly kSchemaVersion, else a StoreError saying to run `attnlab db migrate
                 // --db FILE`; checked (quick_check) as `migrate` checks
    supervised,  // device workers and job processes: as `existing`, unchecked at open: their
                 // supervisor's open checked, and a device worker checks before each claim
  };

  // Opens the file, sets WAL and a busy timeout. A file that is not SQLite, or whose schema is
  // newer than this build knows, is a StoreError naming the file. A damaged file (one that fails
  // PRAGMA quick_check) is a StoreError in one line before anything is written: checked by
  // `migrate` and `existing` (every writer, before it writes).
  explicit Database(const std::string& path, Open mode = Open::migrate);

  // The schema version the file had when this object opened it (0: new or empty file); equal to
  // schema_version() unless this open migrated it.
  int migrated_from() const { return migrated_from_; }

  std::int64_t add_experiment(const std::string& name, const std::string& source_path,
                              const std::string& config_text);
  // Inserts the job, or finds the existing one with the same config_hash; either way the spec's
  // experiment owns it from now on (experiment_jobs).
  AddedJob add_job(const JobSpec& spec);

  // --- shards (SLURM): each array task writes its own database file ---
  // Merges a shard into this database in one transaction: its experiments and jobs matched by
  // config_hash (added if missing), its finished runs matched by runs.uid (added once: merging
  // twice changes nothing) with their plugins, curves, results, variance and spectrum rows, and each
  // job's state taken from the shard when the shard's is final. A shard that fails
  // `PRAGMA integrity_check`, is not an attnlab database, or has another schema version is a
  // StoreError naming it, with nothing merged.
  MergeReport merge_shard(const std::string& shard_path);

  // --- measurements taken after a run ended (`attnlab variance`): one transaction each ---
  // Adds or replaces named results of an existing run.
  void set_results(std::int64_t run_id, const std::vector<std::pair<std::string, double>>& results);
  // Replaces the run's per-example variance rows for `split` ("val" or "test"): example i has
  // rsd[i], pi[i], vote[i] and label[i].
  void set_variance_examples(std::int64_t run_id, const std::string& split, std::int64_t passes,
                             const std::vector<double>& rsd, const std::vector<std::int64_t>& pi,
                             const std::vector<std::int64_t>& vote, const std::vector<std::int64_t>& label);

 private:
  void link_job(std::int64_t experiment_id, std::int64_t job_id);  // experiment_jobs, inside add_job's transaction
};

class ReadTransaction {
 public:
  explicit ReadTransaction(ResultsReader& db);
  ~ReadTransaction();
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;

 private:
  ResultsReader& db_;
};

}  // namespace attnlab::store
