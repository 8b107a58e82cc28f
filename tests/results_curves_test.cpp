// attnlab curves and the gnuplot driver: the CSV against the points put in the database (per run,
// and the mean over seeds worked out by hand), pictures (PNG, SVG) with data files holding the
// curve's exact numbers, x = wall-clock time, and the one-line errors.
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "results/curves.hpp"
#include "results/plot.hpp"
#include "results_support.hpp"

namespace attnlab::results::testing {
namespace {

// Rows of a CSV without quoted fields (these have none), CRLF or LF line ends.
std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::vector<std::string> fields;
    std::stringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(cell);
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    rows.push_back(fields);
  }
  return rows;
}

double number(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  EXPECT_TRUE(!text.empty() && *end == '\0') << "not a number: '" << text << "'";
  return v;
}

// A gnuplot data file: comment lines skipped, blocks (series) separated by blank lines.
std::vector<std::vector<std::vector<double>>> dat_blocks(const std::string& text) {
  std::vector<std::vector<std::vector<double>>> blocks;
  bool in_block = false;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] == '#') continue;
    if (line.empty()) {
      in_block = false;
      continue;
    }
    if (!in_block) blocks.emplace_back();
    in_block = true;
    std::vector<double> row;
    std::stringstream fields(line);
    for (std::string f; fields >> f;) row.push_back(number(f));
    blocks.back().push_back(row);
  }
  return blocks;
}

// Three seeds of softmax/listops and one of skyformer/listops, validation accuracy at steps 0, 10,
// 20, 30 (seed 3 also at 40), wall time 0.5 + 0.1 seed seconds per step. By hand, softmax's
// mean (std) at steps 0..30: 0.2 (0.1), 0.3 (0.1), 0.4 (0.1), 0.6 (0.2); min/max 0.1/0.3,
// 0.2/0.4, 0.3/0.5, 0.4/0.8; mean wall time 0.7 * step.
const std::vector<std::vector<double>> kSoftmaxAcc = {{0.1, 0.2, 0.3, 0.4}, {0.2, 0.4, 0.5, 0.6}, {0.3, 0.3, 0.4, 0.8, 0.9}};
const std::vector<double> kSkyformerAcc = {0.25, 0.35, 0.45, 0.55};

std::vector<store::CurvePoint> acc_curve(const std::vector<double>& values, std::int64_t seed) {
  std::vector<store::CurvePoint> c;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::int64_t step = static_cast<std::int64_t>(i) * 10;
    c.push_back({step, "val", "acc", values[i], (0.5 + 0.1 * static_cast<double>(seed)) * static_cast<double>(step)});
  }
  auto loss = make_curve("train", "loss", 3, 10, [](std::int64_t step) { return 2.0 - 0.01 * static_cast<double>(step); });
  c.insert(c.end(), loss.begin(), loss.end());
  return c;
}

class CurvesTest : public ResultsTest {
 protected:
  void SetUp() override {
    ResultsTest::SetUp();
    db_ = file("runs.db");
    store::Database db(db_);
    for (std::int64_t seed = 1; seed <= 3; ++seed) {
      FakeJob job;
      job.seed = seed;
      job.results = {{"test_acc", 0.5}};
      job.curve = acc_curve(kSoftmaxAcc[static_cast<std::size_t>(seed - 1)], seed);
      softmax_runs_.push_back(add_job(db, job).second);
    }
    FakeJob sky;
    sky.method = "skyformer";
    sky.seed = 1;
    sky.curve = acc_curve(kSkyformerAcc, 1);
    skyformer_run_ = add_job(db, sky).second;
    FakeJob queued;  // matches --where method = softmax, but has no run that counts
    queued.seed = 4;
    queued.outcome = "queued";
    add_job(db, queued);
  }

  std::vector<std::string> with_db(std::vector<std::string> args) const {
    args.push_back("--db");
    args.push_back(db_);
    return args;
  }

  std::string db_;
  std::vector<std::int64_t> softmax_runs_;
  std::int64_t skyformer_run_ = 0;
};

TEST_F(CurvesTest, PerRunCsvHoldsTheStoredPoints) {
  const auto out = attnlab(with_db({"curves", std::to_string(softmax_runs_[2]), std::to_string(skyformer_run_),
                                    "--metric", "acc", "--split", "val"}));
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = csv_rows(out.out);
  ASSERT_EQ(rows.size(), 1u + 5 + 4);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"run", "method", "dataset", "seed", "step", "wall_seconds", "value"}));
  for (std::size_t i = 0; i < 5; ++i) {  // seed 3's five points, in step order
    const auto& r = rows[1 + i];
    EXPECT_EQ(r[0], std::to_string(softmax_runs_[2]));
    EXPECT_EQ(r[1], "softmax");
    EXPECT_EQ(r[2], "listops");
    EXPECT_EQ(r[3], "3");
    EXPECT_EQ(r[4], std::to_string(10 * i));
    EXPECT_EQ(number(r[5]), 0.8 * 10.0 * static_cast<double>(i));  // exact: written at %.17g
    EXPECT_EQ(number(r[6]), kSoftmaxAcc[2][i]);
  }
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& r = rows[6 + i];
    EXPECT_EQ(r[0], std::to_string(skyformer_run_));
    EXPECT_EQ(r[1], "skyformer");
    EXPECT_EQ(number(r[6]), kSkyformerAcc[i]);
  }
}

TEST_F(CurvesTest, MeanCsvIsTheMeanAndSampleStdOverSeeds) {
  std::vector<std::string> args = {"curves", "--mean", "--metric", "acc"};
  for (const auto id : softmax_runs_) args.push_back(std::to_string(id));
  args.push_back(std::to_string(skyformer_run_));
  const auto out = attnlab(with_db(args));
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = csv_rows(out.out);
  ASSERT_EQ(rows.size(), 1u + 4 + 4);  // seed 3's step 40 is not in every run: left out
  EXPECT_EQ(rows[0], (std::vector<std::string>{"method", "dataset", "runs", "step", "wall_seconds", "mean", "std",
                                               "min", "max"}));
  const double mean[] = {0.2, 0.3, 0.4, 0.6}, std_dev[] = {0.1, 0.1, 0.1, 0.2};
  const double lowest[] = {0.1, 0.2, 0.3, 0.4}, highest[] = {0.3, 0.4, 0.5, 0.8};
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& r = rows[1 + i];
    EXPECT_EQ(r[0], "softmax");
    EXPECT_EQ(r[1], "listops");
    EXPECT_EQ(r[2], "3");
    EXPECT_EQ(r[3], std::to_string(10 * i));
    EXPECT_NEAR(number(r[4]), 7.0 * static_cast<double>(i), 1e-12);  // (0.6 + 0.7 + 0.8) / 3 per step
    EXPECT_NEAR(number(r[5]), mean[i], 1e-12);
    EXPECT_NEAR(number(r[6]), std_dev[i], 1e-12);
    EXPECT_EQ(number(r[7]), lowest[i]);
    EXPECT_EQ(number(r[8]), highest[i]);
  }
  for (std::size_t i = 0; i < 4; ++i) {  // one run: its values, no std (empty, never zero)
    const auto& r = rows[5 + i];
    EXPECT_EQ(r[0], "skyformer");
    EXPECT_EQ(r[2], "1");
    EXPECT_EQ(number(r[5]), kSkyformerAcc[i]);
    EXPECT_EQ(r[6], "");
    EXPECT_EQ(number(r[7]), kSkyformerAcc[i]);
  }
}

TEST_F(CurvesTest, ANaNValueIsKeptAsNaNNeverAveragedAway) {
  std::int64_t diverged = 0;
  {
    store::Database db(db_);
    FakeJob job;
    job.method = "skyformer";
    job.seed = 2;
    job.outcome = "diverged";
    job.curve = acc_curve({0.35, std::nan(""), 0.55, 0.65}, 2);
    diverged = add_job(db, job).second;
  }
  const auto out = attnlab(with_db({"curves", "--mean", "--metric", "acc", std::to_string(skyformer_run_),
                                    std::to_string(diverged)}));
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = csv_rows(out.out);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_NEAR(number(rows[1][5]), 0.3, 1e-12);                   // (0.25 + 0.35) / 2
  EXPECT_NEAR(number(rows[1][6]), std::sqrt(0.005), 1e-12);      // sqrt(2 * 0.05^2 / 1)
  for (std::size_t c = 5; c <= 8; ++c) EXPECT_EQ(rows[2][c], "nan") << c;  // step 10
  EXPECT_NEAR(number(rows[3][5]), 0.5, 1e-12);

  if (!gnuplot_on_path()) return;
  const auto picture = attnlab(with_db({"curves", std::to_string(diverged), "--metric", "acc", "-o", file("d.svg")}));
  ASSERT_EQ(picture.status, 0) << picture.err;
  const auto blocks = dat_blocks(slurp(file("d.dat")));
  ASSERT_EQ(blocks.size(), 1u);
  ASSERT_EQ(blocks[0].size(), 4u);
  EXPECT_TRUE(std::isnan(blocks[0][1][1]));  // a gap in the line, not a zero
}

TEST_F(CurvesTest, WhereTakesTheCountingRunsOfTheMatchingJobs) {
  const auto out = attnlab(with_db({"curves", "--where", "method = softmax", "--metric", "acc"}));
  ASSERT_EQ(out.status, 0) << out.err;
  std::vector<std::string> runs;
  const auto rows = csv_rows(out.out);
  for (std::size_t i = 1; i < rows.size(); ++i)
    if (runs.empty() || runs.back() != rows[i][0]) runs.push_back(rows[i][0]);
  EXPECT_EQ(runs, (std::vector<std::string>{std::to_string(softmax_runs_[0]), std::to_string(softmax_runs_[1]),
                                            std::to_string(softmax_runs_[2])}));
  EXPECT_NE(out.err.find("1 matching job(s) with no run that counts yet left out"), std::string::npos) << out.err;

  const auto none = attnlab(with_db({"curves", "--where", "method = performer"}));
  EXPECT_NE(none.status, 0);
  EXPECT_NE(none.err.find("no job in " + db_ + " matches --where 'method = performer'"), std::string::npos) << none.err;
}

// --group-by: runs labelled, and with --mean grouped, by config keys (a swept learning rate here):
// two lr = 0.001 seeds averaged, the lr = 0.002 run alone.
// softmax/listops at train.lr 0.001 (seeds 1 and 2) and 0.002 (seed 1), the first three curves above.
std::string lr_sweep_db(const std::string& path) {
  store::Database db(path);
  const std::vector<std::pair<std::int64_t, std::string>> jobs = {{1, "0.001"}, {2, "0.001"}, {1, "0.002"}};
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    FakeJob job;
    job.seed = jobs[i].first;
    job.params = {{"train.lr", jobs[i].second}};
    job.curve = acc_curve(kSoftmaxAcc[i], job.seed);
    add_job(db, job);
  }
  return path;
}

TEST_F(CurvesTest, GroupByAConfigKeySplitsTheMeans) {
  const std::string db_path = lr_sweep_db(file("sweep.db"));
  const auto out = attnlab({"curves", "--where", "method = softmax", "--metric", "acc", "--mean", "--group-by",
                            "method,train.lr", "--db", db_path});
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = csv_rows(out.out);
  ASSERT_EQ(rows.size(), 1u + 4 + 5);
  EXPECT_EQ(rows[0][0], "group");
  EXPECT_EQ(rows[1][0], "softmax lr=0.001");
  EXPECT_EQ(rows[1][3], "2");                    // runs
  EXPECT_NEAR(number(rows[4][6]), 0.5, 1e-12);   // mean of 0.4 and 0.6 at step 30
  EXPECT_EQ(rows[5][0], "softmax lr=0.002");
  EXPECT_EQ(rows[5][3], "1");
  EXPECT_EQ(number(rows[9][6]), 0.9);            // its step 40

  const auto bad = attnlab({"curves", "--where", "method = softmax", "--metric", "acc", "--group-by", "train.lrr", "--db", db_path});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("curves: unknown key 'train.lrr' (did you mean: train.lr)"), std::string::npos) << bad.err;
}

// Without --group-by, a sweep's keys label and group the runs: --mean never averages lr 0.001 and
// 0.002 as if they were seeds.
TEST_F(CurvesTest, ASweepsKeysGroupTheMeansWithoutBeingAsked) {
  const std::string db_path = lr_sweep_db(file("sweep.db"));
  const auto out = attnlab({"curves", "--where", "method = softmax", "--metric", "acc", "--mean", "--db", db_path});
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = csv_rows(out.out);
  ASSERT_EQ(rows.size(), 1u + 4 + 5);
  EXPECT_EQ(rows[1][0], "softmax listops lr=0.001");
  EXPECT_EQ(rows[1][3], "2");
  EXPECT_NEAR(number(rows[4][6]), 0.5, 1e-12);  // mean of 0.4 and 0.6 at step 30
  EXPECT_EQ(rows[5][0], "softmax listops lr=0.002");
  EXPECT_EQ(rows[5][3], "1");
  const auto per_run = attnlab({"curves", "--where", "method = softmax", "--metric", "acc", "--db", db_path});
  ASSERT_EQ(per_run.status, 0) << per_run.err;
  EXPECT_EQ(csv_rows(per_run.out)[1][0], "softmax listops lr=0.001");
}

TEST_F(CurvesTest, ErrorsAreOneLineNamingWhatIsWrong) {
  auto expect_error = [&](const std::vector<std::string>& args, const std::string& says) {
    const auto out = attnlab(with_db(args));
    EXPECT_EQ(out.status, 2);
    EXPECT_NE(out.err.find(says), std::string::npos) << "stderr: " << out.err;
    EXPECT_EQ(std::count(out.err.begin(), out.err.end(), '\n'), 1) << out.err;
    EXPECT_EQ(out.out, "");
  };
  expect_error({"curves", "999"}, "curves: no run 999 in " + db_);
  expect_error({"curves", "x1"}, "curves: 'x1' is not a run id");
  expect_error({"curves"}, "curves: name the runs (RUN... or --where EXPR)");
  expect_error({"curves", std::to_string(skyformer_run_), "--metric", "bleu"},
               "curves: run " + std::to_string(skyformer_run_) +
                   " (skyformer/listops seed 1, done) has no val/bleu points; it has train/loss (3), val/acc (4)");
  expect_error({"curves", std::to_string(skyformer_run_), "--format", "png"}, "curves: --format png needs -o FILE");
  expect_error({"curves", std::to_string(skyformer_run_), "--format", "gif"}, "curves: unknown --format 'gif'");
  expect_error({"curves", std::to_string(skyformer_run_), "--x", "epoch"}, "curves: --x: unknown x axis 'epoch'");
}

TEST_F(CurvesTest, PngPictureWithItsDataFile) {
  REQUIRE_GNUPLOT();
  const std::string png = file("val acc.png");  // a space: gnuplot runs without a shell
  const auto out = attnlab(with_db({"curves", std::to_string(softmax_runs_[0]), std::to_string(skyformer_run_),
                                    "--metric", "acc", "-o", png}));
  ASSERT_EQ(out.status, 0) << out.err;
  const std::string bytes = slurp(png);
  ASSERT_GT(bytes.size(), 5000u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  auto be32 = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
    return v;
  };
  EXPECT_EQ(be32(16), 800u);  // width
  EXPECT_EQ(be32(20), 500u);  // height

  const auto blocks = dat_blocks(slurp(file("val acc.dat")));
  ASSERT_EQ(blocks.size(), 2u);
  ASSERT_EQ(blocks[0].size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(blocks[0][i], (std::vector<double>{10.0 * static_cast<double>(i), kSoftmaxAcc[0][i]}));
    EXPECT_EQ(blocks[1][i], (std::vector<double>{10.0 * static_cast<double>(i), kSkyformerAcc[i]}));
  }
  const std::string script = slurp(file("val acc.gp"));
  EXPECT_NE(script.find("title 'softmax/listops seed 1 (run " + std::to_string(softmax_runs_[0]) + ")'"),
            std::string::npos) << script;
  EXPECT_NE(script.find("set xlabel 'step'"), std::string::npos);
  EXPECT_NE(script.find("set ylabel 'validation accuracy'"), std::string::npos);
}

TEST_F(CurvesTest, SvgOfTheMeanAgainstTimeHasItsBandInTheDataFile) {
  REQUIRE_GNUPLOT();
  std::vector<std::string> args = {"curves", "--mean", "--metric", "acc", "--x", "time", "--format", "svg", "-o",
                                   file("mean.svg")};
  for (const auto id : softmax_runs_) args.push_back(std::to_string(id));
  const auto out = attnlab(with_db(args));
  ASSERT_EQ(out.status, 0) << out.err;
  const std::string svg = slurp(file("mean.svg"));
  EXPECT_GT(svg.size(), 3000u);
  EXPECT_TRUE(svg.rfind("<?xml", 0) == 0 || svg.rfind("<svg", 0) == 0) << svg.substr(0, 80);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("<path"), std::string::npos);
  EXPECT_NE(svg.find("softmax/listops (mean ± std of 3 seeds)"), std::string::npos);

  const auto blocks = dat_blocks(slurp(file("mean.dat")));
  ASSERT_EQ(blocks.size(), 1u);
  ASSERT_EQ(blocks[0].size(), 4u);
  const double mean[] = {0.2, 0.3, 0.4, 0.6}, std_dev[] = {0.1, 0.1, 0.1, 0.2};
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& row = blocks[0][i];  // x = mean wall time, mean, mean - std, mean + std
    ASSERT_EQ(row.size(), 4u);
    EXPECT_NEAR(row[0], 7.0 * static_cast<double>(i), 1e-12);
    EXPECT_NEAR(row[1], mean[i], 1e-12);
    EXPECT_NEAR(row[2], mean[i] - std_dev[i], 1e-12);
    EXPECT_NEAR(row[3], mean[i] + std_dev[i], 1e-12);
  }
  EXPECT_NE(slurp(file("mean.gp")).find("set xlabel 'wall-clock seconds since the run started'"), std::string::npos);
}

TEST_F(CurvesTest, TimeAxisOfOneRunIsItsWallSeconds) {
  REQUIRE_GNUPLOT();
  const auto out = attnlab(with_db({"curves", std::to_string(softmax_runs_[1]), "--metric", "acc", "--x", "time",
                                    "-o", file("t.png")}));  // the format from the file name
  ASSERT_EQ(out.status, 0) << out.err;
  EXPECT_EQ(slurp(file("t.png")).substr(1, 3), "PNG");
  const auto blocks = dat_blocks(slurp(file("t.dat")));
  ASSERT_EQ(blocks.size(), 1u);
  ASSERT_EQ(blocks[0].size(), 4u);
  for (std::size_t i = 0; i < 4; ++i)  // seed 2: 0.7 s per step
    EXPECT_EQ(blocks[0][i], (std::vector<double>{0.7 * 10.0 * static_cast<double>(i), kSoftmaxAcc[1][i]}));
}

TEST_F(CurvesTest, MissingGnuplotIsOneLineSayingWhatToDo) {
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path ? old_path : "";
  setenv("PATH", dir_.string().c_str(), 1);  // a folder without gnuplot
  const auto out = attnlab(with_db({"curves", std::to_string(skyformer_run_), "--metric", "acc", "-o", file("x.png")}));
  setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(out.status, 2);
  EXPECT_EQ(out.err, "attnlab: error: curves: gnuplot not found on PATH: install gnuplot-nox, or use --format csv\n");
}

// The driver on its own: quoting, gnuplot's own errors, names it refuses.
using PlotTest = ResultsTest;

TEST_F(PlotTest, QuotesNamesAndReportsGnuplotErrors) {
  Plot plot;
  plot.title = "it's softmax_lra";  // a quote, and an underscore that must stay one
  plot.x_label = "x";
  plot.y_label = "y";
  plot.series.push_back({"a_b 'c'", {1, 2, 3}, {1, 4, 9}, {}, {}});
  const std::string script = script_text(plot, "d'x.dat", "d'x.png", PictureFormat::png);
  EXPECT_NE(script.find("set title 'it''s softmax_lra'"), std::string::npos) << script;
  EXPECT_NE(script.find("'d''x.dat' index 0 using 1:2"), std::string::npos) << script;
  EXPECT_NE(script.find("title 'a_b ''c'''"), std::string::npos) << script;
  EXPECT_NE(script.find("noenhanced"), std::string::npos);
  EXPECT_EQ(data_text(plot).substr(data_text(plot).find("\n\n\n") + 3), "1 1\n2 4\n3 9\n");

  EXPECT_THROW(draw(plot, file("p.dat"), PictureFormat::png), std::runtime_error);
  Plot empty = plot;
  empty.series[0].y.pop_back();
  try {
    draw(empty, file("p.png"), PictureFormat::png);
    ADD_FAILURE() << "unequal lengths drawn";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "plot 'it's softmax_lra', series 'a_b 'c'': x and y differ in length");
  }

  Plot nan = plot;
  nan.series[0].y = {std::nan(""), std::nan(""), std::nan("")};
  try {
    draw(nan, file("n.png"), PictureFormat::png);
    ADD_FAILURE() << "an all-NaN plot drawn";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "plot 'it's softmax_lra': nothing to draw, every y value is NaN or infinite");
  }

  if (!gnuplot_on_path()) GTEST_SKIP() << "gnuplot is not on PATH: not run";
  draw(plot, file("it's here.png"), PictureFormat::png);
  EXPECT_GT(slurp(file("it's here.png")).size(), 3000u);

  Plot undefined = plot;  // nothing gnuplot can place on a log axis: it stops with an error
  undefined.log_y = true;
  undefined.series[0].y = {-1, -2, -3};
  try {
    draw(undefined, file("u.png"), PictureFormat::png);
    ADD_FAILURE() << "gnuplot's error not reported";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("gnuplot failed on " + file("u.gp") + " (exit status 1): ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(file("u.png")) && fs::file_size(file("u.png")) > 0);
}

}  // namespace
}  // namespace attnlab::results::testing
