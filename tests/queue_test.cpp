// The queue under load and under faults, through the real binary: workers draining no-op jobs
// concurrently and while being killed, a job that segfaults its process, and real training jobs
// killed or stopped mid-run that resume from their checkpoints with the same final figures.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "attnlab/store/run_writer.hpp"
#include "cli/cli_options.hpp"
#include "queue/job_exec.hpp"
#include "queue/supervisor.hpp"
#include "queue/worker.hpp"

extern char** environ;

namespace {
namespace fs = std::filesystem;
using attnlab::testing::query_one;
using Clock = std::chrono::steady_clock;

// Starts `attnlab ARGS...` with stdout and stderr appended to `log`.
pid_t spawn_attnlab(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> all = {ATTNLAB_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return error == 0 ? pid : 0;
}

// Waits for a child of this process; -1 if it is still running after `seconds` (then killed).
int wait_exit(pid_t pid, double seconds) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The parent pid and state letter of a process from /proc (0 and 'X' when it is gone).
std::pair<pid_t, char> proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return {0, 'X'};
  std::istringstream rest(text.substr(close + 2));
  char state = 'X';
  pid_t parent = 0;
  rest >> state >> parent;
  return {parent, state};
}

bool alive(pid_t pid) {
  const char state = proc_stat(pid).second;
  return state != 'X' && state != 'Z';
}

// True when no connection holds the database's write lock at this instant.
bool write_lock_free(const std::string& db_path) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
  const bool locked = sqlite3_exec(db, "BEGIN IMMEDIATE; ROLLBACK;", nullptr, nullptr, nullptr) != SQLITE_OK;
  sqlite3_close(db);
  return !locked;
}

// Stops `pid` (SIGSTOP) at an instant it holds no write lock on the database: stopped inside a
// heartbeat's transaction, it would lock every other worker out for as long as it stays stopped,
// which no worker can undo. False if that never happened in 200 tries.
bool stop_outside_a_transaction(pid_t pid, const std::string& db_path) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    if (kill(pid, SIGSTOP) != 0) return false;
    for (char state = proc_stat(pid).second; state != 'T'; state = proc_stat(pid).second) {
      if (state == 'X' || state == 'Z') return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (write_lock_free(db_path)) return true;
    kill(pid, SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A database holding `jobs` no-op jobs (the workers run them with --noop).
void fill_noop_queue(const std::string& db_path, int jobs) {
  attnlab::store::Database db(db_path, attnlab::store::Database::Open::migrate);
  const auto experiment = db.add_experiment("noop", "", "");
  for (int i = 1; i <= jobs; ++i)
    db.add_job({experiment, "noop", "noop", i, "noop = " + std::to_string(i), "noop-" + std::to_string(i), {}, {}});
}

struct Queue : attnlab::testing::CliTest {};

TEST_F(Queue, FourWorkersDrainTwoHundredJobsEachExactlyOnce) {
  const std::string db = path("q.db");
  fill_noop_queue(db, 200);
  std::vector<pid_t> workers;
  for (int w = 0; w < 4; ++w)
    workers.push_back(spawn_attnlab({"worker", "--db", db, "--idle-exit", "--noop", "--noop-seconds", "0.02"}, path("w.log")));
  for (auto pid : workers) {
    ASSERT_GT(pid, 0);
    EXPECT_EQ(wait_exit(pid, 120), 0) << read_file(path("w.log"));
  }
  EXPECT_EQ(query_one(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM jobs WHERE state = 'done'"), "200");
  // every claim makes a run: 200 runs for 200 jobs means no job was claimed twice
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs"), "200");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs WHERE status = 'done' AND attempt = 1"), "200");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM (SELECT job_id FROM runs GROUP BY job_id HAVING count(*) != 1)"), "0");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM results WHERE name = 'noop' AND value = 1"), "200");
  const int busy_workers = std::stoi(query_one(db, "SELECT count(DISTINCT worker) FROM runs"));
  EXPECT_GE(busy_workers, 2) << "the jobs were not shared out";
  std::cout << "[ queue    ] 200 jobs, 4 workers: " << query_one(db, "SELECT group_concat(n, ' + ') FROM (SELECT count(*) AS n FROM runs GROUP BY worker)")
            << " claims" << std::endl;
}

// --jobs-per-device 3: one supervisor, three device workers on the CPU, each claiming its own jobs.
TEST_F(Queue, JobsPerDeviceRunsThatManyDeviceWorkersOnOneDevice) {
  const std::string db = path("q.db");
  fill_noop_queue(db, 30);
  const pid_t worker = spawn_attnlab({"worker", "--db", db, "--idle-exit", "--jobs-per-device", "3", "--noop",
                                      "--noop-seconds", "0.1"}, path("w.log"));
  ASSERT_GT(worker, 0);
  EXPECT_EQ(wait_exit(worker, 120), 0) << read_file(path("w.log"));
  EXPECT_NE(read_file(path("w.log")).find("device(s) cpu, lease 60 s, 3 jobs at once on each"), std::string::npos)
      << read_file(path("w.log"));
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs WHERE status = 'done' AND attempt = 1"), "30");
  EXPECT_EQ(query_one(db, "SELECT count(DISTINCT worker) FROM runs"), "3");
  EXPECT_EQ(query_one(db, "SELECT group_concat(DISTINCT device) FROM runs"), "cpu");
}

// The --threads a job process gets: the cores shared out among the jobs of one device.
TEST(WorkerOptions, JobThreadsShareTheCoresAmongTheJobsOfADevice) {
  const char* saved = std::getenv("ATTNLAB_THREADS");
  const std::string saved_value = saved ? saved : "";
  setenv("ATTNLAB_THREADS", "7", 1);
  attnlab::WorkerOptions o;
  EXPECT_EQ(attnlab::job_threads(o), 0);  // one job per device: the job process decides
  o.jobs_per_device = 2;
  EXPECT_EQ(attnlab::job_threads(o), 3);  // 7 / 2
  o.jobs_per_device = 8;
  EXPECT_EQ(attnlab::job_threads(o), 1);  // never 0
  o.threads = 4;
  EXPECT_EQ(attnlab::job_threads(o), 4);  // --threads given: as given
  if (saved) setenv("ATTNLAB_THREADS", saved_value.c_str(), 1);
  else unsetenv("ATTNLAB_THREADS");
}

// Each process boundary has one options type, written by the parent and read by the child.
// The supervisor's rules, without a process: what follows each way a device worker can end.
TEST(Supervisor, EachEndOfADeviceWorkerDecidesItsSlot) {
  using namespace attnlab;
  const auto exited = [](int code) { return ChildExit{false, code}; };
  const auto ok = after_exit(exited(kDeviceWorkerDone), "cpu", 3, 5.0, false);
  EXPECT_TRUE(ok.finished);
  EXPECT_EQ(ok.status, 0);
  EXPECT_EQ(ok.say, "");
  const auto not_done = after_exit(exited(kDeviceWorkerJobsNotDone), "cpu", 0, 5.0, false);
  EXPECT_TRUE(not_done.finished && not_done.jobs_not_done);
  EXPECT_EQ(not_done.status, 0);
  const auto full_disk = after_exit(exited(kDeviceWorkerDiskFull), "cpu", 0, 5.0, false);
  EXPECT_TRUE(full_disk.finished);
  EXPECT_EQ(full_disk.status, kDeviceWorkerError);
  const auto unusable = after_exit(exited(kDeviceWorkerDatabaseUnusable), "cuda:1", 0, 5.0, false);
  EXPECT_TRUE(unusable.finished && unusable.stop_every_slot);
  EXPECT_EQ(unusable.status, kDeviceWorkerCannotRun);
  EXPECT_EQ(unusable.say, "the database cannot be used (see above); every device worker stops");
  const auto cannot = after_exit(exited(kDeviceWorkerCannotRun), "cuda:1", 0, 5.0, false);
  EXPECT_EQ(cannot.say, "the device worker on cuda:1 cannot run (see above); not restarted");
  EXPECT_EQ(cannot.status, kDeviceWorkerCannotRun);
  // while the supervisor stops (or the database is gone), nothing restarts, whatever the end
  for (const auto& end : {exited(kDeviceWorkerError), ChildExit{true, SIGKILL}, exited(128 + SIGTERM)}) {
    const auto stopping = after_exit(end, "cpu", 0, 1.0, true);
    EXPECT_TRUE(stopping.finished);
    EXPECT_EQ(stopping.status, 0);
  }
}

// A worker that dies is restarted after 0.5 s, doubling to at most 30 s; the 11th death in a row
// (each after less than a minute) gives the slot up; one that ran a minute starts afresh.
TEST(Supervisor, DeathsInARowBackOffThenGiveTheSlotUp) {
  using namespace attnlab;
  const ChildExit crashed{true, SIGSEGV};
  int deaths = 0;
  std::vector<double> waits;
  for (int i = 0; i < 10; ++i) {
    const auto d = after_exit(crashed, "cuda:0", deaths, 2.0, false);
    ASSERT_FALSE(d.finished) << i;
    waits.push_back(d.restart_in);
    deaths = d.quick_deaths;
  }
  EXPECT_EQ(waits, (std::vector<double>{0.5, 1, 2, 4, 8, 16, 30, 30, 30, 30}));
  const auto given_up = after_exit(crashed, "cuda:0", deaths, 2.0, false);
  EXPECT_TRUE(given_up.finished);
  EXPECT_EQ(given_up.status, kDeviceWorkerError);
  EXPECT_EQ(given_up.say, "the device worker on cuda:0 killed by signal 11 (Segmentation fault) 11 times in a row; "
                          "giving up on cuda:0");
  const auto healthy = after_exit(crashed, "cuda:0", deaths, kHealthySeconds + 1, false);
  EXPECT_FALSE(healthy.finished);
  EXPECT_EQ(healthy.quick_deaths, 1);
  EXPECT_EQ(healthy.restart_in, 0.5);
  // stopped by someone else's SIGTERM (it exits 128 + 15 after releasing its job): restarted too
  const auto terminated = after_exit(ChildExit{false, 128 + SIGTERM}, "cpu", 0, 2.0, false);
  EXPECT_FALSE(terminated.finished);
  EXPECT_EQ(terminated.say, "the device worker on cpu was stopped by signal 15 (Terminated); restarting it in 0.50 s");
}

TEST(ProcessOptions, ExecJobReadsBackWhatTheDeviceWorkerWrites) {
  attnlab::JobExecOptions o;
  o.db_path = "/tmp/q b.db";  // a space: one word on the command line
  o.job_id = 12;
  o.run_id = 34;
  o.device = "cuda:1";
  o.threads = 3;
  o.cache_dir = "/tmp/cache";
  o.checkpoint_dir = "/tmp/ckpt";
  o.plugin_dirs = {"/a", "/b"};
  const auto vm = attnlab::parse_command_line("exec-job", o.to_args(), attnlab::JobExecOptions::options());
  const auto back = attnlab::JobExecOptions::from(vm);
  EXPECT_EQ(back.db_path, o.db_path);
  EXPECT_EQ(back.job_id, 12);
  EXPECT_EQ(back.run_id, 34);
  EXPECT_EQ(back.device, "cuda:1");
  EXPECT_EQ(back.threads, 3);
  EXPECT_EQ(back.cache_dir, o.cache_dir);
  EXPECT_EQ(back.checkpoint_dir, o.checkpoint_dir);
  EXPECT_EQ(back.plugin_dirs, o.plugin_dirs);
  // the defaults travel as defaults
  attnlab::JobExecOptions given;
  given.db_path = "x.db";
  const auto plain = attnlab::JobExecOptions::from(
      attnlab::parse_command_line("exec-job", given.to_args(), attnlab::JobExecOptions::options()));
  EXPECT_EQ(plain.device, "cpu");
  EXPECT_EQ(plain.threads, 0);
  EXPECT_EQ(plain.cache_dir, "");
  EXPECT_EQ(plain.checkpoint_dir, "");
  EXPECT_TRUE(plain.plugin_dirs.empty());
}

TEST(ProcessOptions, WorkerDeviceReadsBackWhatTheSupervisorWrites) {
  attnlab::WorkerOptions o;
  o.db_path = "/tmp/q.db";
  o.max_jobs = 5;
  o.idle_exit = true;
  o.lease_seconds = 2.5;
  o.threads = 2;
  o.cache_dir = "/tmp/cache";
  o.plugin_dirs = {"/p"};
  o.job_exe = "/bin/false";
  o.noop = true;
  o.noop_seconds = 0.25;
  for (std::int64_t id = 1; id <= 4500; ++id) o.only_jobs.push_back(id);  // three --only chunks
  const auto args = o.device_worker_args("cuda:0");
  EXPECT_EQ(std::count(args.begin(), args.end(), "--only"), 3);
  const auto vm = attnlab::parse_command_line("worker-device", args, attnlab::WorkerOptions::device_worker_options());
  EXPECT_EQ(vm["device"].as<std::string>(), "cuda:0");
  const auto back = attnlab::WorkerOptions::from(vm, "worker-device");
  EXPECT_EQ(back.db_path, o.db_path);
  EXPECT_EQ(back.max_jobs, 5);
  EXPECT_TRUE(back.idle_exit);
  EXPECT_EQ(back.lease_seconds, 2.5);
  EXPECT_EQ(back.threads, 2);
  EXPECT_EQ(back.cache_dir, o.cache_dir);
  EXPECT_EQ(back.plugin_dirs, o.plugin_dirs);
  EXPECT_EQ(back.job_exe, o.job_exe);
  EXPECT_TRUE(back.noop);
  EXPECT_EQ(back.noop_seconds, 0.25);
  EXPECT_EQ(back.only_jobs, o.only_jobs);
  // several jobs per device: each device worker gets its share of the threads, and runs one job at a time
  o.threads = 0;
  o.jobs_per_device = 2;
  const auto shared = attnlab::WorkerOptions::from(
      attnlab::parse_command_line("worker-device", o.device_worker_args("cpu"), attnlab::WorkerOptions::device_worker_options()),
      "worker-device");
  EXPECT_EQ(shared.threads, attnlab::job_threads(o));
  EXPECT_GE(shared.threads, 1);
  EXPECT_EQ(shared.jobs_per_device, 1);
}

// Workers SIGKILLed (device workers and supervisors) and paused past their lease at random
// moments, new ones started, while 4 workers drain the queue.
TEST_F(Queue, WorkersKilledAtRandomLoseNothingAndWriteNothingTwice) {
  const std::string db = path("q.db");
  const int jobs = 150;
  fill_noop_queue(db, jobs);
  // Orphans (device workers of a killed supervisor) become our children: we can wait for them.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::vector<std::string> worker_args = {"worker", "--db", db, "--idle-exit", "--noop", "--noop-seconds", "0.3",
                                                "--lease", "1"};
  std::vector<pid_t> supervisors;
  for (int w = 0; w < 4; ++w) supervisors.push_back(spawn_attnlab(worker_args, path("w.log")));

  std::mt19937 random(20250314);
  int kills = 0, supervisor_kills = 0, pauses = 0;
  const auto start = Clock::now();
  while (Clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(50, 250)(random)));
    for (auto& pid : supervisors)  // reap the ended ones; keep four supervisors while work is left
      if (waitpid(pid, nullptr, WNOHANG) == pid) pid = 0;
    supervisors.erase(std::remove(supervisors.begin(), supervisors.end(), 0), supervisors.end());
    const std::string left = query_one(db, "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')");
    if (left == "0") break;
    while (supervisors.size() < 4) supervisors.push_back(spawn_attnlab(worker_args, path("w.log")));

    // the victims: device workers holding a lease now (worker ids are host:pid:device)
    std::vector<pid_t> holders;
    std::stringstream ids(query_one(db, "SELECT group_concat(worker, ' ') FROM runs WHERE status = 'running'"));
    for (std::string id; ids >> id;) {
      const auto first = id.find(':'), second = id.find(':', first + 1);
      if (first == std::string::npos || second == std::string::npos) continue;
      const pid_t pid = std::atoi(id.substr(first + 1, second - first - 1).c_str());
      if (alive(pid) && std::find(supervisors.begin(), supervisors.end(), proc_stat(pid).first) != supervisors.end())
        holders.push_back(pid);
    }
    if (holders.empty()) continue;
    const pid_t victim = holders[random() % holders.size()];
    const int action = std::uniform_int_distribution<int>(0, 9)(random);
    if (action < 5) {  // the device worker, mid-job
      kill(victim, SIGKILL);
      ++kills;
    } else if (action < 8) {  // its supervisor: the device worker gets SIGTERM and releases its job
      const pid_t supervisor = proc_stat(victim).first;
      kill(supervisor, SIGKILL);
      waitpid(supervisor, nullptr, 0);
      supervisors.erase(std::remove(supervisors.begin(), supervisors.end(), supervisor), supervisors.end());
      ++kills;
      ++supervisor_kills;
    } else {  // frozen past its lease: its late writes must be refused
      kill(victim, SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(1600));
      kill(victim, SIGCONT);
      ++pauses;
    }
  }
  // No more faults: the survivors (and fresh workers) finish the queue.
  for (int w = 0; w < 2; ++w) supervisors.push_back(spawn_attnlab(worker_args, path("w.log")));
  for (auto pid : supervisors) EXPECT_NE(wait_exit(pid, 120), -1) << "a worker did not finish";
  // every descendant, orphans included, is gone before the database is judged
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (waitpid(-1, nullptr, WNOHANG) >= 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));

  EXPECT_EQ(query_one(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM jobs WHERE state NOT IN ('done', 'failed')"), "0");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs WHERE status = 'running'"), "0");
  // done exactly once
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM jobs j WHERE state = 'done' AND "
                          "(SELECT count(*) FROM runs r WHERE r.job_id = j.id AND r.status = 'done') != 1"), "0");
  // killing workers is the infrastructure's fault, never the job's: no job used up its attempts
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM jobs WHERE state = 'failed' OR failures > 0"), "0");
  // results only from attempts that held their lease to the end: the done ones
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM results x JOIN runs r ON r.id = x.run_id WHERE r.status != 'done'"), "0");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM results"), query_one(db, "SELECT count(*) FROM runs WHERE status = 'done'"));
  const std::string lost = query_one(db, "SELECT count(*) FROM runs WHERE status = 'lost'");
  EXPECT_GT(kills, 0);
  EXPECT_NE(lost, "0") << "no attempt lost its lease: the faults did not bite";
  std::cout << "[ faults   ] jobs " << jobs << ", kills " << kills << " (supervisors " << supervisor_kills
            << "), pauses past the lease " << pauses << ", attempts " << query_one(db, "SELECT count(*) FROM runs")
            << " (retries " << query_one(db, "SELECT count(*) - " + std::to_string(jobs) + " FROM runs") << "), lost attempts "
            << lost << ", interrupted " << query_one(db, "SELECT count(*) FROM runs WHERE status = 'interrupted'")
            << ", done " << query_one(db, "SELECT count(*) FROM jobs WHERE state = 'done'") << ", failed after "
            << "3 attempts " << query_one(db, "SELECT count(*) FROM jobs WHERE state = 'failed'")
            << ", jobs lost 0, results from lost attempts "
            << query_one(db, "SELECT count(*) FROM results x JOIN runs r ON r.id = x.run_id WHERE r.status = 'lost'")
            << std::endl;
}

// A tiny real experiment: softmax (dropout 0.1) on generated ListOps.
std::string write_experiment(const std::string& file, const std::string& method_table, int steps) {
  std::ofstream(file) << "[experiment]\nname = \"q\"\nseeds = [3]\n"
                      << "[model]\nlayers = 1\ndim = 32\nffn_dim = 64\nheads = 2\n"
                      << "[train]\nsteps = " << steps << "\nbatch_size = 8\nlr = 0.002\nwarmup = 20\n"
                      << "eval_every = 50\nlog_every = 10\ncheckpoint_every = 35\n"
                      << method_table << "\n"
                      << "[datasets.listops]\nmax_len = 96\ntrain_size = 256\nval_size = 32\ntest_size = 32\n"
                      << "max_depth = 3\nmax_args = 4\nmin_length = 8\nmax_length = 90\n";
  return file;
}

// The build folder of the binary under test: its plugins/ and datasets/ hold the bundled plugins.
fs::path build_dir() { return fs::path(ATTNLAB_BINARY).parent_path().parent_path(); }


// Whether the process catches SIGTERM (its SigCgt mask in /proc).
bool catches_sigterm(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGTERM - 1)) & 1;
  return false;
}

// SIGINT and SIGTERM are caught from the start of `run`, not once its workers start: a stop while
// it checks the experiment's data ends it with a word and nothing stored (e7c0818 died of the
// signal and printed nothing).
TEST_F(Queue, ARunStoppedWhileItChecksItsDataSaysSoAndStoresNothing) {
  std::string text = read_file(write_experiment(path("e.toml"), "[methods.softmax]", 20));
  text.replace(text.find("train_size = 256"), 16, "train_size = 40000");  // seconds of generating
  std::ofstream(path("e.toml")) << text;
  const pid_t pid = spawn_attnlab({"run", path("e.toml"), "--db", path("r.db"), "--cache-dir", path("cache")}, path("run.log"));
  bool caught = false;
  for (int i = 0; i < 1000 && !caught; ++i) {
    caught = catches_sigterm(pid);
    if (!caught) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(caught) << read_file(path("run.log"));
  EXPECT_FALSE(fs::exists(path("r.db")));  // caught while it still checks the experiment
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(pid, 120), 128 + SIGTERM) << read_file(path("run.log"));
  EXPECT_NE(read_file(path("run.log")).find("attnlab: run: stopped by signal 15 before anything was queued\n"), std::string::npos)
      << read_file(path("run.log"));
  EXPECT_FALSE(fs::exists(path("r.db")));
}

// Results belong to the code that made them: a done job whose plugin file changed is not
// "already done" (refused in one line naming the plugin and both hashes, until --rerun).
TEST_F(Queue, ADoneJobWhosePluginChangedIsNotSilentlyDone) {
  fs::create_directories(path("my plugins"));
  fs::copy_file(build_dir() / "plugins" / "attn_softmax.so", path("my plugins/attn_softmax.so"));
  const std::string file = write_experiment(path("e.toml"), "[methods.softmax]", 20);
  const std::string db = path("r.db");
  // named the long way round: what is recorded must be the file's one canonical name
  const std::string args = "run " + file + " --db " + db + " --cache-dir " + path("cache") + " --threads 1 --plugins '" +
                           path("my plugins/../my plugins") + "'";
  std::string out;
  ASSERT_EQ(attnlab(args, out), 0) << out;
  // the plugin that ran, recorded by its absolute, canonical path
  EXPECT_EQ(query_one(db, "SELECT path FROM run_plugins WHERE kind = 'attention'"),
            fs::canonical(path("my plugins/attn_softmax.so")).string());
  ASSERT_EQ(attnlab(args, out), 0) << out;  // the same build again: already done
  EXPECT_NE(out.find("already done"), std::string::npos) << out;

  std::ofstream(path("my plugins/attn_softmax.so"), std::ios::app) << "rebuilt";  // other bytes, still loadable
  const std::string old_hash = query_one(db, "SELECT substr(sha256, 1, 16) FROM run_plugins WHERE kind = 'attention'");
  EXPECT_EQ(attnlab(args, out), 2) << out;
  const auto at = out.find("job 1 (softmax/listops seed 3) is done with attention plugin 'softmax'");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string line = out.substr(at, out.find('\n', at) - at);  // one line says it all
  EXPECT_NE(line.find("sha256 " + old_hash), std::string::npos) << line;
  EXPECT_NE(line.find("is now 1.0 sha256 "), std::string::npos) << line;
  EXPECT_NE(line.find("--rerun"), std::string::npos) << line;
  EXPECT_EQ(query_one(db, "SELECT count(*) || ' ' || max(state) FROM jobs"), "1 done");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs"), "1");

  ASSERT_EQ(attnlab(args + " --rerun", out), 0) << out;
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs WHERE status = 'done'"), "2");
  EXPECT_NE(query_one(db, "SELECT sha256 FROM run_plugins WHERE run_id = 2 AND kind = 'attention'"),
            query_one(db, "SELECT sha256 FROM run_plugins WHERE run_id = 1 AND kind = 'attention'"));
  ASSERT_EQ(attnlab(args, out), 0) << out;  // now done with this build
}

// A job queued with --plugins runs on a worker started without it; once its plugin is gone, the
// job is blocked at its first attempt instead of using up its attempts.
TEST_F(Queue, AJobFindsThePluginsItWasQueuedWithAndAMissingOneBlocksIt) {
  fs::create_directories(path("crash"));
  fs::copy_file(fs::path(ATTNLAB_CRASH_PLUGIN_DIR) / "crash_attention.so", path("crash/crash_attention.so"));
  const std::string file = write_experiment(path("e.toml"), "[methods.crash]\ncalls = 1000000", 20);
  const std::string db = path("r.db");
  const std::string cache = " --cache-dir " + path("cache");
  std::string out;
  ASSERT_EQ(attnlab("queue add " + file + " --db " + db + cache + " --plugins " + path("crash"), out), 0) << out;
  attnlab("worker --idle-exit --threads 1 --db " + db + cache, out);
  EXPECT_EQ(query_one(db, "SELECT state FROM jobs"), "done") << out;
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs"), "1");

  // the same experiment with another seed, then the plugin folder is gone
  std::string text = read_file(file);
  text.replace(text.find("seeds = [3]"), 11, "seeds = [4]");
  std::ofstream(path("e4.toml")) << text;
  ASSERT_EQ(attnlab("queue add " + path("e4.toml") + " --db " + db + cache + " --plugins " + path("crash"), out), 0) << out;
  fs::remove_all(path("crash"));
  attnlab("worker --idle-exit --threads 1 --db " + db + cache, out);
  EXPECT_EQ(query_one(db, "SELECT state || ' ' || attempts || ' ' || failures || ' ' || infra_failures FROM jobs WHERE id = 2"),
            "blocked 1 0 0") << out;
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE job_id = 2"), "rejected");
  EXPECT_NE(query_one(db, "SELECT error FROM jobs WHERE id = 2").find("no attention plugin named 'crash'"), std::string::npos)
      << query_one(db, "SELECT error FROM jobs WHERE id = 2");
  EXPECT_NE(out.find("queue retry 2"), std::string::npos) << out;
}

// A malformed data file is final at once, with the file and line the reader reports.
TEST_F(Queue, AMalformedDataFileBlocksTheJobAtOnce) {
  fs::create_directories(path("lra"));
  const std::string good = "Source\tTarget\n( [MAX 2 9 ] )\t9\n( [MIN 4 1 ] )\t1\n( [SM 2 3 ] )\t5\n";
  for (const char* split : {"train", "val", "test"}) std::ofstream(path(std::string("lra/basic_") + split + ".tsv")) << good;
  std::ofstream(path("e.toml")) << "[experiment]\nname = \"files\"\nseeds = [1]\n"
                                << "[model]\nlayers = 1\ndim = 32\nffn_dim = 64\nheads = 2\n"
                                << "[train]\nsteps = 4\nbatch_size = 2\nwarmup = 1\neval_every = 2\nlog_every = 2\n"
                                << "[methods.softmax]\n[datasets.listops]\nsource = \"files\"\npath = \"" << path("lra")
                                << "\"\nmax_len = 16\n";
  const std::string db = path("r.db");
  const std::string cache = " --cache-dir " + path("cache");
  std::string out;
  ASSERT_EQ(attnlab("queue add " + path("e.toml") + " --db " + db + cache, out), 0) << out;
  std::ofstream(path("lra/basic_train.tsv")) << good << "( [MAX 2 9 ] )\t9\textra\n";  // line 5: three columns
  attnlab("worker --idle-exit --threads 1 --db " + db + cache, out);
  EXPECT_EQ(query_one(db, "SELECT state || ' ' || attempts || ' ' || failures FROM jobs"), "blocked 1 0") << out;
  EXPECT_NE(query_one(db, "SELECT error FROM runs").find("basic_train.tsv:5:"), std::string::npos)
      << query_one(db, "SELECT error FROM runs");
}

// The job process's own finish releases the lease a moment before it exits: a heartbeat refused
// then is not a lost lease (it was reported as one, reliably with a 0.1 s lease).
TEST_F(Queue, AShortLeaseDoesNotCallAFinishedRunLost) {
  const std::string file = write_experiment(path("e.toml"), "[methods.softmax]", 5);
  std::string text = read_file(file);
  text.replace(text.find("seeds = [3]"), 11, "seeds = [1, 2, 3]");
  std::ofstream(file) << text;
  std::string out;
  ASSERT_EQ(attnlab("run " + file + " --db " + path("r.db") + " --cache-dir " + path("cache") + " --threads 1 --lease 0.1", out), 0)
      << out;
  EXPECT_EQ(query_one(path("r.db"), "SELECT group_concat(status, ',') FROM runs"), "done,done,done") << out;
  EXPECT_EQ(out.find("lost its lease"), std::string::npos) << out;
}

TEST_F(Queue, AJobThatSegfaultsFailsAfterItsAttemptsWhileTheOthersFinish) {
  const std::string file = write_experiment(path("crash.toml"), "[methods.crash]\nhow = \"segv\"\n[methods.softmax]", 20);
  const std::string db = path("r.db");
  std::string out;
  // every job ran, one did not end done: exit status 3, the states counted on stderr
  ASSERT_EQ(attnlab("run " + file + " --db " + db + " --cache-dir " + path("cache") + " --threads 1 --plugins " +
                        ATTNLAB_CRASH_PLUGIN_DIR, out), 3) << out;
  EXPECT_NE(out.find("attnlab: run: 1 of 2 job(s) did not end done (1 failed); exit status 3\n"), std::string::npos) << out;
  const std::string crash = "(SELECT id FROM jobs WHERE method = 'crash')";
  EXPECT_EQ(query_one(db, "SELECT state FROM jobs WHERE id = " + crash), "failed");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs WHERE job_id = " + crash + " AND status = 'failed' AND "
                          "error = 'job process killed by signal 11 (Segmentation fault)'"), "3");
  EXPECT_NE(query_one(db, "SELECT error FROM jobs WHERE id = " + crash).find("signal 11"), std::string::npos);
  EXPECT_EQ(query_one(db, "SELECT state FROM jobs WHERE method = 'softmax'"), "done");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM results WHERE name = 'test_acc'"), "1");
  EXPECT_EQ(query_one(db, "PRAGMA integrity_check"), "ok");

  // `worker --idle-exit` on the same job again: it ran a job that did not end done, so 3 as well
  ASSERT_EQ(attnlab("queue retry " + query_one(db, "SELECT id FROM jobs WHERE method = 'crash'") + " --db " + db, out), 0) << out;
  EXPECT_EQ(attnlab("worker --idle-exit --db " + db + " --cache-dir " + path("cache") + " --threads 1 --plugins " +
                        ATTNLAB_CRASH_PLUGIN_DIR, out), 3) << out;
  EXPECT_EQ(query_one(db, "SELECT state FROM jobs WHERE id = " + crash), "failed");
}

// Resume: the same job run without interruption once (the reference), then interrupted in
// several ways; every interrupted job must end with the reference's figures and curve.
// A database damaged while a worker runs: the worker re-checks the file before each claim and stops
// in one line instead of writing more jobs into it (c797cb7 ran two more jobs into the damaged
// file and exited 0).
TEST_F(Queue, ADatabaseDamagedWhileAWorkerRunsStopsItBeforeItsNextClaim) {
  const std::string db = path("q.db");
  {
    // a file of some size: the damage lands among curve points, not in the queue's own pages
    attnlab::store::Database database(db, attnlab::store::Database::Open::migrate);
    const auto experiment = database.add_experiment("filler", "", "");
    database.add_job({experiment, "noop", "noop", 0, "noop = 0", "noop-0", {}, {}});
    attnlab::store::Claimer claimer;
    claimer.worker = "test";
    const auto lease = attnlab::store::Queue(database).claim_next_job(claimer, 60);
    std::vector<attnlab::store::CurvePoint> points;
    for (int i = 0; i < 20000; ++i) points.push_back({i, "train", "loss", i * 0.5, i * 0.1});
    attnlab::store::RunWriter(database, lease->run_id).append_curve(points);
    attnlab::store::RunWriter(database, lease->run_id).finish(attnlab::store::RunStatus::done, {}, "", "");
  }
  fill_noop_queue(db, 3);
  const pid_t worker = spawn_attnlab({"worker", "--db", db, "--idle-exit", "--noop", "--noop-seconds", "1.5"}, path("w.log"));
  bool running = false;
  for (int i = 0; i < 2000 && !running; ++i) {
    running = query_one(db, "SELECT count(*) FROM runs WHERE status = 'running'") == "1";
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(running) << read_file(path("w.log"));
  attnlab::testing::flip_middle(db, 16384);
  EXPECT_EQ(wait_exit(worker, 60), 2) << read_file(path("w.log"));
  const std::string log = read_file(path("w.log"));
  EXPECT_NE(log.find("claims no more jobs: " + db + ": the database is damaged (quick_check: "), std::string::npos) << log;
  EXPECT_NE(log.find("restore the file from a copy"), std::string::npos) << log;
  EXPECT_NE(log.find("the database cannot be used (see above); every device worker stops"), std::string::npos) << log;
  EXPECT_EQ(log.find("restarting it in"), std::string::npos) << log;
}

// runs.pid names the process that ran the attempt, its job process, from the moment the device
// worker starts it: an attempt killed before it recorded its environment is no exception
// (c797cb7 kept the device worker's pid for those).
TEST_F(Queue, AnAttemptKilledBeforeItsFirstWriteNamesItsJobProcess) {
  const std::string db = path("q.db");
  fill_noop_queue(db, 1);
  const std::string job = path("job.sh");  // a job process that never writes anything
  std::ofstream(job) << "#!/bin/sh\nexec sleep 60\n";
  fs::permissions(job, fs::perms::owner_all);
  const pid_t worker = spawn_attnlab({"worker-device", "--device", "cpu", "--db", db, "--job-exe", job}, path("w.log"));
  pid_t job_pid = 0;
  for (int i = 0; i < 2000 && job_pid == 0; ++i) {
    const std::string pid = query_one(db, "SELECT pid FROM runs WHERE id = 1");
    if (pid != "(none)" && pid != "(error)" && pid != "NULL" && std::stoi(pid) != worker) job_pid = std::stoi(pid);
    else std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(job_pid, 0) << read_file(path("w.log"));
  EXPECT_EQ(proc_stat(job_pid).first, worker);
  ASSERT_EQ(kill(job_pid, SIGKILL), 0);
  for (int i = 0; i < 2000 && query_one(db, "SELECT status FROM runs WHERE id = 1") == "running"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(worker, SIGTERM);
  wait_exit(worker, 30);
  EXPECT_EQ(query_one(db, "SELECT status || ' ' || pid FROM runs WHERE id = 1"), "lost " + std::to_string(job_pid));
}

// SIGTERM during a stochastic run's variance passes (they can take as long as training) stops
// them within a second: the attempt ends interrupted at its last step's resume checkpoint, and the
// next attempt evaluates from it with the uninterrupted run's numbers (c797cb7 ran on through the
// passes until a second signal).
TEST_F(Queue, SigtermStopsTheVariancePassesWithinASecondAndTheNextAttemptEndsTheSame) {
  std::string text = read_file(write_experiment(path("e.toml"), "[methods.performer]\nfeatures = 8", 60));
  text.replace(text.find("test_size = 32"), 14, "test_size = 400");
  text.replace(text.find("checkpoint_every = 35\n"), 22, "checkpoint_every = 35\nvariance_passes = 80\n");
  std::ofstream(path("e.toml")) << text;
  const std::string common = " --cache-dir " + path("cache") + " --threads 1";
  std::string out;
  ASSERT_EQ(attnlab("run " + path("e.toml") + " --db " + path("reference.db") + common, out), 0) << out;

  const std::string db = path("r.db");
  const pid_t parent = spawn_attnlab({"run", path("e.toml"), "--db", db, "--cache-dir", path("cache"), "--threads", "1"},
                                     path("run.log"));
  // past the last step (its resume checkpoint recorded) and the test evaluation: in the passes, as
  // the job process reports them for the queue's ETA
  std::string phase;
  for (int i = 0; i < 12000 && phase.empty(); ++i) {
    if (fs::exists(db) && query_one(db, "SELECT resume_step FROM runs WHERE id = 1") == "60")
      phase = query_one(db, "SELECT coalesce((SELECT phase || ' ' || total || ' ' || (done > 0 AND seconds > 0) "
                            "FROM run_phases WHERE run_id = 1), '')");
    if (phase.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(phase, "variance passes 80 1") << read_file(path("run.log"));
  const auto signalled = Clock::now();
  ASSERT_EQ(kill(parent, SIGTERM), 0);
  EXPECT_EQ(wait_exit(parent, 60), 128 + SIGTERM) << read_file(path("run.log"));
  const double took = std::chrono::duration<double>(Clock::now() - signalled).count();
  std::cout << "[ stopped  ] " << took << " s after SIGTERM, in the variance passes\n";
  EXPECT_LT(took, 5.0) << read_file(path("run.log"));  // the passes stop within a second; the rest is exiting
  EXPECT_EQ(read_file(path("run.log")).find("variance pass 80/80"), std::string::npos) << read_file(path("run.log"));
  EXPECT_EQ(query_one(db, "SELECT status || ' ' || resume_step FROM runs WHERE id = 1"), "interrupted 60");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM curves WHERE run_id = 1 AND split = 'test'"), "0");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM run_phases"), "0");  // the attempt is in none now

  ASSERT_EQ(attnlab("worker --idle-exit --db " + db + common, out), 0) << out;
  EXPECT_NE(out.find("resumes run 1 from step 60"), std::string::npos) << out;
  const std::string figures = "SELECT group_concat(name || '=' || printf('%.17g', value), ' ') FROM (SELECT * FROM results "
                              "WHERE run_id = %RUN% AND name IN ('test_acc', 'test_loss', 'rsd', 'pi', 'va', 'agv', "
                              "'mean_pass_acc', 'variance_passes', 'best_val_acc') ORDER BY name)";
  auto of = [&](const std::string& file, const std::string& run) {
    std::string sql = figures;
    sql.replace(sql.find("%RUN%"), 5, run);
    return query_one(file, sql);
  };
  EXPECT_NE(of(path("reference.db"), "1").find("rsd="), std::string::npos) << of(path("reference.db"), "1");
  EXPECT_EQ(of(db, "2"), of(path("reference.db"), "1"));
}

class WorkerResume : public attnlab::testing::CliTest {
 protected:
  static constexpr int kSteps = 700;
  static std::string reference_dir() { return (fs::temp_directory_path() / ("attnlab-resume-ref-" + std::to_string(getpid()))).string(); }
  static std::string experiment_file() { return reference_dir() + "/resume.toml"; }
  static std::string reference_db() { return reference_dir() + "/reference.db"; }
  static std::string cache() { return reference_dir() + "/cache"; }

  static void SetUpTestSuite() {
    fs::create_directories(reference_dir());
    // every resume below also carries the weights kept at accuracy marks 0.1, 0.2, ... over
    std::string text = read_file(write_experiment(experiment_file(), "[methods.softmax]", kSteps));
    text.replace(text.find("checkpoint_every = 35\n"), 22, "checkpoint_every = 35\naccuracy_checkpoints = 0.1\n");
    std::ofstream(experiment_file()) << text;
    const int status = std::system((std::string(ATTNLAB_BINARY) + " run " + experiment_file() + " --db " + reference_db() +
                                    " --cache-dir " + cache() + " --threads 1 > " + reference_dir() + "/reference.log 2>&1").c_str());
    ASSERT_EQ(status, 0) << read_file(reference_dir() + "/reference.log");
  }
  static void TearDownTestSuite() { fs::remove_all(reference_dir()); }

  // The final figures that must not depend on interruptions, exactly (17 digits).
  static std::string figures(const std::string& db, const std::string& run) {
    return query_one(db, "SELECT group_concat(name || '=' || printf('%.17g', value), ' ') FROM (SELECT * FROM results "
                         "WHERE run_id = " + run + " AND name IN ('test_acc', 'test_loss', 'best_val_acc', 'best_step', "
                         "'steps_done', 'param_count', 'majority_rate') ORDER BY name)");
  }
  static std::string curve(const std::string& db, const std::string& run) {
    return query_one(db, "SELECT group_concat(split || '/' || name || '@' || step || '=' || printf('%.17g', value), ' ') "
                         "FROM (SELECT * FROM curves WHERE run_id = " + run + " ORDER BY split, name, step)");
  }
  // The weights kept at each accuracy mark: step and checksum of the file's bytes.
  static std::string marks(const std::string& db, const std::string& run) {
    return query_one(db, "SELECT group_concat(printf('%g', mark) || '@' || step || '=' || checksum, ' ') FROM (SELECT * "
                         "FROM accuracy_marks WHERE run_id = " + run + " ORDER BY mark)");
  }
  // The files a finished job leaves in the checkpoint folder: its best weights, its marks' and its
  // last step's (where the last validation did not keep them as the best).
  static std::vector<std::string> final_files(const std::string& db, const std::string& run) {
    std::vector<std::string> names = {"run-" + run + ".pt"};
    const std::string last = query_one(db, "SELECT last_checkpoint FROM runs WHERE id = " + run);
    EXPECT_NE(last, "NULL") << "a finished run records its last weights";
    if (last != "NULL" && fs::path(last).filename() != names.front()) names.push_back(fs::path(last).filename().string());
    std::stringstream paths(query_one(db, "SELECT group_concat(path, ' ') FROM accuracy_marks WHERE run_id = " + run));
    for (std::string p; paths >> p;) names.push_back(fs::path(p).filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::vector<std::string> files_left() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(path("r.db.ckpt"))) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  void expect_same_as_reference(const std::string& db, const std::string& run) const {
    EXPECT_NE(marks(reference_db(), "1"), "NULL");
    EXPECT_EQ(marks(db, run), marks(reference_db(), "1"));
    const std::string expected = figures(reference_db(), "1");
    EXPECT_NE(expected.find("test_acc="), std::string::npos) << expected;
    EXPECT_EQ(figures(db, run), expected);
    EXPECT_NE(curve(reference_db(), "1"), "NULL");
    EXPECT_EQ(curve(db, run), curve(reference_db(), "1"));
    EXPECT_EQ(query_one(db, "SELECT value FROM results WHERE run_id = " + run + " AND name = 'steps_done'"),
              std::to_string(kSteps) + ".0");
  }

  // Starts `attnlab run` on the experiment; returns once its job has recorded a resume
  // checkpoint, with the job process's pid in `job_pid` (0 if that never happened).
  pid_t start_run_until_checkpoint(const std::vector<std::string>& extra, pid_t& job_pid) const {
    std::vector<std::string> args = {"run", experiment_file(), "--db", path("r.db"), "--cache-dir", cache(), "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    const pid_t parent = spawn_attnlab(args, path("run.log"));
    job_pid = 0;
    for (int i = 0; i < 3000 && job_pid == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (!fs::exists(path("r.db"))) continue;
      const std::string pid = query_one(path("r.db"), "SELECT pid FROM runs WHERE status = 'running' AND resume_step > 0");
      if (pid != "(none)" && pid != "(error)" && pid != "NULL") job_pid = std::stoi(pid);
    }
    return parent;
  }
};

TEST_F(WorkerResume, AJobProcessKilledMidTrainingResumesWithTheSameFigures) {
  pid_t job_pid = 0;
  const pid_t parent = start_run_until_checkpoint({}, job_pid);
  ASSERT_GT(job_pid, 0) << read_file(path("run.log"));
  ASSERT_EQ(kill(job_pid, SIGKILL), 0);
  ASSERT_EQ(wait_exit(parent, 300), 0) << read_file(path("run.log"));
  const std::string db = path("r.db");
  // a SIGKILL from outside is the infrastructure's fault: counted apart from the method's crashes
  EXPECT_EQ(query_one(db, "SELECT status || ': ' || error FROM runs WHERE id = 1"),
            "lost: job process killed by signal 9 (Killed), not by its own code");
  EXPECT_EQ(query_one(db, "SELECT failures || ' ' || infra_failures FROM jobs WHERE id = 1"), "0 1");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 2"), "done");
  const std::string step = query_one(db, "SELECT resume_step FROM runs WHERE id = 1");
  ASSERT_NE(step, "NULL");
  EXPECT_GT(std::stoi(step), 0);
  EXPECT_LT(std::stoi(step), kSteps);
  EXPECT_NE(read_file(path("run.log")).find("resumes run 1 from step " + step), std::string::npos) << read_file(path("run.log"));
  // the points up to the checkpoint are run 1's own, carried over (same wall times)
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM curves a JOIN curves b USING (split, name, step) WHERE a.run_id = 1 AND "
                          "b.run_id = 2 AND a.wall_seconds = b.wall_seconds AND b.step > " + step), "0");
  EXPECT_NE(query_one(db, "SELECT count(*) FROM curves a JOIN curves b USING (split, name, step) WHERE a.run_id = 1 AND "
                          "b.run_id = 2 AND a.wall_seconds = b.wall_seconds AND b.step <= " + step), "0");
  expect_same_as_reference(db, "2");
  EXPECT_TRUE(fs::exists(path("r.db.ckpt/run-2.pt")));
  // the job is final: nothing else is left behind (no resume checkpoint, not the killed
  // attempt's best-validation file nor its marks')
  EXPECT_EQ(files_left(), final_files(db, "2"));

  // `db gc` for older databases: the same rule, on whatever is there
  for (const char* name : {"run-1.pt", "job-1.run-1.resume.pt", "job-1.run-2.resume.pt.partial.77", "run-99.pt"})
    std::ofstream(path(std::string("r.db.ckpt/") + name)) << std::string(1000, 'x');
  std::string out;
  ASSERT_EQ(attnlab("db gc --db " + db + " --dry-run", out), 0) << out;
  EXPECT_NE(out.find("would remove 3 file(s), 0.0 MiB; kept " + std::to_string(final_files(db, "2").size())),
            std::string::npos) << out;
  EXPECT_NE(out.find("left alone 1"), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(path("r.db.ckpt/run-1.pt")));
  ASSERT_EQ(attnlab("db gc --db " + db, out), 0) << out;
  EXPECT_NE(out.find("removed 3 file(s)"), std::string::npos) << out;
  auto expected = final_files(db, "2");
  expected.push_back("run-99.pt");  // a run this database lacks: left alone
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(files_left(), expected);
}

// The weights kept at accuracy marks are part of what a resume restores: a run killed after
// reaching a mark carries that mark's file over under its own name (same bytes as the
// uninterrupted run's), saves no mark twice, and leaves none of the lost run's files behind;
// `gradients` refuses a mark file whose bytes changed (c797cb7 saved the marks again at the
// resumed run's first validation, from later weights, and never removed the lost run's files).
TEST_F(WorkerResume, TheWeightsKeptAtAccuracyMarksAreCarriedOverWithTheirBytes) {
  pid_t job_pid = 0;
  const pid_t parent = start_run_until_checkpoint({}, job_pid);
  ASSERT_GT(job_pid, 0) << read_file(path("run.log"));
  const std::string db = path("r.db");
  bool past_a_mark = false;  // a resume checkpoint written after the first mark was kept
  for (int i = 0; i < 6000 && !past_a_mark; ++i) {
    past_a_mark = query_one(db, "SELECT count(*) FROM curves c JOIN runs r ON r.id = c.run_id WHERE c.run_id = 1 AND "
                                "c.name = 'accuracy_mark' AND c.step < r.resume_step") != "0";
    if (!past_a_mark) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(past_a_mark) << read_file(path("run.log"));
  ASSERT_EQ(kill(job_pid, SIGKILL), 0);
  ASSERT_EQ(wait_exit(parent, 300), 0) << read_file(path("run.log"));
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 1"), "lost");
  EXPECT_NE(read_file(path("run.log")).find("resumes run 1 from step"), std::string::npos) << read_file(path("run.log"));
  expect_same_as_reference(db, "2");  // marks: steps and checksums
  const std::string first_mark = query_one(db, "SELECT path FROM accuracy_marks WHERE run_id = 2 ORDER BY mark LIMIT 1");
  EXPECT_EQ(fs::path(first_mark).filename().string(), "run-2.pt.acc10");
  EXPECT_EQ(files_left(), final_files(db, "2"));

  attnlab::testing::flip_middle(first_mark, 64);
  std::string out;
  EXPECT_NE(attnlab("gradients 2 --examples 4 --repeats 2 --db " + db + " --cache-dir " + cache() + " --threads 1", out), 0)
      << out;
  EXPECT_NE(out.find("run 2: accuracy mark 0.1 " + first_mark + " is damaged (checksum "), std::string::npos) << out;
}

TEST_F(WorkerResume, AKilledDeviceWorkerTakesItsJobProcessAlongAndTheJobResumesElsewhere) {
  pid_t job_pid = 0;
  const pid_t parent = start_run_until_checkpoint({"--lease", "2"}, job_pid);
  ASSERT_GT(job_pid, 0) << read_file(path("run.log"));
  const pid_t device_worker = proc_stat(job_pid).first;
  ASSERT_NE(device_worker, parent);
  ASSERT_EQ(kill(device_worker, SIGKILL), 0);
  // the job process dies with its device worker: nothing is left writing for the lost attempt
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    gone = !alive(job_pid);
  }
  EXPECT_TRUE(gone) << "the job process outlived its device worker";
  // the supervisor starts a new device worker, which takes the job once the lease expires
  ASSERT_EQ(wait_exit(parent, 300), 0) << read_file(path("run.log"));
  const std::string db = path("r.db");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 1"), "lost");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 2"), "done");
  EXPECT_NE(query_one(db, "SELECT worker FROM runs WHERE id = 1"), query_one(db, "SELECT worker FROM runs WHERE id = 2"));
  EXPECT_NE(read_file(path("run.log")).find("resumes run 1 from step"), std::string::npos) << read_file(path("run.log"));
  expect_same_as_reference(db, "2");
}

TEST_F(WorkerResume, SigtermCheckpointsAndReleasesTheJobThenAWorkerFinishesIt) {
  pid_t job_pid = 0;
  const pid_t parent = start_run_until_checkpoint({}, job_pid);
  ASSERT_GT(job_pid, 0) << read_file(path("run.log"));
  ASSERT_EQ(kill(parent, SIGTERM), 0);
  EXPECT_EQ(wait_exit(parent, 120), 128 + SIGTERM) << read_file(path("run.log"));
  const std::string db = path("r.db");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 1"), "interrupted");
  EXPECT_EQ(query_one(db, "SELECT state || ' ' || failures FROM jobs WHERE id = 1"), "queued 0");
  const std::string checkpoint = query_one(db, "SELECT resume_checkpoint FROM runs WHERE id = 1");
  EXPECT_TRUE(fs::exists(checkpoint)) << checkpoint;
  EXPECT_EQ(query_one(db, "PRAGMA integrity_check"), "ok");

  std::string out;
  ASSERT_EQ(attnlab("worker --idle-exit --db " + db + " --cache-dir " + cache() + " --threads 1", out), 0) << out;
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 2"), "done");
  EXPECT_NE(out.find("resumes run 1 from step " + query_one(db, "SELECT resume_step FROM runs WHERE id = 1")), std::string::npos) << out;
  expect_same_as_reference(db, "2");
  EXPECT_FALSE(fs::exists(checkpoint));  // the job is done: its resume checkpoints are removed
}

// Kills an attempt the hard way, as a crashed machine would: its device worker (the job process
// dies with it) and the front end at once, so nothing checkpoints or releases anything.
void kill_hard(pid_t parent, pid_t job_pid) {
  const pid_t device_worker = proc_stat(job_pid).first;
  kill(device_worker, SIGKILL);
  kill(parent, SIGKILL);
  wait_exit(parent, 10);
  for (int i = 0; i < 500 && alive(job_pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// A resume checkpoint whose bytes changed is caught by the checksum recorded with it: set aside
// in one line, and the attempt starts afresh from step 0 without using up an attempt, ending
// with the uninterrupted run's figures (e7c0818 resumed from it and ended done with others).
TEST_F(WorkerResume, ADamagedResumeCheckpointIsSetAsideAndTheJobStartsAfresh) {
  pid_t job_pid = 0;
  const pid_t parent = start_run_until_checkpoint({"--lease", "1"}, job_pid);
  ASSERT_GT(job_pid, 0) << read_file(path("run.log"));
  kill_hard(parent, job_pid);
  const std::string db = path("r.db");
  const std::string checkpoint = query_one(db, "SELECT resume_checkpoint FROM runs WHERE id = 1");
  ASSERT_TRUE(fs::exists(checkpoint)) << checkpoint;
  attnlab::testing::flip_middle(checkpoint, 4096);

  std::string out;
  ASSERT_EQ(attnlab("worker --idle-exit --lease 1 --db " + db + " --cache-dir " + cache() + " --threads 1", out), 0) << out;
  const auto at = out.find("resume checkpoint " + checkpoint + " is damaged (checksum ");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_NE(out.substr(at, out.find('\n', at) - at).find("; set aside as " + checkpoint + ".damaged; starting afresh from step 0"),
            std::string::npos) << out;
  EXPECT_TRUE(fs::exists(checkpoint + ".damaged"));
  EXPECT_EQ(out.find("resumes run 1"), std::string::npos) << out;  // it never did
  EXPECT_EQ(query_one(db, "SELECT state || ' ' || failures FROM jobs"), "done 0");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 2"), "done");
  expect_same_as_reference(db, "2");
}

// Fills the file system `file` is on: writes until the disk says ENOSPC.
void fill_disk(const std::string& file) {
  std::ofstream out(file, std::ios::binary);
  const std::string block(64 * 1024, 'x');
  while (out.write(block.data(), static_cast<std::streamsize>(block.size())) && out.flush()) {
  }
}

// The database's own disk full (a 8 MiB tmpfs; root only) while a job trains: the job's attempt is
// the machine's failure (`lost`, the method's failure count 0), and the worker that cannot write
// the queue stops in one line naming the file and what to do instead of restarting into the same
// error; once there is space, a worker finishes the job with the undisturbed run's figures
// (c797cb7: failures=1 and a device-worker restart loop, eleven restarts in 150 s).
TEST_F(WorkerResume, ADatabaseDiskFullIsTheMachinesFailureAndStopsTheWorkersInOneLine) {
  const std::string disk = path("disk");
  fs::create_directories(disk);
  if (geteuid() != 0 || std::system(("mount -t tmpfs -o size=8m tmpfs '" + disk + "' 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "mounting a small tmpfs needs root";
  struct Unmount {
    std::string folder;
    ~Unmount() { std::system(("umount '" + folder + "'").c_str()); }
  } unmount{disk};
  fs::create_directories(path("ckpt"));  // the checkpoints elsewhere: only the database's disk fills
  fs::create_directory_symlink(path("ckpt"), disk + "/r.db.ckpt");
  const std::string db = disk + "/r.db";
  const pid_t parent = spawn_attnlab({"run", experiment_file(), "--db", db, "--cache-dir", cache(), "--threads", "1", "--lease", "2"},
                                     path("run.log"));
  bool checkpointed = false;
  for (int i = 0; i < 3000 && !checkpointed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (fs::exists(db)) checkpointed = query_one(db, "SELECT count(*) FROM runs WHERE resume_step > 0") == "1";
  }
  ASSERT_TRUE(checkpointed) << read_file(path("run.log"));
  fill_disk(disk + "/filler");
  const int status = wait_exit(parent, 120);
  fs::remove(disk + "/filler");
  const std::string log = read_file(path("run.log"));
  EXPECT_EQ(status, 2) << log;
  EXPECT_NE(log.find("claims no more jobs: " + db), std::string::npos) << log;
  EXPECT_NE(log.find("database or disk is full; free some space and start a worker again"), std::string::npos) << log;
  EXPECT_EQ(log.find("restarting it in"), std::string::npos) << log;
  EXPECT_EQ(query_one(db, "SELECT failures FROM jobs WHERE id = 1"), "0");

  std::string out;
  ASSERT_EQ(attnlab("worker --idle-exit --lease 2 --db " + db + " --cache-dir " + cache() + " --threads 1", out), 0) << out;
  EXPECT_EQ(query_one(db, "SELECT state || ' ' || failures FROM jobs WHERE id = 1"), "done 0");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 1"), "lost");
  const std::string last = query_one(db, "SELECT max(id) FROM runs");
  expect_same_as_reference(db, last);
}

// A device worker stopped (SIGSTOP) until its lease expires: another worker takes the job over
// while the orphaned job process trains on. The orphan's checkpoints are never adopted (its
// writes are refused) and never read by anyone: the new attempt continues from the step the
// database recorded with every curve point (e7c0818 loaded the orphan's newer file and lost the
// points in between).
TEST_F(WorkerResume, AnAttemptThatLostItsLeaseWritesNothingALaterAttemptReads) {
  pid_t job_pid = 0;
  const pid_t parent = start_run_until_checkpoint({"--lease", "1"}, job_pid);
  ASSERT_GT(job_pid, 0) << read_file(path("run.log"));
  const pid_t device_worker = proc_stat(job_pid).first;
  const std::string db = path("r.db");
  ASSERT_TRUE(stop_outside_a_transaction(device_worker, db));
  std::string out;
  const int status = attnlab("worker --idle-exit --lease 1 --db " + db + " --cache-dir " + cache() + " --threads 1", out);
  kill(device_worker, SIGCONT);
  EXPECT_EQ(wait_exit(parent, 120), 0) << read_file(path("run.log"));
  ASSERT_EQ(status, 0) << out;
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 1"), "lost");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 2"), "done");
  EXPECT_NE(out.find("resumes run 1 from step " + query_one(db, "SELECT resume_step FROM runs WHERE id = 1")), std::string::npos)
      << out;
  expect_same_as_reference(db, "2");
  EXPECT_EQ(files_left(), final_files(db, "2"));
}

// The steps a resumed attempt continues were trained by the plugin files that trained them: a
// plugin file changed since the checkpoint starts the job afresh, saying so (e7c0818 finished it
// from the old file's checkpoint and recorded only the new file's hash).
TEST_F(WorkerResume, AResumeAcrossAChangedPluginFileStartsAfresh) {
  fs::create_directories(path("mine"));
  fs::copy_file(build_dir() / "plugins" / "attn_softmax.so", path("mine/attn_softmax.so"));
  pid_t job_pid = 0;
  const pid_t parent = start_run_until_checkpoint({"--lease", "1", "--plugins", path("mine")}, job_pid);
  ASSERT_GT(job_pid, 0) << read_file(path("run.log"));
  kill_hard(parent, job_pid);
  std::ofstream(path("mine/attn_softmax.so"), std::ios::app) << "rebuilt";  // other bytes, still loadable
  const std::string db = path("r.db");
  std::string out;
  ASSERT_EQ(attnlab("worker --idle-exit --lease 1 --db " + db + " --cache-dir " + cache() + " --threads 1", out), 0) << out;
  EXPECT_NE(out.find("does not resume run 1: its attention plugin 'softmax' changed since (sha256 " +
                     query_one(db, "SELECT substr(sha256, 1, 16) FROM run_plugins WHERE run_id = 1 AND kind = 'attention'") +
                     ", now " +
                     query_one(db, "SELECT substr(sha256, 1, 16) FROM run_plugins WHERE run_id = 2 AND kind = 'attention'")),
            std::string::npos) << out;
  EXPECT_EQ(out.find("resumes run 1"), std::string::npos) << out;
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 2"), "done");
  expect_same_as_reference(db, "2");  // every point trained afresh
  // a bundled plugin's own build in an earlier folder overrides it, as documented: no warning
  // (c797cb7 said "this one is ignored" of the bundled file, twice)
  EXPECT_EQ(read_file(path("run.log")).find("is ignored"), std::string::npos) << read_file(path("run.log"));
  EXPECT_EQ(out.find("is ignored"), std::string::npos) << out;
  ASSERT_EQ(attnlab("plugins --plugins " + path("mine"), out), 0) << out;
  EXPECT_NE(out.find("attn_softmax.so: overridden by " + fs::canonical(path("mine/attn_softmax.so")).string()), std::string::npos)
      << out;
}

// SIGTERM to a device worker (not to the front end): it checkpoints and releases its job, and the
// supervisor starts it again, as for any unexpected end (e7c0818's `run` exited 0, work queued).
TEST_F(WorkerResume, ADeviceWorkerStoppedFromOutsideIsRestartedAndTheJobFinishes) {
  pid_t job_pid = 0;
  const pid_t parent = start_run_until_checkpoint({}, job_pid);
  ASSERT_GT(job_pid, 0) << read_file(path("run.log"));
  ASSERT_EQ(kill(proc_stat(job_pid).first, SIGTERM), 0);
  ASSERT_EQ(wait_exit(parent, 300), 0) << read_file(path("run.log"));
  const std::string log = read_file(path("run.log"));
  EXPECT_NE(log.find("the device worker on cpu was stopped by signal 15 (Terminated); restarting it in 0.50 s"),
            std::string::npos) << log;
  const std::string db = path("r.db");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 1"), "interrupted");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 2"), "done");
  expect_same_as_reference(db, "2");
}

// A checkpoint folder on a full disk (a 64 KiB tmpfs): one line naming the file and the error,
// the attempt the infrastructure's (not the method's), no partial file, and the worker stops
// claiming instead of failing every queued job on the same disk (e7c0818: an abort with a
// backtrace, counted as the method's crash, 3 times in 3 s).
TEST_F(WorkerResume, AFullDiskIsOneLineAndNotTheMethodsFailure) {
  const std::string folder = path("r.db.ckpt");
  fs::create_directories(folder);
  if (geteuid() != 0 || std::system(("mount -t tmpfs -o size=64k tmpfs '" + folder + "' 2>/dev/null").c_str()) != 0)
    GTEST_SKIP() << "mounting a small tmpfs needs root";
  std::string out;
  const int status = attnlab("run " + experiment_file() + " --db " + path("r.db") + " --cache-dir " + cache() + " --threads 1", out);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(folder)) left.push_back(entry.path().filename().string());
  std::system(("umount '" + folder + "'").c_str());
  EXPECT_EQ(status, 1) << out;
  const std::string line = "cannot write checkpoint " + folder + "/";
  const auto at = out.find(line);
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.find(line, at + 1), std::string::npos) << out;  // once
  EXPECT_NE(out.substr(at, out.find('\n', at) - at).find(": No space left on device"), std::string::npos) << out;
  EXPECT_NE(out.find("claims no more jobs: the disk is full"), std::string::npos) << out;
  EXPECT_EQ(out.find("Aborted"), std::string::npos) << out;
  const std::string db = path("r.db");
  EXPECT_EQ(query_one(db, "SELECT state || ' ' || failures || ' ' || infra_failures FROM jobs"), "queued 0 1");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs"), "lost");
  for (const auto& name : left) EXPECT_EQ(name.find(".partial"), std::string::npos) << name;
}

}  // namespace
