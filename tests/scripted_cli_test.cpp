// A method written in PyTorch, end to end through the CLI: `attnlab run` trains it beside softmax
// and records its file like a plugin's; a changed file is refused for a done job; a forward that
// raises in training ends the job with the script's own message; `check` and `bench` take the file.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <filesystem>
#include <fstream>

#include "plugin_host/hashing.hpp"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::query_one;
using testing::scripted_method;

struct ScriptedCli : testing::CliTest {
  // softmax and the scripted method `name` (script `file` in the test's folder) on tiny ListOps
  std::string experiment(const std::string& name, const std::string& file) const {
    const std::string toml = path(name + ".toml");
    std::ofstream(toml) << "[experiment]\nname = \"" << name << "\"\n"
                        << "[model]\nlayers = 1\ndim = 16\nffn_dim = 32\nheads = 2\n"
                        << "[train]\nsteps = 6\nbatch_size = 4\nwarmup = 2\neval_every = 3\nlog_every = 3\n"
                        << "[methods.softmax]\n[methods." << name << "]\nscript = \"" << file << "\"\n"
                        << "[datasets.listops]\nmax_len = 64\ntrain_size = 32\nval_size = 8\ntest_size = 8\n"
                        << "max_depth = 2\nmax_args = 3\nmin_length = 3\nmax_length = 60\n";
    return toml;
  }
  std::string common() const { return "--db " + path("r.db") + " --cache-dir " + path("cache") + " --threads 1"; }
};

TEST_F(ScriptedCli, RunsBesideSoftmaxRecordsItsFileAndRefusesItChanged) {
  fs::copy_file(scripted_method("projection"), path("mine.pt"));
  const std::string toml = experiment("mine", "mine.pt");
  std::string out;
  ASSERT_EQ(attnlab("run " + toml + " " + common(), out), 0) << out;
  const std::string db = path("r.db");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM runs WHERE status = 'done'"), "2") << out;
  const std::string file = fs::canonical(path("mine.pt")).string();
  EXPECT_EQ(query_one(db, "SELECT p.version || ' ' || p.path || ' ' || p.sha256 FROM run_plugins p JOIN runs r "
                          "ON r.id = p.run_id JOIN jobs j ON j.id = r.job_id WHERE j.method = 'mine' AND p.kind = 'attention'"),
            "torchscript " + file + " " + sha256_of_file(file));

  fs::copy_file(scripted_method("softmax_script"), path("mine.pt"), fs::copy_options::overwrite_existing);
  EXPECT_EQ(attnlab("queue add " + toml + " --db " + path("r.db") + " --cache-dir " + path("cache"), out), 2) << out;
  EXPECT_NE(out.find("plugin 'mine'"), std::string::npos) << out;
  EXPECT_NE(out.find("--rerun"), std::string::npos) << out;
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM jobs WHERE state = 'queued'"), "0");
}

TEST_F(ScriptedCli, AForwardThatRaisesInTrainingEndsTheJobWithTheScriptsMessage) {
  fs::copy_file(scripted_method("raises_in_training"), path("quitter.pt"));
  std::string out;
  EXPECT_EQ(attnlab("run " + experiment("quitter", "quitter.pt") + " " + common(), out), 3) << out;
  const std::string error =
      query_one(path("r.db"), "SELECT r.error FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.method = 'quitter'");
  EXPECT_NE(error.find(fs::canonical(path("quitter.pt")).string() +
                       ": forward raised builtins.RuntimeError: scripted method gave up in training"),
            std::string::npos)
      << error;
  // the same exception on two attempts in a row: not tried a third time (3 allowed)
  EXPECT_EQ(query_one(path("r.db"), "SELECT count(*) FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.method = 'quitter'"),
            "2");
  EXPECT_EQ(query_one(path("r.db"), "SELECT state || ': ' || error FROM jobs WHERE method = 'quitter'"),
            "failed: 2 attempts failed; last: " + error);
}

TEST_F(ScriptedCli, CheckAndBenchTakeTheFile) {
  std::string out;
  EXPECT_EQ(attnlab("check " + scripted_method("leaky"), out), 1) << out;
  EXPECT_NE(out.find("FAIL  padding invariance"), std::string::npos) << out;
  EXPECT_NE(out.find("9 checks: 8 passed, 1 failed"), std::string::npos) << out;

  EXPECT_EQ(attnlab("check " + scripted_method("text"), out), 2) << out;
  EXPECT_EQ(out.rfind("attnlab: error: " + scripted_method("text") + ": not a TorchScript file (PytorchStreamReader "
                      "failed reading zip archive: ", 0), 0u) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;

  ASSERT_EQ(attnlab("bench --methods softmax," + scripted_method("projection") +
                        " --lengths 32 --steps 2 --warmup 1 --batch-size 2 " + common(),
                    out),
            0)
      << out;
  EXPECT_EQ(query_one(path("r.db"), "SELECT count(*) FROM bench_results WHERE method = 'projection' AND status = 'done'"),
            "1")
      << out;
}

// Issue 41: a check needs no name (a file named like a bundled plugin is checked, under its file
// name), while a run still refuses the clash and says what to rename; a module sized for its job
// is checked at that shape, given on the command line or taken from an experiment.
TEST_F(ScriptedCli, CheckTakesAFileNamedLikeABundledPluginAndAJobsShape) {
  std::string out;
  EXPECT_EQ(attnlab("check " + scripted_method("skyformer"), out), 0) << out;
  EXPECT_NE(out.find(": skyformer.pt torchscript (attention)"), std::string::npos) << out;
  EXPECT_NE(out.find("9 checks: 9 passed, 0 failed"), std::string::npos) << out;

  fs::copy_file(scripted_method("skyformer"), path("skyformer.pt"));
  std::ofstream(path("clash.toml")) << "[methods.skyformer]\nscript = \"skyformer.pt\"\n[datasets.listops]\n";
  EXPECT_EQ(attnlab("run " + path("clash.toml") + " " + common(), out), 2) << out;
  EXPECT_NE(out.find("the name 'skyformer' is taken by the attention plugin "), std::string::npos) << out;
  EXPECT_NE(out.find("rename its table, e.g. [methods.skyformer_script]"), std::string::npos) << out;

  const std::string bound = scripted_method("shape_bound");
  EXPECT_EQ(attnlab("check " + bound, out), 2) << out;
  EXPECT_NE(out.find(bound + " takes one length only (fixed_length = True): say it, --length N"), std::string::npos) << out;
  EXPECT_EQ(attnlab("check " + bound + " --heads 2 --head-dim 16 --length 128", out), 0) << out;
  EXPECT_NE(out.find("2 heads of 16, exactly 128 tokens"), std::string::npos) << out;
  EXPECT_NE(out.find("9 checks: 9 passed, 0 failed"), std::string::npos) << out;

  // the shape of an experiment's job: dim 32 in 2 heads (16 each), ListOps at 128 tokens
  fs::copy_file(bound, path("bound.pt"));
  std::ofstream(path("bound.toml")) << "[model]\ndim = 32\nheads = 2\n[methods.bound]\nscript = \"bound.pt\"\n"
                                    << "[datasets.listops]\nmax_len = 128\n";
  EXPECT_EQ(attnlab("check --config " + path("bound.toml") + " --method bound", out), 0) << out;
  EXPECT_NE(out.find("9 checks: 9 passed, 0 failed"), std::string::npos) << out;
  EXPECT_EQ(attnlab("check --config " + path("bound.toml") + " --method other", out), 2) << out;
  EXPECT_NE(out.find("has no [methods.other]"), std::string::npos) << out;
}

// bench pre-runs a script at the shape it measures (the model's heads and head size, each length,
// the batch size): a module made for another shape is one line before anything is measured.
TEST_F(ScriptedCli, BenchPreRunsAScriptAtTheModelsShape) {
  const std::string bound = scripted_method("shape_bound");
  const std::string args = " --lengths 128 --steps 1 --warmup 1 --batch-size 2 " + common();
  std::string out;
  EXPECT_EQ(attnlab("bench --methods " + bound + args, out), 2) << out;  // the default model: 2 heads of 32
  EXPECT_EQ(out.rfind("attnlab: error: bench: --methods: " + bound + ": forward raised ", 0), 0u) << out;
  ASSERT_EQ(attnlab("bench --methods " + bound + args + " --model.dim 32 --model.heads 2", out), 0) << out;
  EXPECT_EQ(query_one(path("r.db"), "SELECT count(*) FROM bench_results WHERE method = 'shape_bound' AND status = 'done'"),
            "1")
      << out;
}

// A module whose parameters are drawn in __init__ and that exports no reset_parameters() starts
// every layer and seed alike: `check` and `run` say so, once.
TEST_F(ScriptedCli, AFileWithoutResetParametersIsSaidOnce) {
  const std::string file = scripted_method("projection");
  const std::string line = file + ": its 1 parameter tensors start from the file's values in every layer and seed; "
                                  "export reset_parameters() to draw them from the job's seed";
  std::string out;
  EXPECT_EQ(attnlab("check " + file, out), 0) << out;
  EXPECT_NE(out.find("warning: " + line), std::string::npos) << out;
  fs::copy_file(file, path("mine.pt"));
  ASSERT_EQ(attnlab("queue add " + experiment("mine", "mine.pt") + " --db " + path("r.db") + " --cache-dir " + path("cache"), out),
            0)
      << out;
  const std::string stored = fs::canonical(path("mine.pt")).string();
  const auto first = out.find(stored + ": its 1 parameter tensors");
  EXPECT_NE(first, std::string::npos) << out;
  EXPECT_EQ(out.find(stored + ": its 1 parameter tensors", first + 1), std::string::npos) << "said twice: " << out;
  // and the stored run says it, the other method's run nothing
  ASSERT_EQ(attnlab("worker --idle-exit --db " + path("r.db") + " --cache-dir " + path("cache") + " --threads 1", out), 0)
      << out;
  EXPECT_EQ(query_one(path("r.db"), "SELECT r.warnings FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.method = 'mine'"),
            stored + line.substr(file.size()));
  EXPECT_EQ(query_one(path("r.db"), "SELECT count(*) FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.method = 'softmax' "
                                    "AND r.warnings IS NULL"),
            "1");
  EXPECT_EQ(attnlab("check " + scripted_method("reset_projection") + " --head-dim 8", out), 0) << out;  // its mix is 8x8
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
}

}  // namespace
}  // namespace attnlab
