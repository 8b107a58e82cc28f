#pragma once
// What the results suites share: a scratch database filled the way the runner fills one (jobs
// enqueued, attempts claimed, curves appended, runs finished), with numbers the tests choose, and
// the attnlab binary run end to end on it.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "attnlab/store/run_writer.hpp"
#include "test_paths.hpp"

namespace attnlab::results::testing {

namespace fs = std::filesystem;

// One job of a synthetic sweep and how it ends.
struct FakeJob {
  std::string method = "softmax";
  std::string dataset = "listops";
  std::int64_t seed = 1;
  std::string experiment = "sweep";
  std::string experiment_text;  // its file's text (default: "text of NAME")
  // done | diverged | oom | failed (three failed attempts) | queued (never claimed) | running
  std::string outcome = "done";
  std::vector<std::pair<std::string, double>> results;            // the counting run's results
  std::vector<std::pair<std::string, std::string>> params;        // config keys beyond method/dataset/seed
  std::vector<store::CurvePoint> curve;                           // appended before it finishes
  std::string config_hash;  // "" = one of its own; another job's to be that job again (a reuse)
};

// Adds the job (its experiment by name), plays its attempts, returns {job id, counting run id}
// (run id 0 when it never ended).
inline std::pair<std::int64_t, std::int64_t> add_job(store::Database& db, const FakeJob& f) {
  const std::string text = f.experiment_text.empty() ? "text of " + f.experiment : f.experiment_text;
  auto experiment = db.find_experiment(f.experiment, text);
  const std::int64_t experiment_id = experiment ? *experiment : db.add_experiment(f.experiment, "", text);
  store::JobSpec spec;
  spec.experiment_id = experiment_id;
  spec.method = f.method;
  spec.dataset = f.dataset;
  spec.seed = f.seed;
  spec.config_toml = "# synthetic\n";
  spec.params = {{"method", f.method}, {"dataset", f.dataset}, {"seed", std::to_string(f.seed)}};
  for (const auto& p : f.params) spec.params.push_back(p);
  spec.config_hash = f.experiment + "/" + f.method + "/" + f.dataset + "/" + std::to_string(f.seed);
  for (const auto& [k, v] : f.params) spec.config_hash += "/" + k + "=" + v;
  if (!f.config_hash.empty()) spec.config_hash = f.config_hash;
  const auto added = db.add_job(spec);
  const std::int64_t job = added.job_id;
  if (added.existed) return {job, db.counting_run(job).value_or(0)};  // reused as it stands
  if (f.outcome == "queued") return {job, 0};

  const store::Claimer claimer{"test:1:cpu", "test", "cpu", 1};
  std::int64_t run = 0;
  do {
    const auto lease = store::Queue(db).claim_next_job(claimer, 600, {job});
    EXPECT_TRUE(lease.has_value());
    if (!lease) return {job, 0};
    run = lease->run_id;
    if (!f.curve.empty()) store::RunWriter(db, run).append_curve(f.curve);
    if (f.outcome == "running") return {job, 0};
    const store::RunStatus status = store::parse_run_status(f.outcome);
    const bool failed = status == store::RunStatus::failed;
    store::RunWriter(db, run).finish(status, failed ? std::vector<std::pair<std::string, double>>{} : f.results,
                  failed ? "synthetic failure" : "", "");
  } while (db.job(job).state == store::JobState::queued);  // a failed attempt is retried until the cap
  return {job, run};
}

// A curve: `name` on `split` at steps 0, every, 2 every, ... with values f(step) and wall time
// seconds_per_step * step.
template <class F>
std::vector<store::CurvePoint> make_curve(const std::string& split, const std::string& name, int points, int every,
                                          F value, double seconds_per_step = 0.5) {
  std::vector<store::CurvePoint> c;
  for (int i = 0; i < points; ++i) {
    const std::int64_t step = static_cast<std::int64_t>(i) * every;
    c.push_back({step, split, name, value(step), seconds_per_step * static_cast<double>(step)});
  }
  return c;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Output {
  int status = -1;  // exit status
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the attnlab binary with `args` (each passed as one word, single-quoted for the shell).
inline Output run_attnlab(const std::vector<std::string>& args, const fs::path& scratch) {
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::string command = quote(ATTNLAB_BINARY);
  for (const auto& a : args) command += " " + quote(a);
  const auto out_path = scratch / "stdout.txt", err_path = scratch / "stderr.txt";
  command += " >" + quote(out_path.string()) + " 2>" + quote(err_path.string());
  const int rc = std::system(command.c_str());
  Output o;
  o.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  o.out = slurp(out_path.string());
  o.err = slurp(err_path.string());
  return o;
}

inline bool gnuplot_on_path() {
  const char* path = std::getenv("PATH");
  std::stringstream folders(path ? path : "");
  for (std::string folder; std::getline(folders, folder, ':');)
    if (!folder.empty() && access((folder + "/gnuplot").c_str(), X_OK) == 0) return true;
  return false;
}

// Picture tests skip, saying why, where gnuplot is missing (scripts/install-deps.sh installs it).
#define REQUIRE_GNUPLOT() \
  if (!::attnlab::results::testing::gnuplot_on_path()) \
  GTEST_SKIP() << "gnuplot is not on PATH (apt-get install gnuplot-nox): picture not tested"

class ResultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "attnlab-results-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  Output attnlab(const std::vector<std::string>& args) const { return run_attnlab(args, dir_); }

  fs::path dir_;
};

}  // namespace attnlab::results::testing
