// attnlab queue add|list|show|cancel|retry and attnlab db migrate, through the binary. Nothing
// here trains: jobs are queued and steered, and finished states are set in SQL where needed.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "attnlab/precision.hpp"
#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "attnlab/store/run_writer.hpp"

#include "../store/src/schema_v1.hpp"
#include "../store/src/schema_v2.hpp"
#include "../store/src/schema_v3.hpp"

namespace {
namespace fs = std::filesystem;
using attnlab::testing::query_one;

struct QueueCli : attnlab::testing::CliTest {
  std::string experiment(const std::string& name = "tiny.toml", const std::string& extra_dataset_keys = "") const {
    const std::string file = path(name);
    std::ofstream(file) << "[experiment]\nname = \"tiny\"\nseeds = [1, 2]\n"
                        << "[model]\nlayers = 1\ndim = 16\nffn_dim = 32\nheads = 2\n"
                        << "[train]\nsteps = 20\nbatch_size = 8\n"
                        << "[methods.softmax]\n"
                        << "[datasets.listops]\nmax_len = 64\ntrain_size = 64\nval_size = 16\ntest_size = 16\n"
                        << extra_dataset_keys;
    return file;
  }
  std::string db() const { return path("q.db"); }
  // A database whose one run holds `points` curve points: a file of some size, mostly curve pages.
  void fill_with_curve_points(int points) const {
    attnlab::store::Database database(db());
    const auto experiment_id = database.add_experiment("big", "", "");
    database.add_job({experiment_id, "noop", "noop", 1, "noop = 1", "noop-1", {}, {}});
    attnlab::store::Claimer claimer;
    claimer.worker = "test";
    const auto lease = attnlab::store::Queue(database).claim_next_job(claimer, 60);
    ASSERT_TRUE(lease);
    std::vector<attnlab::store::CurvePoint> rows;
    for (int i = 0; i < points; ++i) rows.push_back({i, "train", "loss", i * 0.5, i * 0.1});
    attnlab::store::RunWriter(database, lease->run_id).append_curve(rows);
  }
  std::string opts() const { return " --db " + db(); }
  int queue(const std::string& args, std::string& out) const { return attnlab("queue " + args + opts(), out); }
  std::string sql(const std::string& query) const { return query_one(db(), query); }
  void exec(const std::string& statement) const {
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(db().c_str(), &handle), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(handle, statement.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(handle);
  }
};

TEST_F(QueueCli, AddingTheSameExperimentTwiceAddsNothing) {
  const std::string file = experiment();
  std::string out;
  ASSERT_EQ(queue("add " + file + " --cache-dir " + path("cache"), out), 0) << out;
  EXPECT_NE(out.find("experiment 'tiny': 2 job(s): 2 added, 0 already queued or running, 0 already done"),
            std::string::npos) << out;
  EXPECT_NE(out.find(db() + ": 2 queued"), std::string::npos) << out;
  EXPECT_EQ(sql("SELECT count(*) FROM jobs WHERE state = 'queued' AND attempts = 0"), "2");
  EXPECT_EQ(sql("PRAGMA user_version"), "17");

  ASSERT_EQ(queue("add " + file + " --cache-dir " + path("cache"), out), 0) << out;
  EXPECT_NE(out.find("2 job(s): 0 added, 2 already queued or running"), std::string::npos) << out;
  EXPECT_EQ(sql("SELECT count(*) FROM jobs"), "2");
  EXPECT_EQ(sql("SELECT count(*) FROM experiments"), "1");  // the same file: the same experiment row

  // done jobs stay done; --rerun queues them again
  exec("UPDATE jobs SET state = 'done' WHERE id = 1");
  ASSERT_EQ(queue("add " + file + " --cache-dir " + path("cache"), out), 0) << out;
  EXPECT_NE(out.find("0 added, 1 already queued or running, 1 already done (--rerun runs them again)"),
            std::string::npos) << out;
  EXPECT_EQ(sql("SELECT state FROM jobs WHERE id = 1"), "done");
  ASSERT_EQ(queue("add " + file + " --cache-dir " + path("cache") + " --rerun", out), 0) << out;
  EXPECT_NE(out.find("1 queued again"), std::string::npos) << out;
  EXPECT_EQ(sql("SELECT group_concat(state) FROM jobs"), "queued,queued");
}

// A second experiment file naming jobs the first queued reuses them (one job each, trained once)
// and owns them: `--where "experiment = NAME"` finds them under either name.
TEST_F(QueueCli, AnExperimentOwnsTheJobsItReuses) {
  std::string out;
  ASSERT_EQ(queue("add " + experiment() + " --cache-dir " + path("cache"), out), 0) << out;
  {
    std::ifstream in(path("tiny.toml"));
    std::string text((std::istreambuf_iterator<char>(in)), {});
    text.replace(text.find("name = \"tiny\""), 13, "name = \"again\"");
    std::ofstream(path("again.toml")) << text;
  }
  ASSERT_EQ(queue("add " + path("again.toml") + " --cache-dir " + path("cache"), out), 0) << out;
  EXPECT_NE(out.find("experiment 'again': 2 job(s): 0 added, 2 already queued or running"), std::string::npos) << out;
  EXPECT_EQ(sql("SELECT count(*) FROM jobs"), "2");
  EXPECT_EQ(sql("SELECT group_concat(e.name || ':' || ej.job_id, ' ') FROM (SELECT * FROM experiment_jobs "
                "ORDER BY experiment_id, job_id) AS ej JOIN experiments AS e ON e.id = ej.experiment_id"),
            "tiny:1 tiny:2 again:1 again:2");
  for (const char* name : {"tiny", "again"}) {
    ASSERT_EQ(attnlab(std::string("results --where 'experiment = ") + name + "' --format csv" + opts(), out), 0) << out;
    EXPECT_NE(out.find("softmax,listops,2,"), std::string::npos) << name << ": " << out;  // both jobs
  }
}

TEST_F(QueueCli, ABadExperimentStoresNothing) {
  std::string out;
  EXPECT_EQ(queue("add " + experiment("bad.toml", "source = \"files\"\npath = \"" + path("nowhere") + "\"\n") +
                  " --cache-dir " + path("cache"), out), 2);
  EXPECT_NE(out.find("attnlab: error: " + path("bad.toml") + ": [datasets.listops] "), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(db()));
}

TEST_F(QueueCli, ListShowCancelRetry) {
  std::string out;
  ASSERT_EQ(queue("add " + experiment() + " --cache-dir " + path("cache"), out), 0) << out;
  exec("UPDATE jobs SET state = 'failed', failures = 3, error = '3 attempts failed; last: boom' WHERE id = 2");

  ASSERT_EQ(queue("list", out), 0) << out;
  EXPECT_NE(out.find("job  method   dataset  seed  state   attempts  failures  lease  error"), std::string::npos) << out;
  EXPECT_NE(out.find("2    softmax  listops  2     failed  0         3/3              3 attempts failed; last: boom"),
            std::string::npos) << out;
  EXPECT_NE(out.find("2 job(s): 1 queued, 1 failed"), std::string::npos) << out;
  ASSERT_EQ(queue("list --state failed --format csv", out), 0) << out;
  EXPECT_EQ(out,
            "job,experiment,method,dataset,seed,state,attempts,failures,max_attempts,lease_run,lease_owner,"
            "lease_expires_at,error,infra_failures,max_infra_failures\n2,tiny,softmax,listops,2,failed,0,3,3,,,,3 attempts failed; last: boom,0,10\n");
  ASSERT_EQ(queue("list --method linear", out), 0) << out;
  EXPECT_NE(out.find("0 job(s): no jobs"), std::string::npos) << out;
  EXPECT_EQ(queue("list --state broken", out), 2);
  EXPECT_NE(out.find("unknown job state 'broken' (one of queued, running, submitted, done, failed, diverged, oom, "
                     "blocked, cancelled)"), std::string::npos) << out;

  ASSERT_EQ(queue("show 1", out), 0) << out;
  EXPECT_NE(out.find("job 1: softmax on listops, seed 1, experiment 'tiny'"), std::string::npos) << out;
  EXPECT_NE(out.find("state: queued (0 attempt(s); 0 failure(s) of 3 allowed; 0 ended from outside, 0 of them in a row before a checkpoint of their own, of 10 allowed)"), std::string::npos) << out;
  EXPECT_NE(out.find("[train]\naccuracy_checkpoints = 0.0\nbatch_size = 8"), std::string::npos) << out;
  EXPECT_NE(out.find("attempts: none yet"), std::string::npos) << out;
  EXPECT_EQ(queue("show 7", out), 2);
  EXPECT_NE(out.find("queue show: no job 7 in " + db()), std::string::npos) << out;

  // cancel: a missing job refuses the whole command; a job that cannot be cancelled is named
  EXPECT_EQ(queue("cancel 1 99", out), 2);
  EXPECT_NE(out.find("queue cancel: no job 99"), std::string::npos) << out;
  EXPECT_EQ(sql("SELECT state FROM jobs WHERE id = 1"), "queued");
  ASSERT_EQ(queue("cancel 1 2", out), 0) << out;
  EXPECT_EQ(out, "cancelled 1 job(s): 1\njob 2 is failed: left as it is\n");
  EXPECT_EQ(sql("SELECT state FROM jobs WHERE id = 1"), "cancelled");

  ASSERT_EQ(queue("retry --state failed,cancelled", out), 0) << out;
  EXPECT_EQ(out, "queued again 2 job(s): 1, 2\n");
  EXPECT_EQ(sql("SELECT group_concat(state || ':' || failures) FROM jobs"), "queued:0,queued:0");
  ASSERT_EQ(queue("retry 1", out), 0) << out;
  EXPECT_EQ(out, "queued again 0 job(s)\njob 1 is queued: left as it is\n");
  EXPECT_EQ(queue("retry x1", out), 2);
  EXPECT_NE(out.find("'x1' is not a job id"), std::string::npos) << out;
}

TEST_F(QueueCli, ShowListsEveryAttempt) {
  std::string out;
  ASSERT_EQ(queue("add " + experiment() + " --cache-dir " + path("cache"), out), 0) << out;
  exec("INSERT INTO runs (job_id, attempt, status, worker, host, device, pid, started_at, finished_at, error, uid) VALUES "
       "(1, 1, 'lost', 'n1:5:cpu', 'n1', 'cpu', 5, '2025-01-01T00:00:00.000Z', '2025-01-01T00:09:00.000Z', "
       "'lease expired: worker n1:5:cpu stopped renewing it', 'aa'), "
       "(1, 2, 'failed', 'n2:6:cuda:0', 'n2', 'cuda:0', 6, '2025-01-01T00:10:00.000Z', NULL, 'killed by signal 11', 'bb');"
       "UPDATE runs SET resume_checkpoint = '/c/job-1.resume.pt', resume_step = 400 WHERE attempt = 1;"
       "UPDATE jobs SET attempts = 2, failures = 2, error = 'killed by signal 11' WHERE id = 1;");
  ASSERT_EQ(queue("show 1", out), 0) << out;
  EXPECT_NE(out.find("state: queued (2 attempt(s); 2 failure(s) of 3 allowed; 0 ended from outside, 0 of them in a row before a checkpoint of their own, of 10 allowed)\n"
                     "plugin folders: "),
            std::string::npos) << out;
  EXPECT_NE(out.find("/datasets\nerror: killed by signal 11\n"),
            std::string::npos) << out;
  EXPECT_NE(out.find("run  attempt  status  worker       host  device  pid  started                   finished"),
            std::string::npos) << out;
  EXPECT_NE(out.find("1    1        lost    n1:5:cpu     n1    cpu     5    2025-01-01T00:00:00.000Z  "
                     "2025-01-01T00:09:00.000Z  400          lease expired: worker n1:5:cpu stopped renewing it"),
            std::string::npos) << out;
  EXPECT_NE(out.find("2    2        failed  n2:6:cuda:0  n2    cuda:0  6    2025-01-01T00:10:00.000Z"), std::string::npos)
      << out;
}

// A worker that cannot start job processes (its executable gone while it ran) gives the attempt
// back uncounted and stops, instead of burning every queued job's attempts in a second.
TEST_F(QueueCli, AWorkerThatCannotStartJobProcessesCountsNoFailure) {
  std::string out;
  ASSERT_EQ(queue("add " + experiment() + " --cache-dir " + path("cache"), out), 0) << out;
  EXPECT_EQ(attnlab("worker-device --device cpu --idle-exit --job-exe " + path("gone/attnlab") + opts(), out), 1);
  EXPECT_NE(out.find("could not start its job process"), std::string::npos) << out;
  EXPECT_EQ(sql("SELECT group_concat(state || ':' || attempts || ':' || failures, ' ') FROM jobs"), "queued:1:0 queued:0:0");
  EXPECT_EQ(sql("SELECT status FROM runs"), "interrupted");
  EXPECT_NE(sql("SELECT error FROM runs").find("No such file or directory"), std::string::npos);
}

TEST_F(QueueCli, DbMigrateIsTheOnlyWayAnOldFileMoves) {
  {
    sqlite3* handle = nullptr;
    ASSERT_EQ(sqlite3_open(db().c_str(), &handle), SQLITE_OK);
    const std::string ddl = std::string(attnlab::store::kSchemaV1) + attnlab::store::kSchemaV2 + attnlab::store::kSchemaV3 +
                            "PRAGMA user_version = 3;"
                            "INSERT INTO experiments (name, config_text) VALUES ('old', 'x');"
                            "INSERT INTO jobs (experiment_id, method, dataset, seed, config_toml, config_hash, state) "
                            "VALUES (1, 'softmax', 'listops', 1, 'c', 'h', 'done');";
    ASSERT_EQ(sqlite3_exec(handle, ddl.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(handle);
  }
  std::string out;
  EXPECT_EQ(queue("list", out), 2);  // readers and workers never migrate
  EXPECT_NE(out.find("database schema version 3 is older than this attnlab needs (17): run `attnlab db migrate --db " +
                     db() + "` first"), std::string::npos) << out;
  EXPECT_EQ(sql("PRAGMA user_version"), "3");

  ASSERT_EQ(attnlab("db migrate" + opts(), out), 0) << out;
  EXPECT_EQ(out, db() + ": schema version 3 -> 17\n");
  EXPECT_EQ(sql("SELECT state || ':' || attempts FROM jobs"), "done:0");
  ASSERT_EQ(attnlab("db migrate" + opts(), out), 0) << out;
  EXPECT_EQ(out, db() + ": schema version 17 -> 17 (up to date)\n");
  ASSERT_EQ(queue("list", out), 0) << out;
  EXPECT_NE(out.find("1 job(s): 1 done"), std::string::npos) << out;

  EXPECT_EQ(attnlab("queue list --db " + path("missing.db"), out), 2);
  EXPECT_NE(out.find(path("missing.db") + ": no such database: run `attnlab db migrate --db "), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(path("missing.db")));
  ASSERT_EQ(attnlab("db migrate --db " + path("new.db"), out), 0) << out;
  EXPECT_EQ(out, path("new.db") + ": schema version 0 -> 17 (new database)\n");
  EXPECT_EQ(attnlab("db vacuum", out), 2);
  EXPECT_NE(out.find("attnlab db: unknown command 'vacuum'"), std::string::npos) << out;
}

// What a job's first step would refuse is known at enqueue: refused in one line, nothing stored
// (e7c0818 queued such jobs and each used up its attempts). Queued without the data check
// (--no-load-check), the job is blocked at its first attempt, uncounted.
TEST_F(QueueCli, WhatTheFirstStepWouldRefuseIsRefusedAtEnqueue) {
  std::string text;
  {
    std::ifstream in(experiment());
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  text.replace(text.find("batch_size = 8"), 14, "batch_size = 1000");
  std::ofstream(path("big.toml")) << text;
  const std::string cache = " --cache-dir " + path("cache");
  std::string out;
  EXPECT_EQ(queue("add " + path("big.toml") + cache, out), 2) << out;
  EXPECT_NE(out.find("attnlab: error: " + path("big.toml") + ": [train] batch_size = 1000 (softmax on listops) is more "
                     "than the 64 training examples of [datasets.listops]; nothing queued\n"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(db()) && sql("SELECT count(*) FROM jobs") != "0");

  EXPECT_EQ(attnlab("run " + path("big.toml") + cache + " --no-load-check --threads 1" + opts(), out), 3) << out;
  // no seed done: a sentence, not a table's header with no rows under it
  EXPECT_NE(out.find("no job of the experiment is done yet: nothing to summarise\n"), std::string::npos) << out;
  EXPECT_EQ(sql("SELECT group_concat(state || ' ' || attempts || ' ' || failures, ', ') FROM jobs"), "blocked 1 0, blocked 1 0");
  EXPECT_NE(sql("SELECT error FROM jobs WHERE seed = 1").find("[train] batch_size = 1000 is more than the 64 training examples"),
            std::string::npos) << sql("SELECT error FROM jobs WHERE seed = 1");

  // fp16 where this build can autocast it nowhere (LibTorch 1.13 without CUDA)
  if (attnlab::autocast_possible(attnlab::Precision::fp16)) return;
  text.replace(text.find("batch_size = 1000"), 17, "batch_size = 8\nprecision = \"fp16\"");
  std::ofstream(path("fp16.toml")) << text;
  EXPECT_EQ(queue("add " + path("fp16.toml") + cache, out), 2) << out;
  EXPECT_NE(out.find(path("fp16.toml") + ": [train] precision = \"fp16\" (softmax): precision fp16 on the CPU needs LibTorch 2"),
            std::string::npos) << out;
  EXPECT_EQ(sql("SELECT count(*) FROM jobs"), "2");
}

// A database whose pages contradict each other (16 KiB flipped mid-file) is refused in one line by
// writers and readers, and nothing is written (e7c0818 read and wrote such a file with exit 0);
// `attnlab db check` runs the full check and lists the problems.
TEST_F(QueueCli, ADamagedDatabaseIsRefusedInOneLineAndDbCheckSaysWhy) {
  fill_with_curve_points(20000);
  std::string out;
  ASSERT_EQ(attnlab("db check --db " + db(), out), 0) << out;
  EXPECT_EQ(out.rfind(db() + ": ok (PRAGMA integrity_check, ", 0), 0u) << out;

  attnlab::testing::flip_middle(db(), 16384);
  auto bytes_of = [](const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string damaged = bytes_of(db());
  EXPECT_EQ(attnlab("db check --db " + db(), out), 1) << out;
  EXPECT_EQ(out.rfind(db() + ": damaged: ", 0), 0u) << out;
  const std::string refusal = "attnlab: error: " + db() + ": the database is damaged (quick_check: ";
  // every writer opens through the checked path: queue cancel and retry too (c797cb7 wrote into it)
  for (const std::string& command : {"results --db " + db(), "queue add " + experiment() + " --cache-dir " + path("cache") + opts(),
                                    "worker --idle-exit" + opts(), "queue cancel 1" + opts(), "queue retry 1" + opts()}) {
    EXPECT_EQ(attnlab(command, out), 2) << command << "\n" << out;
    const auto at = out.find(refusal);
    EXPECT_NE(at, std::string::npos) << command << "\n" << out;
    EXPECT_EQ(out.find('\n', at) + 1, out.size()) << command << "\n" << out;  // one line, the last
  }
  EXPECT_TRUE(bytes_of(db()) == damaged);  // nothing written
}

// The rows PRAGMA integrity_check gives, then its error when it stops on a page too damaged to
// read, as SQLite's own connection sees them.
std::pair<std::vector<std::string>, std::string> integrity_rows(const std::string& file) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA integrity_check(100)", -1, &st, nullptr);
  std::vector<std::string> lines;
  int rc = SQLITE_ROW;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    std::istringstream row(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
    for (std::string line; std::getline(row, line);)
      if (line != "ok" && line != "*** in database main ***") lines.push_back(line);
  }
  const std::string error = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return {lines, error};
}

// `db check` prints every problem SQLite listed before its check stopped on a damaged page, then
// the error (c797cb7 printed the error alone: "1 problem, database disk image is malformed").
TEST_F(QueueCli, DbCheckPrintsTheProblemsFoundBeforeTheCheckStopped) {
  fill_with_curve_points(3000);
  std::ifstream in(db(), std::ios::binary);
  const std::string intact((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t page = 4096, pages = intact.size() / page;
  // damage of that kind: a few header bytes of b-tree pages changed, drawn until SQLite lists
  // problems and then stops (seeded: the same file every run)
  std::mt19937 draw(1);
  std::pair<std::vector<std::string>, std::string> found;
  for (int attempt = 0; attempt < 20000 && (found.first.empty() || found.second.empty()); ++attempt) {
    std::string bytes = intact;
    for (int flips = 1 + static_cast<int>(draw() % 3); flips > 0; --flips)
      bytes[(1 + draw() % (pages - 1)) * page + draw() % 60] = static_cast<char>(draw() % 256);
    std::ofstream(db(), std::ios::binary | std::ios::trunc) << bytes;
    found = integrity_rows(db());
  }
  ASSERT_FALSE(found.first.empty());
  ASSERT_FALSE(found.second.empty());
  std::string out;
  EXPECT_EQ(attnlab("db check --db " + db(), out), 1) << out;
  EXPECT_EQ(out.rfind(db() + ": damaged: ", 0), 0u) << out;
  for (const auto& line : found.first) EXPECT_NE(out.find("  " + line + "\n"), std::string::npos) << line << "\n" << out;
  EXPECT_NE(out.find(found.second), std::string::npos) << out;
}

// Small things said plainly: a folder where a file belongs, a table defined twice, a character
// --where does not know.
// --jobs-per-device auto: 1 while a job has no bench figure (named); then as many as fit 90% of the
// device's memory at the jobs' largest peak, at most one per host core.
TEST_F(QueueCli, JobsPerDeviceAutoReadsTheJobsBenchFigures) {
  std::string out;
  ASSERT_EQ(queue("add " + experiment() + " --cache-dir " + path("cache"), out), 0) << out;
  const std::string worker = "worker --idle-exit --noop --jobs-per-device auto --cache-dir " + path("cache") + opts();
  ASSERT_EQ(attnlab(worker, out), 0) << out;
  EXPECT_NE(out.find("attnlab: --jobs-per-device auto: 1 (no bench figure for softmax on listops at 64 tokens, batch 8, "
                     "fp32, on cpu: attnlab bench --db " + db() + " --methods softmax --dataset listops --lengths 64 "
                     "--batch-size 8 --precision fp32 --device cpu)"),
            std::string::npos) << out;

  // the figure measured, then its peak set to a share of this machine's memory
  ASSERT_EQ(attnlab("bench --config " + path("tiny.toml") + " --methods softmax --lengths 64 --batch-size 8 --steps 1 "
                    "--warmup 0 --threads 1 --cache-dir " + path("cache") + opts(), out), 0) << out;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (meminfo >> key && key != "MemTotal:") meminfo.ignore(256, '\n');
  meminfo >> kib;
  const double memory = kib * 1024;
  auto requeue_and_work = [&](double share) {
    exec("UPDATE bench_results SET peak_memory_bytes = " + std::to_string(share * memory));
    exec("UPDATE jobs SET state = 'queued'");
    EXPECT_EQ(attnlab(worker, out), 0) << out;
    return out;
  };
  EXPECT_NE(requeue_and_work(0.6).find("attnlab: --jobs-per-device auto: 1 (cpu: 90% of "), std::string::npos) << out;
  const auto cores = static_cast<int>(std::thread::hardware_concurrency());
  const int expected = std::min({3, cores, 8});  // floor(0.9 / 0.29) = 3 by memory
  EXPECT_NE(requeue_and_work(0.29).find("attnlab: --jobs-per-device auto: " + std::to_string(expected) + " (cpu: "),
            std::string::npos) << out;
  EXPECT_NE(out.find(expected > 1 ? std::to_string(expected) + " jobs at once on each" : "device(s) cpu, lease"), std::string::npos) << out;
}

TEST_F(QueueCli, MistakesAreNamedAsTheyAre) {
  std::string out;
  fs::create_directories(path("folder.db"));
  EXPECT_EQ(attnlab("results --db " + path("folder.db"), out), 2) << out;
  EXPECT_EQ(out, "attnlab: error: " + path("folder.db") + ": is a folder, not a database file\n");
  fs::create_directories(path("folder.toml"));
  EXPECT_EQ(queue("add " + path("folder.toml"), out), 2) << out;
  EXPECT_EQ(out, "attnlab: error: " + path("folder.toml") + ": is a folder, not an experiment file\n");

  std::ofstream(experiment(), std::ios::app) << "[methods.\"softmax\"]\n";
  EXPECT_EQ(queue("add " + path("tiny.toml"), out), 2) << out;
  EXPECT_NE(out.find("tiny.toml:18:1: TOML syntax: table [methods.\"softmax\"] is defined twice\n"), std::string::npos) << out;

  ASSERT_EQ(queue("add " + experiment() + " --cache-dir " + path("cache"), out), 0) << out;
  EXPECT_EQ(attnlab("results --where 'method = caf\xc3\xa9'" + opts(), out), 2) << out;
  EXPECT_EQ(out, "attnlab: error: --where 'method = caf\xc3\xa9': unexpected character '\xc3\xa9' (quote a value that holds it) "
                 "at column 13\n");
}

}  // namespace
