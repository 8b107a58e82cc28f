// attnlab bench end to end through the binary (tiny settings: softmax at 32 and 64 tokens), its
// refusals, --show, and the table's ratios on rows made here.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/cli_options.hpp"
#include "studies/bench.hpp"
#include "attnlab/store/studies.hpp"

extern char** environ;

namespace {
namespace fs = std::filesystem;

struct Bench : attnlab::testing::CliTest {
  std::string tiny() const {
    return "bench --db " + path("b.db") + " --cache-dir " + path("cache") +
           " --methods softmax --lengths 32,64 --batch-size 2 --steps 2 --warmup 1 --threads 1";
  }
};

std::string query(const std::string& db_path, const std::string& sql) { return attnlab::testing::query_one(db_path, sql); }

// The printed line that starts with `prefix`, or "".
std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// bench-one's command line as bench writes it, read back field by field.
TEST(BenchOneOptions, ReadsBackWhatBenchWrites) {
  attnlab::BenchOneOptions o;
  o.db_path = "/tmp/b.db";
  o.config_tomls = {"method = \"softmax\"\n[bench]\nseq_len = 64\n", "method = \"performer\"\n"};
  o.device = "cuda:0";
  o.threads = 2;
  o.cache_dir = "/tmp/cache";
  o.plugin_dirs = {"/p", "/q"};
  o.stored_ids = "/tmp/b.ids";
  o.trace_dir = "/tmp/traces";
  const auto back = attnlab::BenchOneOptions::from(
      attnlab::parse_command_line("bench-one", o.to_args(), attnlab::BenchOneOptions::options()));
  EXPECT_EQ(back.db_path, o.db_path);
  EXPECT_EQ(back.config_tomls, o.config_tomls);
  EXPECT_EQ(back.device, o.device);
  EXPECT_EQ(back.threads, 2);
  EXPECT_EQ(back.cache_dir, o.cache_dir);
  EXPECT_EQ(back.plugin_dirs, o.plugin_dirs);
  EXPECT_EQ(back.stored_ids, o.stored_ids);
  EXPECT_EQ(back.trace_dir, o.trace_dir);
}

TEST_F(Bench, StoresOneRowPerLengthAndPrintsRatiosToSoftmax) {
  std::string out;
  ASSERT_EQ(attnlab(tiny(), out), 0) << out;
  const auto db = path("b.db");
  EXPECT_EQ(query(db, "SELECT count(*) FROM bench_results"), "2");
  EXPECT_EQ(query(db, "SELECT group_concat(seq_len) FROM (SELECT seq_len FROM bench_results ORDER BY id)"), "32,64");
  EXPECT_EQ(query(db, "SELECT count(*) FROM bench_results WHERE status = 'done' AND method = 'softmax' "
                      "AND dataset = 'listops' AND batch_size = 2 AND steps_timed = 2 AND threads = 1 AND device = 'cpu'"),
            "2");
  EXPECT_EQ(query(db, "SELECT count(*) FROM bench_results WHERE step_seconds_min > 0 AND "
                      "step_seconds_min <= step_seconds_median AND step_seconds_median <= step_seconds_max"),
            "2");
  EXPECT_EQ(query(db, "SELECT count(*) FROM bench_results WHERE peak_memory_bytes > 1e6"), "2");
  EXPECT_EQ(query(db, "SELECT count(*) FROM bench_results WHERE length(torch_version) > 0 AND length(git_revision) > 0 "
                      "AND length(device_name) > 0 AND (error IS NULL OR error = '')"),
            "2");
  // the resolved configuration: the job sections and the bench settings
  const std::string config = query(db, "SELECT config_toml FROM bench_results ORDER BY id LIMIT 1");
  for (const char* part : {"method = 'softmax'", "[model]", "dim = 64", "layers = 2", "[methods.softmax]", "[bench]",
                           "seq_len = 32", "steps = 2", "warmup = 1"})
    EXPECT_NE(config.find(part), std::string::npos) << part << " in\n" << config;

  // the table: each softmax row is its own reference, so both ratios read 1.00
  EXPECT_NE(out.find("time vs softmax"), std::string::npos) << out;
  EXPECT_NE(out.find("mem vs softmax"), std::string::npos) << out;
  for (const char* length : {"32", "64"}) {
    const auto cells = words(line_starting(out, std::string("softmax  ") + length + " "));
    ASSERT_EQ(cells.size(), 9u) << out;  // method length status step min-max ratio peak(2 words) ratio
    EXPECT_EQ(cells[2], "done");
    EXPECT_EQ(cells[5], "1.00") << out;
    EXPECT_EQ(cells[8], "1.00") << out;
  }
}

TEST_F(Bench, UnknownMethodIsOneLineNamingItAndStoresNothing) {
  std::string out;
  EXPECT_EQ(attnlab("bench --db " + path("b.db") + " --methods softmax,no_such_method --lengths 32 --threads 1", out), 2);
  EXPECT_EQ(out.rfind("attnlab: error: bench: no attention method named 'no_such_method' (found: ", 0), 0u) << out;
  EXPECT_NE(out.find("softmax"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_FALSE(fs::exists(path("b.db")));
}

TEST_F(Bench, ShowPrintsTheStoredRows) {
  std::string out;
  EXPECT_EQ(attnlab("bench --show --db " + path("b.db"), out), 2);  // no database yet
  EXPECT_NE(out.find("no such database"), std::string::npos) << out;

  ASSERT_EQ(attnlab(tiny(), out), 0) << out;
  ASSERT_EQ(attnlab("bench --show --db " + path("b.db"), out), 0) << out;
  EXPECT_NE(out.find("time vs softmax"), std::string::npos) << out;
  int rows = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const auto cells = words(line);
    if (cells.size() < 8 || cells[1] != "softmax") continue;
    ++rows;
    EXPECT_EQ(cells[2], "listops");
    EXPECT_TRUE(cells[3] == "32" || cells[3] == "64") << line;
    EXPECT_EQ(cells[4], "2");    // batch
    EXPECT_EQ(cells[5], "cpu");  // device
    EXPECT_EQ(cells[6], "1");    // threads
    EXPECT_EQ(cells[7], "done");
  }
  EXPECT_EQ(rows, 2) << out;
}

// --precision bf16 measures the step as a bf16 run takes it (autocast forward, fp32 weights); the
// table then has a precision column, and each row's ratios are to softmax in its own precision.
TEST_F(Bench, PrecisionIsStoredAndRatiosStayWithinOnePrecision) {
  std::string out;
  const std::string base = "bench --db " + path("b.db") + " --cache-dir " + path("cache") +
                           " --methods softmax,skyformer --lengths 32 --batch-size 2 --steps 2 --warmup 1 --threads 1";
  ASSERT_EQ(attnlab(base, out), 0) << out;
  EXPECT_EQ(out.find("precision"), std::string::npos) << out;  // fp32 alone: no column
  ASSERT_EQ(attnlab(base + " --precision bf16", out), 0) << out;
  const auto db = path("b.db");
  EXPECT_EQ(query(db, "SELECT count(*) FROM bench_results WHERE status = 'done'"), "4");
  EXPECT_EQ(query(db, "SELECT count(*) FROM bench_results WHERE config_toml LIKE '%precision = ''bf16''%'"), "2");
  ASSERT_EQ(attnlab("bench --show --db " + db, out), 0) << out;
  EXPECT_NE(out.find("precision"), std::string::npos) << out;
  for (const char* precision : {"fp32", "bf16"}) {
    int softmax_rows = 0;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      const auto cells = words(line);
      // when method dataset length batch device threads precision status step min-max ratio ...
      if (cells.size() < 12 || cells[7] != precision || cells[1] != "softmax") continue;
      ++softmax_rows;
      EXPECT_EQ(cells[11], "1.00") << line;  // its own reference, not the other precision's
    }
    EXPECT_EQ(softmax_rows, 1) << precision << "\n" << out;
  }
  EXPECT_NE(attnlab(base + " --precision fp8", out), 0);
  EXPECT_NE(out.find("--precision"), std::string::npos) << out;
}

// --attention-only times the attention module's forward alone; softmax's rows then carry its
// throughput, 4·B·H·N²·Dh FLOPs over the median time, and the ratios compare like with like.
TEST_F(Bench, AttentionOnlyTimesTheForwardAndPrintsSoftmaxThroughput) {
  std::string out;
  const std::string base = "bench --db " + path("b.db") + " --cache-dir " + path("cache") +
                           " --methods softmax,performer --lengths 64 --batch-size 2 --steps 3 --warmup 1 --threads 1";
  ASSERT_EQ(attnlab(base + " --attention-only", out), 0) << out;
  const auto db = path("b.db");
  EXPECT_EQ(query(db, "SELECT count(*) FROM bench_results WHERE status = 'done' AND config_toml LIKE '%attention_only = true%'"),
            "2");
  const double median = std::stod(query(db, "SELECT step_seconds_median FROM bench_results WHERE method = 'softmax'"));
  const double tflops = 4.0 * 2 * 2 * 64 * 64 * 32 / median / 1e12;  // batch 2, 2 heads of 32 (dim 64), 64 tokens
  const auto cells = words(line_starting(out, "softmax    64 "));
  // method length part status step min-max ratio peak(2 words) ratio TFLOP/s
  ASSERT_EQ(cells.size(), 11u) << out;
  EXPECT_EQ(cells[2], "attention");
  EXPECT_EQ(cells[6], "1.00");
  EXPECT_NEAR(std::stod(cells[10]), tflops, tflops * 0.01) << out;
  EXPECT_EQ(words(line_starting(out, "performer  64 ")).back(), "-") << out;  // no FLOP count but softmax's

  ASSERT_EQ(attnlab(base, out), 0) << out;  // the training step: its own reference
  ASSERT_EQ(attnlab("bench --show --db " + db, out), 0) << out;
  int softmax_rows = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const auto row = words(line);
    if (row.size() < 12 || row[1] != "softmax") continue;
    ++softmax_rows;
    EXPECT_EQ(row[11], "1.00") << line;  // when method dataset length batch device threads part status step min-max ratio
  }
  EXPECT_EQ(softmax_rows, 2) << out;
}

// --trace: one more step per measurement under LibTorch's profiler, a Chrome trace per method and
// length (a JSON array of complete events) holding the step's forward, backward and AdamW ops; the
// timed rows are stored as without it.
TEST_F(Bench, TraceWritesOneStepOfEachMeasurementAsAChromeTrace) {
  std::string out;
  ASSERT_EQ(attnlab(tiny() + " --trace " + path("traces"), out), 0) << out;
  EXPECT_EQ(query(path("b.db"), "SELECT count(*) FROM bench_results WHERE status = 'done'"), "2");
  for (const char* length : {"32", "64"}) {
    const std::string file = path("traces") + "/softmax-" + length + "-step-fp32.json";
    std::ifstream in(file);
    ASSERT_TRUE(in) << file;
    const auto trace = nlohmann::json::parse(in);
    ASSERT_TRUE(trace.is_array()) << file;
    std::size_t complete = 0;
    bool backward = false, adamw = false, forward = false;
    for (const auto& event : trace) {
      complete += event.value("ph", "") == "X";
      const std::string name = event.value("name", "");
      backward |= name.find("Backward") != std::string::npos;
      adamw |= name == "aten::_fused_adamw_" || name == "aten::addcdiv_";  // AdamW's update: fused (2.x), per tensor (1.13)
      forward |= name == "aten::layer_norm";
    }
    EXPECT_EQ(complete, trace.size()) << file;
    EXPECT_TRUE(forward && backward && adamw) << file << ": forward " << forward << ", backward " << backward
                                              << ", AdamW " << adamw;
  }
}

// --ops counts one more step's ops as the profiler records them: the same number as the traced
// step's events (softmax's step runs the same ops every time), stored with the host's time a step,
// and printed with both.
TEST_F(Bench, OpsCountsAStepsOpsAsTheProfilerRecordsThem) {
  std::string out;
  ASSERT_EQ(attnlab(tiny() + " --ops --trace " + path("traces"), out), 0) << out;
  for (const char* length : {"32", "64"}) {
    std::ifstream in(path("traces") + "/softmax-" + length + "-step-fp32.json");
    ASSERT_TRUE(in) << length;
    const auto events = nlohmann::json::parse(in).size();
    EXPECT_EQ(query(path("b.db"), std::string("SELECT ops_per_step FROM bench_results WHERE seq_len = ") + length),
              std::to_string(events));
    EXPECT_EQ(query(path("b.db"), std::string("SELECT host_seconds_median > 0 AND host_seconds_median <= "
                                              "step_seconds_median * 1.0001 FROM bench_results WHERE seq_len = ") + length),
              "1");
    const auto cells = words(line_starting(out, "softmax  " + std::string(length) + " "));
    ASSERT_EQ(cells.size(), 12u) << out;  // "376.0 MiB" is two words
    EXPECT_EQ(cells[10], std::to_string(events)) << out;  // host (s), ops, ops vs softmax last
  }
  EXPECT_NE(out.find("host (s)  ops"), std::string::npos) << out;
  ASSERT_EQ(attnlab(tiny(), out), 0) << out;  // without --ops: not counted, not shown
  EXPECT_EQ(query(path("b.db"), "SELECT count(*) FROM bench_results WHERE ops_per_step IS NULL"), "2");
  EXPECT_EQ(out.find("ops vs softmax"), std::string::npos) << out;
}

// The first process of the children of `parent`, or 0.
pid_t child_of(pid_t parent) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');  // "pid (comm) state ppid ..."
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == parent) return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

TEST_F(Bench, AKilledMeasurementProcessIsRecordedAsFailedAndTheBenchGoesOn) {
  // 1024 tokens for 500 steps would take minutes: it is killed as soon as it starts; 16 tokens follow
  std::vector<std::string> args = {ATTNLAB_BINARY, "bench", "--db", path("b.db"), "--cache-dir", path("cache"),
                                   "--methods", "softmax", "--lengths", "1024,16", "--batch-size", "2",
                                   "--steps", "500", "--warmup", "0", "--threads", "1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, path("bench.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t parent = 0;
  ASSERT_EQ(posix_spawn(&parent, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  pid_t child = 0;
  for (int i = 0; i < 600 && !child; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    child = child_of(parent);
  }
  ASSERT_NE(child, 0) << "no measuring process appeared";
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  waitpid(parent, &status, 0);
  std::ifstream in(path("bench.log"));
  std::stringstream log;
  log << in.rdbuf();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log.str();

  const auto db = path("b.db");
  EXPECT_EQ(query(db, "SELECT count(*) FROM bench_results"), "2") << log.str();
  EXPECT_EQ(query(db, "SELECT status || ' ' || seq_len FROM bench_results ORDER BY id LIMIT 1"), "failed 1024");
  EXPECT_EQ(query(db, "SELECT error FROM bench_results ORDER BY id LIMIT 1").rfind("bench process killed by signal 9 (Killed)", 0), 0u);
  EXPECT_EQ(query(db, "SELECT status || ' ' || seq_len FROM bench_results ORDER BY id DESC LIMIT 1"), "done 16");
  EXPECT_NE(log.str().find("softmax at 1024: failed: bench process killed by signal 9"), std::string::npos) << log.str();
}

// The measuring process takes several configurations (a GPU's bench gives it every length of a
// method) and measures and stores each in turn, as the bench itself would one at a time.
TEST_F(Bench, OneMeasuringProcessMeasuresEachConfigurationItIsGivenInTurn) {
  std::string out;
  ASSERT_EQ(attnlab(tiny(), out), 0) << out;
  const auto first = query(path("b.db"), "SELECT config_toml FROM bench_results WHERE seq_len = 32");
  const auto second = query(path("b.db"), "SELECT config_toml FROM bench_results WHERE seq_len = 64");
  ASSERT_FALSE(first.empty());
  const auto db = path("one.db");
  auto quoted = [](const std::string& text) {  // for the shell: '...' with each ' written '\''
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  };
  ASSERT_EQ(attnlab("bench-one --db " + db + " --device cpu --threads 1 --config-toml " + quoted(second) +
                        " --config-toml " + quoted(first), out), 0) << out;
  EXPECT_EQ(query(db, "SELECT group_concat(status || ' ' || seq_len) FROM (SELECT * FROM bench_results ORDER BY id)"),
            "done 64,done 32");
  EXPECT_EQ(query(db, "SELECT count(*) FROM bench_results WHERE steps_timed = 2 AND step_seconds_median > 0"), "2");
  EXPECT_LT(out.find("  64 tokens: done: step"), out.find("  32 tokens: done: step")) << out;
}

// bench --concurrent: each N measures in N processes together, every process's row stored with N;
// the table's "steps/s, all" is their 1 / median summed.
TEST_F(Bench, ConcurrentMeasuresInNProcessesTogetherAndSumsTheirSteps) {
  std::string out;
  ASSERT_EQ(attnlab("bench --db " + path("b.db") + " --cache-dir " + path("cache") +
                        " --methods softmax --lengths 32 --batch-size 2 --steps 3 --warmup 1 --threads 1 --concurrent 1,2",
                    out), 0) << out;
  const auto db = path("b.db");
  EXPECT_EQ(query(db, "SELECT group_concat(concurrent) FROM (SELECT concurrent FROM bench_results ORDER BY id)"), "1,2,2");
  EXPECT_EQ(query(db, "SELECT count(*) FROM bench_results WHERE status = 'done' AND steps_timed = 3"), "3");
  const double summed = std::stod(query(db, "SELECT sum(1.0 / step_seconds_median) FROM bench_results WHERE concurrent = 2"));
  const auto packed = words(line_starting(out, "softmax  32      2 "));
  ASSERT_EQ(packed.size(), 11u) << out;
  EXPECT_NEAR(std::stod(packed[10]), summed, 0.051) << out;
  EXPECT_NE(out.find("softmax at 32 tokens, 2 at once"), std::string::npos) << out;
}

// attnlab estimate on an experiment: a figure missing is named with the bench command that measures
// it (exit 3); that command run as printed, the estimate of a real short run's time is within a
// quarter of what the run then took (wall_seconds: training, validation and test).
TEST_F(Bench, EstimateNamesTheBenchItLacksAndThenComesWithinAQuarterOfTheRun) {
  const std::string experiment = path("short.toml");
  std::ofstream(experiment) << R"([experiment]
name = "short"
seeds = [1]
[datasets.listops]
source = "generate"
max_len = 128
train_size = 2000
val_size = 200
test_size = 200
max_depth = 4
max_args = 5
min_length = 16
max_length = 128
[model]
layers = 2
dim = 64
ffn_dim = 128
heads = 2
[train]
steps = 150
batch_size = 16
eval_every = 75
log_every = 50
[methods.softmax]
)";
  const std::string cache = " --cache-dir " + path("cache");
  std::string out;
  ASSERT_EQ(attnlab("bench --db " + path("bench.db") + cache + " --methods performer --lengths 32 --steps 1 --threads 1", out), 0) << out;
  ASSERT_EQ(attnlab("estimate " + experiment + " --db " + path("bench.db") + cache, out), 3) << out;
  const std::string wanted = "attnlab bench --config " + experiment + " --db " + path("bench.db") +
                             " --methods softmax --dataset listops --lengths 128 --batch-size 16 --precision fp32 --device cpu";
  const auto named = out.find(wanted);
  ASSERT_NE(named, std::string::npos) << out;
  EXPECT_NE(out.find("softmax x listops, seed 1"), std::string::npos) << out;
  EXPECT_NE(out.find("no total, 1 job(s) without a bench figure"), std::string::npos) << out;

  ASSERT_EQ(attnlab(wanted.substr(std::string("attnlab ").size()) + cache + " --threads 1", out), 0) << out;
  ASSERT_EQ(attnlab("estimate " + experiment + " --db " + path("bench.db") + cache, out), 0) << out;
  const auto job = words(line_starting(out, "softmax x listops, seed 1"));
  ASSERT_EQ(job.size(), 13u) << out;  // the label is 5 words, "128 tokens" 2
  EXPECT_EQ(job[10] + " " + job[11], "128 tokens") << out;  // the length measured, not scaled
  // the step figure is the bench row's median, as measured
  const double bench_step = std::stod(query(path("bench.db"),
                                            "SELECT step_seconds_median FROM bench_results WHERE method = 'softmax'"));
  EXPECT_NEAR(std::stod(job[9]), bench_step, 5e-5) << out;
  EXPECT_NE(out.find("1 job(s) on 1 x cpu, 1 at once on each: wall "), std::string::npos) << out;

  // The estimate's model against a real run, both sides read off that run's own clocks (the bench ran
  // at another moment, under whatever else the machine ran then): its training steps' mean time, at
  // 150 steps and 2 validations x 13 batches + 13 test batches forward only, a third of a step each,
  // must come within a quarter of its wall time.
  ASSERT_EQ(attnlab("run " + experiment + " --db " + path("runs.db") + cache + " --threads 1", out), 0) << out;
  const double took = std::stod(query(path("runs.db"), "SELECT wall_seconds FROM run_summary"));
  const double trained = std::stod(query(path("runs.db"), "SELECT value FROM results WHERE name = 'train_seconds'"));
  const double estimated = trained / 150 * (150 + 39.0 / 3);
  EXPECT_NEAR(estimated / took, 1.0, 0.25) << "estimated " << estimated << " s, the run took " << took << " s";
}

// The table from rows made here: ratios only against comparable softmax rows, errors listed.
TEST(BenchTable, RatiosAgainstComparableSoftmaxAndErrorsListed) {
  auto row = [](const std::string& method, std::int64_t len, double seconds, double bytes, std::int64_t batch = 4) {
    attnlab::store::BenchResult r;
    r.method = method;
    r.dataset = "listops";
    r.seq_len = len;
    r.batch_size = batch;
    r.device = "cpu";
    r.threads = 2;
    r.status = "done";
    r.step_seconds_median = r.step_seconds_min = r.step_seconds_max = seconds;
    r.peak_memory_bytes = bytes;
    r.config_toml = "[model]\ndim = 64\n";
    return r;
  };
  std::vector<attnlab::store::BenchResult> rows = {row("softmax", 1024, 0.8, 1e9), row("linear", 1024, 0.2, 2.5e8),
                                                   row("linear", 2048, 0.4, 5e8), row("linear", 1024, 0.3, 3e8, 8)};
  auto failed = row("fancy", 1024, 0, 0);
  failed.status = "oom";
  failed.error = "CUDA out of memory";
  rows.push_back(failed);
  const std::string table = attnlab::bench_table(rows, false);
  const auto linear = words(line_starting(table, "linear   1024"));
  ASSERT_EQ(linear.size(), 9u) << table;
  EXPECT_EQ(linear[5], "0.25");  // time vs softmax
  EXPECT_EQ(linear[8], "0.25");  // memory vs softmax
  EXPECT_EQ(words(line_starting(table, "linear   2048"))[5], "-") << table;  // no softmax at 2048
  // the batch-8 row (the second at 1024) has no softmax with its batch size
  std::vector<std::vector<std::string>> at_1024;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("linear   1024", 0) == 0) at_1024.push_back(words(line));
  ASSERT_EQ(at_1024.size(), 2u) << table;
  EXPECT_EQ(at_1024[1][3], "0.300") << table;
  EXPECT_EQ(at_1024[1][5], "-") << table;
  EXPECT_EQ(at_1024[1][8], "-") << table;
  EXPECT_NE(table.find("  fancy at 1024: oom: CUDA out of memory\n"), std::string::npos) << table;

  EXPECT_DOUBLE_EQ(attnlab::median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(attnlab::median({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(attnlab::median({})));
}

// Packed rows (bench --concurrent N): the N processes' rows one line, the median of their medians,
// their steps a second summed; a group with a failed process shows the failure and no aggregate.
TEST(BenchTable, APackedMeasurementIsOneLineWithItsProcessesStepsPerSecondSummed) {
  auto row = [](double seconds, std::int64_t concurrent, const std::string& status = "done") {
    attnlab::store::BenchResult r;
    r.method = "softmax";
    r.dataset = "listops";
    r.seq_len = 64;
    r.batch_size = 4;
    r.device = "cpu";
    r.status = status;
    r.concurrent = concurrent;
    r.step_seconds_median = r.step_seconds_min = r.step_seconds_max = seconds;
    r.peak_memory_bytes = 1e8 * seconds;
    r.config_toml = "[model]\ndim = 64\n";
    return r;
  };
  const std::vector<attnlab::store::BenchResult> rows = {row(0.01, 1), row(0.01, 2), row(0.04, 2),
                                                         row(0.02, 2), row(0, 2, "oom")};
  const std::string table = attnlab::bench_table(rows, false);
  std::vector<std::vector<std::string>> lines;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("softmax", 0) == 0) lines.push_back(words(line));
  ASSERT_EQ(lines.size(), 3u) << table;
  // method length at-once status step min-max ratio peak(2) ratio steps/s
  ASSERT_EQ(lines[0].size(), 11u) << table;
  EXPECT_EQ(lines[0][2], "1");
  EXPECT_EQ(lines[0][10], "100.0") << table;        // 1 / 0.01
  EXPECT_EQ(lines[1][2], "2");
  EXPECT_EQ(lines[1][4], "0.0250") << table;        // the median of 0.01 and 0.04
  EXPECT_EQ(lines[1][5], "0.0100-0.0400") << table;
  EXPECT_EQ(lines[1][10], "125.0") << table;        // 1 / 0.01 + 1 / 0.04
  EXPECT_EQ(lines[1][6], "1.00") << table;          // against the packed softmax itself, not the lone one
  EXPECT_EQ(lines[2][3], "oom") << table;
  EXPECT_EQ(lines[2].back(), "-") << table;
}

}  // namespace
