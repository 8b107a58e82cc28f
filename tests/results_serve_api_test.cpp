// attnlab serve's endpoints beyond the queue and /api/results (runner/serve/api.hpp): the tables,
// the comparison and the curves hold exactly what `attnlab table|compare|curves --format json`
// print for the same options; a run's page has its configuration, environment, plugins, attempts
// and every curve; bench and approx rows come back whole; every endpoint refuses an unknown
// parameter, and a bad id or status is a 400 (an unknown run a 404) with the reason.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "results_support.hpp"
#include "attnlab/store/run_writer.hpp"
#include "serve/api.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab::results::testing {
namespace {

using json = nlohmann::ordered_json;

class ServeApi : public ResultsTest {
 protected:
  // softmax and skyformer on listops and image, three seeds each, with validation accuracy and
  // training loss curves; one run with its environment and plugins recorded; bench and approx rows.
  void SetUp() override {
    ResultsTest::SetUp();
    store::Database db(file("s.db"));
    for (const std::string method : {"softmax", "skyformer"})
      for (const std::string dataset : {"listops", "image"})
        for (std::int64_t seed = 1; seed <= 3; ++seed) {
          FakeJob f;
          f.method = method, f.dataset = dataset, f.seed = seed;
          const double skill = (method == "softmax" ? 0.40 : 0.38) + 0.01 * static_cast<double>(seed);
          f.results = {{"test_acc", skill}, {"steps_per_second", 10.0 + static_cast<double>(seed)},
                       {"peak_memory_bytes", 1e8 * static_cast<double>(seed)}, {"rsd", 0.1 * static_cast<double>(seed)},
                       {"pi", 0.9}, {"agv", 0.01}, {"va", 0.5}, {"variance_passes", 20}};
          f.curve = make_curve("val", "acc", 5, 100, [&](std::int64_t s) { return skill * static_cast<double>(s) / 400.0; });
          for (const auto& p : make_curve("train", "loss", 5, 100, [&](std::int64_t s) { return 2.0 - static_cast<double>(s) / 400.0 - 0.01 * static_cast<double>(seed); }))
            f.curve.push_back(p);
          add_job(db, f);
        }
    store::BenchResult bench;
    bench.method = "softmax", bench.dataset = "listops", bench.seq_len = 1024, bench.batch_size = 8;
    bench.device = "cpu", bench.steps_timed = 5, bench.step_seconds_median = 0.25, bench.peak_memory_bytes = 3.0 * (1 << 30);
    bench.status = "done", bench.config_toml = "[train]\nprecision = \"bf16\"\n";
    store::add_bench_result(db, bench);
    store::ApproxResult approx;
    approx.method = "nystromformer", approx.reference = "softmax", approx.source = "init:listops", approx.param = "landmarks";
    approx.features = 64, approx.seq_len = 1024, approx.samples = 8, approx.rel_error_mean = 0.125, approx.rel_error_std = 0.01;
    store::add_approx_results(db, {approx});
  }

  json get(serve::Reply (*endpoint)(store::ResultsReader&, const serve::Params&), const serve::Params& params,
           int status = 200) {
    store::ResultsReader db(file("s.db"));
    const auto reply = endpoint(db, params);
    EXPECT_EQ(reply.status, status) << reply.body;
    return json::parse(reply.body);
  }

  json printed(std::vector<std::string> args) {
    args.insert(args.end(), {"--db", file("s.db"), "--format", "json"});
    const auto out = attnlab(args);
    EXPECT_EQ(out.status, 0) << out.err;
    return json::parse(out.out);
  }
};

TEST_F(ServeApi, TablesAndTheComparisonAreWhatTheCommandsPrint) {
  for (const std::string which : {"accuracy", "cost", "variance"}) {
    const auto table = get(serve::table_json, {{"table", which}, {"where", "dataset = listops OR dataset = image"}});
    EXPECT_EQ(table["rows"], printed({"table", which, "--where", "dataset = listops OR dataset = image"})) << which;
    ASSERT_FALSE(table["text"].empty()) << which;
    EXPECT_EQ(table["text"][0].size(), table["header"].size()) << which;  // the wide layout, as the terminal shows it
  }
  const auto accuracy = get(serve::table_json, {});
  EXPECT_EQ(accuracy["header"][0], "method");
  EXPECT_NE(accuracy["text"][0][1].get<std::string>().find(" ± "), std::string::npos) << accuracy["text"];

  const auto comparison = get(serve::compare_json, {{"a", "softmax"}, {"b", "skyformer"}});
  EXPECT_EQ(comparison["rows"], printed({"compare", "softmax", "skyformer"}));
  ASSERT_EQ(comparison["rows"].size(), 2u);  // image and listops
  EXPECT_FALSE(comparison["notes"].empty());
  const auto bootstrap = get(serve::compare_json, {{"a", "softmax"}, {"b", "skyformer"}, {"ci", "bootstrap"}, {"level", "0.9"}});
  EXPECT_EQ(bootstrap["rows"], printed({"compare", "softmax", "skyformer", "--ci", "bootstrap", "--level", "0.9"}));
  EXPECT_NE(get(serve::compare_json, {{"a", "softmax"}}, 400)["error"].get<std::string>().find("name the two groups"),
            std::string::npos);
  get(serve::compare_json, {{"a", "softmax"}, {"b", "skyformer"}, {"level", "high"}}, 400);
  get(serve::table_json, {{"table", "speed"}}, 400);
}

// Performer with its features swept beside softmax's one configuration: /api/compare takes each
// task's best-validation configuration, as the command does, and its notes say which in one line.
TEST_F(ServeApi, TheComparisonTakesTheBestValidationConfigurationOfASweep) {
  {
    store::Database db(file("s.db"));
    for (const std::string dataset : {"listops", "image"})
      for (const std::string features : {"64", "128", "256"})
        for (std::int64_t seed = 1; seed <= 2; ++seed) {
          FakeJob f;
          f.method = "performer", f.dataset = dataset, f.seed = seed;
          f.params = {{"methods.performer.features", features}};
          const double skill = 0.3 + (features == "128" ? 0.05 : 0.0) + 0.01 * static_cast<double>(seed);
          f.results = {{"test_acc", skill}, {"best_val_acc", skill + 0.01}};
          add_job(db, f);
        }
  }
  const auto comparison = get(serve::compare_json, {{"a", "softmax"}, {"b", "performer"}, {"by", "dataset"}});
  EXPECT_EQ(comparison["rows"], printed({"compare", "softmax", "performer", "--by", "dataset"}));
  ASSERT_EQ(comparison["rows"].size(), 2u) << comparison;
  for (const auto& row : comparison["rows"]) EXPECT_EQ(row["B config"], "features=128") << row;
  std::vector<std::string> picks;
  for (const auto& note : comparison["notes"]) {
    const std::string line = note.get<std::string>();
    EXPECT_LT(line.size(), 200u) << line;
    if (line.find(" takes ") != std::string::npos) picks.push_back(line);
  }
  EXPECT_EQ(picks, (std::vector<std::string>{
                       "listops: B takes performer features=128 of 3 configurations: best mean best_val_acc 0.3750 (2 seeds)",
                       "image: B takes performer features=128 of 3 configurations: best mean best_val_acc 0.3750 (2 seeds)"}))
      << comparison["notes"];

  const auto all = get(serve::compare_json, {{"a", "softmax"}, {"b", "performer"}, {"pick", "all"}});
  EXPECT_EQ(all["rows"], printed({"compare", "softmax", "performer", "--pick", "all"}));
  EXPECT_EQ(all["rows"].size(), 6u);
  EXPECT_NE(get(serve::compare_json, {{"a", "softmax"}, {"b", "performer"}, {"pick", "best"}}, 400)["error"]
                .get<std::string>()
                .find("unknown pick rule 'best'"),
            std::string::npos);
}

TEST_F(ServeApi, CurvesAreWhatTheCurvesCommandPrintsRunByRunAndAsMeans) {
  const serve::Params where = {{"where", "method = softmax AND dataset = listops"}, {"split", "val"}, {"metric", "acc"}};
  const auto curves = get(serve::curves_json, where);
  const auto rows = printed({"curves", "--where", "method = softmax AND dataset = listops", "--split", "val", "--metric", "acc"});
  std::size_t row = 0;
  ASSERT_EQ(curves["runs"].size(), 3u);
  for (const auto& run : curves["runs"])
    for (const auto& point : run["points"]) {
      ASSERT_LT(row, rows.size());
      EXPECT_EQ(rows[row]["run"], run["run"]);
      EXPECT_EQ(rows[row]["step"], point[0]);
      EXPECT_EQ(rows[row]["wall_seconds"], point[1]);
      EXPECT_EQ(rows[row]["value"], point[2]);
      ++row;
    }
  EXPECT_EQ(row, rows.size());
  EXPECT_EQ(curves["label"], "validation accuracy");

  auto mean_params = where;
  mean_params.emplace("mean", "1");
  const auto means = get(serve::curves_json, mean_params);
  const auto mean_rows =
      printed({"curves", "--where", "method = softmax AND dataset = listops", "--split", "val", "--metric", "acc", "--mean"});
  ASSERT_EQ(means["means"].size(), 1u);
  const auto& points = means["means"][0]["points"];
  ASSERT_EQ(points.size(), mean_rows.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(points[i][0], mean_rows[i]["step"]);
    EXPECT_EQ(points[i][2], mean_rows[i]["mean"]);
    EXPECT_EQ(points[i][6], mean_rows[i]["runs"]);
    EXPECT_EQ(points[i][3], mean_rows[i]["std"]);
  }
  EXPECT_EQ(means["means"][0]["seeds"], json::parse("[1, 2, 3]"));

  const auto two = get(serve::curves_json, {{"run", "1,2"}, {"metric", "loss"}, {"split", "train"}});
  EXPECT_EQ(two["runs"].size(), 2u);
  get(serve::curves_json, {{"run", "x"}}, 400);
  get(serve::curves_json, {{"run", "999"}}, 400);
  get(serve::curves_json, {}, 400);                                       // no runs named
  get(serve::curves_json, {{"where", "method = softmax"}, {"metric", "nope"}}, 400);  // no such curve
}

// Jobs selected that have no run with points (failed before the first, or never ended): an answer
// that says so (`jobs_without_run`, `left_out`), never a 400 (the page draws no empty chart).
TEST_F(ServeApi, CurvesOfJobsWithoutPointsAreLeftOutNotRefused) {
  {
    store::Database db(file("s.db"));
    FakeJob failed;
    failed.method = "boom", failed.outcome = "failed";
    add_job(db, failed);
    FakeJob diverged;
    diverged.method = "boom", diverged.seed = 2, diverged.outcome = "diverged";
    add_job(db, diverged);
  }
  const auto answer = get(serve::curves_json, {{"where", "method = boom"}, {"metric", "acc"}});
  EXPECT_EQ(answer["runs"].size(), 0u) << answer;
  EXPECT_EQ(answer["jobs_without_run"].get<std::size_t>() + answer["left_out"].size(), 2u) << answer;
}

TEST_F(ServeApi, ARunHasItsConfigurationEnvironmentPluginsAttemptsAndEveryCurve) {
  std::int64_t run = 0;
  {
    store::Database db(file("s.db"));
    FakeJob f;
    f.method = "<b>kernelized</b>", f.outcome = "running", f.params = {{"train.steps", "400"}};
    add_job(db, f);
    run = db.attempts_of_job(db.list_jobs({}).back().job.id).back().run_id;
    store::RunEnvironment env;
    env.host = "node7", env.device = "cuda:0", env.device_name = "NVIDIA H100", env.torch_version = "2.5.1";
    env.attnlab_version = "0.9", env.git_revision = "abc1234", env.threads = 4;
    env.plugins = {{"attention", "kernelized", "1.0", "/p/libkernelized.so", "deadbeef"}};
    store::RunWriter(db, run).set_environment(env);
    store::RunWriter(db, run).append_curve(make_curve("val", "acc", 3, 50, [](std::int64_t s) { return 0.001 * static_cast<double>(s); }));
    store::RunWriter(db, run).finish(store::RunStatus::done, {{"test_acc", 0.5}, {"agv", 0.02}}, "", "");
  }
  const auto page = get(serve::run_json, {{"id", std::to_string(run)}});
  EXPECT_EQ(page["run"], run);
  EXPECT_EQ(page["method"], "<b>kernelized</b>");  // markup is a string like any other
  EXPECT_EQ(page["status"], "done");
  EXPECT_EQ(page["results"], json::parse(R"({"agv": 0.02, "test_acc": 0.5})"));
  EXPECT_EQ(page["environment"]["device_name"], "NVIDIA H100");
  EXPECT_EQ(page["environment"]["git_revision"], "abc1234");
  EXPECT_EQ(page["environment"]["threads"], 4);
  ASSERT_EQ(page["plugins"].size(), 1u);
  EXPECT_EQ(page["plugins"][0]["sha256"], "deadbeef");
  ASSERT_EQ(page["attempts"].size(), 1u);
  EXPECT_EQ(page["config"], "# synthetic\n");
  ASSERT_EQ(page["curves"].size(), 1u);
  EXPECT_EQ(page["curves"][0]["label"], "validation accuracy");
  EXPECT_EQ(page["curves"][0]["points"], json::parse("[[0, 0.0, 0.0], [50, 25.0, 0.05], [100, 50.0, 0.1]]"));

  EXPECT_NE(get(serve::run_json, {{"id", "999"}}, 404)["error"].get<std::string>().find("no run with id 999"), std::string::npos);
  get(serve::run_json, {{"id", "one"}}, 400);
  get(serve::run_json, {}, 400);
  get(serve::run_json, {{"id", "1"}, {"id", "2"}}, 400);
}

TEST_F(ServeApi, RunsAreFilteredByTheWhereLanguageAndByStatus) {
  const auto all = get(serve::runs_json, {});
  EXPECT_EQ(all.size(), 12u);
  const auto image = get(serve::runs_json, {{"where", "dataset = image AND seed >= 2"}});
  ASSERT_EQ(image.size(), 4u);
  for (const auto& run : image) {
    EXPECT_EQ(run["dataset"], "image");
    EXPECT_GE(run["seed"], 2);
    EXPECT_TRUE(run["results"].contains("test_acc"));
  }
  EXPECT_EQ(get(serve::runs_json, {{"status", "failed"}}).size(), 0u);
  EXPECT_EQ(get(serve::runs_json, {{"status", "done,failed"}}).size(), 12u);
  EXPECT_NE(get(serve::runs_json, {{"status", "finished"}}, 400)["error"].get<std::string>().find("unknown run status"),
            std::string::npos);
  get(serve::runs_json, {{"where", "seed >"}}, 400);
  get(serve::runs_json, {{"where", "no_such_key = 1"}}, 400);
}

TEST_F(ServeApi, BenchAndApproxRowsComeBackWhole) {
  const auto bench = get(serve::bench_json, {});
  ASSERT_EQ(bench.size(), 1u);
  EXPECT_EQ(bench[0]["method"], "softmax");
  EXPECT_EQ(bench[0]["seq_len"], 1024);
  EXPECT_EQ(bench[0]["precision"], "bf16");  // read from the row's configuration
  EXPECT_EQ(bench[0]["part"], "step");
  EXPECT_EQ(bench[0]["step_seconds_median"], 0.25);
  EXPECT_EQ(bench[0]["peak_memory_bytes"], 3.0 * (1 << 30));
  EXPECT_EQ(get(serve::bench_json, {{"method", "performer"}}).size(), 0u);
  const auto approx = get(serve::approx_json, {{"method", "nystromformer,performer"}});
  ASSERT_EQ(approx.size(), 1u);
  EXPECT_EQ(approx[0]["features"], 64);
  EXPECT_EQ(approx[0]["rel_error_mean"], 0.125);
  EXPECT_EQ(approx[0]["param"], "landmarks");
}

// A second experiment, a learning-rate sweep: listed with its description and jobs, its results
// alone on asking (or as the latest), its runs given the swept key as a column, and its curves
// labelled by what differs among them (lr and seed), never by what they share.
TEST_F(ServeApi, ExperimentsAndLabelsSayWhatDiffers) {
  {
    store::Database db(file("s.db"));
    for (const std::string lr : {"0.001", "0.0001"})
      for (std::int64_t seed = 1; seed <= 2; ++seed) {
        FakeJob f;
        f.experiment = "lr", f.experiment_text = "[experiment]\ndescription = \"Performer's learning rate\"\n";
        f.method = "performer", f.seed = seed, f.params = {{"train.lr", lr}, {"model.dim", "64"}};
        f.results = {{"test_acc", 0.3}};
        f.curve = make_curve("val", "loss", 3, 100, [&](std::int64_t s) { return 1.0 / static_cast<double>(s + seed); });
        add_job(db, f);
      }
  }
  const json experiments = get(serve::experiments_json, {});
  ASSERT_EQ(experiments.size(), 2u) << experiments;
  EXPECT_EQ(experiments[0]["name"], "sweep");
  EXPECT_EQ(experiments[0]["jobs"], 12);
  EXPECT_EQ(experiments[1]["name"], "lr");
  EXPECT_EQ(experiments[1]["description"], "Performer's learning rate");
  EXPECT_EQ(experiments[1]["states"], json({{"done", 4}}));

  for (const char* which : {"lr", "latest"}) {
    const json rows = get(serve::results_json, {{"experiment", which}});
    ASSERT_EQ(rows.size(), 2u) << which << ": " << rows;  // performer at each lr
    EXPECT_EQ(rows[0]["method"], "performer");
  }
  EXPECT_EQ(get(serve::results_json, {{"experiment", "*"}}).size(), 6u);

  const json runs = get(serve::runs_json, {{"where", "experiment = lr"}});
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0]["params"], json({{"train.lr", "0.001"}}));  // model.dim is the same for all: no column
  EXPECT_EQ(get(serve::runs_json, {{"where", "experiment = lr"}, {"columns", "model.dim"}})[0]["params"],
            json({{"model.dim", "64"}}));

  const json curves = get(serve::curves_json, {{"where", "experiment = lr"}});
  std::vector<std::string> labels;
  for (const auto& run : curves["runs"]) labels.push_back(run["short_label"]);
  // what every line has is said once, above the chart; a label says the rest
  EXPECT_EQ(curves["shared"], "performer listops");
  EXPECT_EQ(labels, (std::vector<std::string>{"lr=0.001 seed 1", "lr=0.001 seed 2", "lr=0.0001 seed 1", "lr=0.0001 seed 2"}));
  const json means = get(serve::curves_json, {{"where", "experiment = lr"}, {"mean", "1"}})["means"];
  ASSERT_EQ(means.size(), 2u);
  EXPECT_EQ(means[0]["short_label"], "lr=0.001 (2 runs, mean ± std)");
  // one run: everything is shared but its seed
  const json one = get(serve::curves_json, {{"run", "1"}, {"metric", "acc"}});
  EXPECT_EQ(one["shared"], "softmax listops");
  EXPECT_EQ(one["runs"][0]["short_label"], "seed 1");
}

// A second experiment whose file names jobs the first already ran reuses them (one job, one hash)
// and owns them: its picker count, its results and its runs include them.
TEST_F(ServeApi, AJobReusedByASecondExperimentBelongsToBoth) {
  std::vector<std::string> hashes;
  {
    store::Database db(file("s.db"));
    for (std::int64_t seed = 1; seed <= 2; ++seed) {
      FakeJob softmax;
      softmax.experiment = "lo-methods", softmax.method = "softmax", softmax.dataset = "sparse_sum", softmax.seed = seed;
      softmax.config_hash = "softmax-sparse_sum-" + std::to_string(seed);
      softmax.results = {{"test_acc", 0.4 + 0.1 * static_cast<double>(seed)}};
      add_job(db, softmax);
      FakeJob again = softmax;
      again.experiment = "boom-fail";
      add_job(db, again);
      FakeJob boom = again;
      boom.method = "boom", boom.config_hash = "", boom.outcome = "failed";
      add_job(db, boom);
    }
  }
  const json experiments = get(serve::experiments_json, {});
  ASSERT_EQ(experiments.size(), 3u) << experiments;
  EXPECT_EQ(experiments[1]["name"], "lo-methods");
  EXPECT_EQ(experiments[1]["states"], json({{"done", 2}}));
  EXPECT_EQ(experiments[2]["name"], "boom-fail");
  EXPECT_EQ(experiments[2]["jobs"], 4);
  EXPECT_EQ(experiments[2]["states"], json({{"done", 2}, {"failed", 2}}));

  const json rows = get(serve::results_json, {{"experiment", "boom-fail"}});
  ASSERT_EQ(rows.size(), 2u) << rows;
  EXPECT_EQ(rows[0]["method"], "softmax");
  EXPECT_EQ(rows[0]["jobs"], 2);
  EXPECT_EQ(rows[1]["method"], "boom");
  EXPECT_EQ(get(serve::results_json, {{"experiment", "lo-methods"}}).size(), 1u);
  EXPECT_EQ(get(serve::runs_json, {{"where", "experiment = boom-fail"}}).size(), 2u + 2u * 3u);  // three failed attempts each
  for (const auto& run : get(serve::runs_json, {{"where", "experiment = boom-fail AND method = softmax"}}))
    EXPECT_EQ(run["experiment"], "lo-methods, boom-fail") << run;  // both own it, in the order they asked
  // "not owned by": the softmax jobs belong to boom-fail too
  EXPECT_EQ(get(serve::runs_json, {{"where", "experiment != boom-fail"}}).size(), 12u);  // the fixture's own sweep
}

// A method's own setting differs when the methods shown differ in it (Skyformer's 32 landmarks,
// Nyströmformer's 64): one column, each run its own method's value, nothing for softmax.
TEST_F(ServeApi, MethodsDifferingInTheirOwnSettingShowIt) {
  {
    store::Database db(file("s.db"));
    for (const auto& [method, landmarks] : std::vector<std::pair<std::string, std::string>>{
             {"skyformer", "32"}, {"nystromformer", "64"}, {"softmax", ""}}) {
      FakeJob f;
      f.experiment = "landmarks", f.method = method, f.results = {{"test_acc", 0.3}};
      if (!landmarks.empty()) f.params = {{"methods." + method + ".landmarks", landmarks}, {"methods." + method + ".dropout", "0.1"}};
      add_job(db, f);
    }
  }
  const json runs = get(serve::runs_json, {{"where", "experiment = landmarks"}});
  ASSERT_EQ(runs.size(), 3u) << runs;
  EXPECT_EQ(runs[0]["params"], json({{"methods.*.landmarks", "32"}})) << runs;  // dropout is 0.1 for both: no column
  EXPECT_EQ(runs[1]["params"], json({{"methods.*.landmarks", "64"}}));
  EXPECT_EQ(runs[2]["params"], json({{"methods.*.landmarks", ""}}));
  EXPECT_EQ(get(serve::runs_json, {{"where", "experiment = landmarks"}, {"columns", "methods.*.dropout"}})[1]["params"],
            json({{"methods.*.dropout", "0.1"}}));
}

// A page polling curves names the runs it holds: an ended run held whole comes back unchanged, with
// no points; a run held up to a step, with the points after it; a new run whole. A mean ignores it.
TEST_F(ServeApi, CurvesAnswerOnlyWhatAPageDoesNotHold) {
  const json whole = get(serve::curves_json, {{"run", "1,2,3"}, {"metric", "acc"}});
  ASSERT_EQ(whole["runs"].size(), 3u);
  ASSERT_EQ(whole["runs"][1]["points"].size(), 5u);  // steps 0, 100, ..., 400
  const json part = get(serve::curves_json, {{"run", "1,2,3"}, {"metric", "acc"}, {"held", "1,2:200"}});
  ASSERT_EQ(part["runs"].size(), 3u);
  EXPECT_EQ(part["runs"][0]["unchanged"], true);
  EXPECT_EQ(part["runs"][0]["points"], json::array());
  EXPECT_EQ(part["runs"][1]["after_step"], 200);
  EXPECT_EQ(part["runs"][1]["points"], json(std::vector<json>(whole["runs"][1]["points"].begin() + 3, whole["runs"][1]["points"].end())));
  EXPECT_FALSE(part["runs"][2].contains("after_step"));
  EXPECT_EQ(part["runs"][2]["points"], whole["runs"][2]["points"]);
  EXPECT_EQ(part["runs"][0]["short_label"], whole["runs"][0]["short_label"]);  // labels always whole
  EXPECT_EQ(get(serve::curves_json, {{"run", "1,2,3"}, {"metric", "acc"}, {"held", "1-3"}})["runs"][2]["unchanged"], true);
  const json means = get(serve::curves_json, {{"run", "1,2,3"}, {"metric", "acc"}, {"held", "1-3"}, {"mean", "1"}});
  EXPECT_EQ(means["runs"][0]["points"], whole["runs"][0]["points"]);
  for (const char* bad : {"x", "3-1", "1-999999999", "1:x", "-1"})
    EXPECT_EQ(get(serve::curves_json, {{"run", "1"}, {"metric", "acc"}, {"held", bad}}, 400)["error"].get<std::string>().rfind(
                  "parameter 'held': '", 0), 0u) << bad;
}

// The runs a polling page holds (ended ones) come back as their ids and config columns only.
TEST_F(ServeApi, RunsAnswerOnlyWhatAPageDoesNotHold) {
  const json whole = get(serve::runs_json, {});
  ASSERT_EQ(whole.size(), 12u);
  const json part = get(serve::runs_json, {{"held", "1-10"}});
  ASSERT_EQ(part.size(), 12u);
  EXPECT_EQ(part[0], json({{"run", 1}, {"unchanged", true}, {"params", json::object()}}));
  EXPECT_EQ(part[10], whole[10]);  // not held: whole
  EXPECT_EQ(get(serve::runs_json, {{"held", "x"}}, 400)["error"].get<std::string>().rfind("parameter 'held': 'x'", 0), 0u);
}

TEST_F(ServeApi, EveryEndpointRefusesAnUnknownParameter) {
  ASSERT_EQ(serve::endpoints().size(), 10u);
  for (const auto& endpoint : serve::endpoints()) {
    const auto refused = get(endpoint.answer, {{"sql", "DROP TABLE jobs"}}, 400);
    EXPECT_EQ(refused["error"].get<std::string>().rfind("unknown parameter 'sql' (known: ", 0), 0u) << endpoint.path;
  }
}

}  // namespace
}  // namespace attnlab::results::testing
