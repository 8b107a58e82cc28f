// Merging a shard (a database one SLURM array task wrote alone) into this database: one
// transaction per shard, idempotent by run uid. Rules: store/README.md, "Shards".
#include <filesystem>
#include <map>
#include <set>

#include "attnlab/store.hpp"
#include "sqlite.hpp"

namespace attnlab::store {
namespace {

// Every table a shard's rows are read from.
constexpr const char* kShardTables[] = {"experiments", "experiment_jobs", "jobs", "job_params", "runs",
                                        "run_plugins", "curves", "results", "variance_examples",
                                        "spectrum_summaries", "spectrum_results", "gradient_stats"};

// ATTACHes the shard read-only as schema "shard" for the lifetime of the object. ATTACH and
// DETACH cannot run inside a transaction, so this wraps the merge's transaction.
class AttachedShard {
 public:
  AttachedShard(sqlite3* db, const std::string& main_path, const std::string& shard_path) : db_(db) {
    sql::Statement st(db, main_path, "ATTACH DATABASE ?1 AS shard");
    st.bind(1, sql::file_uri(shard_path, "mode=ro"));
    st.run();
  }
  ~AttachedShard() { sqlite3_exec(db_, "DETACH DATABASE shard", nullptr, nullptr, nullptr); }
  AttachedShard(const AttachedShard&) = delete;
  AttachedShard& operator=(const AttachedShard&) = delete;

 private:
  sqlite3* db_;
};

// Refuses a shard that is damaged, foreign, or of another schema version, before anything is read.
void check_shard(sqlite3* db, const std::string& shard) {
  {
    sql::Statement st(db, shard, "PRAGMA shard.integrity_check");
    const std::string first = st.step() ? st.column_text(0) : "no answer";
    if (first != "ok") throw StoreError(shard + ": corrupt shard (integrity_check: " + first + ")");
  }
  {
    sql::Statement st(db, shard, "PRAGMA shard.user_version");
    st.step();
    const std::int64_t version = st.column_int64(0);
    if (version != Database::kSchemaVersion)
      throw StoreError(shard + ": shard schema version " + std::to_string(version) + ", but this attnlab merges version " +
                       std::to_string(Database::kSchemaVersion) + " only");
  }
  std::set<std::string> tables;
  sql::Statement st(db, shard, "SELECT name FROM shard.sqlite_master WHERE type = 'table'");
  while (st.step()) tables.insert(st.column_text(0));
  for (const char* table : kShardTables)
    if (!tables.count(table)) throw StoreError(shard + ": not an attnlab database (no table " + table + ")");
}

std::int64_t insert_id(sqlite3* db) { return sqlite3_last_insert_rowid(db); }

// The merge itself, inside the caller's transaction, on a checked shard.
class Merge {
 public:
  Merge(sqlite3* db, const std::string& main_path) : db_(db), path_(main_path) {}

  MergeReport run() {
    merge_jobs();
    merge_runs();
    update_jobs();
    return report_;
  }

 private:
  struct ShardJob {
    std::int64_t main_id = 0;
    JobState state = JobState::queued;
    std::string error;
    std::int64_t failures = 0, infra_failures = 0;
  };

  // Experiments are matched by (name, text); added only when a job needs one that is missing.
  std::int64_t main_experiment(std::int64_t shard_id) {
    if (auto it = experiments_.find(shard_id); it != experiments_.end()) return it->second;
    std::int64_t id = 0;
    {
      sql::Statement st(db_, path_,
                        "SELECT m.id FROM main.experiments m JOIN shard.experiments s "
                        "ON s.id = ?1 AND m.name = s.name AND m.config_text = s.config_text ORDER BY m.id LIMIT 1");
      st.bind(1, shard_id);
      if (st.step()) id = st.column_int64(0);
    }
    if (id == 0) {
      sql::Statement st(db_, path_,
                        "INSERT INTO main.experiments (name, source_path, config_text, created_at) "
                        "SELECT name, source_path, config_text, created_at FROM shard.experiments WHERE id = ?1");
      st.bind(1, shard_id);
      st.run();
      id = insert_id(db_);
    }
    return experiments_[shard_id] = id;
  }

  // Jobs are matched by config_hash; a missing one is added with its parameters.
  void merge_jobs() {
    sql::Statement st(db_, path_,
                      "SELECT s.id, s.experiment_id, s.state, coalesce(s.error, ''), s.failures, coalesce(m.id, 0), "
                      "s.infra_failures "
                      "FROM shard.jobs s LEFT JOIN main.jobs m ON m.config_hash = s.config_hash ORDER BY s.id");
    while (st.step()) {
      const std::int64_t shard_id = st.column_int64(0);
      ShardJob job{st.column_int64(5), parse_job_state(st.column_text(2)), st.column_text(3), st.column_int64(4),
                   st.column_int64(6)};
      if (job.main_id == 0) job.main_id = add_job(shard_id, st.column_int64(1), job.state);
      jobs_[shard_id] = job;
    }
    merge_owners();
  }

  // Each experiment that owns a job in the shard owns it here.
  void merge_owners() {
    sql::Statement st(db_, path_, "SELECT experiment_id, job_id FROM shard.experiment_jobs ORDER BY experiment_id, job_id");
    sql::Statement link(db_, path_, "INSERT OR IGNORE INTO main.experiment_jobs (experiment_id, job_id) VALUES (?1, ?2)");
    while (st.step()) {
      link.bind(1, main_experiment(st.column_int64(0))).bind(2, jobs_.at(st.column_int64(1)).main_id);
      link.run();
      link.reset();
    }
  }

  std::int64_t add_job(std::int64_t shard_id, std::int64_t shard_experiment, JobState state) {
    const std::int64_t experiment = main_experiment(shard_experiment);
    {
      // Not final in the shard: its task still owns it, so nobody here may claim it.
      sql::Statement st(db_, path_,
                        "INSERT INTO main.jobs (experiment_id, method, dataset, seed, config_toml, config_hash, state, "
                        "created_at, failures, max_attempts, infra_failures, max_infra_failures, plugin_dirs, error) "
                        "SELECT ?1, method, dataset, seed, config_toml, config_hash, ?2, created_at, failures, "
                        "max_attempts, infra_failures, max_infra_failures, plugin_dirs, error FROM shard.jobs WHERE id = ?3");
      st.bind(1, experiment).bind(2, to_string(is_final(state) ? state : JobState::submitted)).bind(3, shard_id);
      st.run();
    }
    const std::int64_t id = insert_id(db_);
    sql::Statement params(db_, path_,
                          "INSERT INTO main.job_params (job_id, key, value) "
                          "SELECT ?1, key, value FROM shard.job_params WHERE job_id = ?2");
    params.bind(1, id).bind(2, shard_id);
    params.run();
    ++report_.jobs_added;
    return id;
  }

  // Finished runs whose uid is new here are copied with new ids and the next attempt numbers of
  // their job here; a run still running in the shard waits for a later merge.
  void merge_runs() {
    sql::Statement st(db_, path_,
                      "SELECT s.id, s.job_id, s.status, EXISTS (SELECT 1 FROM main.runs m WHERE m.uid = s.uid) "
                      "FROM shard.runs s ORDER BY s.job_id, s.attempt");
    while (st.step()) {
      if (parse_run_status(st.column_text(2)) == RunStatus::running) {
        ++report_.runs_unfinished;
      } else if (st.column_int64(3)) {
        ++report_.runs_present;
      } else {
        copy_run(st.column_int64(0), jobs_.at(st.column_int64(1)).main_id);
        touched_.insert(st.column_int64(1));
        ++report_.runs_added;
      }
    }
  }

  void copy_run(std::int64_t shard_run, std::int64_t main_job) {
    {
      sql::Statement st(db_, path_,
                        "INSERT INTO main.runs (job_id, attempt, status, host, device, device_name, torch_version, "
                        "attnlab_version, git_revision, threads, pid, started_at, finished_at, error, checkpoint_path, "
                        "worker, uid, heartbeat_at, resume_checkpoint, resume_step, resume_checksum, checkpoint_checksum, "
                        "step_mode, warnings, last_checkpoint, last_checksum) "
                        "SELECT ?1, (SELECT coalesce(max(attempt), 0) + 1 FROM main.runs WHERE job_id = ?1), status, host, "
                        "device, device_name, torch_version, attnlab_version, git_revision, threads, pid, started_at, "
                        "finished_at, error, checkpoint_path, worker, uid, heartbeat_at, resume_checkpoint, resume_step, "
                        "resume_checksum, checkpoint_checksum, step_mode, warnings, last_checkpoint, last_checksum "
                        "FROM shard.runs WHERE id = ?2");
      st.bind(1, main_job).bind(2, shard_run);
      st.run();
    }
    const std::int64_t run = insert_id(db_);
    for (const char* copy : {
             "INSERT INTO main.run_plugins (run_id, kind, name, version, path, sha256) "
             "SELECT ?1, kind, name, version, path, sha256 FROM shard.run_plugins WHERE run_id = ?2",
             "INSERT INTO main.curves (run_id, step, split, name, value, wall_seconds) "
             "SELECT ?1, step, split, name, value, wall_seconds FROM shard.curves WHERE run_id = ?2",
             "INSERT INTO main.results (run_id, name, value) SELECT ?1, name, value FROM shard.results WHERE run_id = ?2",
             "INSERT INTO main.accuracy_marks (run_id, mark, step, path, checksum) "
             "SELECT ?1, mark, step, path, checksum FROM shard.accuracy_marks WHERE run_id = ?2",
             "INSERT INTO main.variance_examples (run_id, split, example, passes, rsd, pi, vote, label) "
             "SELECT ?1, split, example, passes, rsd, pi, vote, label FROM shard.variance_examples WHERE run_id = ?2",
             "INSERT INTO main.spectrum_summaries (run_id, layer, stage, batch, split, matrices, width, rows_min, rows_max, k, "
             "rank90_mean, rank90_std, rank99_mean, rank99_std, stable_rank_mean, device, device_name, torch_version, git_revision, "
             "threads, created_at) "
             "SELECT ?1, layer, stage, batch, split, matrices, width, rows_min, rows_max, k, rank90_mean, rank90_std, rank99_mean, "
             "rank99_std, stable_rank_mean, device, device_name, torch_version, git_revision, threads, created_at "
             "FROM shard.spectrum_summaries WHERE run_id = ?2",
             "INSERT INTO main.spectrum_results (run_id, layer, stage, batch, idx, sigma_mean, sigma_std, normalised_mean, "
             "normalised_std, energy_mean) SELECT ?1, layer, stage, batch, idx, sigma_mean, sigma_std, normalised_mean, "
             "normalised_std, energy_mean FROM shard.spectrum_results WHERE run_id = ?2",
             "INSERT INTO main.gradient_stats (run_id, mark, parameter, step, split, examples, repeats, neurons, abs_mean, "
             "std, device, device_name, torch_version, git_revision, threads, created_at) SELECT ?1, mark, parameter, step, "
             "split, examples, repeats, neurons, abs_mean, std, device, device_name, torch_version, git_revision, threads, "
             "created_at "
             "FROM shard.gradient_stats WHERE run_id = ?2",
         }) {
      sql::Statement st(db_, path_, copy);
      st.bind(1, run).bind(2, shard_run);
      st.run();
    }
  }

  // A job that received runs counts them; it takes the shard's outcome when that is final,
  // unless it holds a lease here (a local attempt is running) or is done here already.
  void update_jobs() {
    for (const std::int64_t shard_id : touched_) {
      const ShardJob& job = jobs_.at(shard_id);
      {
        sql::Statement st(db_, path_,
                          "UPDATE main.jobs SET attempts = (SELECT count(*) FROM main.runs WHERE job_id = ?1) WHERE id = ?1");
        st.bind(1, job.main_id);
        st.run();
      }
      if (!is_final(job.state)) continue;
      sql::Statement st(db_, path_,
                        "UPDATE main.jobs SET state = ?1, failures = ?2, infra_failures = ?5, error = ?3 "
                        "WHERE id = ?4 AND state NOT IN ('running', 'done')");
      st.bind(1, to_string(job.state)).bind(2, job.failures).bind_text_or_null(3, job.error).bind(4, job.main_id);
      st.bind(5, job.infra_failures);
      st.run();
    }
  }

  sqlite3* db_;
  std::string path_;
  MergeReport report_;
  std::map<std::int64_t, std::int64_t> experiments_;  // shard id -> id here
  std::map<std::int64_t, ShardJob> jobs_;             // shard id -> its job here and outcome
  std::set<std::int64_t> touched_;                    // shard job ids that received runs
};

}  // namespace

MergeReport Database::merge_shard(const std::string& shard_path) {
  const std::string nothing = "; nothing merged into " + path_;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(shard_path, ec)) throw StoreError(shard_path + ": no such shard database" + nothing);
  try {
    AttachedShard attached(db_, path_, shard_path);
    // One transaction: the shard is read from one snapshot and this database changes wholly or not at all.
    sql::Transaction tx(db_, path_);
    check_shard(db_, shard_path);
    const MergeReport report = Merge(db_, path_).run();
    tx.commit();
    return report;
  } catch (const sql::SqliteError& e) {
    // SQLite's own complaint (a malformed or unreadable file, a constraint): one line naming the shard.
    const std::string what = e.what();
    const auto colon = what.rfind(": ");
    throw StoreError(shard_path + ": cannot merge (" + (colon == std::string::npos ? what : what.substr(colon + 2)) + ")" +
                     nothing);
  } catch (const StoreError& e) {
    throw StoreError(e.what() + nothing);
  }
}

}  // namespace attnlab::store
