// End to end through the attnlab binary: plugin listing, a tiny experiment whose rows are checked
// in the database, re-running, a config error that stores nothing, and a killed job process.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <torch/version.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>
#include <thread>

extern char** environ;

namespace {
namespace fs = std::filesystem;
using attnlab::testing::query_one;

struct Cli : attnlab::testing::CliTest {
  std::string experiment(int steps, int seeds) const {
    std::string seed_list = "1";
    for (int s = 2; s <= seeds; ++s) seed_list += ", " + std::to_string(s);
    const std::string file = path("tiny.toml");
    std::ofstream(file) << "[experiment]\nname = \"tiny\"\nseeds = [" << seed_list << "]\n"
                        << "[model]\nlayers = 1\ndim = 16\nffn_dim = 32\nheads = 2\n"
                        << "[train]\nsteps = " << steps << "\nbatch_size = 8\nlr = 0.002\nwarmup = 2\n"
                        << "eval_every = 10\nlog_every = 5\n"
                        << "[methods.softmax]\n"
                        << "[datasets.listops]\nmax_len = 64\ntrain_size = 64\nval_size = 16\ntest_size = 16\n"
                        << "max_depth = 3\nmax_args = 4\nmin_length = 3\nmax_length = 60\n";
    return file;
  }

  std::string common() const { return "--db " + path("r.db") + " --cache-dir " + path("cache") + " --threads 1"; }

  // Starts `attnlab run` on a job far too long to finish; returns the run's pid once its job
  // process has written some of its curve (the job process's pid in `job_pid`).
  pid_t start_long_run(std::string& job_pid) const {
    const std::string file = experiment(100000, 1);
    const std::string db = path("r.db");
    std::vector<std::string> args = {ATTNLAB_BINARY, "run", file, "--db", db, "--cache-dir", path("cache"), "--threads", "1"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, path("run.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t parent = 0;
    if (posix_spawn(&parent, argv[0], &actions, nullptr, argv.data(), environ) != 0) return 0;
    posix_spawn_file_actions_destroy(&actions);
    job_pid = "(none)";
    for (int i = 0; i < 600 && (job_pid == "(none)" || job_pid == "(error)"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const std::string points = fs::exists(db) ? query_one(db, "SELECT count(*) FROM curves") : "0";
      if (points != "0" && points != "(error)") job_pid = query_one(db, "SELECT pid FROM runs WHERE status = 'running'");
    }
    return parent;
  }
};


TEST_F(Cli, PluginsListsMethodsDatasetsAndParameters) {
  std::string out;
  ASSERT_EQ(attnlab("plugins", out), 0) << out;
  EXPECT_NE(out.find("softmax 1.0"), std::string::npos) << out;
  EXPECT_NE(out.find("listops"), std::string::npos);
  EXPECT_NE(out.find("- dropout (real, default 0.0, range [0, 0.99])"), std::string::npos) << out;
  EXPECT_NE(out.find("- max_len (integer"), std::string::npos);
}

// attnlab env reports what is loaded: this LibTorch, the threads as asked, the BLAS library
// into the process, and every bundled plugin file counted under its folder.
TEST_F(Cli, EnvSaysWhatThisBuildAndMachineAre) {
  std::string out;
  ASSERT_EQ(attnlab("env --threads 1 --format csv", out), 0) << out;
  std::map<std::string, std::vector<std::string>> rows;  // item -> values (the plugin folders repeat)
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto comma = line.find(',');
    if (comma == std::string::npos) continue;
    std::string value = line.substr(comma + 1);
    if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
    rows[line.substr(0, comma)].push_back(value);
  }
  ASSERT_EQ(rows.count("LibTorch"), 1u) << out;
  EXPECT_EQ(rows["LibTorch"][0].rfind(TORCH_VERSION, 0), 0u) << out;
  EXPECT_EQ(rows["threads"][0].rfind("1 intra-op (--threads)", 0), 0u) << out;
  EXPECT_NE(rows["BLAS"][0].find(".so"), std::string::npos) << out;  // a library, not a guess
  EXPECT_EQ(rows["devices"][0].rfind("cpu", 0), 0u) << out;
  // The bundled attention plugins: every attn_*.so beside the binary's build folder, loaded.
  const fs::path plugins = fs::canonical(fs::path(ATTNLAB_BINARY).parent_path().parent_path() / "plugins");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(plugins)) files += entry.path().extension() == ".so";
  const std::string want = plugins.string() + ": " + std::to_string(files) + " attention, 0 dataset";
  EXPECT_NE(std::find(rows["plugin folder"].begin(), rows["plugin folder"].end(), want), rows["plugin folder"].end())
      << "no '" << want << "' in\n" << out;
  ASSERT_EQ(attnlab("env --format json", out), 0) << out;
  EXPECT_EQ(out.front(), '[') << out;
}

TEST_F(Cli, RunStoresEveryRowAndPrintsTheSummary) {
  std::string out;
  ASSERT_EQ(attnlab("run " + experiment(20, 2) + " " + common(), out), 0) << out;
  const auto db = path("r.db");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM jobs WHERE state = 'done'"), "2");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs WHERE status = 'done' AND finished_at IS NOT NULL"), "2");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM results WHERE name = 'test_acc' AND value BETWEEN 0 AND 1"), "2");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM results WHERE name = 'peak_memory_bytes' AND value > 1e6"), "2");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM results WHERE name = 'majority_rate' AND value > 0"), "2");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM results WHERE name = 'steps_done' AND value = 20"), "2");
  // train loss every 5 steps, val every 10: 4 + 2 points per run
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM curves WHERE run_id = 1 AND split = 'train' AND name = 'loss'"), "4");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM curves WHERE run_id = 1 AND split = 'val' AND name = 'acc'"), "2");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM run_plugins WHERE length(sha256) = 64"), "4");
  EXPECT_NE(query_one(db, "SELECT torch_version FROM runs WHERE id = 1"), "NULL");
  EXPECT_NE(query_one(db, "SELECT git_revision FROM runs WHERE id = 1"), "NULL");
  EXPECT_EQ(query_one(db, "SELECT value FROM job_params WHERE job_id = 1 AND key = 'train.steps'"), "20");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM run_summary WHERE test_acc IS NOT NULL"), "2");
  EXPECT_TRUE(fs::exists(path("r.db.ckpt/run-1.pt")));
  EXPECT_NE(out.find("majority_rate mean ± std (n)"), std::string::npos) << out;
  EXPECT_NE(out.find("test_acc mean ± std (n)"), std::string::npos);

  // the same experiment again: nothing new runs; --rerun runs both again
  ASSERT_EQ(attnlab("run " + path("tiny.toml") + " " + common(), out), 0) << out;
  EXPECT_NE(out.find("is already done"), std::string::npos) << out;
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs"), "2");
  ASSERT_EQ(attnlab("run " + path("tiny.toml") + " " + common() + " --rerun", out), 0) << out;
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs WHERE attempt = 2 AND status = 'done'"), "2");
  // same seed, same CPU build: the same numbers
  EXPECT_EQ(query_one(db, "SELECT value FROM results WHERE run_id = 1 AND name = 'test_acc'"),
            query_one(db, "SELECT value FROM results WHERE run_id = 3 AND name = 'test_acc'"));
  EXPECT_EQ(query_one(db, "SELECT group_concat(value) FROM curves WHERE run_id = 2"),
            query_one(db, "SELECT group_concat(value) FROM curves WHERE run_id = 4"));

  ASSERT_EQ(attnlab("results --db " + db, out), 0) << out;
  EXPECT_NE(out.find("softmax  listops"), std::string::npos) << out;
}

// Methods written softmax, then performer (not the alphabetical order toml++ keeps) run and show
// in the file's order: job 1 is softmax's, and `table accuracy` lists softmax first.
TEST_F(Cli, MethodsKeepTheFilesOrderInJobsAndTables) {
  std::string text = "[experiment]\nname = \"order\"\n[model]\nlayers = 1\ndim = 16\nffn_dim = 32\nheads = 2\n"
                     "[train]\nsteps = 10\nbatch_size = 8\nwarmup = 2\neval_every = 10\nlog_every = 5\n"
                     "[methods.softmax]\n[methods.performer]\nfeatures = 8\n"
                     "[datasets.listops]\nmax_len = 64\ntrain_size = 64\nval_size = 16\ntest_size = 16\n"
                     "max_depth = 3\nmax_args = 4\nmin_length = 3\nmax_length = 60\n";
  std::ofstream(path("order.toml")) << text;
  std::string out;
  ASSERT_EQ(attnlab("run " + path("order.toml") + " " + common(), out), 0) << out;
  EXPECT_EQ(query_one(path("r.db"), "SELECT group_concat(method, ',') FROM (SELECT method FROM jobs ORDER BY id)"),
            "softmax,performer");
  ASSERT_EQ(attnlab("table accuracy --db " + path("r.db"), out), 0) << out;
  const auto softmax = out.find("softmax"), performer = out.find("performer");
  ASSERT_NE(softmax, std::string::npos) << out;
  ASSERT_NE(performer, std::string::npos) << out;
  EXPECT_LT(softmax, performer) << out;
  ASSERT_EQ(attnlab("results --db " + path("r.db"), out), 0) << out;
  EXPECT_LT(out.find("softmax"), out.find("performer")) << out;
}

TEST_F(Cli, ConfigErrorIsOneLineAndStoresNothing) {
  const std::string file = path("bad.toml");
  std::ofstream(file) << "[methods.softmax]\ndropout = \"high\"\n[datasets.listops]\n";
  std::string out;
  EXPECT_EQ(attnlab("run " + file + " " + common(), out), 2);
  EXPECT_EQ(out, "attnlab: error: " + file + ":2: [methods.softmax] dropout: expected a real number, got a string "
                 "(attention plugin softmax)\n");
  EXPECT_FALSE(fs::exists(path("r.db")));
}

TEST_F(Cli, UnknownDeviceIsRefusedBeforeAnythingIsStored) {
  std::string out;
  EXPECT_EQ(attnlab("run " + experiment(5, 1) + " " + common() + " --device cuda:7", out), 2);
  EXPECT_NE(out.find("device 'cuda:7'"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(path("r.db")));
}

// Issue 13, item 7: every split is loaded once where the user is, so a malformed or missing file
// fails `run` / `queue add` in one line naming FILE:LINE before anything is stored, and the jobs
// then hit the token cache.
TEST_F(Cli, MalformedOrMissingDataFileFailsBeforeAnythingIsStored) {
  const std::string data = path("lra");
  fs::create_directories(data);
  const std::string row = "[MAX 1 ( [MIN 2 3 ] ) ]\t2\n";
  std::ofstream(data + "/basic_train.tsv") << "Source\tTarget\n" << row << row << "[MAX 1 2 ]\tten\n";
  std::ofstream(data + "/basic_val.tsv") << "Source\tTarget\n" << row;
  std::ofstream(data + "/basic_test.tsv") << "Source\tTarget\n" << row;
  const std::string file = path("files.toml");
  std::ofstream(file) << "[experiment]\nname = \"files\"\n[model]\nlayers = 1\ndim = 16\nffn_dim = 32\nheads = 2\n"
                      << "[train]\nsteps = 2\nwarmup = 0\nbatch_size = 2\n[methods.softmax]\n"
                      << "[datasets.listops]\nsource = \"files\"\npath = \"" << data << "\"\nmax_len = 16\n";
  std::string out;
  EXPECT_EQ(attnlab("run " + file + " " + common(), out), 2);
  EXPECT_EQ(out, "attnlab: error: " + file + ": [datasets.listops] " + data +
                     "/basic_train.tsv:4: Target 'ten' is not an integer in 0..9\n");
  EXPECT_FALSE(fs::exists(path("r.db")));

  std::ofstream(data + "/basic_train.tsv") << "Source\tTarget\n" << row << row;
  fs::remove(data + "/basic_test.tsv");
  EXPECT_EQ(attnlab("queue add " + file + " --db " + path("r.db") + " --cache-dir " + path("cache"), out), 2);
  EXPECT_EQ(out, "attnlab: error: " + file + ": [datasets.listops] " + data + "/basic_test.tsv: no such file\n");
  EXPECT_FALSE(fs::exists(path("r.db")));

  // whole again: queued, and the three splits are in the cache the jobs will map
  std::ofstream(data + "/basic_test.tsv") << "Source\tTarget\n" << row;
  ASSERT_EQ(attnlab("queue add " + file + " --db " + path("r.db") + " --cache-dir " + path("cache"), out), 0) << out;
  EXPECT_EQ(std::distance(fs::directory_iterator(path("cache/tokens")), fs::directory_iterator{}), 3);
  // --no-load-check leaves the loading to the jobs
  EXPECT_EQ(attnlab("queue add " + file + " --db " + path("r2.db") + " --cache-dir " + path("cache2") +
                    " --no-load-check", out), 0) << out;
  EXPECT_FALSE(fs::exists(path("cache2/tokens")));
}

// Issue 13, item 13: a configuration whose padded arrays cannot fit is refused before anything is
// built or stored, in one line naming the dataset, max_len, the estimate and the bound.
TEST_F(Cli, DatasetPastTheSizeBoundIsRefusedUnlessForced) {
  const std::string file = path("huge.toml");
  std::ofstream(file) << "[experiment]\nname = \"huge\"\n[methods.softmax]\n"
                      << "[datasets.listops]\nmax_len = 1000000\ntrain_size = 100000000\n";
  std::string out;
  EXPECT_EQ(attnlab("queue add " + file + " --db " + path("r.db") + " --cache-dir " + path("cache"), out), 2);
  EXPECT_EQ(out.rfind("attnlab: error: " + file + ": [datasets.listops] listops: max_len = 1000000 needs about 200 TB "
                      "in memory and again in the token cache (100004000 examples x 1 input(s) x 1000000 tokens x 2 "
                      "bytes), past the bound of ", 0), 0u) << out;
  EXPECT_NE(out.find("; --force loads it anyway\n"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_FALSE(fs::exists(path("r.db")));
  EXPECT_FALSE(fs::exists(path("cache")));  // nothing generated
  EXPECT_EQ(attnlab("data " + file + " --cache-dir " + path("cache"), out), 2);
  EXPECT_NE(out.find("listops: max_len = 1000000 needs about 200 TB"), std::string::npos) << out;

  // The bound set by hand: the tiny experiment (96 examples x 64 tokens x 2 bytes + 16 bytes each) is past
  // 1000 bytes; --force stores it all the same.
  ::setenv("ATTNLAB_DATA_BOUND", "1000", 1);
  const int refused =
      attnlab("queue add " + experiment(2, 1) + " --db " + path("r.db") + " --cache-dir " + path("cache"), out);
  const std::string refusal = out;
  const int forced = attnlab("queue add " + path("tiny.toml") + " --db " + path("r.db") + " --cache-dir " +
                             path("cache") + " --force", out);
  ::unsetenv("ATTNLAB_DATA_BOUND");
  EXPECT_EQ(refused, 2);
  EXPECT_NE(refusal.find("listops: max_len = 64 needs about 13.8 kB in memory and again in the token cache (96 "
                         "examples x 1 input(s) x 64 tokens x 2 bytes), past the bound of 1 kB (ATTNLAB_DATA_BOUND); "
                         "--force loads it anyway"), std::string::npos) << refusal;
  EXPECT_EQ(forced, 0) << out;
  EXPECT_EQ(query_one(path("r.db"), "SELECT count(*) FROM jobs WHERE state = 'queued'"), "1");
}

// `attnlab data` loads each dataset configuration once, whatever the methods (it printed every
// split once per method before).
TEST_F(Cli, DataPrintsEachDatasetConfigurationOnce) {
  std::string text;
  {
    std::ifstream in(experiment(5, 2));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.replace(text.find("[methods.softmax]\n"), 17, "[methods.softmax]\ndropout = 0.1\n[methods.performer]\n");
  std::ofstream(path("two.toml")) << text;
  std::string out;
  ASSERT_EQ(attnlab("data " + path("two.toml") + " --cache-dir " + path("cache") + " --threads 1", out), 0) << out;
  std::size_t rows = 0;  // table rows start with the dataset's name
  for (std::size_t at = 0; at != std::string::npos; at = out.find('\n', at), at = at == std::string::npos ? at : at + 1)
    if (out.compare(at, 8, "listops ") == 0) ++rows;
  EXPECT_EQ(rows, 3u) << out;  // train, val, test: once each
}

// Options shared by several commands are checked once, for all of them, in one line.
TEST_F(Cli, NegativeThreadsAndMissingPluginFoldersAreOneLineErrors) {
  const std::string file = experiment(5, 1);
  for (const std::string& command : std::vector<std::string>{"run " + file, "data " + file, "worker --idle-exit", "queue add " + file}) {
    std::string out;
    const bool threads = command.rfind("queue", 0) != 0;  // queue add has no --threads
    const std::string db = command.rfind("data", 0) == 0 ? "" : " --db " + path("r.db");  // data has no database
    if (threads) {
      EXPECT_EQ(attnlab(command + db + " --threads -1", out), 2) << command;
      EXPECT_NE(out.find("--threads must be 0 (ATTNLAB_THREADS or every core) or more, not -1"), std::string::npos)
          << command << ": " << out;
      EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
    }
    EXPECT_EQ(attnlab(command + db + " --plugins " + path("no-such-folder"), out), 2) << command;
    EXPECT_NE(out.find("--plugins " + path("no-such-folder") + ": no such folder"), std::string::npos) << command << ": " << out;
    EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
  }
  for (const std::string command : {"bench --methods softmax --lengths 32", "variance 1", "approx --show"}) {
    std::string out;
    EXPECT_EQ(attnlab(command + " --db " + path("r.db") + " --threads -1", out), 2) << command;
    EXPECT_NE(out.find("--threads must be 0"), std::string::npos) << command << ": " << out;
  }
  EXPECT_FALSE(fs::exists(path("r.db")));
}

// A repeated seed is refused in one line naming the file and line; nothing is queued.
TEST_F(Cli, RepeatedSeedIsRefused) {
  std::string text;
  {
    std::ifstream in(experiment(5, 1));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.replace(text.find("seeds = [1]"), 11, "seeds = [5, 5, 5]");
  std::ofstream(path("dup.toml")) << text;
  std::string out;
  EXPECT_EQ(attnlab("queue add " + path("dup.toml") + " --db " + path("r.db"), out), 2);
  EXPECT_EQ(out, "attnlab: error: " + path("dup.toml") + ":3: [experiment] seeds: 5 is named twice\n");
  EXPECT_FALSE(fs::exists(path("r.db")));
}

// `queue show` prints the stored configuration with shortest numbers (dropout = 0.1), while the
// stored text (the job's identity) keeps what it had.
TEST_F(Cli, QueueShowPrintsShortestNumbers) {
  std::string text;
  {
    std::ifstream in(experiment(5, 1));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.replace(text.find("[methods.softmax]\n"), 17, "[methods.softmax]\ndropout = 0.1\n");
  std::ofstream(path("d.toml")) << text;
  std::string out;
  ASSERT_EQ(attnlab("queue add " + path("d.toml") + " --db " + path("r.db"), out), 0) << out;
  ASSERT_EQ(attnlab("queue show 1 --db " + path("r.db"), out), 0) << out;
  EXPECT_NE(out.find("dropout = 0.1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("lr = 0.002\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("0000000"), std::string::npos) << out;
}

// `attnlab run ... | head -n 1`: the reader closes the pipe after the first line, before any job
// prints. No attnlab process may die of SIGPIPE: every job ends done at its first attempt and the
// front end finishes with status 0.
TEST_F(Cli, AReaderThatClosesStdoutStopsNothing) {
  const std::string file = experiment(20, 2);
  const std::string command = "( " + std::string(ATTNLAB_BINARY) + " run " + file + " " + common() + " 2> " +
                              path("err.log") + "; echo $? > " + path("rc") + " ) | head -n 1 > " + path("first.txt");
  ASSERT_EQ(std::system(command.c_str()), 0);
  auto read = [&](const std::string& name) {
    std::ifstream in(path(name));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  EXPECT_EQ(read("first.txt").rfind("experiment 'tiny': 2 job(s): 2 added", 0), 0u) << read("first.txt");
  EXPECT_EQ(read("rc"), "0\n") << read("err.log");
  const std::string db = path("r.db");
  EXPECT_EQ(query_one(db, "SELECT group_concat(state) FROM jobs"), "done,done") << read("err.log");
  EXPECT_EQ(query_one(db, "SELECT group_concat(status) FROM runs"), "done,done") << read("err.log");
}

// A killed job process (its attempt fails, the job is retried and resumes): queue_test.cpp.

TEST_F(Cli, InterruptedRunIsMarkedAndItsJobQueuedAgain) {
  const std::string db = path("r.db");
  std::string pid;
  const pid_t parent = start_long_run(pid);
  ASSERT_GT(parent, 0);
  ASSERT_NE(pid, "(none)") << "the job never started";
  ASSERT_EQ(kill(parent, SIGTERM), 0);  // forwarded to the job process
  int status = 0;
  waitpid(parent, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM) << status;
  EXPECT_EQ(query_one(db, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 1"), "interrupted");
  EXPECT_EQ(query_one(db, "SELECT state FROM jobs WHERE id = 1"), "queued");
  EXPECT_NE(query_one(db, "SELECT count(*) FROM curves WHERE run_id = 1"), "0");
}

}  // namespace

namespace {

// Skyformer is stochastic: its run ends with variance passes, and `attnlab variance` measures them
// again from the checkpoint; softmax has nothing to vary.
TEST_F(Cli, VarianceOfAStochasticRunFromItsCheckpoint) {
  std::string file = experiment(20, 1);
  {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    std::string toml = text.str();
    toml.replace(toml.find("[methods.softmax]"), 17, "[methods.softmax]\n[methods.skyformer]\nlandmarks = 8");
    toml.replace(toml.find("log_every = 5\n"), 14, "log_every = 5\nvariance_passes = 6\n");
    std::ofstream(file, std::ios::trunc) << toml;
  }
  std::string out;
  ASSERT_EQ(attnlab("run " + file + " " + common(), out), 0) << out;
  const std::string db = path("r.db");
  const std::string sky = query_one(db, "SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.method = 'skyformer'");
  const std::string soft = query_one(db, "SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.method = 'softmax'");
  EXPECT_EQ(query_one(db, "SELECT value FROM results WHERE run_id = " + sky + " AND name = 'variance_passes'"), "6.0");
  EXPECT_NE(out.find(" variance pass 6/6  ETA 0.0s\n"), std::string::npos) << "the passes show progress:\n" << out;
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM results WHERE run_id = " + soft + " AND name = 'rsd'"), "0");

  ASSERT_EQ(attnlab("variance " + sky + " --passes 5 --split val --per-example " + common(), out), 0) << out;
  EXPECT_EQ(query_one(db, "SELECT count(*) || ' ' || min(passes) || ' ' || (max(pi) <= 4) FROM variance_examples WHERE split = 'val'"),
            "16 5 1");
  EXPECT_NE(out.find("skyformer  listops  val    5       16"), std::string::npos) << out;
  EXPECT_EQ(query_one(db, "SELECT value FROM results WHERE run_id = " + sky + " AND name = 'variance_passes'"), "5.0");
  const double pi = std::stod(query_one(db, "SELECT value FROM results WHERE run_id = " + sky + " AND name = 'pi'"));
  EXPECT_GE(pi, 0.0);
  EXPECT_LE(pi, 4.0);  // R - (votes for the majority class) <= R - 1

  EXPECT_EQ(attnlab("variance " + soft + " " + common(), out), 2);
  EXPECT_NE(out.find("has no stochastic attention"), std::string::npos) << out;
  EXPECT_EQ(attnlab("variance 99 " + common(), out), 2);
  EXPECT_NE(out.find("no run with id 99"), std::string::npos) << out;
}

}  // namespace

namespace {

// gmm_rks learns a full covariance per head and component: inspect lists its eigenvalues.
TEST_F(Cli, InspectListsTheLearnedCovariancesOfAGmmRun) {
  std::string file = experiment(10, 1);
  {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    std::string toml = text.str();
    toml.replace(toml.find("[methods.softmax]"), 17, "[methods.softmax]\n[methods.gmm_rks]\nfeatures = 8\ncomponents = 3");
    toml.replace(toml.find("log_every = 5\n"), 14, "log_every = 5\nvariance_passes = 0\n");
    std::ofstream(file, std::ios::trunc) << toml;
  }
  std::string out;
  ASSERT_EQ(attnlab("run " + file + " " + common(), out), 0) << out;
  const std::string db = path("r.db");
  const std::string gmm = query_one(db, "SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.method = 'gmm_rks'");
  const std::string soft = query_one(db, "SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.method = 'softmax'");
  const std::string where = " --db " + db + " --cache-dir " + path("cache");
  ASSERT_EQ(attnlab("inspect " + gmm + where, out), 0) << out;
  std::size_t rows = 0;
  for (std::size_t at = out.find("block0.attention.sigma"); at != std::string::npos; at = out.find("block0.attention.sigma", at + 1))
    ++rows;
  EXPECT_EQ(rows, 2u * 3u) << out;  // 2 heads x 3 components
  ASSERT_EQ(attnlab("inspect " + soft + where, out), 0) << out;
  EXPECT_NE(out.find("has no learned covariance"), std::string::npos) << out;

  // weights whose bytes changed since they were written are not the run's: refused by their checksum
  const std::string checkpoint = query_one(db, "SELECT checkpoint_path FROM runs WHERE id = " + gmm);
  EXPECT_EQ(query_one(db, "SELECT length(checkpoint_checksum) FROM runs WHERE id = " + gmm), "16");
  attnlab::testing::flip_middle(checkpoint, 64);
  EXPECT_EQ(attnlab("inspect " + gmm + where, out), 2) << out;
  EXPECT_NE(out.find("run " + gmm + ": checkpoint " + checkpoint + " is damaged (checksum "), std::string::npos) << out;
}

}  // namespace

namespace {

std::string file_text(const std::string& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `attnlab export` writes a run's initial, best and last weights; a run started from its own initial
// weights (`[model] init_from`) is the run again, point for point; a file of another model is refused
// when queued, and one whose bytes changed after it was queued blocks its job when it starts.
TEST_F(Cli, ExportedInitialWeightsStartARunThatRepeatsTheOriginal) {
  const std::string file = experiment(20, 1);
  std::string out;
  ASSERT_EQ(attnlab("run " + file + " " + common(), out), 0) << out;
  const std::string db = path("r.db"), where = " --db " + db + " --cache-dir " + path("cache");
  for (const char* which : {"initial", "best", "last"}) {
    ASSERT_EQ(attnlab("export 1 --weights " + std::string(which) + " -o " + path(std::string(which) + ".safetensors") + where, out), 0)
        << out;
    EXPECT_NE(out.find("run 1 (softmax/listops seed 1): " + std::string(which) + " weights, 24 tensors, "), std::string::npos) << out;
    EXPECT_NE(out.find(" lra_authors names -> " + path(std::string(which) + ".safetensors")), std::string::npos) << out;
  }
  EXPECT_NE(file_text(path("initial.safetensors")), file_text(path("last.safetensors")));
  EXPECT_EQ(attnlab("export 1 --weights middle" + where, out), 2);
  EXPECT_NE(out.find("--weights middle: expected best, last or initial"), std::string::npos) << out;

  std::string restart = file_text(file);
  restart.replace(restart.find("name = \"tiny\""), 13, "name = \"restart\"");
  restart.replace(restart.find("heads = 2\n"), 10, "heads = 2\ninit_from = \"initial.safetensors\"\n");
  std::ofstream(path("restart.toml")) << restart;
  ASSERT_EQ(attnlab("run " + path("restart.toml") + " " + common(), out), 0) << out;
  const std::string curve = "SELECT group_concat(step || split || name || '=' || printf('%.17g', value), ' ') FROM "
                            "(SELECT * FROM curves WHERE run_id = ";
  EXPECT_EQ(query_one(db, curve + "2 ORDER BY step, split, name)"), query_one(db, curve + "1 ORDER BY step, split, name)"));
  EXPECT_NE(query_one(db, "SELECT count(*) FROM curves WHERE run_id = 2"), "0");
  EXPECT_NE(query_one(db, "SELECT value FROM job_params WHERE key = 'model.init_from_sha256' AND job_id = 2"), "(none)");

  // a file of another model: one line, nothing queued
  std::string wider = restart;
  wider.replace(wider.find("dim = 16"), 8, "dim = 32");
  std::ofstream(path("wider.toml")) << wider;
  EXPECT_EQ(attnlab("run " + path("wider.toml") + " " + common(), out), 2);
  EXPECT_NE(out.find(path("wider.toml") + ": [model] init_from (softmax on listops): " + path("initial.safetensors") +
                     ": model.embeddings.word_embeddings.weight is [16, 16] there, [16, 32] in this model (and 19 more); "
                     "nothing queued"),
            std::string::npos)
      << out;
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM jobs"), "2");

  // queued, then the file's bytes changed: the job is blocked when it starts, saying why
  const std::string queued = " --db " + path("q.db") + " --cache-dir " + path("cache");
  ASSERT_EQ(attnlab("queue add " + path("restart.toml") + queued, out), 0) << out;
  fs::copy_file(path("last.safetensors"), path("initial.safetensors"), fs::copy_options::overwrite_existing);
  attnlab("worker --idle-exit --threads 1" + queued, out);
  EXPECT_EQ(query_one(path("q.db"), "SELECT state FROM jobs"), "blocked");
  EXPECT_NE(query_one(path("q.db"), "SELECT error FROM runs").find("[model] init_from " + path("initial.safetensors") +
                                                                    " changed since the job was queued (sha256 "),
            std::string::npos)
      << query_one(path("q.db"), "SELECT error FROM runs");
}

}  // namespace
