// The queue in the store (schemas 4 and 6): claims, leases, expiry, the failure cap, cancel and retry,
// refusing to open without migrating, and the migration of a version 3 file with data.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../store/src/schema_v1.hpp"
#include "../store/src/schema_v2.hpp"
#include "../store/src/schema_v3.hpp"
#include "../store/src/schema_v4.hpp"
#include "../store/src/schema_v5.hpp"
#include "../store/src/schema_v6.hpp"
#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "attnlab/store/run_writer.hpp"
#include "attnlab/store/studies.hpp"
#include "store_support.hpp"
#include "../store/src/access.hpp"

using attnlab::store::Claimer;
using attnlab::store::CurvePoint;
using attnlab::store::Database;
namespace store = attnlab::store;
using attnlab::store::JobFilter;
using attnlab::store::JobState;
using attnlab::store::LeaseLost;
using attnlab::store::QueuedJob;
using attnlab::store::RunStatus;
using attnlab::store::StoreError;
namespace fs = std::filesystem;
using attnlab::store::testing::query;
using attnlab::store::testing::query_one;
using attnlab::store::testing::raw_exec;
using attnlab::store::testing::raw_query_one;
using attnlab::store::testing::StoreTest;

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void sleep_s(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

class StoreQueue : public StoreTest {
 protected:
  // A database with `n` queued jobs of one experiment; their ids in `jobs`.
  Database& fill(int n, const std::string& name = "queue.db") {
    db_ = std::make_unique<Database>(file(name));
    const auto exp = db_->add_experiment("e", "e.toml", "[experiment]");
    for (int i = 0; i < n; ++i) jobs.push_back(db_->add_job(spec(exp, "h" + std::to_string(i), i)).job_id);
    return *db_;
  }
  QueuedJob queued(std::int64_t job) {
    const auto rows = db_->list_jobs({{}, {}, {}, {job}});
    EXPECT_EQ(rows.size(), 1u);
    return rows.empty() ? QueuedJob{} : rows[0];
  }
  std::string run_column(std::int64_t run, const std::string& column) {
    return query_one(store::sqlite_handle(*db_), "SELECT quote(" + column + ") FROM runs WHERE id = " + std::to_string(run));
  }

  std::unique_ptr<Database> db_;
  std::vector<std::int64_t> jobs;
};

TEST_F(StoreQueue, ClaimsTheLowestQueuedJobOnceWithALease) {
  Database& db = fill(3);
  const double before = now_seconds();
  std::vector<std::int64_t> claimed, runs;
  while (auto lease = store::Queue(db).claim_next_job(claimer("w1"), 30)) {
    claimed.push_back(lease->job_id);
    runs.push_back(lease->run_id);
    EXPECT_EQ(lease->attempt, 1);
    EXPECT_EQ(lease->worker, "w1");
    EXPECT_GE(lease->expires_at, before + 30);
    EXPECT_LE(lease->expires_at, now_seconds() + 30);
    const QueuedJob q = queued(lease->job_id);
    EXPECT_EQ(q.job.state, JobState::running);
    EXPECT_EQ(q.attempts, 1);
    EXPECT_EQ(q.lease_run_id, lease->run_id);
    EXPECT_EQ(q.lease_owner, "w1");
    EXPECT_DOUBLE_EQ(q.lease_expires_at, lease->expires_at);
  }
  EXPECT_EQ(claimed, jobs);
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer("w2"), 30), std::nullopt);
  // the run rows the claims made: the claimer, a 128-bit uid each, a first heartbeat
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(DISTINCT uid) FROM runs WHERE length(uid) = 32 AND uid NOT GLOB '*[^0-9a-f]*'"),
            "3");
  EXPECT_EQ(run_column(runs[0], "worker || '|' || host || '|' || device || '|' || pid || '|' || status"),
            "'w1|test-host|cpu|1|running'");
  EXPECT_NE(run_column(runs[0], "heartbeat_at"), "NULL");
  // restricted to some ids
  Database& same = *db_;
  store::Queue(same).cancel_jobs({jobs[0]});
  EXPECT_EQ(store::Queue(same).retry_jobs({jobs[0]}), std::vector<std::int64_t>{jobs[0]});
  EXPECT_EQ(store::Queue(same).claim_next_job(claimer(), 30, {jobs[1], jobs[2]}), std::nullopt);
  EXPECT_EQ(store::Queue(same).claim_next_job(claimer(), 30, {jobs[2], jobs[0]})->job_id, jobs[0]);
}

TEST_F(StoreQueue, ConcurrentClaimersNeverShareAJob) {
  fill(200, "shared.db");
  constexpr int kClaimers = 4;
  std::vector<std::vector<std::int64_t>> taken(kClaimers);
  std::vector<std::thread> threads;
  for (int t = 0; t < kClaimers; ++t) {
    threads.emplace_back([&, t] {
      Database db(file("shared.db"), Database::Open::existing);  // one connection per claimer
      const Claimer me{"w" + std::to_string(t), "h", "cpu", t + 1};
      while (auto lease = store::Queue(db).claim_next_job(me, 30)) {
        taken[t].push_back(lease->job_id);
        sleep_s(0.001);  // the job: others claim meanwhile
        store::RunWriter(db, lease->run_id).finish(RunStatus::done, {{"noop", 1}}, "", "");
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::int64_t> all;
  int busy_claimers = 0;
  for (const auto& v : taken) {
    busy_claimers += !v.empty();
    all.insert(all.end(), v.begin(), v.end());
  }
  EXPECT_GE(busy_claimers, 2);  // the claims did interleave
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, jobs);  // each job exactly once
  EXPECT_EQ(query_one(store::sqlite_handle(*db_), "SELECT count(*) FROM runs"), "200");
  EXPECT_EQ(query_one(store::sqlite_handle(*db_), "SELECT count(*) FROM jobs WHERE state = 'done' AND attempts = 1"), "200");
}

TEST_F(StoreQueue, AnExpiredLeaseReturnsTheJobAfterABackOff) {
  Database& db = fill(1);
  double now = 1000;
  store::set_clock(db, [&] { return now; });
  const auto first = store::Queue(db).claim_next_job(claimer("slow"), 0.05);
  ASSERT_TRUE(first);
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer("other"), 30), std::nullopt);  // not expired yet
  now += 0.1;
  // this claim ends the expired lease; the job is claimed again after its back-off (0.5 s)
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer("other"), 30), std::nullopt);
  EXPECT_DOUBLE_EQ(queued(first->job_id).retry_after, now + 0.5);
  now += 0.49;
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer("other"), 30), std::nullopt);
  now += 0.01;
  const auto second = store::Queue(db).claim_next_job(claimer("other"), 30);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->job_id, first->job_id);
  EXPECT_EQ(second->attempt, 2);
  EXPECT_EQ(run_column(first->run_id, "status || '|' || error"), "'lost|lease expired: worker slow stopped renewing it'");
  EXPECT_NE(run_column(first->run_id, "finished_at"), "NULL");
  const QueuedJob q = queued(first->job_id);
  EXPECT_EQ(q.failures, 0);        // not the method's crash...
  EXPECT_EQ(q.infra_failures, 1);  // ...but an attempt the infrastructure ended: its own count
  EXPECT_EQ(q.attempts, 2);
  EXPECT_EQ(q.lease_owner, "other");

  // expire_leases does the same without claiming
  store::RunWriter(db, second->run_id).finish(RunStatus::failed, {}, "boom", "");
  const auto third = store::Queue(db).claim_next_job(claimer("slow"), 0.05);
  ASSERT_TRUE(third);
  EXPECT_EQ(store::expire_leases(db), 0);
  now += 0.1;
  EXPECT_EQ(store::expire_leases(db), 1);
  // one crash and two lost leases: the job is queued again (lost attempts have their own cap)
  EXPECT_EQ(queued(third->job_id).job.state, JobState::queued);
  EXPECT_EQ(queued(third->job_id).failures, 1);
  EXPECT_EQ(queued(third->job_id).infra_failures, 2);
  EXPECT_EQ(queued(third->job_id).error, "lease expired: worker slow stopped renewing it");
}

TEST_F(StoreQueue, HeartbeatsKeepTheLease) {
  Database& db = fill(1);
  double now = 1000;
  store::set_clock(db, [&] { return now; });
  const auto lease = store::Queue(db).claim_next_job(claimer(), 0.3);
  ASSERT_TRUE(lease);
  EXPECT_EQ(run_column(lease->run_id, "heartbeat_at"), "'1970-01-01T00:16:40.000Z'");  // the claim's time
  for (int i = 0; i < 4; ++i) {
    now += 0.1;
    EXPECT_TRUE(store::Queue(db).renew_lease(lease->run_id, 0.3));
  }
  EXPECT_EQ(run_column(lease->run_id, "heartbeat_at"), "'1970-01-01T00:16:40.400Z'");
  EXPECT_EQ(store::expire_leases(db), 0);  // 0.4 s after the claim, alive thanks to the heartbeats
  EXPECT_DOUBLE_EQ(queued(lease->job_id).lease_expires_at, now + 0.3);
  // a lease past its time that nobody ended yet still holds: a late heartbeat keeps it
  now += 0.35;
  EXPECT_TRUE(store::Queue(db).renew_lease(lease->run_id, 30));
  EXPECT_EQ(store::expire_leases(db), 0);
  EXPECT_THROW(store::Queue(db).renew_lease(lease->run_id, 0), StoreError);
}

TEST_F(StoreQueue, ALostLeaseRefusesEveryRunLevelWriteAndWritesNothing) {
  Database& db = fill(1);
  double clock = 1000;
  store::set_clock(db, [&] { return clock; });
  const auto old = store::Queue(db).claim_next_job(claimer("old"), 0.05);
  ASSERT_TRUE(old);
  store::RunWriter(db, old->run_id).append_curve({{1, "train", "loss", 2.0, 0.1}});  // while it held the lease
  clock += 0.1;
  EXPECT_EQ(store::expire_leases(db), 1);
  clock += 0.5;  // the back-off
  const auto now = store::Queue(db).claim_next_job(claimer("new"), 30);
  ASSERT_TRUE(now);
  const std::string before = attnlab::store::testing::dump_tables(store::sqlite_handle(db));

  const std::int64_t run = old->run_id;
  EXPECT_THROW(store::RunWriter(db, run).set_environment(env()), LeaseLost);
  EXPECT_THROW(store::RunWriter(db, run).append_curve({{2, "train", "loss", 1.0, 0.2}}), LeaseLost);
  EXPECT_THROW(store::RunWriter(db, run).set_resume_checkpoint("/x/resume.pt", 2), LeaseLost);
  EXPECT_THROW(store::RunWriter(db, run).copy_curve_from(now->run_id, 10), LeaseLost);
  EXPECT_THROW(store::RunWriter(db, run).finish(RunStatus::done, {{"test_acc", 1.0}}, "", "/x/best.pt"), LeaseLost);
  EXPECT_FALSE(store::RunWriter(db, run).fail_if_unfinished(RunStatus::failed, "late"));
  EXPECT_FALSE(store::Queue(db).renew_lease(run, 30));
  EXPECT_EQ(attnlab::store::testing::dump_tables(store::sqlite_handle(db)), before);  // not one byte written
  try {
    store::RunWriter(db, run).finish(RunStatus::done, {}, "", "");
  } catch (const LeaseLost& e) {
    EXPECT_EQ(std::string(e.what()), db.path() + ": run " + std::to_string(run) + " no longer holds the lease of job " +
                                         std::to_string(old->job_id) + " (the run is 'lost'); nothing written");
  }

  // the holder writes as usual, and may continue the old attempt's curve
  store::RunWriter(db, now->run_id).copy_curve_from(run, 10);
  store::RunWriter(db, now->run_id).finish(RunStatus::done, {{"test_acc", 0.5}}, "", "");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM results WHERE run_id = " + std::to_string(run)), "0");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM curves WHERE run_id = " + std::to_string(now->run_id)), "1");
  EXPECT_EQ(queued(now->job_id).job.state, JobState::done);
  EXPECT_THROW(store::RunWriter(db, now->run_id).finish(RunStatus::done, {}, "", ""), LeaseLost);  // once only
}

TEST_F(StoreQueue, FailuresAreCappedAndInterruptionsAreNot) {
  Database& db = fill(2);
  raw_exec(db.path(), "UPDATE jobs SET max_attempts = 2 WHERE id = " + std::to_string(jobs[0]));
  for (int i = 0; i < 5; ++i) {  // interrupted: released, never counted
    const auto lease = store::Queue(db).claim_next_job(claimer(), 30, {jobs[1]});
    ASSERT_TRUE(lease);
    store::RunWriter(db, lease->run_id).finish(RunStatus::interrupted, {}, "SIGTERM", "");
  }
  EXPECT_EQ(queued(jobs[1]).job.state, JobState::queued);
  EXPECT_EQ(queued(jobs[1]).failures, 0);
  EXPECT_EQ(queued(jobs[1]).attempts, 5);

  auto lease = store::Queue(db).claim_next_job(claimer(), 30, {jobs[0]});
  ASSERT_TRUE(lease);
  EXPECT_TRUE(store::RunWriter(db, lease->run_id).fail_if_unfinished(RunStatus::failed, "job process killed by signal 11"));
  EXPECT_EQ(queued(jobs[0]).job.state, JobState::queued);
  EXPECT_EQ(queued(jobs[0]).error, "job process killed by signal 11");
  lease = store::Queue(db).claim_next_job(claimer(), 30, {jobs[0]});
  ASSERT_TRUE(lease);
  store::RunWriter(db, lease->run_id).finish(RunStatus::failed, {}, "exited with status 3", "");
  const QueuedJob q = queued(jobs[0]);
  EXPECT_EQ(q.job.state, JobState::failed);
  EXPECT_EQ(q.failures, 2);
  EXPECT_EQ(q.error, "2 attempts failed; last: exited with status 3");
  EXPECT_EQ(q.lease_run_id, 0);
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer(), 30, {jobs[0]}), std::nullopt);
  // each attempt keeps its own error
  EXPECT_EQ(query(store::sqlite_handle(db), "SELECT error FROM runs WHERE job_id = " + std::to_string(jobs[0]) + " ORDER BY attempt"),
            (std::vector<std::string>{"job process killed by signal 11", "exited with status 3"}));

  // done, diverged and oom are final at once
  Database& same = db;
  const auto exp = same.add_experiment("e2", "", "c");
  for (const auto& [status, state] :
       {std::pair{RunStatus::diverged, JobState::diverged}, std::pair{RunStatus::oom, JobState::oom}}) {
    const auto job = same.add_job(spec(exp, std::string("final-") + to_string(status))).job_id;
    const auto l = store::Queue(same).claim_next_job(claimer(), 30, {job});
    store::RunWriter(same, l->run_id).finish(status, {}, "loss is nan", "");
    EXPECT_EQ(queued(job).job.state, state);
    EXPECT_EQ(queued(job).failures, 0);
  }
}

TEST_F(StoreQueue, CancelTakesTheLeaseAwayAndRetryQueuesAgain) {
  Database& db = fill(4);
  const auto running = store::Queue(db).claim_next_job(claimer("holder"), 30, {jobs[0]});
  ASSERT_TRUE(running);
  const auto done = store::Queue(db).claim_next_job(claimer(), 30, {jobs[3]});
  store::RunWriter(db, done->run_id).finish(RunStatus::done, {}, "", "");
  store::Queue(db).mark_submitted({jobs[2]});

  EXPECT_EQ(store::Queue(db).cancel_jobs({jobs[0], jobs[1], jobs[2], jobs[3], 999, jobs[1]}),
            (std::vector<std::int64_t>{jobs[0], jobs[1], jobs[2]}));
  for (int i : {0, 1, 2}) EXPECT_EQ(queued(jobs[i]).job.state, JobState::cancelled);
  EXPECT_EQ(queued(jobs[3]).job.state, JobState::done);
  EXPECT_EQ(run_column(running->run_id, "status || '|' || error"), "'interrupted|cancelled'");
  EXPECT_EQ(queued(jobs[0]).lease_run_id, 0);
  // the holder finds out at its next write or heartbeat
  EXPECT_FALSE(store::Queue(db).renew_lease(running->run_id, 30));
  EXPECT_THROW(store::RunWriter(db, running->run_id).append_curve({{1, "train", "loss", 1.0, 1.0}}), LeaseLost);
  EXPECT_THROW(store::RunWriter(db, running->run_id).finish(RunStatus::done, {{"test_acc", 1}}, "", ""), LeaseLost);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM results"), "0");
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer(), 30), std::nullopt);  // cancelled jobs are not claimed

  EXPECT_EQ(store::Queue(db).retry_jobs({jobs[0], jobs[3], 999}), std::vector<std::int64_t>{jobs[0]});
  EXPECT_EQ(queued(jobs[0]).job.state, JobState::queued);
  EXPECT_EQ(queued(jobs[3]).job.state, JobState::done);  // retry leaves done jobs alone (requeue_job runs them again)
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer(), 30)->job_id, jobs[0]);
}

TEST_F(StoreQueue, RetryResetsTheFailureCount) {
  Database& db = fill(1);
  for (int i = 0; i < 3; ++i) store::RunWriter(db, store::Queue(db).claim_next_job(claimer(), 30)->run_id).finish(RunStatus::failed, {}, "boom", "");
  EXPECT_EQ(queued(jobs[0]).job.state, JobState::failed);
  EXPECT_EQ(store::Queue(db).retry_jobs({jobs[0]}), std::vector<std::int64_t>{jobs[0]});
  EXPECT_EQ(queued(jobs[0]).failures, 0);
  EXPECT_EQ(queued(jobs[0]).attempts, 3);
  const auto lease = store::Queue(db).claim_next_job(claimer(), 30);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->attempt, 4);
  store::RunWriter(db, lease->run_id).finish(RunStatus::failed, {}, "boom", "");
  EXPECT_EQ(queued(jobs[0]).job.state, JobState::queued);  // three more tries after a retry
}

// A job handed to a SLURM array whose task died goes back to the queue as it was: its failures stay.
TEST_F(StoreQueue, RetryOfASubmittedJobKeepsItsFailures) {
  Database& db = fill(1);
  store::RunWriter(db, store::Queue(db).claim_next_job(claimer(), 30)->run_id).finish(RunStatus::failed, {}, "boom", "");
  EXPECT_EQ(store::Queue(db).mark_submitted({jobs[0]}), std::vector<std::int64_t>{jobs[0]});
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer(), 30), std::nullopt);  // submitted jobs are the array's
  EXPECT_EQ(store::Queue(db).retry_jobs({jobs[0]}), std::vector<std::int64_t>{jobs[0]});
  EXPECT_EQ(queued(jobs[0]).job.state, JobState::queued);
  EXPECT_EQ(queued(jobs[0]).failures, 1);
}

TEST_F(StoreQueue, CountsListsAndSubmits) {
  Database& db = fill(5);
  store::RunWriter(db, store::Queue(db).claim_next_job(claimer(), 30, {jobs[0]})->run_id).finish(RunStatus::done, {}, "", "");
  store::Queue(db).claim_next_job(claimer(), 30, {jobs[1]});
  EXPECT_EQ(store::Queue(db).mark_submitted({jobs[1], jobs[2], jobs[3]}), (std::vector<std::int64_t>{jobs[2], jobs[3]}));
  store::Queue(db).cancel_jobs({jobs[3]});
  const std::vector<std::pair<JobState, std::int64_t>> want = {
      {JobState::queued, 1}, {JobState::running, 1}, {JobState::submitted, 1},
      {JobState::done, 1},   {JobState::failed, 0},  {JobState::diverged, 0},
      {JobState::oom, 0},    {JobState::blocked, 0}, {JobState::cancelled, 1}};
  EXPECT_EQ(db.queue_counts(), want);

  auto ids = [](const std::vector<QueuedJob>& rows) {
    std::vector<std::int64_t> out;
    for (const auto& r : rows) out.push_back(r.job.id);
    return out;
  };
  EXPECT_EQ(ids(db.list_jobs({})), jobs);
  EXPECT_EQ(ids(db.list_jobs({{JobState::done, JobState::cancelled}, {}, {}, {}})), (std::vector<std::int64_t>{jobs[0], jobs[3]}));
  EXPECT_EQ(ids(db.list_jobs({{}, {"softmax"}, {"listops"}, {jobs[4], jobs[2]}})),
            (std::vector<std::int64_t>{jobs[2], jobs[4]}));
  EXPECT_TRUE(db.list_jobs({{}, {"linear"}, {}, {}}).empty());
  EXPECT_TRUE(db.list_jobs({{}, {"it's \"odd\"\n"}, {}, {}}).empty());  // quoted through JSON, not spliced
  const QueuedJob first = db.list_jobs({}).at(0);
  EXPECT_EQ(first.job.config_hash, "h0");
  EXPECT_EQ(first.max_attempts, 3);
  EXPECT_FALSE(first.created_at.empty());
}

TEST_F(StoreQueue, AbandonLeasesEndsEveryRunningRunWhateverItsExpiry) {
  Database& db = fill(3);
  double now = 1000;
  store::set_clock(db, [&] { return now; });
  const auto a = store::Queue(db).claim_next_job(claimer(), 3600);
  const auto b = store::Queue(db).claim_next_job(claimer(), 3600);
  EXPECT_EQ(store::Queue(db).abandon_leases("requeued array task"), 2);
  for (const auto& lease : {a, b}) {
    EXPECT_EQ(run_column(lease->run_id, "status || '|' || error"), "'lost|requeued array task'");
    EXPECT_EQ(queued(lease->job_id).job.state, JobState::queued);
    EXPECT_EQ(queued(lease->job_id).failures, 0);
    EXPECT_EQ(queued(lease->job_id).infra_failures, 1);
  }
  EXPECT_EQ(store::Queue(db).abandon_leases("again"), 0);
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer(), 30)->job_id, jobs[2]);  // the other two back off
  now += 0.5;
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer(), 30)->job_id, jobs[0]);
}

TEST_F(StoreQueue, ResumePointIsTheNewestCheckpointSinceTheLastFinish) {
  Database& db = fill(2);
  EXPECT_EQ(db.resume_point(jobs[0]), std::nullopt);
  const auto first = store::Queue(db).claim_next_job(claimer(), 30, {jobs[0]});
  store::RunWriter(db, first->run_id).append_curve({{5, "train", "loss", 2.0, 1}, {10, "train", "loss", 1.5, 2}, {12, "train", "loss", 1.4, 3},
                                  {20, "train", "tau", 0.5, 0}});  // instability points: before training, any step
  store::RunWriter(db, first->run_id).set_resume_checkpoint("/ck/job.resume.pt", 5);
  store::RunWriter(db, first->run_id).set_resume_checkpoint("/ck/job.resume.pt", 10, "0123abcd");
  store::RunWriter(db, first->run_id).fail_if_unfinished(RunStatus::failed, "killed by signal 9");

  const auto second = store::Queue(db).claim_next_job(claimer(), 30, {jobs[0]});
  const auto point = db.resume_point(jobs[0]);  // the newest, at the step it holds
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->path, "/ck/job.resume.pt");
  EXPECT_EQ(point->run_id, first->run_id);
  EXPECT_EQ(point->step, 10);
  EXPECT_EQ(point->checksum, "0123abcd");
  EXPECT_EQ(db.run_attempt(second->run_id).resume_step, 0);
  store::RunWriter(db, second->run_id).copy_curve_from(first->run_id, 10);  // what was logged after the checkpoint is redone
  const auto copied = db.curve(second->run_id);
  ASSERT_EQ(copied.size(), 3u);
  int loss_at_10 = 0, tau_at_20 = 0;
  for (const auto& p : copied) {
    loss_at_10 += p.name == "loss" && p.step == 10 && p.value == 1.5;
    tau_at_20 += p.name == "tau" && p.step == 20;
    EXPECT_NE(p.step, 12);
  }
  EXPECT_EQ(loss_at_10, 1);
  EXPECT_EQ(tau_at_20, 1);
  const auto other = store::Queue(db).claim_next_job(claimer(), 30, {jobs[1]});
  EXPECT_THROW(store::RunWriter(db, second->run_id).copy_curve_from(other->run_id, 10), StoreError);  // another job's curve

  store::RunWriter(db, second->run_id).finish(RunStatus::done, {}, "", "");
  store::Queue(db).requeue_job(jobs[0]);  // run again (--rerun): from the start, not from an old checkpoint
  EXPECT_EQ(db.resume_point(jobs[0]), std::nullopt);
}

TEST_F(StoreQueue, AttemptsOfAJobOldestFirst) {
  Database& db = fill(1);
  EXPECT_TRUE(db.attempts_of_job(jobs[0]).empty());
  double now = 1000;
  store::set_clock(db, [&] { return now; });
  const auto first = store::Queue(db).claim_next_job({"n1:5:cpu", "n1", "cpu", 5}, 0.01);
  store::RunWriter(db, first->run_id).set_resume_checkpoint("/c/job-1.resume.pt", 40);
  now += 0.05;  // past the lease; the attempt had a checkpoint: no back-off
  const auto second = store::Queue(db).claim_next_job({"n2:6:cuda:1", "n2", "cuda:1", 6}, 30);
  const auto attempts = db.attempts_of_job(jobs[0]);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].run_id, first->run_id);
  EXPECT_EQ(attempts[0].attempt, 1);
  EXPECT_EQ(attempts[0].status, RunStatus::lost);
  EXPECT_EQ(attempts[0].worker + "|" + attempts[0].host + "|" + attempts[0].device, "n1:5:cpu|n1|cpu");
  EXPECT_EQ(attempts[0].pid, 5);
  EXPECT_EQ(attempts[0].error, "lease expired: worker n1:5:cpu stopped renewing it");
  EXPECT_EQ(attempts[0].resume_checkpoint, "/c/job-1.resume.pt");
  EXPECT_EQ(attempts[0].resume_step, 40);
  EXPECT_FALSE(attempts[0].finished_at.empty());
  EXPECT_LE(attempts[0].started_at, attempts[0].heartbeat_at);
  EXPECT_EQ(attempts[1].run_id, second->run_id);
  EXPECT_EQ(attempts[1].status, RunStatus::running);
  EXPECT_EQ(attempts[1].finished_at, "");
  EXPECT_EQ(attempts[1].resume_step, 0);
  // the experiment an enqueue finds again
  EXPECT_EQ(db.find_experiment("e", "[experiment]"), std::optional<std::int64_t>(queued(jobs[0]).job.experiment_id));
  EXPECT_EQ(db.find_experiment("e", "[experiment]\n"), std::nullopt);
  EXPECT_EQ(queued(jobs[0]).experiment, "e");
}

TEST_F(StoreQueue, WorkersNeverMigrate) {
  const std::string missing = file("missing.db");
  try {
    Database db(missing, Database::Open::existing);
    FAIL() << "opened a missing file";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": no such database: run `attnlab db migrate --db " + missing +
                                         "` (or `attnlab queue add`) first");
  }
  EXPECT_FALSE(fs::exists(missing));

  const std::string old = file("v3.db");
  raw_exec(old, std::string(attnlab::store::kSchemaV1) + attnlab::store::kSchemaV2 + attnlab::store::kSchemaV3 +
                    "PRAGMA user_version = 3;");
  try {
    Database db(old, Database::Open::existing);
    FAIL() << "opened a version 3 file without migrating";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), old + ": database schema version 3 is older than this attnlab needs (" +
                                           std::to_string(Database::kSchemaVersion) + "): run `attnlab db migrate --db " +
                                           old + "` first");
  }
  EXPECT_EQ(raw_query_one(old, "PRAGMA user_version"), "3");
  EXPECT_EQ(raw_query_one(old, "SELECT count(*) FROM sqlite_master WHERE name = 'jobs_by_state'"), "0");

  const std::string empty = file("empty.db");
  std::ofstream(empty).close();
  EXPECT_THROW(Database(empty, Database::Open::existing), StoreError);
  EXPECT_EQ(fs::file_size(empty), 0u);

  { Database migrated(old); }
  Database db(old, Database::Open::existing);
  EXPECT_EQ(db.schema_version(), Database::kSchemaVersion);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA foreign_keys"), "1");
  raw_exec(old, "PRAGMA user_version = " + std::to_string(Database::kSchemaVersion + 1));
  EXPECT_THROW(Database(old, Database::Open::existing), StoreError);
}

// A version 3 file made with the version 1..3 DDL and rows in every state the old runner left.
TEST_F(StoreQueue, MigratesAVersion3FileWithDataKeepingEveryRow) {
  const std::string path = file("v3-data.db");
  raw_exec(path, std::string(attnlab::store::kSchemaV1) + attnlab::store::kSchemaV2 + attnlab::store::kSchemaV3 + R"sql(
    PRAGMA user_version = 3;
    INSERT INTO experiments (id, name, source_path, config_text) VALUES (1, 'old', 'old.toml', '[experiment]');
    INSERT INTO jobs (id, experiment_id, method, dataset, seed, config_toml, config_hash, state) VALUES
      (1, 1, 'softmax', 'listops', 1, 'c1', 'h1', 'done'),
      (2, 1, 'softmax', 'listops', 2, 'c2', 'h2', 'failed'),
      (3, 1, 'softmax', 'listops', 3, 'c3', 'h3', 'running'),
      (4, 1, 'softmax', 'listops', 4, 'c4', 'h4', 'queued'),
      (5, 1, 'softmax', 'listops', 5, 'c5', 'h5', 'running');
    INSERT INTO job_params VALUES (1, 'train.lr', '0.001'), (2, 'train.lr', '0.002');
    INSERT INTO runs (id, job_id, attempt, status, host, pid, started_at, finished_at, error, checkpoint_path) VALUES
      (10, 1, 1, 'interrupted', 'n1', 11, '2024-01-01T00:00:00.000Z', '2024-01-01T00:01:00.000Z', 'SIGINT', NULL),
      (11, 1, 2, 'done', 'n1', 12, '2024-01-01T00:02:00.000Z', '2024-01-01T00:03:00.000Z', NULL, 'run-11.pt'),
      (12, 2, 1, 'failed', 'n1', 13, '2024-01-01T00:04:00.000Z', '2024-01-01T00:05:00.000Z', 'boom', NULL),
      (13, 3, 1, 'running', 'n1', 14, '2024-01-01T00:06:00.000Z', NULL, NULL, NULL),
      (14, 3, 2, 'running', 'n1', 15, '2024-01-01T00:07:00.000Z', NULL, NULL, NULL);
    INSERT INTO run_plugins VALUES (11, 'attention', 'softmax', '1.0', '/p/softmax.so', 'aa');
    INSERT INTO curves VALUES (11, 10, 'train', 'loss', 1.5, 0.5), (11, 20, 'val', 'acc', 0.75, 1.0);
    INSERT INTO results VALUES (11, 'test_acc', 0.8125);
    INSERT INTO variance_examples VALUES (11, 'test', 0, 10, 0.5, 1, 2, 2);
    INSERT INTO bench_results (method, dataset, seq_len, batch_size, device, steps_timed, status, config_toml)
      VALUES ('softmax', 'listops', 128, 4, 'cpu', 5, 'done', '');
  )sql");
  const std::string counts_sql =
      "SELECT (SELECT count(*) FROM experiments) || ',' || (SELECT count(*) FROM jobs) || ',' || "
      "(SELECT count(*) FROM job_params) || ',' || (SELECT count(*) FROM runs) || ',' || "
      "(SELECT count(*) FROM run_plugins) || ',' || (SELECT count(*) FROM curves) || ',' || "
      "(SELECT count(*) FROM results) || ',' || (SELECT count(*) FROM variance_examples) || ',' || "
      "(SELECT count(*) FROM bench_results)";
  EXPECT_EQ(raw_query_one(path, counts_sql), "1,5,2,5,1,2,1,1,1");

  Database db(path);
  EXPECT_EQ(db.migrated_from(), 3);
  EXPECT_EQ(db.schema_version(), Database::kSchemaVersion);
  EXPECT_EQ(query_one(store::sqlite_handle(db), counts_sql), "1,5,2,5,1,2,1,1,1");  // nothing lost
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(query(store::sqlite_handle(db), "PRAGMA foreign_key_check").empty());
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA foreign_keys"), "1");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(DISTINCT uid) FROM runs WHERE length(uid) = 32"), "5");
  // ids, values and the view survive the table rebuilds
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT group_concat(run_id || ':' || status || ':' || coalesce(test_acc, '-'), ' ') "
                                   "FROM run_summary"),
            "10:interrupted:- 11:done:0.8125 12:failed:- 13:lost:- 14:running:-");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT host || pid || started_at || finished_at || checkpoint_path FROM runs WHERE id = 11"),
            "n1122024-01-01T00:02:00.000Z2024-01-01T00:03:00.000Zrun-11.pt");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT error FROM runs WHERE id = 13"),
            "never finished (still running when the database moved to schema 4)");

  auto job = [&](std::int64_t id) {
    const auto rows = db.list_jobs({{}, {}, {}, {id}});
    EXPECT_EQ(rows.size(), 1u);
    return rows.at(0);
  };
  EXPECT_EQ(job(1).job.state, JobState::done);
  EXPECT_EQ(job(1).attempts, 2);
  EXPECT_EQ(job(1).failures, 0);
  EXPECT_EQ(job(2).job.state, JobState::failed);
  EXPECT_EQ(job(2).failures, 1);
  EXPECT_EQ(job(2).error, "boom");
  EXPECT_EQ(job(3).job.state, JobState::running);  // with an expired lease held by its newest run
  EXPECT_EQ(job(3).lease_run_id, 14);
  EXPECT_EQ(job(3).lease_expires_at, 0);
  EXPECT_EQ(job(4).job.state, JobState::queued);
  EXPECT_EQ(job(5).job.state, JobState::queued);  // 'running' with no run: nothing holds it
  EXPECT_EQ(job(4).max_attempts, 3);

  // The first claim ends the stale lease (job 3 queued again after a back-off, counted as the
  // infrastructure's) and takes job 4.
  const auto lease = store::Queue(db).claim_next_job(claimer(), 30);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->job_id, 4);
  EXPECT_EQ(lease->attempt, 1);
  EXPECT_EQ(job(3).job.state, JobState::queued);
  EXPECT_GT(job(3).retry_after, 0);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT status FROM runs WHERE id = 14"), "lost");
  EXPECT_EQ(job(3).failures, 0);
  EXPECT_EQ(job(3).infra_failures, 1);
  // and the new states are allowed now
  store::Queue(db).cancel_jobs({4});
  EXPECT_EQ(job(4).job.state, JobState::cancelled);
}

// Schemas 6 and 9: what ended an attempt decides what it costs the job. Attempts ended from
// outside are the machine's fault: the job backs off (0.5 s doubling to 60 s) and is queued again;
// it fails only after max_infra_failures of them in a row ended before a checkpoint of their own.
TEST_F(StoreQueue, AttemptsEndedFromOutsideBackOffAndFailTheJobOnlyWithoutProgress) {
  Database& db = fill(1);
  double now = 1000;
  store::set_clock(db, [&] { return now; });
  const QueuedJob fresh = queued(jobs[0]);
  EXPECT_EQ(fresh.max_infra_failures, 10);
  EXPECT_GT(fresh.max_infra_failures, fresh.max_attempts);
  auto lose = [&](const std::string& why) {
    now += 100;  // past any back-off
    const auto lease = store::Queue(db).claim_next_job(claimer(), 30);
    EXPECT_TRUE(lease);
    if (lease) EXPECT_TRUE(store::RunWriter(db, lease->run_id).fail_if_unfinished(RunStatus::lost, why));
    return lease ? lease->run_id : 0;
  };
  for (int i = 1; i <= 9; ++i) {
    lose("job process killed by signal 9 (Killed), not by its own code");
    const QueuedJob q = queued(jobs[0]);
    EXPECT_EQ(q.job.state, JobState::queued) << i;
    EXPECT_EQ(q.lost_in_a_row, i);
    EXPECT_DOUBLE_EQ(q.retry_after, now + std::min(60.0, 0.5 * (1 << (i - 1)))) << i;
    EXPECT_EQ(store::Queue(db).claim_next_job(claimer(), 30), std::nullopt);  // backing off
  }
  // an attempt that adopted a checkpoint of its own made progress: no back-off, the row starts over
  now += 100;
  const auto progressing = store::Queue(db).claim_next_job(claimer(), 30);
  ASSERT_TRUE(progressing);
  store::RunWriter(db, progressing->run_id).set_resume_checkpoint("/c/job-1.run-10.step-35.resume.pt", 35, "0123456789abcdef");
  EXPECT_TRUE(store::RunWriter(db, progressing->run_id).fail_if_unfinished(RunStatus::lost, "lease expired"));
  EXPECT_EQ(queued(jobs[0]).lost_in_a_row, 0);
  EXPECT_EQ(queued(jobs[0]).retry_after, 0);
  // the method's own crashes still have their three
  for (int i = 1; i <= 2; ++i) store::RunWriter(db, store::Queue(db).claim_next_job(claimer(), 30)->run_id).finish(RunStatus::failed, {}, "segv", "");
  EXPECT_EQ(queued(jobs[0]).job.state, JobState::queued);
  EXPECT_EQ(queued(jobs[0]).failures, 2);
  EXPECT_EQ(queued(jobs[0]).infra_failures, 10);
  for (int i = 1; i <= 9; ++i) lose("lease expired");
  EXPECT_EQ(queued(jobs[0]).job.state, JobState::queued);
  lose("lease expired");
  const QueuedJob q = queued(jobs[0]);
  EXPECT_EQ(q.job.state, JobState::failed);
  EXPECT_EQ(q.infra_failures, 20);
  EXPECT_EQ(q.lost_in_a_row, 10);
  EXPECT_EQ(q.error, "10 attempts in a row ended from outside (killed, lease expired) before a checkpoint of their own; "
                     "last: lease expired");
  // every attempt keeps its own reason
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) || ' ' || group_concat(DISTINCT status) FROM runs WHERE status = 'lost'"),
            "20 lost");
  // a retry resets the counts and the back-off
  EXPECT_EQ(store::Queue(db).retry_jobs({jobs[0]}), std::vector<std::int64_t>{jobs[0]});
  EXPECT_EQ(queued(jobs[0]).failures, 0);
  EXPECT_EQ(queued(jobs[0]).infra_failures, 0);
  EXPECT_EQ(queued(jobs[0]).lost_in_a_row, 0);
  EXPECT_EQ(queued(jobs[0]).retry_after, 0);
}

TEST_F(StoreQueue, ARejectedAttemptBlocksTheJobWithoutCountingAFailure) {
  Database& db = fill(2);
  const auto lease = store::Queue(db).claim_next_job(claimer(), 30);
  ASSERT_TRUE(lease);
  store::RunWriter(db, lease->run_id).finish(RunStatus::rejected, {}, "e.toml:3: [methods.x]: no attention plugin named 'x'", "");
  QueuedJob q = queued(jobs[0]);
  EXPECT_EQ(q.job.state, JobState::blocked);
  EXPECT_EQ(q.failures, 0);
  EXPECT_EQ(q.infra_failures, 0);
  EXPECT_EQ(q.error, "e.toml:3: [methods.x]: no attention plugin named 'x'");
  EXPECT_EQ(run_column(lease->run_id, "status"), "'rejected'");
  // never claimed again by itself; the other job is
  const auto next = store::Queue(db).claim_next_job(claimer(), 30);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->job_id, jobs[1]);
  EXPECT_EQ(store::Queue(db).claim_next_job(claimer(), 30), std::nullopt);
  // counted with the jobs that ended without a result, and it counts its rejected run
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT run_id FROM job_outcomes WHERE job_id = " + std::to_string(jobs[0])),
            std::to_string(lease->run_id));
  EXPECT_EQ(db.counting_run(jobs[0]), lease->run_id);
  EXPECT_EQ(db.counting_run(jobs[1]), std::nullopt);  // running: nothing counts yet
  // retried by hand once fixed; cancellable too
  EXPECT_EQ(store::Queue(db).retry_jobs({jobs[0]}), std::vector<std::int64_t>{jobs[0]});
  EXPECT_EQ(queued(jobs[0]).job.state, JobState::queued);
  store::RunWriter(db, store::Queue(db).claim_next_job(claimer(), 30, {jobs[0]})->run_id).finish(RunStatus::rejected, {}, "again", "");
  EXPECT_EQ(store::Queue(db).cancel_jobs({jobs[0]}), std::vector<std::int64_t>{jobs[0]});
  EXPECT_EQ(queued(jobs[0]).job.state, JobState::cancelled);
}

TEST_F(StoreQueue, AJobKeepsThePluginFoldersItWasQueuedWith) {
  db_ = std::make_unique<Database>(file("plugins.db"));
  const auto exp = db_->add_experiment("e", "e.toml", "[experiment]");
  auto with_dirs = spec(exp, "h-dirs", 1);
  with_dirs.plugin_dirs = {"/opt/my plugins", "/srv/\"quoted\"\\dir"};
  const auto added = db_->add_job(with_dirs);
  const auto plain = db_->add_job(spec(exp, "h-plain", 2));
  EXPECT_EQ(queued(added.job_id).plugin_dirs, with_dirs.plugin_dirs);
  EXPECT_TRUE(queued(plain.job_id).plugin_dirs.empty());
  EXPECT_EQ(db_->job_by_hash("h-dirs")->id, added.job_id);
  EXPECT_FALSE(db_->job_by_hash("nope"));
  const auto lease = store::Queue(*db_).claim_next_job(claimer("w"), 30);
  std::int64_t job = 0;
  const auto attempt = db_->run_attempt(lease->run_id, &job);
  EXPECT_EQ(job, lease->job_id);
  EXPECT_EQ(attempt.status, RunStatus::running);
  EXPECT_EQ(attempt.worker, "w");
  EXPECT_THROW(db_->run_attempt(999), StoreError);
}

// A version 5 file with jobs in flight: the rebuild to 6 keeps every row and value, and the new
// columns start at their defaults (failure counts as they were).
TEST_F(StoreQueue, MigratesAVersion5FileKeepingEveryRowAndLease) {
  const std::string path = file("v5-data.db");
  raw_exec(path, std::string(attnlab::store::kSchemaV1) + attnlab::store::kSchemaV2 + attnlab::store::kSchemaV3 + "PRAGMA foreign_keys = OFF;" +
                     attnlab::store::kSchemaV4 + attnlab::store::kSchemaV5 + R"sql(
    PRAGMA user_version = 5;
    INSERT INTO experiments (id, name, source_path, config_text) VALUES (1, 'old', 'old.toml', '[experiment]');
    INSERT INTO runs (id, job_id, attempt, status, started_at, uid, worker, resume_checkpoint, resume_step, checkpoint_path)
      VALUES (20, 1, 1, 'done', '2025-01-01T00:00:00.000Z', 'u20', 'n:1:cpu', NULL, NULL, 'db.ckpt/run-20.pt'),
             (21, 2, 1, 'lost', '2025-01-01T00:00:00.000Z', 'u21', 'n:1:cpu', 'db.ckpt/job-2.run-21.resume.pt', 70, NULL),
             (22, 2, 2, 'running', '2025-01-01T00:00:00.000Z', 'u22', 'n:2:cpu', NULL, NULL, NULL);
    INSERT INTO jobs (id, experiment_id, method, dataset, seed, config_toml, config_hash, state, attempts, failures,
                      lease_run_id, lease_owner, lease_expires_at, error) VALUES
      (1, 1, 'softmax', 'listops', 1, 'c1', 'h1', 'done', 1, 0, NULL, NULL, NULL, NULL),
      (2, 1, 'softmax', 'listops', 2, 'c2', 'h2', 'running', 2, 1, 22, 'n:2:cpu', 1e12, 'lease expired');
    INSERT INTO results VALUES (20, 'test_acc', 0.5);
  )sql");
  Database db(path);
  EXPECT_EQ(db.migrated_from(), 5);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(query(store::sqlite_handle(db), "PRAGMA foreign_key_check").empty());
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT group_concat(id || ':' || state || ':' || failures || ':' || infra_failures || ':' || "
                                   "max_infra_failures || ':' || coalesce(lease_run_id, '-') || ':' || coalesce(plugin_dirs, '-'), ' ') FROM jobs"),
            "1:done:0:0:10:-:- 2:running:1:0:10:22:-");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT group_concat(id || ':' || status || ':' || uid || ':' || coalesce(resume_step, '-'), ' ') FROM runs"),
            "20:done:u20:- 21:lost:u21:70 22:running:u22:-");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT mean FROM seed_stats WHERE metric = 'test_acc'"), "0.5");
  EXPECT_EQ(db.resume_point(2)->path, "db.ckpt/job-2.run-21.resume.pt");
  // the lease still holds: the running attempt may write
  EXPECT_NO_THROW(store::RunWriter(db, 22).append_curve({{1, "train", "loss", 1.0, 0.1}}));
}

// A version 6 file with a finished run: migrations 7 and 8 add the spectrum and gradient tables and
// touch nothing else; the run can then be measured.
TEST_F(StoreQueue, MigratesAVersion6FileAddingTheStudyTables) {
  const std::string path = file("v6-data.db");
  raw_exec(path, std::string(attnlab::store::kSchemaV1) + attnlab::store::kSchemaV2 + attnlab::store::kSchemaV3 + "PRAGMA foreign_keys = OFF;" +
                     attnlab::store::kSchemaV4 + attnlab::store::kSchemaV5 + attnlab::store::kSchemaV6 + R"sql(
    PRAGMA user_version = 6;
    INSERT INTO experiments (id, name, source_path, config_text) VALUES (1, 'old', 'old.toml', '[experiment]');
    INSERT INTO jobs (id, experiment_id, method, dataset, seed, config_toml, config_hash, state, attempts)
      VALUES (1, 1, 'softmax', 'listops', 1, 'c1', 'h1', 'done', 1);
    INSERT INTO runs (id, job_id, attempt, status, started_at, uid, checkpoint_path)
      VALUES (20, 1, 1, 'done', '2025-01-01T00:00:00.000Z', 'u20', 'db.ckpt/run-20.pt');
    INSERT INTO results VALUES (20, 'test_acc', 0.5);
    INSERT INTO variance_examples VALUES (20, 'test', 0, 10, 0.5, 1, 2, 2);
  )sql");
  // runs and jobs gain columns in version 9, approx_results in 10, bench_results in 11 (ALTER TABLE
  // rewrites their CREATE text)
  const std::string before = raw_query_one(
      path, "SELECT group_concat(sql, ';') FROM sqlite_master WHERE name NOT IN ('runs', 'jobs', 'approx_results', "
            "'bench_results', 'seed_stats')");
  Database db(path);
  EXPECT_EQ(db.migrated_from(), 6);
  EXPECT_EQ(db.schema_version(), Database::kSchemaVersion);
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM pragma_table_info('runs') WHERE name IN "
                                   "('resume_checksum', 'checkpoint_checksum')"), "2");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM pragma_table_info('jobs') WHERE name IN "
                                   "('lost_in_a_row', 'retry_after')"), "2");
  // version 10: every table with a provenance has its five columns
  for (const char* table : {"runs", "bench_results", "approx_results", "spectrum_summaries", "gradient_stats"})
    EXPECT_EQ(query_one(store::sqlite_handle(db), std::string("SELECT count(*) FROM pragma_table_info('") + table +
                                                      "') WHERE name IN ('device', 'device_name', 'torch_version', "
                                                      "'git_revision', 'threads')"),
              "5")
        << table;
  // version 11: a bench step's host time, ops and mode; a run's step mode
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM pragma_table_info('bench_results') WHERE name IN "
                                   "('host_seconds_median', 'ops_per_step', 'step_mode')"), "3");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM pragma_table_info('runs') WHERE name = 'step_mode'"), "1");
  EXPECT_EQ(query_one(store::sqlite_handle(db), "PRAGMA integrity_check"), "ok");
  EXPECT_TRUE(query(store::sqlite_handle(db), "PRAGMA foreign_key_check").empty());
  // every version 6 object as it was, the three new tables after them
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT group_concat(sql, ';') FROM sqlite_master WHERE name NOT LIKE 'spectrum%' "
                                   "AND name NOT LIKE 'sqlite_autoindex_spectrum%' AND name NOT LIKE '%gradient_stats%' "
                                   "AND name NOT LIKE '%accuracy_marks%' AND name NOT LIKE '%run_phases%' AND name NOT LIKE '%experiment_jobs%' "
                                   "AND name NOT IN ('runs', 'jobs', 'approx_results', 'bench_results', 'seed_stats')"),
            before);
  // version 15: each job owned by the experiment that made it
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM experiment_jobs AS ej JOIN jobs AS j "
                                   "ON j.id = ej.job_id AND j.experiment_id = ej.experiment_id"),
            query_one(store::sqlite_handle(db), "SELECT count(*) FROM jobs"));
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT count(*) FROM sqlite_master WHERE name = 'gradient_stats'"), "1");
  EXPECT_EQ(query(store::sqlite_handle(db), "SELECT name FROM sqlite_master WHERE name LIKE 'spectrum%' ORDER BY name"),
            (std::vector<std::string>{"spectrum_results", "spectrum_summaries"}));
  EXPECT_EQ(query_one(store::sqlite_handle(db), "SELECT (SELECT count(*) FROM runs) || ',' || (SELECT count(*) FROM results) || ',' || "
                                   "(SELECT count(*) FROM variance_examples) || ',' || (SELECT count(*) FROM spectrum_summaries)"),
            "1,1,1,0");
  attnlab::store::SpectrumResult r;
  r.run_id = 20;
  r.layer = 1;
  r.stage = "heads";
  r.batch = 2;
  r.values = {{1, 0, 1, 0, 1}};
  store::set_spectrum(db, r);
  EXPECT_EQ(store::spectrum_results(db, {20}).size(), 1u);
}

// What a store error says of the machine, from SQLite's own codes: the file locked past the busy
// timeout, a write SQLite refuses as read-only (a file or mount that became read-only; here
// PRAGMA query_only, as a ResultsReader has no write to try), damaged; anything else (a refused value, an
// unknown run) is the caller's and names no fault. A worker and a job process act on these.
TEST_F(StoreQueue, DatabaseFaultsAreToldApartFromTheCallersErrors) {
  Database& db = fill(1);
  auto fault_of = [](auto&& write) {
    try {
      write();
    } catch (const StoreError& e) {
      return store::database_fault(e);
    }
    return store::DatabaseFault::none;
  };
  {
    Database other(file("queue.db"), Database::Open::existing);
    ASSERT_EQ(sqlite3_exec(store::sqlite_handle(other), "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_busy_timeout(store::sqlite_handle(db), 10);  // the lock outlasts this connection's patience
    EXPECT_EQ(fault_of([&] { db.add_experiment("x", "", ""); }), store::DatabaseFault::locked);
    sqlite3_exec(store::sqlite_handle(other), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  ASSERT_EQ(sqlite3_exec(store::sqlite_handle(db), "PRAGMA query_only = ON", nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_EQ(fault_of([&] { db.add_experiment("x", "", ""); }), store::DatabaseFault::read_only);
  sqlite3_exec(store::sqlite_handle(db), "PRAGMA query_only = OFF", nullptr, nullptr, nullptr);
  EXPECT_EQ(fault_of([&] { db.run_attempt(999); }), store::DatabaseFault::none);
  EXPECT_EQ(store::database_fault(StoreError("a message")), store::DatabaseFault::none);
  EXPECT_EQ(store::database_fault(std::runtime_error("not the store's")), store::DatabaseFault::none);
  db_.reset();
  {
    // a page in the middle of the file turned to noise
    std::fstream bytes(file("queue.db"), std::ios::in | std::ios::out | std::ios::binary);
    bytes.seekp(static_cast<std::streamoff>(fs::file_size(file("queue.db")) / 4096 / 2 * 4096));
    bytes << std::string(4096, '\x5a');
  }
  EXPECT_EQ(fault_of([&] { Database damaged(file("queue.db"), Database::Open::existing); }), store::DatabaseFault::damaged);
}

}  // namespace
