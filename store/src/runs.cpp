// A run's own writes (lease-checked: attempts.hpp), its curves and results, and the summaries
// read back from them.

#include "attempts.hpp"

#include <sstream>

#include "access.hpp"
#include "attnlab/store.hpp"
#include "attnlab/store/run_writer.hpp"
#include "provenance.hpp"
#include "sqlite.hpp"

namespace attnlab::store {
namespace {

// The statuses a run's own process may end it with; its worker, ending it for a process that died,
// may also say `lost` (killed from outside): a run never says that of itself.
void check_final_status(const std::string& path, RunStatus status, bool by_worker) {
  if (status != RunStatus::running && (by_worker || status != RunStatus::lost)) return;
  throw StoreError(path + ": '" + to_string(status) + "' is not a final run status (done, failed, diverged, oom, " +
                   "interrupted, rejected" + (by_worker ? ", lost)" : ")"));
}

// One column of the run's own row: `update` sets ?1 on run ?2, lease-checked, in a transaction.
template <class Value>
void update_own_run(sqlite3* db, const std::string& path, std::int64_t run_id, const char* update, const Value& value) {
  sql::Transaction tx(db, path);
  attempts::require_lease(db, path, run_id);
  sql::Statement st(db, path, update);
  st.bind(1, value).bind(2, run_id);
  st.run();
  tx.commit();
}

std::vector<RunSummary> read_summaries(sql::Statement& st);  // below, beside the statements it reads

}  // namespace

RunWriter::RunWriter(Database& db, std::int64_t run_id)
    : database_(db), db_(sqlite_handle(db)), path_(db.path()), run_id_(run_id) {}

void RunWriter::set_environment(const RunEnvironment& env) {
  const std::int64_t run_id = run_id_;
  sql::Transaction tx(db_, path_);
  attempts::require_lease(db_, path_, run_id);
  {
    // Empty host/device/pid keep what the claim recorded (the provenance's columns in its order).
    sql::Statement st(db_, path_,
                      "UPDATE runs SET device = coalesce(?1, device), device_name = ?2, torch_version = ?3, "
                      "git_revision = ?4, threads = ?5, host = coalesce(?6, host), attnlab_version = ?7, "
                      "pid = coalesce(?8, pid), warnings = ?10 WHERE id = ?9");
    bind_provenance(st, 1, env);
    st.bind_text_or_null(6, env.host).bind_text_or_null(7, env.attnlab_version);
    if (env.pid > 0)
      st.bind(8, env.pid);
    else
      st.bind_null(8);
    st.bind(9, run_id);
    std::string warnings;
    for (const auto& line : env.warnings) warnings += (warnings.empty() ? "" : "\n") + line;
    st.bind_text_or_null(10, warnings);
    st.run();
  }
  sql::Statement plugin(db_, path_,
                        "INSERT OR REPLACE INTO run_plugins (run_id, kind, name, version, path, sha256) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  for (const PluginFile& p : env.plugins) {
    plugin.bind(1, run_id).bind(2, p.kind).bind(3, p.name).bind(4, p.version).bind(5, p.path).bind(6, p.sha256);
    plugin.run();
    plugin.reset();
  }
  tx.commit();
}

void RunWriter::set_step_mode(const std::string& mode) {
  const std::int64_t run_id = run_id_;
  update_own_run(db_, path_, run_id, "UPDATE runs SET step_mode = ?1 WHERE id = ?2", mode);
}

void RunWriter::set_phase(const RunPhase& phase) {
  const std::int64_t run_id = run_id_;
  sql::Transaction tx(db_, path_);
  attempts::require_lease(db_, path_, run_id);
  sql::Statement st(db_, path_,
                    "INSERT OR REPLACE INTO run_phases (run_id, phase, done, total, seconds) VALUES (?1, ?2, ?3, ?4, ?5)");
  st.bind(1, run_id).bind(2, phase.phase).bind(3, phase.done).bind(4, phase.total).bind(5, phase.seconds);
  st.run();
  tx.commit();
}

std::optional<RunPhase> ResultsReader::run_phase(std::int64_t run_id) {
  sql::Statement st(db_, path_, "SELECT phase, done, total, seconds FROM run_phases WHERE run_id = ?1");
  st.bind(1, run_id);
  if (!st.step()) return std::nullopt;
  return RunPhase{st.column_text(0), st.column_int64(1), st.column_int64(2), st.column_double(3)};
}

void RunWriter::append_curve(const std::vector<CurvePoint>& points) {
  const std::int64_t run_id = run_id_;
  if (points.empty()) return;
  sql::Transaction tx(db_, path_);
  attempts::require_lease(db_, path_, run_id);
  sql::Statement st(db_, path_,
                    "INSERT OR REPLACE INTO curves (run_id, step, split, name, value, wall_seconds) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  for (const CurvePoint& p : points) {
    st.bind(1, run_id).bind(2, p.step).bind(3, p.split).bind(4, p.name).bind(5, p.value).bind(6, p.wall_seconds);
    st.run();
    st.reset();
  }
  tx.commit();
}

void RunWriter::finish(RunStatus status,
                          const std::vector<std::pair<std::string, double>>& results, const std::string& error,
                          const std::string& checkpoint_path, const std::string& checkpoint_checksum, bool repeatable) {
  const std::int64_t run_id = run_id_;
  check_final_status(path_, status, false);
  sql::Transaction tx(db_, path_);
  const std::int64_t job_id = attempts::require_lease(db_, path_, run_id);
  {
    sql::Statement st(db_, path_, "INSERT OR REPLACE INTO results (run_id, name, value) VALUES (?1, ?2, ?3)");
    for (const auto& [name, value] : results) {
      st.bind(1, run_id).bind(2, name).bind(3, value);
      st.run();
      st.reset();
    }
  }
  {
    sql::Statement st(db_, path_, "UPDATE runs SET checkpoint_path = ?1, checkpoint_checksum = ?2 WHERE id = ?3");
    st.bind_text_or_null(1, checkpoint_path).bind_text_or_null(2, checkpoint_checksum).bind(3, run_id);
    st.run();
  }
  attempts::end_attempt(db_, path_, run_id, job_id, status, error, database_.now(), repeatable);
  tx.commit();
}

bool RunWriter::fail_if_unfinished(RunStatus status, const std::string& error) {
  const std::int64_t run_id = run_id_;
  check_final_status(path_, status, true);
  sql::Transaction tx(db_, path_);
  const std::int64_t job_id = attempts::job_if_holding_lease(db_, path_, run_id);
  if (job_id == 0) return false;  // finished already, or no longer ours: nothing written
  attempts::end_attempt(db_, path_, run_id, job_id, status, error, database_.now());
  tx.commit();
  return true;
}

std::optional<ResumePoint> ResultsReader::resume_point(std::int64_t job_id) {
  sql::Statement st(db_, path_,
                    "SELECT resume_checkpoint, id, coalesce(resume_step, 0), coalesce(resume_checksum, '') FROM runs "
                    "WHERE job_id = ?1 AND resume_checkpoint IS NOT NULL "
                    "AND attempt > (SELECT coalesce(max(attempt), 0) FROM runs "
                    "               WHERE job_id = ?1 AND status IN ('done', 'diverged', 'oom')) "
                    "ORDER BY attempt DESC LIMIT 1");
  st.bind(1, job_id);
  if (!st.step()) return std::nullopt;
  return ResumePoint{st.column_text(0), st.column_int64(1), st.column_int64(2), st.column_text(3)};
}

std::string ResultsReader::checkpoint_checksum(std::int64_t run_id) {
  sql::Statement st(db_, path_, "SELECT coalesce(checkpoint_checksum, '') FROM runs WHERE id = ?1");
  st.bind(1, run_id);
  if (!st.step()) throw StoreError(path_ + ": no run with id " + std::to_string(run_id));
  return st.column_text(0);
}

void RunWriter::set_pid(std::int64_t pid) {
  const std::int64_t run_id = run_id_;
  update_own_run(db_, path_, run_id, "UPDATE runs SET pid = ?1 WHERE id = ?2", pid);
}

void RunWriter::record_accuracy_marks(const std::vector<AccuracyMarkFile>& marks) {
  const std::int64_t run_id = run_id_;
  sql::Transaction tx(db_, path_);
  attempts::require_lease(db_, path_, run_id);
  sql::Statement st(db_, path_,
                    "INSERT OR REPLACE INTO accuracy_marks (run_id, mark, step, path, checksum) VALUES (?1, ?2, ?3, ?4, ?5)");
  for (const AccuracyMarkFile& m : marks) {
    st.bind(1, run_id).bind(2, m.mark).bind(3, m.step).bind(4, m.path).bind(5, m.checksum);
    st.run();
    st.reset();
  }
  tx.commit();
}

void RunWriter::record_last_weights(const std::string& path, const std::string& checksum) {
  const std::int64_t run_id = run_id_;
  sql::Transaction tx(db_, path_);
  attempts::require_lease(db_, path_, run_id);
  sql::Statement st(db_, path_, "UPDATE runs SET last_checkpoint = ?1, last_checksum = ?2 WHERE id = ?3");
  st.bind(1, path).bind(2, checksum).bind(3, run_id);
  st.run();
  tx.commit();
}

WeightsFile ResultsReader::last_weights_of_run(std::int64_t run_id) {
  sql::Statement st(db_, path_, "SELECT coalesce(last_checkpoint, ''), coalesce(last_checksum, '') FROM runs WHERE id = ?1");
  st.bind(1, run_id);
  if (!st.step()) throw StoreError(path_ + ": no run with id " + std::to_string(run_id));
  return {st.column_text(0), st.column_text(1)};
}

std::vector<AccuracyMarkFile> ResultsReader::accuracy_marks(std::int64_t run_id) {
  sql::Statement st(db_, path_, "SELECT mark, step, path, checksum FROM accuracy_marks WHERE run_id = ?1 ORDER BY mark");
  st.bind(1, run_id);
  std::vector<AccuracyMarkFile> marks;
  while (st.step()) marks.push_back({st.column_double(0), st.column_int64(1), st.column_text(2), st.column_text(3)});
  return marks;
}

void RunWriter::set_resume_checkpoint(const std::string& path, std::int64_t step,
                                     const std::string& checksum) {
  const std::int64_t run_id = run_id_;
  sql::Transaction tx(db_, path_);
  attempts::require_lease(db_, path_, run_id);
  sql::Statement st(db_, path_,
                    "UPDATE runs SET resume_checkpoint = ?1, resume_step = ?2, resume_checksum = ?3 WHERE id = ?4");
  st.bind(1, path).bind(2, step).bind_text_or_null(3, checksum).bind(4, run_id);
  st.run();
  tx.commit();
}

void RunWriter::discard_resume_point(std::int64_t earlier) {
  const std::int64_t holder = run_id_;
  sql::Transaction tx(db_, path_);
  const std::int64_t job_id = attempts::require_lease(db_, path_, holder);
  {
    sql::Statement st(db_, path_,
                      "UPDATE runs SET resume_checkpoint = NULL, resume_step = NULL, resume_checksum = NULL "
                      "WHERE id = ?1 AND job_id = ?2");
    st.bind(1, earlier).bind(2, job_id);
    st.run();
  }
  sql::Statement st(db_, path_, "DELETE FROM curves WHERE run_id = ?1");
  st.bind(1, holder);
  st.run();
  tx.commit();
}

void RunWriter::copy_curve_from(std::int64_t from, std::int64_t max_step) {
  const std::int64_t to = run_id_;
  sql::Transaction tx(db_, path_);
  const std::int64_t job_id = attempts::require_lease(db_, path_, to);
  {
    sql::Statement st(db_, path_, "SELECT job_id FROM runs WHERE id = ?1");
    st.bind(1, from);
    if (!st.step()) throw StoreError(path_ + ": no run with id " + std::to_string(from));
    if (st.column_int64(0) != job_id)
      throw StoreError(path_ + ": run " + std::to_string(from) + " is not an attempt of job " + std::to_string(job_id) +
                       "; its curve is not run " + std::to_string(to) + "'s to continue");
  }
  sql::Statement st(db_, path_,
                    "INSERT OR REPLACE INTO curves (run_id, step, split, name, value, wall_seconds) "
                    "SELECT ?1, step, split, name, value, wall_seconds FROM curves WHERE run_id = ?2 "
                    // the instability score's tau points are measured before training, numbered 1..n
                    "AND (step <= ?3 OR name IN ('tau', 'tau_softmax'))");
  st.bind(1, to).bind(2, from).bind(3, max_step);
  st.run();
  tx.commit();
}

void Database::set_results(std::int64_t run_id, const std::vector<std::pair<std::string, double>>& results) {
  sql::Transaction tx(db_, path_);
  {
    sql::Statement st(db_, path_, "SELECT 1 FROM runs WHERE id = ?1");
    st.bind(1, run_id);
    if (!st.step()) throw StoreError(path_ + ": no run with id " + std::to_string(run_id));
  }
  sql::Statement st(db_, path_, "INSERT OR REPLACE INTO results (run_id, name, value) VALUES (?1, ?2, ?3)");
  for (const auto& [name, value] : results) {
    st.bind(1, run_id).bind(2, name).bind(3, value);
    st.run();
    st.reset();
  }
  tx.commit();
}

void Database::set_variance_examples(std::int64_t run_id, const std::string& split, std::int64_t passes,
                                     const std::vector<double>& rsd, const std::vector<std::int64_t>& pi,
                                     const std::vector<std::int64_t>& vote, const std::vector<std::int64_t>& label) {
  if (pi.size() != rsd.size() || vote.size() != rsd.size() || label.size() != rsd.size())
    throw StoreError(path_ + ": per-example variance columns of different lengths");
  sql::Transaction tx(db_, path_);
  {
    sql::Statement st(db_, path_, "DELETE FROM variance_examples WHERE run_id = ?1 AND split = ?2");
    st.bind(1, run_id).bind(2, split);
    st.run();
  }
  sql::Statement st(db_, path_,
                    "INSERT INTO variance_examples (run_id, split, example, passes, rsd, pi, vote, label) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  for (std::size_t i = 0; i < rsd.size(); ++i) {
    st.bind(1, run_id).bind(2, split).bind(3, static_cast<std::int64_t>(i)).bind(4, passes).bind(5, rsd[i]);
    st.bind(6, pi[i]).bind(7, vote[i]).bind(8, label[i]);
    st.run();
    st.reset();
  }
  tx.commit();
}

std::vector<RunSummary> ResultsReader::run_summaries(std::optional<std::int64_t> experiment_id) {
  return summaries(experiment_id, std::nullopt);
}

std::optional<RunSummary> ResultsReader::run_summary(std::int64_t run_id) {
  auto found = summaries(std::nullopt, run_id);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

// Every experiment that asked for the run's job, in the order they did ("lo-methods, boom-fail"): a
// job a second experiment reused belongs to both (experiment_jobs), not to the first alone.
constexpr const char* kExperimentsOfJob =
    "(SELECT group_concat(x.name, ', ') FROM (SELECT e.name AS name FROM experiment_jobs ej "
    "JOIN experiments e ON e.id = ej.experiment_id WHERE ej.job_id = j.id ORDER BY e.id) AS x)";

std::vector<RunSummary> ResultsReader::summaries(std::optional<std::int64_t> experiment_id, std::optional<std::int64_t> run_id) {
  // One statement (one consistent snapshot): a run's row repeats once per result, results in name order.
  // Each condition only where asked for: "?2 IS NULL OR r.id = ?2" kept SQLite from the primary
  // key, and one run's summary read every run (a curves answer of 200 runs read 200 x 521).
  std::string sql =
      std::string("SELECT r.id, r.job_id, ") + kExperimentsOfJob + ", j.method, j.dataset, j.seed, r.attempt, r.status, "
      "r.device, r.error, r.started_at, r.finished_at, res.name, res.value "
      "FROM runs r JOIN jobs j ON j.id = r.job_id LEFT JOIN results res ON res.run_id = r.id WHERE 1";
  if (experiment_id) sql += " AND j.id IN (SELECT job_id FROM experiment_jobs WHERE experiment_id = ?1)";
  if (run_id) sql += " AND r.id = ?2";
  sql += " ORDER BY r.id, res.name";
  sql::Statement st(db_, path_, sql.c_str());
  if (experiment_id) st.bind(1, *experiment_id);
  if (run_id) st.bind(2, *run_id);
  return read_summaries(st);
}

namespace {

// The rows of a summaries statement (ResultsReader::summaries' columns, by run then result name).
std::vector<RunSummary> read_summaries(sql::Statement& st) {
  std::vector<RunSummary> out;
  while (st.step()) {
    const std::int64_t run_id = st.column_int64(0);
    if (out.empty() || out.back().run_id != run_id) {
      RunSummary s;
      s.run_id = run_id;
      s.job_id = st.column_int64(1);
      s.experiment = st.column_text(2);
      s.method = st.column_text(3);
      s.dataset = st.column_text(4);
      s.seed = st.column_int64(5);
      s.attempt = st.column_int64(6);
      s.status = parse_run_status(st.column_text(7));
      s.device = st.column_text(8);
      s.error = st.column_text(9);
      s.started_at = st.column_text(10);
      s.finished_at = st.column_text(11);
      out.push_back(std::move(s));
    }
    if (!st.column_is_null(12)) out.back().results.emplace_back(st.column_text(12), st.column_double(13));
  }
  return out;
}

}  // namespace

std::vector<RunSummary> run_summaries_of(ResultsReader& db, const std::vector<std::int64_t>& run_ids) {
  sql::Statement st(sqlite_handle(db), db.path(),
                    (std::string("SELECT r.id, r.job_id, ") + kExperimentsOfJob +
                     ", j.method, j.dataset, j.seed, r.attempt, r.status, r.device, "
                     "r.error, r.started_at, r.finished_at, res.name, res.value "
                     "FROM runs r JOIN jobs j ON j.id = r.job_id "
                     "LEFT JOIN results res ON res.run_id = r.id WHERE r.id IN (SELECT value FROM json_each(?1)) "
                     "ORDER BY r.id, res.name").c_str());
  st.bind(1, sql::json_array(run_ids));
  return read_summaries(st);
}

void each_curve_point(ResultsReader& db, const std::vector<std::pair<std::int64_t, std::int64_t>>& runs,
                      const std::string& split, const std::string& name,
                      const std::function<void(std::size_t, std::int64_t, double, double)>& point) {
  // one statement for every run: preparing it again per run cost as much as reading 100 points
  sql::Statement st(sqlite_handle(db), db.path(),
                    "SELECT step, value, wall_seconds FROM curves WHERE run_id = ?1 AND split = ?2 AND name = ?3 "
                    "AND step > ?4 ORDER BY step");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (i) st.reset();
    st.bind(1, runs[i].first).bind(2, split).bind(3, name).bind(4, runs[i].second);
    while (st.step()) point(i, st.column_int64(0), st.column_double(2), st.column_double(1));
  }
}

std::vector<CurvePoint> ResultsReader::curve(std::int64_t run_id) {
  sql::Statement st(db_, path_,
                    "SELECT step, split, name, value, wall_seconds FROM curves WHERE run_id = ?1 "
                    "ORDER BY split, name, step");
  st.bind(1, run_id);
  std::vector<CurvePoint> points;
  while (st.step()) {
    CurvePoint p;
    p.step = st.column_int64(0);
    p.split = st.column_text(1);
    p.name = st.column_text(2);
    p.value = st.column_double(3);
    p.wall_seconds = st.column_double(4);
    points.push_back(std::move(p));
  }
  return points;
}

std::vector<CurvePoint> ResultsReader::curve(std::int64_t run_id, const std::string& split, const std::string& name,
                                        std::int64_t after_step) {
  sql::Statement st(db_, path_,
                    "SELECT step, value, wall_seconds FROM curves WHERE run_id = ?1 AND split = ?2 AND name = ?3 "
                    "AND step > ?4 ORDER BY step");
  st.bind(1, run_id);
  st.bind(2, split);
  st.bind(3, name);
  st.bind(4, after_step);
  std::vector<CurvePoint> points;
  while (st.step()) {
    CurvePoint p;
    p.step = st.column_int64(0);
    p.split = split;
    p.name = name;
    p.value = st.column_double(1);
    p.wall_seconds = st.column_double(2);
    points.push_back(std::move(p));
  }
  return points;
}

std::vector<PluginFile> ResultsReader::run_plugins(std::int64_t run_id) {
  sql::Statement st(db_, path_,
                    "SELECT kind, name, version, path, sha256 FROM run_plugins WHERE run_id = ?1 ORDER BY kind, name");
  st.bind(1, run_id);
  std::vector<PluginFile> plugins;
  while (st.step()) plugins.push_back({st.column_text(0), st.column_text(1), st.column_text(2), st.column_text(3),
                                       st.column_text(4)});
  return plugins;
}

RunEnvironment ResultsReader::run_environment(std::int64_t run_id) {
  const std::string select =
      std::string("SELECT ") + kProvenanceColumns + ", host, attnlab_version, pid, step_mode, warnings FROM runs WHERE id = ?1";
  sql::Statement st(db_, path_, select.c_str());
  st.bind(1, run_id);
  if (!st.step()) throw StoreError(path_ + ": no run with id " + std::to_string(run_id));
  RunEnvironment env;
  read_provenance(st, 0, env);
  env.host = st.column_text(5);
  env.attnlab_version = st.column_text(6);
  env.pid = st.column_int64(7);
  env.step_mode = st.column_text(8);
  std::istringstream warnings(st.column_text(9));
  for (std::string line; std::getline(warnings, line);) env.warnings.push_back(line);
  env.plugins = run_plugins(run_id);
  return env;
}

std::string ResultsReader::checkpoint_of_run(std::int64_t run_id) {
  sql::Statement st(db_, path_, "SELECT checkpoint_path FROM runs WHERE id = ?1");
  st.bind(1, run_id);
  if (!st.step()) throw StoreError(path_ + ": no run with id " + std::to_string(run_id));
  return st.column_text(0);
}

}  // namespace attnlab::store
