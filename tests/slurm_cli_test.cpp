// `attnlab slurm` without a cluster: the submission folder (--dry-run), a stand-in sbatch on PATH
// (accepting or refusing), the array task run by hand on its shard (a dead node's attempt ended as
// lost, then the job done), and collect: idempotent, a corrupt or missing shard skipped whole.
// The test against a real SLURM is tests/slurm/slurm_array_test.sh (CTest label `slurm`).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "attnlab/store/run_writer.hpp"
#include "slurm/slurm.hpp"
#include "test_support.hpp"

namespace {
namespace fs = std::filesystem;
using attnlab::testing::query_one;

struct SlurmCli : attnlab::testing::CliTest {
  // softmax on tiny generated ListOps, two seeds: two jobs, two array tasks.
  std::string experiment() const {
    const std::string file = path("tiny.toml");
    std::ofstream(file) << "[experiment]\nname = \"tiny\"\nseeds = [1, 2]\n"
                        << "[model]\nlayers = 1\ndim = 16\nffn_dim = 32\nheads = 2\n"
                        << "[train]\nsteps = 20\nbatch_size = 8\nlr = 0.002\nwarmup = 2\neval_every = 10\nlog_every = 5\n"
                        << "[methods.softmax]\n"
                        << "[datasets.listops]\nmax_len = 64\ntrain_size = 64\nval_size = 16\ntest_size = 16\n"
                        << "max_depth = 3\nmax_args = 4\nmin_length = 3\nmax_length = 60\n";
    return file;
  }
  std::string db() const { return path("main.db"); }

  // `attnlab ARGS` with environment assignments ("PATH=... X=y") in front.
  int run(const std::string& env, const std::string& args, std::string& output) const {
    const std::string log = path("out.log");
    const int status = std::system(("env " + env + " " + ATTNLAB_BINARY + " " + args + " > " + log + " 2>&1").c_str());
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    output = text.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // A stand-in sbatch in its own folder: records its arguments, then prints `stdout_text` and
  // `stderr_text` and exits with `status`. Returns a PATH with that folder first.
  std::string fake_sbatch(const std::string& stdout_text, const std::string& stderr_text, int status) const {
    const fs::path bin = dir / "fakebin";
    fs::create_directories(bin);
    std::ofstream(bin / "sbatch") << "#!/bin/sh\necho \"$@\" >> " << path("sbatch.args") << "\n"
                                  << "printf '%s' '" << stdout_text << "'\nprintf '%s' '" << stderr_text << "' >&2\n"
                                  << "exit " << status << "\n";
    fs::permissions(bin / "sbatch", fs::perms::owner_all);
    return "PATH=" + bin.string() + ":/usr/bin:/bin";
  }

  // A stand-in squeue beside it (PATH as fake_sbatch returns): lists the array tasks in `tasks`.
  void fake_squeue(const std::string& tasks) const {
    const fs::path bin = dir / "fakebin";
    fs::create_directories(bin);
    std::ofstream(bin / "squeue") << "#!/bin/sh\nprintf '" << tasks << "'\n";
    fs::permissions(bin / "squeue", fs::perms::owner_all);
  }

  std::string common() const { return "--db " + db() + " --cache-dir " + path("cache"); }

  // The one submission folder of main.db.
  std::string submission() const {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(db() + ".slurm")) found.push_back(e.path());
    EXPECT_EQ(found.size(), 1u);
    return found.empty() ? "" : found[0].string();
  }

  std::string states() const { return query_one(db(), "SELECT group_concat(state) FROM (SELECT state FROM jobs ORDER BY id)"); }

  // Row counts of the tables a merge writes, and every job's state.
  std::string counts() const {
    std::string all;
    for (const char* table : {"experiments", "jobs", "runs", "results", "curves", "run_plugins"})
      all += std::string(table) + "=" + query_one(db(), std::string("SELECT count(*) FROM ") + table) + " ";
    return all + states();
  }
};

std::string read(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(SlurmCli, DryRunWritesOneShardPerJobAndTheScriptButNoDatabase) {
  std::string out;
  ASSERT_EQ(attnlab("slurm submit " + experiment() + " " + common() +
                        " --dry-run --partition short --time 0:10:00 --max-parallel 1 --cpus-per-task 2"
                        " --sbatch-option=--mem=1G",
                    out),
            0)
      << out;
  EXPECT_FALSE(fs::exists(db())) << "a dry run creates no database";
  const std::string folder = submission();
  const std::string script = read(fs::path(folder) / "submit.sbatch");
  EXPECT_NE(out.find(script), std::string::npos) << "the script is printed:\n" << out;
  EXPECT_NE(out.find("would run: sbatch --parsable '" + folder + "/submit.sbatch'"), std::string::npos) << out;
  const std::vector<std::string> lines = {
      "#SBATCH --array=0-1%1\n", "#SBATCH --requeue\n", "#SBATCH --partition=short\n", "#SBATCH --time=0:10:00\n",
      "#SBATCH --cpus-per-task=2\n", "#SBATCH --mem=1G\n", "#SBATCH --output=" + folder + "/logs/%A_%a.out\n",
      "#SBATCH --job-name=attnlab-tiny\n",
      "exec '" + std::string(ATTNLAB_BINARY) + "' slurm task --submission '" + folder +
          "' --devices cpu --threads 2 --cache-dir '" + path("cache") + "'\n"};
  for (const auto& line : lines)
    EXPECT_NE(script.find(line), std::string::npos) << line << " missing in\n" << script;
  EXPECT_EQ(script.find("--gpus-per-task"), std::string::npos) << script;

  // Shard i holds the experiment and exactly task i's job, in the file's order (seed 1, seed 2).
  const auto manifest = attnlab::slurm::read_manifest(folder);
  EXPECT_EQ(manifest.database, db());
  EXPECT_EQ(manifest.slurm_job_id, "");
  EXPECT_TRUE(manifest.dry_run);
  ASSERT_EQ(manifest.tasks.size(), 2u);
  EXPECT_EQ(manifest.tasks[1].seed, 2);
  EXPECT_EQ(manifest.tasks[1].job_id, 0) << "a dry run queues no job";
  for (int i = 0; i < 2; ++i) {
    const std::string shard = folder + "/shards/task-" + std::to_string(i) + ".db";
    ASSERT_TRUE(fs::exists(shard)) << shard;
    EXPECT_EQ(query_one(shard, "SELECT count(*) FROM jobs"), "1");
    EXPECT_EQ(query_one(shard, "SELECT state FROM jobs"), "queued");
    EXPECT_EQ(query_one(shard, "SELECT count(*) FROM runs"), "0");
    EXPECT_EQ(query_one(shard, "SELECT config_hash FROM jobs"), manifest.tasks[i].config_hash);
    EXPECT_EQ(query_one(shard, "SELECT seed FROM jobs"), std::to_string(i + 1));
    EXPECT_EQ(query_one(shard, "SELECT name || config_text FROM experiments"), "tiny" + read(experiment()));
  }
  // sbatch on the dry run's script by hand: its tasks refuse, since collect never merges them
  EXPECT_EQ(attnlab("slurm task --submission " + folder + " --index 0", out), 2) << out;
  EXPECT_NE(out.find("was written by slurm submit --dry-run and is never collected"), std::string::npos) << out;

  // GPUs: the option reaches SLURM, and the task's worker takes every device it was given.
  ASSERT_EQ(attnlab("slurm submit " + experiment() + " " + common() + " --dry-run --gpus-per-task 1 --dir " + path("gpu"),
                    out),
            0)
      << out;
  EXPECT_NE(out.find("#SBATCH --gpus-per-task=1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("#SBATCH --array=0-1\n"), std::string::npos) << "no throttle without --max-parallel\n" << out;
  EXPECT_NE(out.find(" --devices all --threads 1"), std::string::npos) << out;

  // An existing database is neither read nor written: no experiment, no job a local worker would
  // run; collect skips the dry-run folder in one line instead of waiting for it forever.
  ASSERT_EQ(attnlab("db migrate --db " + db(), out), 0) << out;
  ASSERT_EQ(attnlab("slurm submit " + experiment() + " " + common() + " --dry-run", out), 0) << out;
  EXPECT_EQ(query_one(db(), "SELECT (SELECT count(*) FROM experiments) || ' ' || (SELECT count(*) FROM jobs)"), "0 0");
  ASSERT_EQ(attnlab("slurm collect --db " + db(), out), 0) << out;
  EXPECT_NE(out.find("(experiment 'tiny'): a dry run, never submitted; skipped\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("unfinished"), std::string::npos) << out;
}

TEST_F(SlurmCli, SubmitMarksTheJobsAndRecordsTheSlurmJobOnce) {
  const std::string env = fake_sbatch("4242;cluster\n", "", 0);
  std::string out;
  ASSERT_EQ(run(env, "slurm submit " + experiment() + " " + common() + " --max-parallel 2", out), 0) << out;
  EXPECT_NE(out.find("submitted SLURM job 4242: 2 array task(s) of experiment 'tiny', at most 2 at a time"),
            std::string::npos) << out;
  EXPECT_EQ(states(), "submitted,submitted");
  const std::string folder = submission();
  EXPECT_EQ(read(path("sbatch.args")), "--parsable " + folder + "/submit.sbatch\n");
  EXPECT_EQ(attnlab::slurm::read_manifest(folder).slurm_job_id, "4242");

  // Nothing is queued any more: a second submit is one clear line, and submits nothing.
  ASSERT_NE(run(env, "slurm submit " + experiment() + " " + common(), out), 0) << out;
  EXPECT_NE(out.find("attnlab: error: slurm submit: nothing queued to submit for experiment 'tiny' in " + db() +
                     " (2 submitted)\n"),
            std::string::npos) << out;
  EXPECT_EQ(read(path("sbatch.args")), "--parsable " + folder + "/submit.sbatch\n") << "sbatch ran again";
}

TEST_F(SlurmCli, RefusedOrMissingSbatchLeavesTheJobsQueued) {
  std::string out;
  const std::string env = fake_sbatch("", "sbatch: error: invalid partition specified: nope\n", 1);
  ASSERT_EQ(run(env, "slurm submit " + experiment() + " " + common() + " --partition nope", out), 2) << out;
  const std::string folder = submission();
  EXPECT_NE(out.find("attnlab: error: slurm submit: sbatch failed (status 1): sbatch: error: invalid partition specified: "
                     "nope; its 2 job(s) are queued again, " + folder + " kept for inspection\n"),
            std::string::npos) << out;
  EXPECT_EQ(states(), "queued,queued") << out;

  fs::remove_all(db() + ".slurm");
  fs::remove(db());
  ASSERT_EQ(run("PATH=" + path("empty"), "slurm submit " + experiment() + " " + common(), out), 2) << out;
  EXPECT_EQ(out, "attnlab: error: slurm submit: sbatch not found on PATH (run this on a SLURM login node, or use --dry-run)\n");
  EXPECT_FALSE(fs::exists(db())) << "nothing is written without sbatch";
}

TEST_F(SlurmCli, TasksRunTheirShardsAndCollectMergesOnceSkippingBadShards) {
  std::string out;
  const std::string env = fake_sbatch("77\n", "", 0);  // and a stand-in squeue, for collect
  ASSERT_EQ(run(env, "slurm submit " + experiment() + " " + common(), out), 0) << out;
  const std::string folder = submission();
  const std::string shard0 = folder + "/shards/task-0.db";

  // Task 0 was running on a node that died: its attempt still holds a long lease in the shard.
  {
    attnlab::store::Database shard(shard0, attnlab::store::Database::Open::existing);
    ASSERT_TRUE(attnlab::store::Queue(shard).claim_next_job({"deadnode:1:cpu", "deadnode", "cpu", 1}, 3600.0).has_value());
  }
  // Collect now, while SLURM lists task 1 only: nothing finished, nothing merged (the dead
  // attempt's run is still 'running'), and task 0 is pointed out as gone from SLURM.
  fake_squeue("1\\n");
  ASSERT_EQ(run(env, "slurm collect --db " + db(), out), 0) << out;
  EXPECT_NE(out.find("SLURM job 77): 2 task(s): 0 done, 0 failed, 2 unfinished (1 still in SLURM's queue); 0 run(s) "
                     "merged now, 0 merged before, 1 still running (merged once finished)\n"
                     "  task 0, job 1 (softmax/listops seed 1): submitted, and SLURM no longer runs it (attnlab queue "
                     "cancel 1 then attnlab queue retry 1 queues it again)\n"),
            std::string::npos) << out;
  EXPECT_EQ(states(), "submitted,submitted");

  // SLURM requeued it: the new incarnation ends the dead attempt as lost and runs the job.
  const std::string task_args = "slurm task --submission " + folder + " --threads 1 --cache-dir " + path("cache");
  ASSERT_EQ(attnlab(task_args + " --index 0", out), 0) << out;
  EXPECT_NE(out.find("attnlab slurm task 0: job 1 (softmax/listops seed 1)"), std::string::npos) << out;
  EXPECT_NE(out.find("1 attempt(s) of the previous incarnation ended as lost"), std::string::npos) << out;
  EXPECT_EQ(query_one(shard0, "SELECT group_concat(status) FROM (SELECT status FROM runs ORDER BY id)"), "lost,done");
  EXPECT_NE(query_one(shard0, "SELECT error FROM runs WHERE status = 'lost'").find("requeued array task"), std::string::npos);
  ASSERT_EQ(run("SLURM_ARRAY_TASK_ID=1", task_args, out), 0) << out;
  EXPECT_NE(out.find("attnlab slurm task 1: job 2 (softmax/listops seed 2)"), std::string::npos) << out;

  fake_squeue("");  // the array is over
  ASSERT_EQ(run(env, "slurm collect --db " + db(), out), 0) << out;
  EXPECT_NE(out.find("submission "), std::string::npos);
  EXPECT_NE(out.find("SLURM job 77): 2 task(s): 2 done, 0 failed, 0 unfinished (0 still in SLURM's queue); 3 run(s) "
                     "merged now, 0 merged before\n"),
            std::string::npos) << out;
  EXPECT_EQ(states(), "done,done");
  EXPECT_EQ(query_one(db(), "SELECT count(*) FROM runs WHERE status = 'done'"), "2");
  EXPECT_EQ(query_one(db(), "SELECT count(*) FROM results r JOIN runs u ON u.id = r.run_id WHERE r.name = 'test_acc'"), "2");
  // Every attempt of every shard, the lost one included, exactly once in the main database.
  std::set<std::string> shard_uids;
  for (const auto& shard : {shard0, folder + "/shards/task-1.db"}) {
    std::stringstream uids(query_one(shard, "SELECT group_concat(uid, ' ') FROM runs"));
    for (std::string uid; uids >> uid;) shard_uids.insert(uid);
  }
  EXPECT_EQ(shard_uids.size(), 3u);
  std::string expected;
  for (const auto& uid : shard_uids) expected += (expected.empty() ? "" : " ") + uid;
  EXPECT_EQ(query_one(db(), "SELECT group_concat(uid, ' ') FROM (SELECT uid FROM runs ORDER BY uid)"), expected);

  // Twice: nothing changes.
  const std::string before = counts();
  ASSERT_EQ(run(env, "slurm collect --db " + db(), out), 0) << out;
  EXPECT_NE(out.find("2 done, 0 failed, 0 unfinished (0 still in SLURM's queue); 0 run(s) merged now, 3 merged before\n"),
            std::string::npos) << out;
  EXPECT_EQ(counts(), before);

  // A corrupt shard and a missing one: each one line, skipped whole; the status says so.
  {
    std::ofstream(folder + "/shards/task-1.db", std::ios::trunc) << "not a database";
  }
  fs::remove(shard0);
  EXPECT_EQ(run(env, "slurm collect --db " + db(), out), 1) << out;
  EXPECT_NE(out.find("attnlab: slurm collect: task 0, job 1 (softmax/listops seed 1): " + shard0 + ": shard missing; skipped\n"),
            std::string::npos) << out;
  const auto corrupt = out.find("attnlab: slurm collect: task 1, job 2 (softmax/listops seed 2): ");
  ASSERT_NE(corrupt, std::string::npos) << out;
  EXPECT_NE(out.substr(corrupt, out.find('\n', corrupt) - corrupt).find("task-1.db"), std::string::npos) << out;
  EXPECT_NE(out.find("2 task(s): 0 done, 0 failed, 0 unfinished (0 still in SLURM's queue), 2 unreadable; 0 run(s) merged now"),
            std::string::npos) << out;
  EXPECT_EQ(counts(), before);
}

TEST_F(SlurmCli, CollectCountsAFailedJobWithItsError) {
  std::string out;
  const std::string env = fake_sbatch("78\n", "", 0);
  ASSERT_EQ(run(env, "slurm submit " + experiment() + " " + common(), out), 0) << out;
  const std::string folder = submission();
  {  // task 0's job failed every attempt it was allowed
    attnlab::store::Database shard(folder + "/shards/task-0.db", attnlab::store::Database::Open::existing);
    while (const auto lease = attnlab::store::Queue(shard).claim_next_job({"node:1:cpu", "node", "cpu", 1}, 60.0))
      attnlab::store::RunWriter(shard, lease->run_id).finish(attnlab::store::RunStatus::failed, {}, "boom " + std::to_string(lease->attempt), "");
  }
  fake_squeue("");
  ASSERT_EQ(run(env, "slurm collect --db " + db(), out), 0) << out;
  EXPECT_NE(out.find("2 task(s): 0 done, 1 failed, 1 unfinished (0 still in SLURM's queue); 3 run(s) merged now"),
            std::string::npos) << out;
  const auto line = out.find("  task 0, job 1 (softmax/listops seed 1): failed: ");
  ASSERT_NE(line, std::string::npos) << out;
  EXPECT_NE(out.substr(line, out.find('\n', line) - line).find("boom 3"), std::string::npos) << out;
  EXPECT_NE(out.find("  task 1, job 2 (softmax/listops seed 2): submitted, and SLURM no longer runs it"), std::string::npos) << out;
  EXPECT_EQ(states(), "failed,submitted");
}

TEST_F(SlurmCli, CollectRefusesSubmissionsOfAnotherDatabase) {
  std::string out;
  ASSERT_EQ(attnlab("slurm submit " + experiment() + " " + common() + " --dry-run", out), 0) << out;
  ASSERT_EQ(attnlab("db migrate --db " + path("other.db"), out), 0) << out;
  EXPECT_EQ(attnlab("slurm collect --db " + path("other.db") + " --dir " + db() + ".slurm", out), 1) << out;
  EXPECT_NE(out.find("belongs to " + db() + ", not " + path("other.db") + "; skipped"), std::string::npos) << out;
  EXPECT_EQ(attnlab("slurm collect --db " + path("other.db"), out), 2) << out;
  EXPECT_NE(out.find("attnlab: error: slurm collect: no submission folder (with a manifest.toml) in " + path("other.db") +
                     ".slurm\n"),
            std::string::npos) << out;
}

}  // namespace
