// attnlab report: one folder with the three tables (Markdown and CSV), the curves of every
// (method, task) group, and the bench and approximation pictures when the database has them.
#include <filesystem>
#include <sstream>

#include "results/report_folder.hpp"
#include "results_support.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab::results::testing {
namespace {

using store::Database;

class Report : public ResultsTest {
 protected:
  // Two methods × two tasks × three seeds with curves; a bench row pair and an approx sweep.
  void fill(Database& db) {
    for (const std::string method : {"softmax", "performer"})
      for (const std::string task : {"listops", "image"})
        for (std::int64_t seed = 1; seed <= 3; ++seed) {
          FakeJob f;
          f.method = method, f.dataset = task, f.seed = seed;
          const double s = static_cast<double>(seed);
          f.results = {{"test_acc", 0.3 + 0.01 * s}, {"steps_per_second", 4.0}, {"peak_memory_bytes", 3e8}};
          f.curve = make_curve("val", "acc", 5, 100, [s](std::int64_t step) { return 0.1 + 1e-3 * step + 0.01 * s; });
          auto loss = make_curve("val", "loss", 5, 100, [](std::int64_t step) { return 2.0 - 1e-3 * step; });
          auto train = make_curve("train", "loss", 9, 50, [](std::int64_t step) { return 2.2 - 1e-3 * step; });
          f.curve.insert(f.curve.end(), loss.begin(), loss.end());
          f.curve.insert(f.curve.end(), train.begin(), train.end());
          add_job(db, f);
        }
    for (std::int64_t n : {1024, 4096}) {
      store::BenchResult b;
      b.method = "softmax", b.dataset = "listops", b.seq_len = n, b.batch_size = 4, b.device = "cpu";
      b.steps_timed = 3, b.step_seconds_median = 1e-4 * static_cast<double>(n), b.peak_memory_bytes = 1e5 * n;
      b.status = "done", b.config_toml = "";
      store::add_bench_result(db, b);
    }
    std::vector<store::ApproxResult> approx;
    for (std::int64_t d : {16, 32, 64}) {
      store::ApproxResult a;
      a.method = "skyformer", a.reference = "kernelized", a.source = "init:listops", a.param = "landmarks";
      a.features = d, a.seq_len = 1024, a.samples = 8, a.rel_error_mean = 1.0 / static_cast<double>(d);
      a.rel_error_std = 0.1 / static_cast<double>(d);
      approx.push_back(a);
    }
    store::add_approx_results(db, approx);
  }
};

TEST(ReportNames, FileSafe) {
  EXPECT_EQ(file_safe("gmm_rks[features=64]"), "gmm_rks_features_64_");
  EXPECT_EQ(file_safe("cuda:0 batch 4"), "cuda_0_batch_4");
  EXPECT_EQ(file_safe("../x"), ".._x");
}

TEST_F(Report, WritesTablesCurvesAndStudyPicturesLinkedFromItsReadme) {
  REQUIRE_GNUPLOT();
  {
    Database db(file("r.db"));
    fill(db);
  }
  const auto o = attnlab({"report", "--db", file("r.db"), "-o", file("out")});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("pictures"), std::string::npos) << o.out;

  const std::string readme = slurp(file("out/README.md"));
  const std::vector<std::string> expected = {
      "accuracy.md", "accuracy.csv", "cost.md", "cost.csv", "variance.md", "variance.csv",
      "curves/listops-val-acc-time.svg", "curves/listops-val-loss-time.svg", "curves/listops-train-loss-step.svg",
      "curves/image-val-acc-time.svg", "curves/listops/softmax-val-acc-time.svg",
      "curves/image/performer-train-loss-step.svg", "bench/cpu_batch_4-time.svg", "bench/cpu_batch_4-memory.svg",
      "bench/bench.csv", "approx/n1024-kernelized_from_init_listops.svg", "approx/approx.csv"};
  for (const auto& f : expected) {
    ASSERT_TRUE(fs::exists(file("out/" + f))) << f;
    EXPECT_GT(fs::file_size(file("out/" + f)), 50u) << f;
    EXPECT_NE(readme.find("(" + f + ")"), std::string::npos) << f;  // linked
    if (f.size() > 4 && f.substr(f.size() - 4) == ".svg") {
      const std::string svg = slurp(file("out/" + f));
      EXPECT_NE(svg.find("</svg>"), std::string::npos) << f;
      EXPECT_GT(svg.size(), 5000u) << f;  // axes, a legend and at least one line
    }
  }
  // The accuracy table in the README is the Markdown file's; the CSV has the exact means.
  EXPECT_NE(readme.find(slurp(file("out/accuracy.md"))), std::string::npos);
  const std::string csv = slurp(file("out/accuracy.csv"));
  EXPECT_NE(csv.find("softmax,listops,test_acc,0.32,"), std::string::npos) << csv;  // (0.31 + 0.32 + 0.33) / 3, shortest round trip
  // Each mean picture's data file holds the three seeds' mean: 0.1 + 0.02 at step 0.
  const std::string dat = slurp(file("out/curves/listops-val-acc-time.dat"));
  EXPECT_NE(dat.find("0.12"), std::string::npos) << dat;
}

// The colour a gnuplot script gives the line titled `title...` ("" when there is none).
std::string colour_of_line(const std::string& script, const std::string& title) {
  std::istringstream lines(script);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("title '" + title) == std::string::npos) continue;
    const auto at = line.find("lc rgb '");
    return at == std::string::npos ? "" : line.substr(at + 8, 7);
  }
  return "";
}

// A method keeps its colour in every picture, whatever the other methods drawn there: softmax is
// the second method enqueued, and the image task and the bench have it alone (drawn first there).
TEST_F(Report, EachMethodHasOneColourInEveryPicture) {
  REQUIRE_GNUPLOT();
  {
    Database db(file("r.db"));
    for (const std::string method : {"performer", "softmax"})
      for (const std::string task : {"listops", "image"}) {
        if (method == "performer" && task == "image") continue;
        for (std::int64_t seed = 1; seed <= 2; ++seed) {
          FakeJob f;
          f.method = method, f.dataset = task, f.seed = seed;
          f.results = {{"test_acc", 0.3}, {"steps_per_second", 4.0}, {"peak_memory_bytes", 3e8}};
          f.curve = make_curve("val", "acc", 3, 100, [](std::int64_t step) { return 0.1 + 1e-3 * step; });
          auto train = make_curve("train", "loss", 3, 100, [](std::int64_t) { return 1.0; });
          auto loss = make_curve("val", "loss", 3, 100, [](std::int64_t) { return 1.0; });
          f.curve.insert(f.curve.end(), train.begin(), train.end());
          f.curve.insert(f.curve.end(), loss.begin(), loss.end());
          add_job(db, f);
        }
      }
    store::BenchResult b;
    b.method = "softmax", b.dataset = "listops", b.seq_len = 256, b.batch_size = 4, b.device = "cpu";
    b.steps_timed = 3, b.step_seconds_median = 0.1, b.peak_memory_bytes = 1e7, b.status = "done";
    store::add_bench_result(db, b);
  }
  const auto o = attnlab({"report", "--db", file("r.db"), "-o", file("out")});
  ASSERT_EQ(o.status, 0) << o.err;
  const std::string both = slurp(file("out/curves/listops-val-acc-time.gp"));
  const std::string alone = slurp(file("out/curves/image-val-acc-time.gp"));
  const std::string bench = slurp(file("out/bench/cpu_batch_4-time.gp"));
  const std::string performer = colour_of_line(both, "performer/"), softmax = colour_of_line(both, "softmax/");
  ASSERT_FALSE(performer.empty()) << both;
  ASSERT_FALSE(softmax.empty()) << both;
  EXPECT_NE(performer, softmax);
  EXPECT_EQ(colour_of_line(alone, "softmax/"), softmax) << alone;
  EXPECT_EQ(colour_of_line(bench, "softmax"), softmax) << bench;
}

// The report says what was run (the experiment file as enqueued), what chance scores (the
// majority-class rate per task) and how each method compares with softmax, by the same code and
// with the same figures as `attnlab compare`.
TEST_F(Report, HasTheSettingsTheMajorityBaselineAndEachMethodComparedWithSoftmax) {
  {
    Database db(file("r.db"));
    for (const std::string method : {"performer", "softmax", "skyformer"})
      for (std::int64_t seed = 1; seed <= 3; ++seed) {
        FakeJob f;
        f.method = method, f.seed = seed;
        f.results = {{"test_acc", (method == "softmax" ? 0.4 : 0.3) + 0.01 * static_cast<double>(seed)},
                     {"majority_rate", 0.185}, {"steps_per_second", 4.0}, {"peak_memory_bytes", 3e8}};
        add_job(db, f);
      }
  }
  const auto o = attnlab({"report", "--db", file("r.db"), "-o", file("out")});
  ASSERT_EQ(o.status, 0) << o.err;
  const std::string readme = slurp(file("out/README.md"));

  EXPECT_NE(readme.find("## Settings"), std::string::npos) << readme;
  EXPECT_EQ(slurp(file("out/settings/1-sweep.toml")), "text of sweep");  // what add_job enqueued
  EXPECT_NE(readme.find("```toml\ntext of sweep\n```"), std::string::npos) << readme;

  EXPECT_NE(readme.find("## Majority-class baseline"), std::string::npos) << readme;
  EXPECT_NE(readme.find("| listops | 0.1850 | 9 |"), std::string::npos) << readme;

  const std::string compare = slurp(file("out/compare.md"));
  EXPECT_NE(readme.find("## Compared with softmax"), std::string::npos) << readme;
  EXPECT_NE(readme.find(compare), std::string::npos);
  // performer, then skyformer: the order they were enqueued; softmax is the baseline, not a row
  const auto performer = compare.find("### performer against softmax"), skyformer = compare.find("### skyformer against softmax");
  ASSERT_NE(performer, std::string::npos) << compare;
  ASSERT_NE(skyformer, std::string::npos) << compare;
  EXPECT_LT(performer, skyformer);
  EXPECT_EQ(compare.find("### softmax against"), std::string::npos) << compare;
  const auto cli = attnlab({"compare", "performer", "softmax", "--db", file("r.db"), "--format", "markdown"});
  ASSERT_EQ(cli.status, 0) << cli.err;
  EXPECT_NE(compare.find(cli.out), std::string::npos) << compare << "\n---\n" << cli.out;
}

TEST_F(Report, AnEmptyDatabaseGivesTablesThatSaySoAndNoPictures) {
  { Database db(file("empty.db")); }
  const auto o = attnlab({"report", "--db", file("empty.db"), "-o", file("out")});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(slurp(file("out/accuracy.md")).find("no jobs match"), std::string::npos);
  EXPECT_FALSE(fs::exists(file("out/curves")));
  EXPECT_FALSE(fs::exists(file("out/bench")));
  const auto missing = attnlab({"report", "--db", file("empty.db")});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("report: name the folder to write with -o DIR"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace attnlab::results::testing
