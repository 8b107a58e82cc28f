// Merging SLURM shards: each array task writes its own database; merge_shard brings its finished
// runs into the main database once (by run uid), and refuses a damaged or foreign shard whole.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "attnlab/store/run_writer.hpp"
#include "attnlab/store/studies.hpp"
#include "store_support.hpp"
#include "../store/src/access.hpp"

using attnlab::store::Database;
namespace store = attnlab::store;
using attnlab::store::JobSpec;
using attnlab::store::JobState;
using attnlab::store::MergeReport;
using attnlab::store::RunStatus;
using attnlab::store::SpectrumResult;
using attnlab::store::StoreError;
using attnlab::store::testing::dump_tables;
namespace fs = std::filesystem;
using attnlab::store::testing::query;
using attnlab::store::testing::query_one;
using attnlab::store::testing::raw_exec;
using attnlab::store::testing::StoreTest;

namespace {

class Merge : public StoreTest {
 protected:
  static constexpr const char* kExperimentText = "[experiment]\nname = 'sweep'\n";

  // The main database: one experiment, jobs h0..h2 submitted to SLURM, and h0 with one local
  // failed attempt before that.
  void SetUp() override {
    StoreTest::SetUp();
    main_ = std::make_unique<Database>(file("main.db"));
    const auto exp = main_->add_experiment("sweep", "sweep.toml", kExperimentText);
    for (int i = 0; i < 3; ++i) main_jobs_.push_back(main_->add_job(spec(exp, "h" + std::to_string(i), i)).job_id);
    const auto local = store::Queue(*main_).claim_next_job(claimer("local"), 30, {main_jobs_[0]});
    store::RunWriter(*main_, local->run_id).finish(RunStatus::failed, {}, "local crash", "");
    store::Queue(*main_).mark_submitted(main_jobs_);
  }

  // A shard as an array task leaves it: the experiment and one job (as `slurm submit` copies
  // them), then the task's attempts. Returns the shard's path.
  std::string shard(const std::string& name, const std::string& hash, std::int64_t seed) {
    const std::string path = file(name);
    Database db(path);
    const auto exp = db.add_experiment("sweep", "sweep.toml", kExperimentText);
    db.add_job(spec(exp, hash, seed));
    return path;
  }

  // One attempt in a shard: claim, environment, a curve, and the given end (nullopt leaves it running).
  static std::int64_t attempt(const std::string& shard_path, std::optional<RunStatus> end, double test_acc = 0.5) {
    Database db(shard_path, Database::Open::existing);
    const auto lease = store::Queue(db).claim_next_job(claimer("node3:77:cuda:0"), 30);
    EXPECT_TRUE(lease.has_value());
    if (!lease) return 0;
    store::RunWriter(db, lease->run_id).set_environment(env());
    store::RunWriter(db, lease->run_id).append_curve({{10, "train", "loss", 1.25, 1.0}, {20, "val", "acc", 0.5, 2.0}});
    if (end == RunStatus::done) {
      db.set_variance_examples(lease->run_id, "test", 10, {0.5, 0.25}, {1, 0}, {2, 3}, {2, 3});
      store::RunWriter(db, lease->run_id).record_last_weights("/shared/run.pt.last", "0123abcd");
      store::RunWriter(db, lease->run_id).finish(RunStatus::done, {{"test_acc", test_acc}, {"steps_done", 20}}, "", "/shared/run.pt");
      SpectrumResult spectrum;  // measured in the shard after training (attnlab spectrum --db SHARD)
      spectrum.run_id = lease->run_id;
      spectrum.layer = 2;
      spectrum.stage = "out";
      spectrum.batch = 4;
      spectrum.values = {{4, 0, 1, 0, 0.9}, {1, 0, 0.25, 0, 0.1}};
      store::set_spectrum(db, spectrum);
    } else if (end) {
      store::RunWriter(db, lease->run_id).finish(*end, {}, "task crash", "");
    }
    return lease->run_id;
  }

  std::string main_one(const std::string& sql) { return query_one(store::sqlite_handle(*main_), sql); }

  std::unique_ptr<Database> main_;
  std::vector<std::int64_t> main_jobs_;
};

TEST_F(Merge, AddsFinishedRunsOnceWithEverythingTheyWrote) {
  const std::string a = shard("task-0.db", "h0", 0);
  attempt(a, RunStatus::failed);
  attempt(a, RunStatus::done, 0.875);

  const MergeReport first = main_->merge_shard(a);
  EXPECT_EQ(first.runs_added, 2);
  EXPECT_EQ(first.runs_present, 0);
  EXPECT_EQ(first.runs_unfinished, 0);
  EXPECT_EQ(first.jobs_added, 0);

  const std::string job = std::to_string(main_jobs_[0]);
  // attempts continue after the local one; uids are the shard's
  EXPECT_EQ(main_one("SELECT group_concat(attempt || ':' || status || ':' || coalesce(worker, '-'), ' ') FROM "
                     "(SELECT * FROM runs WHERE job_id = " + job + " ORDER BY attempt)"),
            "1:failed:local 2:failed:node3:77:cuda:0 3:done:node3:77:cuda:0");
  Database shard_db(a, Database::Open::existing);
  EXPECT_EQ(main_one("SELECT group_concat(uid) FROM (SELECT uid FROM runs WHERE attempt > 1 ORDER BY attempt)"),
            query_one(store::sqlite_handle(shard_db), "SELECT group_concat(uid) FROM (SELECT uid FROM runs ORDER BY attempt)"));
  const std::string done_run = main_one("SELECT id FROM runs WHERE job_id = " + job + " AND status = 'done'");
  EXPECT_EQ(main_one("SELECT group_concat(name || '=' || value) FROM (SELECT * FROM results WHERE run_id = " + done_run +
                     " ORDER BY name)"),
            "steps_done=20.0,test_acc=0.875");
  EXPECT_EQ(main_one("SELECT count(*) FROM curves WHERE run_id = " + done_run), "2");
  EXPECT_EQ(main_one("SELECT count(*) FROM run_plugins WHERE run_id = " + done_run), "2");
  EXPECT_EQ(main_one("SELECT count(*) FROM variance_examples WHERE run_id = " + done_run), "2");
  EXPECT_EQ(main_one("SELECT count(*) FROM spectrum_summaries WHERE run_id = " + done_run), "1");
  EXPECT_EQ(main_one("SELECT group_concat(normalised_mean) FROM spectrum_results WHERE run_id = " + done_run), "1.0,0.25");
  EXPECT_EQ(main_one("SELECT device_name || '|' || checkpoint_path FROM runs WHERE id = " + done_run),
            "NVIDIA H100 80GB HBM3|/shared/run.pt");
  const auto last = main_->last_weights_of_run(std::stoll(done_run));  // schema 16
  EXPECT_EQ(last.path + "|" + last.checksum, "/shared/run.pt.last|0123abcd");
  // the job takes the shard's outcome and bookkeeping
  const auto merged = main_->list_jobs({{}, {}, {}, {main_jobs_[0]}}).at(0);
  EXPECT_EQ(merged.job.state, JobState::done);
  EXPECT_EQ(merged.attempts, 3);
  EXPECT_EQ(merged.failures, 1);
  EXPECT_EQ(main_one("PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(query(store::sqlite_handle(*main_), "PRAGMA foreign_key_check").empty());

  // merging again changes nothing at all
  const std::string before = dump_tables(store::sqlite_handle(*main_));
  const MergeReport second = main_->merge_shard(a);
  EXPECT_EQ(second.runs_added, 0);
  EXPECT_EQ(second.runs_present, 2);
  EXPECT_EQ(second.jobs_added, 0);
  EXPECT_EQ(dump_tables(store::sqlite_handle(*main_)), before);
  // nor does it undo what was decided here since (a job queued to run again stays queued)
  store::Queue(*main_).requeue_job(main_jobs_[0]);
  const std::string after_requeue = dump_tables(store::sqlite_handle(*main_));
  main_->merge_shard(a);
  EXPECT_EQ(dump_tables(store::sqlite_handle(*main_)), after_requeue);
  EXPECT_EQ(main_one("SELECT state FROM jobs WHERE id = " + job), "queued");
}

TEST_F(Merge, ARunStillRunningWaitsForALaterMerge) {
  const std::string b = shard("task-1.db", "h1", 1);
  const std::int64_t run = attempt(b, std::nullopt);
  MergeReport report = main_->merge_shard(b);
  EXPECT_EQ(report.runs_added, 0);
  EXPECT_EQ(report.runs_unfinished, 1);
  EXPECT_EQ(main_one("SELECT state FROM jobs WHERE id = " + std::to_string(main_jobs_[1])), "submitted");
  {
    Database db(b, Database::Open::existing);
    store::RunWriter(db, run).finish(RunStatus::done, {{"test_acc", 0.25}}, "", "");
  }
  report = main_->merge_shard(b);
  EXPECT_EQ(report.runs_added, 1);
  EXPECT_EQ(report.runs_unfinished, 0);
  EXPECT_EQ(main_one("SELECT state || ':' || attempts FROM jobs WHERE id = " + std::to_string(main_jobs_[1])), "done:1");
}

TEST_F(Merge, AJobOrExperimentMissingHereIsAdded) {
  const std::string c = file("task-9.db");
  {
    Database db(c);
    const auto exp = db.add_experiment("elsewhere", "", "[experiment]\nname = 'elsewhere'\n");
    JobSpec s = spec(exp, "h-new", 9);
    s.params = {{"train.lr", "0.5"}};
    db.add_job(s);
  }
  attempt(c, RunStatus::oom);
  const MergeReport report = main_->merge_shard(c);
  EXPECT_EQ(report.jobs_added, 1);
  EXPECT_EQ(report.runs_added, 1);
  EXPECT_EQ(main_one("SELECT e.name || ':' || j.state || ':' || j.attempts || ':' || p.value FROM jobs j "
                     "JOIN experiments e ON e.id = j.experiment_id JOIN job_params p ON p.job_id = j.id "
                     "WHERE j.config_hash = 'h-new'"),
            "elsewhere:oom:1:0.5");
  EXPECT_EQ(main_one("SELECT count(*) FROM experiments"), "2");
  main_->merge_shard(c);
  EXPECT_EQ(main_one("SELECT count(*) FROM experiments"), "2");
  EXPECT_EQ(main_one("SELECT count(*) FROM jobs"), "4");
  // the shard's experiment owns its job here too, once; the main file's own jobs keep theirs
  EXPECT_EQ(main_one("SELECT group_concat(e.name) FROM experiment_jobs ej JOIN experiments e ON e.id = ej.experiment_id "
                     "JOIN jobs j ON j.id = ej.job_id WHERE j.config_hash = 'h-new'"),
            "elsewhere");
  EXPECT_EQ(main_one("SELECT count(*) FROM experiment_jobs"), "4");
}

// A shard whose experiment reused a job another experiment had made: it owns it here too.
TEST_F(Merge, AnExperimentOwnsTheJobsItReusedInItsShard) {
  const std::string c = file("task-8.db");
  {
    Database db(c);
    const auto first = db.add_experiment("first", "", "[experiment]\nname = 'first'\n");
    const auto second = db.add_experiment("second", "", "[experiment]\nname = 'second'\n");
    db.add_job(spec(first, "h-shared", 8));
    EXPECT_TRUE(db.add_job(spec(second, "h-shared", 8)).existed);
  }
  main_->merge_shard(c);
  EXPECT_EQ(main_one("SELECT group_concat(e.name, ',') FROM (SELECT e.name FROM experiment_jobs ej JOIN experiments e "
                     "ON e.id = ej.experiment_id JOIN jobs j ON j.id = ej.job_id WHERE j.config_hash = 'h-shared' "
                     "ORDER BY e.name) AS e"),
            "first,second");
}

TEST_F(Merge, ADamagedOrForeignShardIsRefusedWhole) {
  const std::string good = shard("task-0.db", "h0", 0);
  for (int i = 0; i < 3; ++i) attempt(good, i < 2 ? RunStatus::failed : RunStatus::done);
  {
    Database checkpointed(good, Database::Open::existing);
    raw_exec(good, "PRAGMA wal_checkpoint(TRUNCATE)");  // every row in the main file, so truncation cuts rows
  }
  const std::string before = dump_tables(store::sqlite_handle(*main_));
  const auto size = fs::file_size(good);

  auto refused = [&](const std::string& path, const std::string& what) {
    try {
      main_->merge_shard(path);
      ADD_FAILURE() << "merged " << path;
    } catch (const StoreError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;  // names the shard first
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_NE(msg.find("nothing merged into " + main_->path()), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    EXPECT_EQ(dump_tables(store::sqlite_handle(*main_)), before) << path;
  };

  const std::string truncated = file("truncated.db");
  {
    const std::string bytes = attnlab::store::testing::read_file(good);
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, size / 2);
  }
  refused(truncated, "");
  refused(file("missing.db"), "no such shard database");
  const std::string text = file("notes.db");
  std::ofstream(text) << "not a database at all, but long enough to have a header? no.\n";
  refused(text, "");
  const std::string newer = file("newer.db");
  fs::copy_file(good, newer);
  const std::string current = std::to_string(Database::kSchemaVersion), next = std::to_string(Database::kSchemaVersion + 1);
  raw_exec(newer, "PRAGMA user_version = " + next);
  refused(newer, "shard schema version " + next + ", but this attnlab merges version " + current + " only");
  const std::string foreign = file("foreign.db");
  raw_exec(foreign, "CREATE TABLE jobs (x); PRAGMA user_version = " + current);
  refused(foreign, "not an attnlab database (no table experiments)");

  // the connection is left clean: the good shard merges afterwards
  EXPECT_EQ(main_->merge_shard(good).runs_added, 3);
  EXPECT_EQ(main_one("SELECT count(*) FROM pragma_database_list WHERE name = 'shard'"), "0");  // detached
}

TEST_F(Merge, AShardPathWithOddCharactersIsOpenedAsItself) {
  fs::create_directories(dir_ / "a dir?#%");
  const std::string odd = (dir_ / "a dir?#%" / "task 0?.db").string();
  {
    Database db(odd);
    const auto exp = db.add_experiment("sweep", "sweep.toml", kExperimentText);
    db.add_job(spec(exp, "h2", 2));
  }
  attempt(odd, RunStatus::done);
  EXPECT_EQ(main_->merge_shard(odd).runs_added, 1);
  EXPECT_FALSE(fs::exists(dir_ / "a dir"));  // no file made at a misread path
}

}  // namespace
