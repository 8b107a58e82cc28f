// Tests of attnlab::store::Database against real SQLite files in a fresh temporary directory: opening,
// migrations, experiments, jobs, runs and their rows. The queue: store_queue_test.cpp; shards:
// store_merge_test.cpp.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "attnlab/store/run_writer.hpp"
#include "attnlab/store/studies.hpp"
#include "store_support.hpp"
#include "../store/src/access.hpp"

namespace fs = std::filesystem;
using attnlab::store::AddedJob;
using attnlab::store::ApproxResult;
using attnlab::store::BenchResult;
using attnlab::store::CurvePoint;
using attnlab::store::Database;
namespace store = attnlab::store;
using attnlab::store::JobState;
using attnlab::store::JobSpec;
using attnlab::store::PluginFile;
using attnlab::store::testing::job_ids_of_experiment;
using attnlab::store::testing::latest_run_of_job;
using attnlab::store::RunEnvironment;
using attnlab::store::SpectrumResult;
using attnlab::store::RunStatus;
using attnlab::store::RunSummary;
using attnlab::store::StoreError;
using attnlab::store::testing::query;
using attnlab::store::testing::query_one;
using attnlab::store::testing::raw_exec;
using attnlab::store::testing::raw_query_one;
using attnlab::store::testing::read_file;
using attnlab::store::testing::StoreTest;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// The plan's details, one line per step ("SEARCH jobs USING ...").
std::string query_plan(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, ("EXPLAIN QUERY PLAN " + sql).c_str(), -1, &st, nullptr), SQLITE_OK);
  std::string plan;
  while (sqlite3_step(st) == SQLITE_ROW)
    plan += (plan.empty() ? "" : "\n") + std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 3)));
  sqlite3_finalize(st);
  return plan;
}

bool is_timestamp(const std::string& s) {
  static const std::regex iso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  return std::regex_match(s, iso);
}

TEST_F(StoreTest, MigratesNewFileToTheCurrentVersion) {
  const std::string path = file("new.db");
  Database db(path);
  EXPECT_EQ(db.path(), path);
  EXPECT_EQ(db.schema_version(), Database::kSchemaVersion);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA user_version"), std::to_string(Database::kSchemaVersion));
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA foreign_keys"), "1");

  auto tables = query(store::sqlite_handle(db), "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  EXPECT_EQ(tables, (std::vector<std::string>{"accuracy_marks", "approx_results", "bench_results", "curves", "experiment_jobs", "experiments", "gradient_stats",
                                              "job_params", "jobs", "results", "run_phases", "run_plugins", "runs", "spectrum_results",
                                              "spectrum_summaries", "variance_examples"}));
  EXPECT_EQ(query(store::sqlite_handle(db), "SELECT name FROM sqlite_master WHERE type = 'view' ORDER BY name"),
            (std::vector<std::string>{"job_outcomes", "job_results", "run_curves", "run_summary", "seed_stats"}));
  auto view_columns = query(store::sqlite_handle(db), "SELECT name FROM pragma_table_info('run_summary')");
  EXPECT_EQ(view_columns,
            (std::vector<std::string>{"run_id", "job_id", "experiment", "method", "dataset", "seed", "attempt",
                                      "status", "device", "started_at", "finished_at", "error", "test_acc",
                                      "best_val_acc", "wall_seconds", "steps_per_second", "peak_memory_bytes",
                                      "param_count", "majority_rate"}));
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(db.migrated_from(), 0);
  // the claim reads the lowest queued id from an index, not a scan
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT group_concat(name) FROM pragma_index_info('jobs_by_state')"), "state,id");
  EXPECT_EQ(query_plan(store::sqlite_handle(db), "SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1"),
            "SEARCH jobs USING COVERING INDEX jobs_by_state (state=?)");
  Database again(path);
  EXPECT_EQ(again.migrated_from(), Database::kSchemaVersion);
}

TEST_F(StoreTest, MigratesExistingEmptyFile) {
  const std::string path = file("empty.db");
  std::ofstream(path).close();
  ASSERT_EQ(fs::file_size(path), 0u);
  Database db(path);
  EXPECT_EQ(db.schema_version(), Database::kSchemaVersion);
}

TEST_F(StoreTest, ReopenKeepsDataWithoutMigratingAgain) {
  const std::string path = file("reopen.db");
  std::int64_t exp = 0;
  std::string schema_before;
  {
    Database db(path);
    exp = db.add_experiment("first", "exp/first.toml", "x = 1");
    db.add_job(spec(exp, "h1"));
    schema_before = query_one(store::sqlite_handle(db), "SELECT group_concat(sql, ';') FROM sqlite_master");
  }
  Database db(path);  // re-running migration 1 would fail on CREATE TABLE
  EXPECT_EQ(db.schema_version(), Database::kSchemaVersion);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT group_concat(sql, ';') FROM sqlite_master"), schema_before);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT name || '|' || source_path || '|' || config_text FROM experiments"),
            "first|exp/first.toml|x = 1");
  const auto jobs = job_ids_of_experiment(db, exp);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(db.job(jobs[0]).config_hash, "h1");
}

TEST_F(StoreTest, LateResultsAndPerExampleVarianceRoundTrip) {
  Database db(file("variance.db"));
  const auto experiment = db.add_experiment("e", "e.toml", "[experiment]");
  const auto run = start_attempt(db, db.add_job(spec(experiment, "h")).job_id);
  store::RunWriter(db, run).finish(RunStatus::done, {{"test_acc", 0.5}, {"rsd", 9.0}}, "", "");
  db.set_results(run, {{"rsd", 0.25}, {"agv", 1.5}});
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT group_concat(name || '=' || value, ' ') FROM (SELECT * FROM results ORDER BY name)"),
            "agv=1.5 rsd=0.25 test_acc=0.5");
  EXPECT_THROW(db.set_results(run + 1, {{"rsd", 1.0}}), StoreError);

  db.set_variance_examples(run, "test", 10, {0.5, INFINITY, 0.0}, {1, 5, 0}, {1, 0, 2}, {1, 1, 2});
  db.set_variance_examples(run, "test", 20, {0.1, 0.2}, {2, 3}, {0, 1}, {0, 1});  // replaces the test rows
  db.set_variance_examples(run, "val", 10, {0.7}, {4}, {3}, {3});
  EXPECT_EQ(query(store::sqlite_handle(db), "SELECT split || ':' || example || ':' || passes || ':' || rsd || ':' || pi || ':' || vote || ':' || "
                               "label FROM variance_examples ORDER BY split, example"),
            (std::vector<std::string>{"test:0:20:0.1:2:0:0", "test:1:20:0.2:3:1:1", "val:0:10:0.7:4:3:3"}));
  EXPECT_THROW(db.set_variance_examples(run, "test", 2, {0.1}, {1, 2}, {0}, {0}), StoreError);
}

TEST_F(StoreTest, StudyResultsRoundTrip) {
  Database db(file("studies.db"));
  BenchResult b;
  b.method = "skyformer";
  b.dataset = "listops";
  b.seq_len = 4096;
  b.batch_size = 4;
  b.device = "cpu";
  b.steps_timed = 5;
  b.step_seconds_median = 0.5;
  b.step_seconds_min = 0.4;
  b.step_seconds_max = 0.7;
  b.peak_memory_bytes = 1.5e9;
  b.host_seconds_median = 0.125;
  b.ops_per_step = 1812;
  b.step_mode = "cuda graph";
  b.status = "done";
  b.config_toml = "[model]\nlayers = 2\n";
  const auto done_id = store::add_bench_result(db, b);
  b.status = "oom";
  b.error = "out of memory";
  b.host_seconds_median = std::numeric_limits<double>::quiet_NaN();  // not measured: NULL, read back as NaN
  b.ops_per_step = 0;                                                // not counted: NULL, read back as 0
  b.step_mode.clear();
  const auto oom_id = store::add_bench_result(db, b);
  const auto benches = store::bench_results(db);
  ASSERT_EQ(benches.size(), 2u);
  EXPECT_EQ(benches[0].id, done_id);
  EXPECT_EQ(benches[1].id, oom_id);
  ASSERT_TRUE(store::bench_result(db, oom_id));
  EXPECT_EQ(store::bench_result(db, oom_id)->status, "oom");
  EXPECT_EQ(store::bench_result(db, done_id)->status, "done");
  EXPECT_FALSE(store::bench_result(db, oom_id + 1));
  EXPECT_EQ(benches[0].method, "skyformer");
  EXPECT_EQ(benches[0].seq_len, 4096);
  EXPECT_DOUBLE_EQ(benches[0].step_seconds_median, 0.5);
  EXPECT_DOUBLE_EQ(benches[0].peak_memory_bytes, 1.5e9);
  EXPECT_DOUBLE_EQ(benches[0].host_seconds_median, 0.125);
  EXPECT_EQ(benches[0].ops_per_step, 1812);
  EXPECT_EQ(benches[0].step_mode, "cuda graph");
  EXPECT_EQ(benches[1].step_mode, "");
  EXPECT_TRUE(std::isnan(benches[1].host_seconds_median));
  EXPECT_EQ(benches[1].ops_per_step, 0);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM bench_results WHERE ops_per_step IS NULL AND "
                                                "host_seconds_median IS NULL"), "1");
  EXPECT_EQ(benches[1].status, "oom");
  EXPECT_EQ(benches[1].error, "out of memory");
  EXPECT_FALSE(benches[0].created_at.empty());
  b.status = "exploded";
  EXPECT_THROW(store::add_bench_result(db, b), StoreError);  // CHECK constraint

  ApproxResult a;
  a.method = "nystromformer";
  a.reference = "softmax";
  a.source = "npy:/tmp/qkv";
  a.param = "landmarks";
  a.features = 64;
  a.seq_len = 1024;
  a.samples = 8;
  a.abs_error_mean = 0.25;
  a.abs_error_std = 0.01;
  a.rel_error_mean = 0.1;
  a.rel_error_std = 0.002;
  auto second = a;
  second.features = 128;
  EXPECT_EQ(store::add_approx_results(db, {a, second}), 2);
  const auto approx = store::approx_results(db);
  ASSERT_EQ(approx.size(), 2u);
  EXPECT_EQ(approx[0].source, "npy:/tmp/qkv");
  EXPECT_EQ(approx[1].features, 128);
  EXPECT_DOUBLE_EQ(approx[0].rel_error_std, 0.002);
}

// One Provenance, the same five columns in every table that stores one (schema 10 gave the study
// tables the device's name and the threads): each study's row reads back what was stamped.
TEST_F(StoreTest, EveryStudyRowKeepsItsProvenance) {
  Database db(file("provenance.db"));
  const auto experiment = db.add_experiment("e", "e.toml", "[experiment]");
  const auto run = start_attempt(db, db.add_job(spec(experiment, "h")).job_id);
  store::RunWriter(db, run).finish(RunStatus::done, {{"test_acc", 0.5}}, "", "");
  attnlab::store::Provenance p;
  p.device = "cuda:0";
  p.device_name = "NVIDIA H100 80GB HBM3";
  p.torch_version = "2.11.0";
  p.git_revision = "0ca9307";
  p.threads = 16;
  auto same = [&](const attnlab::store::Provenance& got, const char* where) {
    EXPECT_EQ(got.device, p.device) << where;
    EXPECT_EQ(got.device_name, p.device_name) << where;
    EXPECT_EQ(got.torch_version, p.torch_version) << where;
    EXPECT_EQ(got.git_revision, p.git_revision) << where;
    EXPECT_EQ(got.threads, p.threads) << where;
  };
  BenchResult b;
  static_cast<attnlab::store::Provenance&>(b) = p;
  b.method = "softmax";
  b.dataset = "listops";
  b.status = "done";
  b.config_toml = "[model]";
  same(*store::bench_result(db, store::add_bench_result(db, b)), "bench");
  ApproxResult a;
  static_cast<attnlab::store::Provenance&>(a) = p;
  a.method = "nystromformer";
  a.reference = "softmax";
  a.source = "npy:/tmp/qkv";
  store::add_approx_results(db, {a});
  same(store::approx_results(db).at(0), "approx");
  SpectrumResult r;
  static_cast<attnlab::store::Provenance&>(r) = p;
  r.run_id = run;
  r.layer = 1;
  r.stage = "out";
  r.batch = 1;
  r.values = {{1, 0, 1, 0, 1}};
  store::set_spectrum(db, r);
  same(store::spectrum_results(db, {run}).at(0), "spectrum");
  attnlab::store::GradientStats g;
  static_cast<attnlab::store::Provenance&>(g) = p;
  g.run_id = run;
  g.mark = 0.4;
  g.parameter = "head_in.bias";
  g.examples = 1;
  g.repeats = 2;
  g.neurons = 1;
  store::set_gradient_stats(db, {g});
  same(store::gradient_stats(db, {run}).at(0), "gradients");
}

// attnlab spectrum (schema 7): a measurement is a summary row and one row per index; measuring
// the same (run, layer, stage, batch) again replaces both, another batch is another measurement.
TEST_F(StoreTest, SpectrumRoundTripsAndReplacesTheSameMeasurement) {
  Database db(file("spectrum.db"));
  const auto experiment = db.add_experiment("e", "e.toml", "[experiment]");
  const auto run = start_attempt(db, db.add_job(spec(experiment, "h")).job_id);
  store::RunWriter(db, run).finish(RunStatus::done, {{"test_acc", 0.5}}, "", "");
  SpectrumResult r;
  r.run_id = run;
  r.layer = 2;
  r.stage = "out";
  r.batch = 16;
  r.matrices = 16;
  r.width = 4;
  r.rows_min = 10;
  r.rows_max = 60;
  r.rank90_mean = 1.5;
  r.rank90_std = 0.5;
  r.rank99_mean = 3;
  r.rank99_std = NAN;  // one matrix: no std, stored as NULL
  r.stable_rank_mean = 1.25;
  r.values = {{8, 1, 1, 0, 0.8}, {2, 0.5, 0.25, 0.125, 0.15}, {1, 0.25, 0.125, 0.0625, 0.05}};
  r.device = "cpu";
  store::set_spectrum(db, r);
  auto again = r;
  again.values.pop_back();
  again.rank90_mean = 1;
  store::set_spectrum(db, again);  // replaces
  auto other = r;
  other.batch = 4;
  store::set_spectrum(db, other);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM spectrum_summaries"), "2");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT group_concat(idx || ':' || normalised_mean, ' ') FROM spectrum_results WHERE batch = 16"),
            "1:1.0 2:0.25");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT k || ' ' || coalesce(rank99_std, 'NULL') FROM spectrum_summaries WHERE batch = 16"),
            "2 NULL");
  const auto all = store::spectrum_results(db);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].batch, 4);  // ordered by run, layer, stage, batch
  EXPECT_EQ(all[1].values.size(), 2u);
  EXPECT_DOUBLE_EQ(all[1].rank90_mean, 1);
  EXPECT_TRUE(std::isnan(all[1].rank99_std));
  EXPECT_DOUBLE_EQ(all[1].values[1].sigma_mean, 2);
  EXPECT_DOUBLE_EQ(all[1].values[1].energy_mean, 0.15);
  EXPECT_EQ(all[1].stage, "out");
  EXPECT_EQ(all[1].rows_max, 60);
  EXPECT_FALSE(all[1].created_at.empty());
  EXPECT_EQ(store::spectrum_results(db, {run}).size(), 2u);
  EXPECT_TRUE(store::spectrum_results(db, {run + 1}).empty());

  auto bad = r;
  bad.run_id = run + 1;
  EXPECT_THROW(store::set_spectrum(db, bad), StoreError);  // no such run
  bad = r;
  bad.stage = "middle";
  EXPECT_THROW(store::set_spectrum(db, bad), StoreError);  // CHECK
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM spectrum_results"), "5");  // a failed write leaves nothing
}

// attnlab gradients (schema 8): one row per (run, mark, parameter), replaced when measured again,
// all rows of a call in one transaction (a bad one stores none).
TEST_F(StoreTest, GradientStatsRoundTripAndReplace) {
  Database db(file("gradients.db"));
  const auto experiment = db.add_experiment("e", "e.toml", "[experiment]");
  const auto run = start_attempt(db, db.add_job(spec(experiment, "h")).job_id);
  store::RunWriter(db, run).finish(RunStatus::done, {{"test_acc", 0.5}}, "", "");
  attnlab::store::GradientStats g;
  g.run_id = run;
  g.mark = 0.4;
  g.parameter = "head_in.bias";
  g.step = 1200;
  g.examples = 50;
  g.repeats = 50;
  g.neurons = 64;
  g.abs_mean = 0.16609;
  g.std = 0.094528;
  g.device = "cpu";
  auto low = g;
  low.mark = 0.2;
  low.step = 400;
  store::set_gradient_stats(db, {g, low});
  g.std = 0.1;
  store::set_gradient_stats(db, {g});  // replaces
  const auto all = store::gradient_stats(db, {run});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_DOUBLE_EQ(all[0].mark, 0.2);  // by run, then mark
  EXPECT_EQ(all[0].step, 400);
  EXPECT_DOUBLE_EQ(all[1].std, 0.1);
  EXPECT_DOUBLE_EQ(all[1].abs_mean, 0.16609);
  EXPECT_EQ(all[1].parameter, "head_in.bias");
  EXPECT_EQ(all[1].neurons, 64);
  EXPECT_FALSE(all[1].created_at.empty());
  EXPECT_TRUE(store::gradient_stats(db, {run + 1}).empty());
  auto bad = g;
  bad.repeats = 1;  // CHECK: one repeat has no std
  auto fine = g;
  fine.mark = 0.6;
  EXPECT_THROW(store::set_gradient_stats(db, {fine, bad}), StoreError);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM gradient_stats"), "2");
}

TEST_F(StoreTest, RefusesNewerSchemaNamingFileAndVersions) {
  const std::string path = file("future.db");
  { Database db(path); }
  const std::string future = std::to_string(Database::kSchemaVersion + 1);
  raw_exec(path, "PRAGMA user_version = " + future);
  try {
    Database db(path);
    FAIL() << "opened a database from the future";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": database schema version " + future + " is newer than this attnlab knows (" +
                                       std::to_string(Database::kSchemaVersion) + ")");
  }
  // Left untouched.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(query_one(raw, "PRAGMA user_version"), future);
  sqlite3_close(raw);
}

// Issue 13, item 12. A reader (results, queue list, ...) leaves a DELETE-journal file as it is, and
// reads a database in a folder it cannot write (an archive, another user's results), which SQLite
// refuses for a WAL file ("attempt to write a readonly database") unless it is opened immutable.
// A WAL file whose log still holds changes cannot be read there: one line says so.
namespace {
// Opens `path` read-only in a child process that cannot write `folder` (made 0555; as root the
// child first becomes nobody, since root writes anywhere): "jobs N", or the error it got.
std::string read_as_outsider(const std::string& folder, const std::string& path) {
  int out[2];
  if (pipe(out) != 0) return "no pipe";
  fs::permissions(folder, fs::perms(0555));
  const pid_t child = fork();
  if (child == 0) {
    close(out[0]);
    std::string said;
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) said = "cannot become nobody";
    try {
      if (said.empty()) said = "jobs " + std::to_string(store::ResultsReader(path).list_jobs({}).size());
    } catch (const std::exception& e) {
      said = e.what();
    }
    (void)!write(out[1], said.data(), said.size());
    _exit(0);
  }
  close(out[1]);
  std::string said;
  char buffer[512];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) said.append(buffer, static_cast<std::size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  fs::permissions(folder, fs::perms(0755));
  return said;
}
}  // namespace

TEST_F(StoreTest, AReaderChangesNothingAndReadsAFolderItCannotWrite) {
  const std::string path = file("r.db");
  {
    Database db(path);
    db.add_job(spec(db.add_experiment("e", "", "c"), "h"));
  }
  raw_exec(path, "PRAGMA journal_mode = DELETE");
  {
    store::ResultsReader reader(path);
    EXPECT_EQ(reader.list_jobs({}).size(), 1u);
  }
  EXPECT_EQ(raw_query_one(path, "PRAGMA journal_mode"), "delete") << "a reader switched the file to WAL";
  { Database writer(path, Database::Open::existing); }  // writers set WAL
  EXPECT_EQ(raw_query_one(path, "PRAGMA journal_mode"), "wal");

  fs::permissions(file(""), fs::perms(0755));  // mkdtemp's 0700 would keep nobody out altogether
  ASSERT_FALSE(fs::exists(path + "-wal") && fs::file_size(path + "-wal") > 0);
  fs::remove(path + "-wal");  // empty: as a copy of the file alone would be
  fs::remove(path + "-shm");
  EXPECT_EQ(read_as_outsider(file(""), path), "jobs 1");

  // A copy taken while a writer had changes in its log: the -wal is part of the database.
  const std::string copy = file("copy"), copied = copy + "/r.db";
  fs::create_directory(copy);
  sqlite3* writer = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &writer), SQLITE_OK);
  query(writer, "PRAGMA wal_autocheckpoint = 0");
  query(writer, "INSERT INTO experiments (name, config_text) VALUES ('later', 'c')");
  fs::copy_file(path, copied);
  fs::copy_file(path + "-wal", copied + "-wal");
  sqlite3_close(writer);
  ASSERT_GT(fs::file_size(copied + "-wal"), 0u);
  EXPECT_EQ(read_as_outsider(copy, copied),
            copied + ": cannot read it here: its write-ahead log " + copied + "-wal holds changes and this folder "
            "cannot be written; open it once where it can be written (`attnlab db migrate --db " + copied + "` folds the log into the file)");
  EXPECT_EQ(store::ResultsReader(copied).list_jobs({}).size(), 1u) << "where it can be written";
}

TEST_F(StoreTest, RefusesTextFileAndLeavesItAlone) {
  for (const std::string& text : {std::string("not a db\n"), std::string(5000, 'x') + "\n"}) {
    const std::string path = file("notes.txt");
    std::ofstream(path, std::ios::binary) << text;
    try {
      Database db(path);
      FAIL() << "opened a text file";
    } catch (const StoreError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg, path + ": not an attnlab database (file is not a database)");
      EXPECT_EQ(msg.find('\n'), std::string::npos);
    }
    EXPECT_EQ(read_file(path), text);
    EXPECT_FALSE(fs::exists(path + "-wal"));
  }
}

TEST_F(StoreTest, RefusesForeignSqliteDatabase) {
  const std::string path = file("other.db");
  raw_exec(path, "CREATE TABLE jobs (x); INSERT INTO jobs VALUES (42)");
  try {
    Database db(path);
    FAIL() << "migrated someone else's database";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": not an attnlab database"), std::string::npos) << e.what();
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(query_one(raw, "SELECT x FROM jobs"), "42");
  EXPECT_EQ(query_one(raw, "PRAGMA user_version"), "0");
  sqlite3_close(raw);
}

TEST_F(StoreTest, RefusesUnopenablePath) {
  const std::string path = file("no/such/dir/x.db");
  try {
    Database db(path);
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
}

TEST_F(StoreTest, FullRoundTrip) {
  const std::string path = file("round.db");
  Database db(path);
  const auto exp = db.add_experiment("lra-small", "experiments/lra.toml", "[experiment]\nname = 'lra-small'\n");
  EXPECT_GT(exp, 0);
  EXPECT_TRUE(is_timestamp(query_one(store::sqlite_handle(db), "SELECT created_at FROM experiments")));

  const AddedJob added = db.add_job(spec(exp, "hash-1", 3));
  EXPECT_FALSE(added.existed);
  EXPECT_EQ(added.state, JobState::queued);
  auto job = db.job(added.job_id);
  EXPECT_EQ(job.id, added.job_id);
  EXPECT_EQ(job.experiment_id, exp);
  EXPECT_EQ(job.method, "softmax");
  EXPECT_EQ(job.dataset, "listops");
  EXPECT_EQ(job.seed, 3);
  EXPECT_EQ(job.config_toml, "[train]\nlr = 0.0001\n");
  EXPECT_EQ(job.config_hash, "hash-1");
  EXPECT_EQ(job.state, JobState::queued);
  EXPECT_EQ(query(store::sqlite_handle(db), "SELECT key || '=' || value FROM job_params ORDER BY key"),
            (std::vector<std::string>{"model.layers=2", "train.lr=0.0001"}));
  EXPECT_TRUE(is_timestamp(query_one(store::sqlite_handle(db), "SELECT created_at FROM jobs")));

  const auto run = start_attempt(db, added.job_id, env(), 4242);
  EXPECT_EQ(db.job(added.job_id).state, JobState::running);
  EXPECT_EQ(query_one(store::sqlite_handle(db),
                      "SELECT host || '|' || device || '|' || device_name || '|' || torch_version || '|' || "
                      "attnlab_version || '|' || git_revision || '|' || threads || '|' || pid FROM runs"),
            "node7|cuda:0|NVIDIA H100 80GB HBM3|2.3.1|0.1.0|abc123|16|4242");

  const std::vector<CurvePoint> points = {
      {0, "train", "loss", 2.5, 0.1},   {100, "train", "loss", 1.25, 10.5}, {100, "val", "acc", 0.5, 11.0},
      {200, "train", "loss", kNaN, 20.0}, {200, "val", "acc", 0.75, 21.0},
  };
  store::RunWriter(db, run).append_curve({points[0], points[1]});
  store::RunWriter(db, run).append_curve({points[2], points[3], points[4]});
  store::RunWriter(db, run).append_curve({});
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT quote(value) FROM curves WHERE step = 200 AND split = 'train'"), "NULL");

  const std::vector<std::pair<std::string, double>> results = {
      {"test_acc", 0.8125}, {"best_val_acc", 0.75}, {"test_loss", kNaN}, {"peak_memory_bytes", 123456789.0}};
  store::RunWriter(db, run).finish(RunStatus::done, results, "", "ckpt/run1.pt");
  EXPECT_EQ(db.job(added.job_id).state, JobState::done);

  auto summaries = db.run_summaries();
  ASSERT_EQ(summaries.size(), 1u);
  const RunSummary& s = summaries[0];
  EXPECT_EQ(s.run_id, run);
  EXPECT_EQ(s.job_id, added.job_id);
  EXPECT_EQ(s.experiment, "lra-small");
  EXPECT_EQ(s.method, "softmax");
  EXPECT_EQ(s.dataset, "listops");
  EXPECT_EQ(s.seed, 3);
  EXPECT_EQ(s.attempt, 1);
  EXPECT_EQ(s.status, RunStatus::done);
  EXPECT_EQ(s.device, "cuda:0");
  EXPECT_EQ(s.error, "");
  EXPECT_TRUE(is_timestamp(s.started_at)) << s.started_at;
  EXPECT_TRUE(is_timestamp(s.finished_at)) << s.finished_at;
  EXPECT_LE(s.started_at, s.finished_at);
  ASSERT_EQ(s.results.size(), 4u);  // sorted by name
  EXPECT_EQ(s.results[0], (std::pair<std::string, double>{"best_val_acc", 0.75}));
  EXPECT_EQ(s.results[1], (std::pair<std::string, double>{"peak_memory_bytes", 123456789.0}));
  EXPECT_EQ(s.results[2], (std::pair<std::string, double>{"test_acc", 0.8125}));
  EXPECT_EQ(s.results[3].first, "test_loss");
  EXPECT_TRUE(std::isnan(s.results[3].second));
  EXPECT_EQ(s.result("test_acc"), 0.8125);
  EXPECT_TRUE(s.result("test_loss").has_value());
  EXPECT_FALSE(s.result("param_count").has_value());
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT checkpoint_path || '|' || quote(error) FROM runs"), "ckpt/run1.pt|NULL");

  // The view pivots the same numbers.
  EXPECT_EQ(query_one(store::sqlite_handle(db),
                      "SELECT experiment || '|' || method || '|' || seed || '|' || status || '|' || test_acc || "
                      "'|' || best_val_acc || '|' || peak_memory_bytes || '|' || quote(param_count) "
                      "FROM run_summary"),
            "lra-small|softmax|3|done|0.8125|0.75|123456789.0|NULL");

  auto curve = db.curve(run);  // ordered by split, name, step
  ASSERT_EQ(curve.size(), 5u);
  const std::vector<int> order = {0, 1, 3, 2, 4};
  for (std::size_t i = 0; i < curve.size(); ++i) {
    const CurvePoint& want = points[static_cast<std::size_t>(order[i])];
    EXPECT_EQ(curve[i].step, want.step) << i;
    EXPECT_EQ(curve[i].split, want.split) << i;
    EXPECT_EQ(curve[i].name, want.name) << i;
    if (std::isnan(want.value))
      EXPECT_TRUE(std::isnan(curve[i].value)) << i;
    else
      EXPECT_EQ(curve[i].value, want.value) << i;
    EXPECT_EQ(curve[i].wall_seconds, want.wall_seconds) << i;
  }

  auto plugins = db.run_plugins(run);
  ASSERT_EQ(plugins.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(plugins[i].kind, env().plugins[i].kind);
    EXPECT_EQ(plugins[i].name, env().plugins[i].name);
    EXPECT_EQ(plugins[i].version, env().plugins[i].version);
    EXPECT_EQ(plugins[i].path, env().plugins[i].path);
    EXPECT_EQ(plugins[i].sha256, env().plugins[i].sha256);
  }
  EXPECT_EQ(latest_run_of_job(db, added.job_id), run);
  EXPECT_TRUE(query(store::sqlite_handle(db), "PRAGMA foreign_key_check").empty());
}

TEST_F(StoreTest, CurvePointsReplaceSameKey) {
  Database db(file("replace.db"));
  const auto job = db.add_job(spec(db.add_experiment("e", "", "c"), "h")).job_id;
  const auto run = start_attempt(db, job);
  store::RunWriter(db, run).append_curve({{10, "val", "acc", 0.5, 1.0}});
  store::RunWriter(db, run).append_curve({{10, "val", "acc", 0.625, 2.0}});
  auto curve = db.curve(run);
  ASSERT_EQ(curve.size(), 1u);
  EXPECT_EQ(curve[0].value, 0.625);
  EXPECT_EQ(curve[0].wall_seconds, 2.0);
}

TEST_F(StoreTest, AddJobTwiceWithSameHashReturnsExisting) {
  Database db(file("dup.db"));
  const auto exp = db.add_experiment("e", "", "c");
  const AddedJob first = db.add_job(spec(exp, "same-hash"));
  start_attempt(db, first.job_id);
  JobSpec other = spec(exp, "same-hash");
  other.method = "linear";
  other.params = {{"only", "this"}};
  const AddedJob second = db.add_job(other);
  EXPECT_TRUE(second.existed);
  EXPECT_EQ(second.job_id, first.job_id);
  EXPECT_EQ(second.state, JobState::running);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM jobs"), "1");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM job_params"), "2");
  EXPECT_EQ(db.job(first.job_id).method, "softmax");

  const AddedJob third = db.add_job(spec(exp, "other-hash", 2));
  EXPECT_FALSE(third.existed);
  EXPECT_NE(third.job_id, first.job_id);
  EXPECT_EQ(job_ids_of_experiment(db, exp), (std::vector<std::int64_t>{first.job_id, third.job_id}));
}

TEST_F(StoreTest, AddJobIsAtomic) {
  Database db(file("atomic.db"));
  const auto exp = db.add_experiment("e", "", "c");
  JobSpec bad = spec(exp, "h");
  bad.params = {{"k", "1"}, {"k", "2"}};  // duplicate key: the second insert fails
  EXPECT_THROW(db.add_job(bad), StoreError);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM jobs"), "0");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM job_params"), "0");
  // The connection is usable afterwards (no transaction left open).
  EXPECT_FALSE(db.add_job(spec(exp, "h")).existed);
}

TEST_F(StoreTest, AttemptsCountUp) {
  Database db(file("attempts.db"));
  const auto job = db.add_job(spec(db.add_experiment("e", "", "c"), "h")).job_id;
  EXPECT_EQ(latest_run_of_job(db, job), std::nullopt);
  const auto r1 = start_attempt(db, job);
  store::RunWriter(db, r1).finish(RunStatus::failed, {}, "boom", "");
  EXPECT_EQ(db.job(job).state, JobState::queued);  // one failure of three allowed
  const auto r2 = start_attempt(db, job);
  store::RunWriter(db, r2).finish(RunStatus::interrupted, {}, "SIGINT", "");
  EXPECT_EQ(db.job(job).state, JobState::queued);
  const auto r3 = start_attempt(db, job);
  EXPECT_EQ(latest_run_of_job(db, job), r3);
  auto s = db.run_summaries();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].attempt, 1);
  EXPECT_EQ(s[1].attempt, 2);
  EXPECT_EQ(s[2].attempt, 3);
  EXPECT_EQ(s[0].error, "boom");
  EXPECT_EQ(s[1].status, RunStatus::interrupted);
  EXPECT_EQ(s[2].status, RunStatus::running);
  const auto listed = db.list_jobs({});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].attempts, 3);
  EXPECT_EQ(listed[0].failures, 1);  // the interrupted attempt is not counted
  EXPECT_EQ(listed[0].lease_run_id, r3);
}

TEST_F(StoreTest, RequeueAndStatusMapping) {
  Database db(file("requeue.db"));
  const auto exp = db.add_experiment("e", "", "c");
  // done, diverged and oom are the method's own outcome: final, taken by the job
  for (const auto& [status, state] : {std::pair{RunStatus::done, JobState::done},
                                      std::pair{RunStatus::diverged, JobState::diverged},
                                      std::pair{RunStatus::oom, JobState::oom}}) {
    const auto job = db.add_job(spec(exp, std::string("h-") + to_string(status))).job_id;
    store::RunWriter(db, start_attempt(db, job)).finish(status, {}, "", "");
    EXPECT_EQ(db.job(job).state, state);
    store::Queue(db).requeue_job(job);
    EXPECT_EQ(db.job(job).state, JobState::queued);
    store::Queue(db).requeue_job(job);  // queued already: nothing to do
    EXPECT_EQ(db.job(job).state, JobState::queued);
  }
  const auto job = db.add_job(spec(exp, "h-failed")).job_id;
  store::RunWriter(db, start_attempt(db, job)).finish(RunStatus::failed, {}, "boom", "");
  EXPECT_EQ(db.job(job).state, JobState::queued);
  // a running job is its lease holder's: requeueing it would let two attempts write
  start_attempt(db, job);
  EXPECT_THROW(store::Queue(db).requeue_job(job), StoreError);
  EXPECT_EQ(db.job(job).state, JobState::running);
}

// The names are what the database stores (its CHECK constraints list them): each value has its
// own, and parsing gives it back; any other text is a one-line error naming every state.
TEST(StoreStates, NamesParseBackAndUnknownNamesAreRefused) {
  std::set<std::string> names;
  for (const JobState state : attnlab::store::kJobStates) {
    names.insert(to_string(state));
    EXPECT_EQ(attnlab::store::parse_job_state(to_string(state)), state);
  }
  EXPECT_EQ(names, (std::set<std::string>{"queued", "running", "done", "failed", "diverged", "oom", "blocked",
                                          "cancelled", "submitted"}));
  names.clear();
  for (const RunStatus status : attnlab::store::kRunStatuses) {
    names.insert(to_string(status));
    EXPECT_EQ(attnlab::store::parse_run_status(to_string(status)), status);
  }
  EXPECT_EQ(names, (std::set<std::string>{"running", "done", "failed", "diverged", "oom", "interrupted", "lost",
                                          "rejected"}));
  std::ostringstream printed;
  printed << JobState::blocked << " " << RunStatus::lost;
  EXPECT_EQ(printed.str(), "blocked lost");

  try {
    attnlab::store::parse_job_state("Done");
    ADD_FAILURE() << "no error";
  } catch (const StoreError& e) {
    EXPECT_STREQ(e.what(), "unknown job state 'Done' (one of queued, running, submitted, done, failed, diverged, oom, "
                           "blocked, cancelled)");
  }
  try {
    attnlab::store::parse_run_status("cancelled");  // a job state, not a run status
    ADD_FAILURE() << "no error";
  } catch (const StoreError& e) {
    EXPECT_STREQ(e.what(), "unknown run status 'cancelled' (one of running, done, failed, diverged, oom, interrupted, "
                           "lost, rejected)");
  }
}

TEST_F(StoreTest, RejectsBadInput) {
  Database db(file("bad.db"));
  const auto exp = db.add_experiment("e", "", "c");
  const auto job = db.add_job(spec(exp, "h")).job_id;
  const auto run = start_attempt(db, job);
  EXPECT_THROW(store::RunWriter(db, run).finish(RunStatus::running, {}, "", ""), StoreError);
  EXPECT_THROW(store::RunWriter(db, run).finish(RunStatus::lost, {}, "", ""), StoreError);  // only expiry ends a run as lost
  EXPECT_THROW(store::RunWriter(db, run).fail_if_unfinished(RunStatus::running, ""), StoreError);
  EXPECT_THROW(store::RunWriter(db, run + 100).finish(RunStatus::done, {}, "", ""), StoreError);
  EXPECT_THROW(db.job(job + 100), StoreError);
  EXPECT_THROW(store::Queue(db).requeue_job(job + 100), StoreError);
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer(), 60, {job + 100}), std::nullopt);
  EXPECT_THROW(store::Queue(db).claim_next_job(claimer(), 0, {}), StoreError);
  EXPECT_THROW(store::RunWriter(db, run + 100).set_environment(env()), StoreError);
  EXPECT_THROW(db.add_job(spec(exp + 100, "h2")), StoreError);  // foreign key
  EXPECT_THROW(store::RunWriter(db, run + 100).append_curve({{1, "train", "loss", 1.0, 1.0}}), StoreError);
  try {
    db.add_job(spec(exp + 100, "h3"));
  } catch (const StoreError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(db.path() + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find("FOREIGN KEY constraint failed"), std::string::npos) << msg;
  }
  auto s = db.run_summaries();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, RunStatus::running);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM curves"), "0");
}

TEST_F(StoreTest, FailRunIfUnfinished) {
  Database db(file("fail.db"));
  const auto exp = db.add_experiment("e", "", "c");
  const auto job_a = db.add_job(spec(exp, "a")).job_id;
  const auto job_b = db.add_job(spec(exp, "b")).job_id;
  const auto running = start_attempt(db, job_a);
  const auto finished = start_attempt(db, job_b, env(), 2);
  store::RunWriter(db, finished).finish(RunStatus::done, {{"test_acc", 0.9}}, "", "");

  EXPECT_TRUE(store::RunWriter(db, running).fail_if_unfinished(RunStatus::failed, "exit code 139"));
  EXPECT_FALSE(store::RunWriter(db, running).fail_if_unfinished(RunStatus::failed, "again"));
  EXPECT_FALSE(store::RunWriter(db, finished).fail_if_unfinished(RunStatus::failed, "should not stick"));

  auto s = db.run_summaries();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].status, RunStatus::failed);
  EXPECT_EQ(s[0].error, "exit code 139");
  EXPECT_TRUE(is_timestamp(s[0].finished_at));
  EXPECT_EQ(db.job(job_a).state, JobState::queued);  // to be tried again
  EXPECT_EQ(db.list_jobs({{}, {}, {}, {job_a}}).at(0).error, "exit code 139");
  EXPECT_EQ(s[1].status, RunStatus::done);
  EXPECT_EQ(s[1].error, "");
  EXPECT_EQ(s[1].result("test_acc"), 0.9);
  EXPECT_EQ(db.job(job_b).state, JobState::done);

  // An interrupted crash puts the job back in the queue.
  const auto again = start_attempt(db, job_a, env(), 3);
  EXPECT_TRUE(store::RunWriter(db, again).fail_if_unfinished(RunStatus::interrupted, "SIGTERM"));
  EXPECT_EQ(db.job(job_a).state, JobState::queued);
}

TEST_F(StoreTest, UnfinishedRunSurvivesCloseAndReopen) {
  const std::string path = file("crash.db");
  std::int64_t run = 0, job = 0;
  {
    Database db(path);
    job = db.add_job(spec(db.add_experiment("e", "", "c"), "h")).job_id;
    run = start_attempt(db, job, env(), 99);
    store::RunWriter(db, run).append_curve({{1, "train", "loss", 3.0, 0.5}});
  }  // never finished
  Database db(path);
  auto s = db.run_summaries();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, RunStatus::running);
  EXPECT_EQ(s[0].finished_at, "");
  EXPECT_TRUE(s[0].results.empty());
  EXPECT_EQ(db.curve(run).size(), 1u);
  EXPECT_EQ(db.job(job).state, JobState::running);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA integrity_check"), "ok");
}

TEST_F(StoreTest, RunOfKilledProcessSurvives) {
  const std::string path = file("killed.db");
  std::int64_t job = 0;
  {
    Database db(path);
    job = db.add_job(spec(db.add_experiment("e", "", "c"), "h")).job_id;
  }
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    try {
      Database db(path);
      const auto lease = store::Queue(db).claim_next_job(claimer(), 600);
      if (!lease) _exit(5);
      const auto run = lease->run_id;
      store::RunWriter(db, run).append_curve({{1, "train", "loss", 3.0, 0.5}, {2, "train", "loss", 2.0, 1.0}});
    } catch (...) {
      _exit(3);
    }
    kill(getpid(), SIGKILL);  // no destructors, no close: the WAL stays as it is
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;

  Database db(path);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA integrity_check"), "ok");
  const auto run = latest_run_of_job(db, job);
  ASSERT_TRUE(run.has_value());
  auto s = db.run_summaries();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, RunStatus::running);
  EXPECT_EQ(s[0].finished_at, "");
  EXPECT_EQ(db.curve(*run).size(), 2u);
  EXPECT_TRUE(store::RunWriter(db, *run).fail_if_unfinished(RunStatus::failed, "killed by signal 9"));
  EXPECT_EQ(db.job(job).state, JobState::queued);
}

TEST_F(StoreTest, ConcurrentProcessesCreateOneDatabase) {
  const std::string path = file("race.db");
  constexpr int kChildren = 6;
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t child = fork();
    ASSERT_NE(child, -1);
    if (child == 0) {
      int code = 0;
      try {
        Database db(path);
        const auto exp = db.add_experiment("e" + std::to_string(i), "", "c");
        const auto job = db.add_job(spec(exp, "h" + std::to_string(i))).job_id;
        const auto lease = store::Queue(db).claim_next_job(claimer(), 600, {job});
        if (!lease || lease->job_id != job) throw std::runtime_error("job " + std::to_string(job) + " not claimed");
      } catch (const std::exception& e) {
        fprintf(stderr, "child %d: %s\n", i, e.what());
        code = 1;
      }
      _exit(code);
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  Database db(path);
  EXPECT_EQ(db.schema_version(), Database::kSchemaVersion);
  EXPECT_EQ(db.run_summaries().size(), static_cast<std::size_t>(kChildren));
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA integrity_check"), "ok");
}

TEST_F(StoreTest, TextWithQuotesIsBoundNotSpliced) {
  const std::string evil = "it's \"quoted\" '; DROP TABLE runs; --";
  Database db(file("quotes.db"));
  const auto exp = db.add_experiment(evil, evil, evil);
  JobSpec js = spec(exp, evil);
  js.method = evil;
  js.dataset = evil;
  js.config_toml = evil;
  js.params = {{evil, evil}};
  const auto job = db.add_job(js).job_id;
  RunEnvironment e = env();
  e.host = evil;
  e.plugins = {{"attention", evil, evil, evil, evil}};
  const auto run = start_attempt(db, job, e);
  store::RunWriter(db, run).append_curve({{1, evil, evil, 1.0, 1.0}});
  store::RunWriter(db, run).finish(RunStatus::failed, {{evil, 1.0}}, evil, evil);

  EXPECT_EQ(query(store::sqlite_handle(db), "SELECT name FROM sqlite_master WHERE name = 'runs'"),
            std::vector<std::string>{"runs"});
  EXPECT_TRUE(db.add_job(js).existed);
  const auto j = db.job(job);
  EXPECT_EQ(j.method, evil);
  EXPECT_EQ(j.dataset, evil);
  EXPECT_EQ(j.config_toml, evil);
  EXPECT_EQ(j.config_hash, evil);
  auto s = db.run_summaries(exp);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].experiment, evil);
  EXPECT_EQ(s[0].method, evil);
  EXPECT_EQ(s[0].error, evil);
  EXPECT_EQ(s[0].result(evil), 1.0);
  auto c = db.curve(run);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].split, evil);
  EXPECT_EQ(c[0].name, evil);
  auto p = db.run_plugins(run);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].name, evil);
  EXPECT_EQ(p[0].sha256, evil);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT key FROM job_params"), evil);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT host FROM runs"), evil);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT checkpoint_path FROM runs"), evil);
}

TEST_F(StoreTest, RunSummariesFilterByExperiment) {
  Database db(file("filter.db"));
  const auto e1 = db.add_experiment("one", "", "c");
  const auto e2 = db.add_experiment("two", "", "c");
  const auto r1 = start_attempt(db, db.add_job(spec(e1, "a")).job_id);
  const auto r2 = start_attempt(db, db.add_job(spec(e2, "b")).job_id);
  const auto r3 = start_attempt(db, db.add_job(spec(e1, "c")).job_id);
  auto ids = [](const std::vector<RunSummary>& v) {
    std::vector<std::int64_t> out;
    for (const auto& s : v) out.push_back(s.run_id);
    return out;
  };
  EXPECT_EQ(ids(db.run_summaries()), (std::vector<std::int64_t>{r1, r2, r3}));
  EXPECT_EQ(ids(db.run_summaries(e1)), (std::vector<std::int64_t>{r1, r3}));
  EXPECT_EQ(ids(db.run_summaries(e2)), (std::vector<std::int64_t>{r2}));
  EXPECT_TRUE(db.run_summaries(e2 + 10).empty());
}

TEST_F(StoreTest, TwoConnectionsSeeEachOther) {
  const std::string path = file("shared.db");
  Database a(path);
  Database b(path);
  const auto exp = a.add_experiment("e", "", "c");
  const auto job = b.add_job(spec(exp, "h")).job_id;
  EXPECT_EQ(a.job(job).config_hash, "h");
  EXPECT_EQ(b.schema_version(), Database::kSchemaVersion);
}

}  // namespace
