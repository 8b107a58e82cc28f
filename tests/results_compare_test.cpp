// Confidence intervals for a difference of means (results/stats.hpp) against bounds computed by
// hand from tabled or closed-form t quantiles, the bootstrap's determinism and agreement with
// Welch, and `attnlab compare` end to end on a database the test fills: a sweep's values kept
// apart, each side's best-validation configuration per task (or the one its expression names, or
// every pair), each said in one line.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>

#include <boost/math/distributions/normal.hpp>

#include "results/aggregate.hpp"
#include "results/stats.hpp"
#include "results_support.hpp"

namespace attnlab::results {
namespace {

using testing::add_job;
using testing::FakeJob;
using testing::ResultsTest;

// Student t quantiles: from tables (10 digits) or closed forms. ν = 1: tan(π(p − ½));
// ν = 2: (2p − 1) / sqrt(2p(1 − p)).
constexpr double kT975df4 = 2.7764451052;
constexpr double kT975df10 = 2.2281388520;
constexpr double kT975df5 = 2.5705818366;
constexpr double kT975df6 = 2.4469118511;
const double kPi = std::acos(-1.0);
double t_df1(double p) { return std::tan(kPi * (p - 0.5)); }
double t_df2(double p) { return (2 * p - 1) / std::sqrt(2 * p * (1 - p)); }

TEST(WelchInterval, EqualSizesAndVariancesGiveDf2nMinus2AndTheTabledBounds) {
  // n = 3, s² = 1 each: se = sqrt(1/3 + 1/3), df = 4.
  const auto small = welch_interval({1, 2, 3}, {0, 1, 2});
  const double se3 = std::sqrt(2.0 / 3.0);
  EXPECT_DOUBLE_EQ(small.diff, 1.0);
  EXPECT_NEAR(small.se, se3, 1e-15);
  EXPECT_NEAR(small.df, 4.0, 1e-12);
  EXPECT_NEAR(small.low, 1.0 - kT975df4 * se3, 1e-9);   // -1.2670
  EXPECT_NEAR(small.high, 1.0 + kT975df4 * se3, 1e-9);  //  3.2670
  EXPECT_FALSE(small.excludes_zero);
  EXPECT_FALSE(small.degenerate);

  // n = 6, s² = 3.5 each, shifted by 3: se = sqrt(7/6), df = 10.
  const auto large = welch_interval({1, 2, 3, 4, 5, 6}, {-2, -1, 0, 1, 2, 3});
  const double se6 = std::sqrt(7.0 / 6.0);
  EXPECT_DOUBLE_EQ(large.diff, 3.0);
  EXPECT_NEAR(large.df, 10.0, 1e-12);
  EXPECT_NEAR(large.low, 3.0 - kT975df10 * se6, 1e-9);  // 0.5933
  EXPECT_NEAR(large.high, 3.0 + kT975df10 * se6, 1e-9);
  EXPECT_TRUE(large.excludes_zero);
}

TEST(WelchInterval, LevelSetsTheQuantile) {
  // n = 2, s² = 2 each: se = sqrt(2), df = 2, where the t quantile has a closed form.
  for (double level : {0.95, 0.90, 0.5}) {
    const auto ci = welch_interval({0, 2}, {-2, 0}, level);
    const double t = t_df2((1 + level) / 2);  // 4.3027 at 95%, 2.9200 at 90%
    EXPECT_NEAR(ci.df, 2.0, 1e-12);
    EXPECT_NEAR(ci.low, 2.0 - t * std::sqrt(2.0), 1e-9) << level;
    EXPECT_NEAR(ci.high, 2.0 + t * std::sqrt(2.0), 1e-9) << level;
    EXPECT_DOUBLE_EQ(ci.level, level);
  }
}

TEST(WelchInterval, UnequalVariancesUseWelchSatterthwaite) {
  // A: n 3, s² 1; B: n 5, s² 10. s²/n: 1/3 and 2; se² = 7/3;
  // df = (7/3)² / ((1/3)²/2 + 2²/4) = (49/9) / (19/18) = 98/19 = 5.1579.
  const auto ci = welch_interval({1, 2, 3}, {0, 2, 4, 6, 8});
  EXPECT_DOUBLE_EQ(ci.diff, -2.0);
  EXPECT_NEAR(ci.se, std::sqrt(7.0 / 3.0), 1e-14);
  EXPECT_NEAR(ci.df, 98.0 / 19.0, 1e-12);
  const double t = (ci.high - ci.diff) / ci.se;  // the quantile used, between df 5's and df 6's
  EXPECT_LT(t, kT975df5);
  EXPECT_GT(t, kT975df6);
  EXPECT_NEAR(ci.diff - ci.low, ci.high - ci.diff, 1e-12);
  EXPECT_FALSE(ci.excludes_zero);

  // One side constant: df is the other side's n − 1 (here 1, the Cauchy quantile).
  const auto one = welch_interval({0, 2}, {5, 5});
  EXPECT_NEAR(one.df, 1.0, 1e-12);
  EXPECT_NEAR(one.low, -4.0 - t_df1(0.975) * 1.0, 1e-9);  // 12.7062 · se 1
  EXPECT_FALSE(one.excludes_zero);
}

TEST(WelchInterval, ConstantGroupsGiveThePointAndTooFewValuesAreRefused) {
  const auto apart = welch_interval({1, 1, 1}, {0, 0});
  EXPECT_TRUE(apart.degenerate);
  EXPECT_EQ(apart.low, 1.0);
  EXPECT_EQ(apart.high, 1.0);
  EXPECT_EQ(apart.se, 0.0);
  EXPECT_TRUE(std::isnan(apart.df));
  EXPECT_TRUE(apart.excludes_zero);
  const auto same = welch_interval({1, 1}, {1, 1});
  EXPECT_TRUE(same.degenerate);
  EXPECT_FALSE(same.excludes_zero);

  EXPECT_THROW(welch_interval({1}, {1, 2}), std::invalid_argument);
  EXPECT_THROW(welch_interval({1, 2}, {1, 2}, 1.0), std::invalid_argument);
  EXPECT_THROW(welch_interval({1, 2}, {1, 2}, 0.0), std::invalid_argument);
}

TEST(SeedStats, MeanAndSampleStd) {
  const SeedStats s = seed_stats({2, 4, 4, 4, 5, 5, 7, 9});  // mean 5, Σ(x − 5)² = 32, s² = 32/7
  EXPECT_EQ(s.n, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_NEAR(s.std, std::sqrt(32.0 / 7.0), 1e-15);
  EXPECT_TRUE(std::isnan(seed_stats({3}).std));
  EXPECT_TRUE(std::isnan(seed_stats({}).mean));
}

TEST(BootstrapInterval, DeterministicForASeed) {
  const std::vector<double> a = {0.61, 0.63, 0.60, 0.65, 0.62}, b = {0.58, 0.60, 0.59, 0.61, 0.57};
  const auto first = bootstrap_interval(a, b, 0.95, 2000, 7), again = bootstrap_interval(a, b, 0.95, 2000, 7);
  EXPECT_EQ(first.low, again.low);
  EXPECT_EQ(first.high, again.high);
  EXPECT_EQ(first.se, again.se);
  EXPECT_EQ(first.resamples, 2000);
  EXPECT_NEAR(first.diff, 0.032, 1e-12);
  EXPECT_LE(first.low, first.diff);
  EXPECT_GE(first.high, first.diff);
  const auto other = bootstrap_interval(a, b, 0.95, 2000, 8);
  EXPECT_TRUE(other.low != first.low || other.high != first.high);
}

TEST(BootstrapInterval, ResamplesFromTheGroupsByHand) {
  // A = {0, 1}, B = {0}: a resampled mean of A is 0, 1/2 or 1 with probabilities 1/4, 1/2, 1/4,
  // so the 2.5% and 97.5% points are 0 and 1, and the differences' sd is sqrt(1/4 / 2).
  const auto ci = bootstrap_interval({0, 1}, {0}, 0.95, 10000, 3);
  EXPECT_DOUBLE_EQ(ci.diff, 0.5);
  EXPECT_EQ(ci.low, 0.0);
  EXPECT_EQ(ci.high, 1.0);
  EXPECT_FALSE(ci.excludes_zero);  // 0 is inside (at the edge)
  EXPECT_NEAR(ci.se, std::sqrt(0.125), 0.01);
  EXPECT_TRUE(std::isnan(ci.df));

  const auto constant = bootstrap_interval({2, 2}, {1}, 0.95, 100, 1);
  EXPECT_TRUE(constant.degenerate);
  EXPECT_EQ(constant.low, 1.0);
  EXPECT_EQ(constant.high, 1.0);
  EXPECT_THROW(bootstrap_interval({}, {1}), std::invalid_argument);
  EXPECT_THROW(bootstrap_interval({1}, {1}, 0.95, 0), std::invalid_argument);
}

// n values of a normal N(mean, sd²) at evenly spaced probabilities: normal-shaped, no randomness.
std::vector<double> normal_like(std::size_t n, double mean, double sd) {
  const boost::math::normal standard;
  std::vector<double> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(mean + sd * quantile(standard, (i + 0.5) / static_cast<double>(n)));
  return v;
}

TEST(BootstrapInterval, CloseToWelchForLargeNormalGroups) {
  const auto a = normal_like(200, 1.0, 0.5), b = normal_like(150, 0.9, 0.3);
  const auto welch = welch_interval(a, b), boot = bootstrap_interval(a, b, 0.95, 10000, 11);
  const double half = welch.high - welch.diff;  // about 0.085
  EXPECT_NEAR(boot.diff, welch.diff, 1e-12);
  EXPECT_NEAR(boot.low, welch.low, 0.05 * half);
  EXPECT_NEAR(boot.high, welch.high, 0.05 * half);
  EXPECT_NEAR(boot.se, welch.se, 0.05 * welch.se);
}

TEST(BootstrapInterval, ExcludesZeroForAClearDifferenceAndNotForNone) {
  const std::vector<double> a = {1.0, 1.1, 0.9, 1.05, 0.95}, b = {0.0, 0.1, -0.1, 0.05, -0.05};
  EXPECT_TRUE(bootstrap_interval(a, b).excludes_zero);
  const std::vector<double> shuffled = {0.95, 1.1, 1.0, 0.9, 1.05};
  const auto none = bootstrap_interval(a, shuffled);
  EXPECT_NEAR(none.diff, 0.0, 1e-12);
  EXPECT_FALSE(none.excludes_zero);
  EXPECT_LT(none.low, 0.0);
  EXPECT_GT(none.high, 0.0);
}

// RFC 4180 records: quoted fields with doubled quotes.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') rows.back().back() += '"', ++i;
      else if (c == '"') quoted = false;
      else rows.back().back() += c;
    } else if (c == '"') quoted = true;
    else if (c == ',') rows.back().emplace_back();
    else if (c == '\n') rows.emplace_back(1);
    else if (c != '\r') rows.back().back() += c;
  }
  if (rows.back().size() == 1 && rows.back().front().empty()) rows.pop_back();
  return rows;
}

// One CSV output as records keyed by header, indexed by the first column.
std::map<std::string, std::map<std::string, std::string>> csv_by_first_column(const std::string& text) {
  const auto rows = parse_csv(text);
  std::map<std::string, std::map<std::string, std::string>> out;
  if (rows.empty()) return out;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    EXPECT_EQ(rows[r].size(), rows[0].size()) << text;
    for (std::size_t c = 0; c < rows[r].size() && c < rows[0].size(); ++c) out[rows[r][0]][rows[0][c]] = rows[r][c];
  }
  return out;
}

double number(const std::map<std::string, std::string>& row, const std::string& column) {
  const auto it = row.find(column);
  if (it == row.end()) throw std::runtime_error("no column " + column);
  return std::stod(it->second);
}

class CompareCommand : public ResultsTest {
 protected:
  // skyformer and softmax on listops and text, three seeds each, a known difference; image only
  // skyformer ran; one softmax job on listops failed.
  const std::vector<double> sky_listops = {0.40, 0.42, 0.44}, soft_listops = {0.35, 0.37, 0.39};
  const std::vector<double> sky_text = {0.50, 0.60, 0.70}, soft_text = {0.48, 0.58, 0.68};

  void SetUp() override {
    ResultsTest::SetUp();
    store::Database db(file("results.db"));
    auto add = [&](const std::string& method, const std::string& dataset, const std::vector<double>& accs) {
      for (std::size_t i = 0; i < accs.size(); ++i) {
        FakeJob job;
        job.method = method;
        job.dataset = dataset;
        job.seed = static_cast<std::int64_t>(i) + 1;
        job.results = {{"test_acc", accs[i]}, {"best_val_acc", accs[i] + 0.01}};
        add_job(db, job);
      }
    };
    add("skyformer", "listops", sky_listops);
    add("softmax", "listops", soft_listops);
    add("skyformer", "text", sky_text);
    add("softmax", "text", soft_text);
    add("skyformer", "image", {0.3, 0.31, 0.32});
    FakeJob failed;
    failed.method = "softmax";
    failed.dataset = "listops";
    failed.seed = 4;
    failed.outcome = "failed";
    add_job(db, failed);
  }
  testing::Output compare(std::vector<std::string> args) {
    args.insert(args.begin(), "compare");
    args.insert(args.end(), {"--db", file("results.db")});
    return attnlab(args);
  }
};

TEST_F(CompareCommand, WelchNumbersOnTheSharedTasks) {
  const auto out = compare({"skyformer", "softmax", "--format", "csv"});
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = csv_by_first_column(out.out);
  ASSERT_EQ(rows.size(), 2u) << out.out;  // image is A's only
  ASSERT_TRUE(rows.count("listops") && rows.count("text")) << out.out;

  // listops: means 0.42 and 0.37, sd 0.02 each, n 3: se = sqrt(2 · 0.02² / 3), df 4.
  const auto& listops = rows.at("listops");
  const double se_listops = std::sqrt(2 * 0.0004 / 3);
  EXPECT_EQ(number(listops, "A n"), 3);
  EXPECT_EQ(number(listops, "B n"), 3);  // the failed fourth softmax seed does not count
  EXPECT_NEAR(number(listops, "A mean"), 0.42, 1e-12);
  EXPECT_NEAR(number(listops, "A std"), 0.02, 1e-12);
  EXPECT_NEAR(number(listops, "B mean"), 0.37, 1e-12);
  EXPECT_NEAR(number(listops, "diff"), 0.05, 1e-12);
  EXPECT_NEAR(number(listops, "se"), se_listops, 1e-12);
  EXPECT_NEAR(number(listops, "df"), 4, 1e-9);
  EXPECT_NEAR(number(listops, "low"), 0.05 - kT975df4 * se_listops, 1e-9);   // 0.00466
  EXPECT_NEAR(number(listops, "high"), 0.05 + kT975df4 * se_listops, 1e-9);  // 0.09534
  EXPECT_EQ(listops.at("excludes 0"), "yes");

  // text: means 0.60 and 0.58, sd 0.1 each: the interval straddles zero.
  const auto& text = rows.at("text");
  const double se_text = std::sqrt(2 * 0.01 / 3);
  EXPECT_NEAR(number(text, "diff"), 0.02, 1e-12);
  EXPECT_NEAR(number(text, "low"), 0.02 - kT975df4 * se_text, 1e-9);  // -0.2067
  EXPECT_NEAR(number(text, "high"), 0.02 + kT975df4 * se_text, 1e-9);
  EXPECT_EQ(text.at("excludes 0"), "no");

  // CSV stays clean; the notes go to stderr.
  EXPECT_NE(out.err.find("only A has: image"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find("listops: B jobs not counted: 1 failed"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find("95% Welch t interval"), std::string::npos) << out.err;
}

// The number after "KEY": in the JSON object that starts with {"dataset": "DATASET".
double json_value(const std::string& json, const std::string& dataset, const std::string& key) {
  const auto object = json.find("{\"dataset\": \"" + dataset + "\"");
  if (object == std::string::npos) throw std::runtime_error("no object for " + dataset + " in " + json);
  const auto at = json.find("\"" + key + "\": ", object);
  if (at == std::string::npos || at > json.find('}', object)) throw std::runtime_error("no " + key + " for " + dataset);
  return std::stod(json.substr(at + key.size() + 4));
}

TEST_F(CompareCommand, LevelReachesTheIntervalAndEveryFormatCarriesTheSameNumbers) {
  const auto table = compare({"skyformer", "softmax", "--level", "0.9"});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("only A has: image"), std::string::npos) << table.out;
  const std::string last = table.out.substr(table.out.rfind('\n', table.out.size() - 2) + 1);
  EXPECT_EQ(last, "90% Welch t interval for mean(A) - mean(B) of test_acc over seeds\n");

  // At 90% the quantile is t_{0.95,4} = 2.132 (tables), where 95% used 2.776.
  const auto csv90 = compare({"skyformer", "softmax", "--level", "0.9", "--format", "csv"});
  const auto listops = csv_by_first_column(csv90.out).at("listops");
  const double t = (number(listops, "high") - number(listops, "diff")) / number(listops, "se");
  EXPECT_GT(t, 2.131);
  EXPECT_LT(t, 2.133);

  const auto csv = csv_by_first_column(compare({"skyformer", "softmax", "--format", "csv"}).out);
  const auto json = compare({"skyformer", "softmax", "--format", "json"});
  ASSERT_EQ(json.status, 0) << json.err;
  for (const char* dataset : {"listops", "text"})
    for (const char* key : {"A n", "A mean", "A std", "B mean", "diff", "low", "high", "se", "df"})
      EXPECT_EQ(json_value(json.out, dataset, key), number(csv.at(dataset), key)) << dataset << " " << key;
  EXPECT_EQ(json.err.substr(json.err.rfind('\n', json.err.size() - 2) + 1),
            "95% Welch t interval for mean(A) - mean(B) of test_acc over seeds\n");
}

TEST_F(CompareCommand, RowsWithOneSeedASideHaveNoInterval) {
  // Grouped by dataset and seed, seeds 1 and 2 only: every row has one seed a side.
  const auto out = compare({"skyformer", "softmax", "--format", "csv", "--by", "dataset,seed", "--where", "seed <= 2"});
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = parse_csv(out.out);
  ASSERT_EQ(rows.size(), 5u) << out.out;  // header + listops, text × seeds 1, 2
  EXPECT_EQ(rows[0][0], "dataset");
  EXPECT_EQ(rows[0][1], "seed");
  for (std::size_t r = 1; r < rows.size(); ++r) {
    EXPECT_EQ(rows[r][2], "1");   // A n
    EXPECT_EQ(rows[r][10], "");   // low: missing, not zero
    EXPECT_EQ(rows[r][11], "");   // high
  }
  EXPECT_NEAR(std::stod(rows[1][8]), 0.40 - 0.35, 1e-12);  // listops seed 1: the difference still shown
  EXPECT_NE(out.err.find("listops / 1: no interval, A has 1 seed(s) and B has 1 seed(s)"), std::string::npos) << out.err;
}

TEST_F(CompareCommand, BootstrapIsTheLibrarysIntervalForTheSeedGiven) {
  const auto out = compare({"skyformer", "softmax", "--ci", "bootstrap", "--seed", "5", "--resamples", "4000", "--format", "csv"});
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = csv_by_first_column(out.out);
  ASSERT_TRUE(rows.count("listops")) << out.out;
  EXPECT_EQ(rows.at("listops").count("df"), 0u);  // no degrees of freedom in a bootstrap
  const auto expected = bootstrap_interval(sky_listops, soft_listops, 0.95, 4000, 5);  // seeds in job order
  EXPECT_NEAR(number(rows.at("listops"), "low"), expected.low, 1e-12);
  EXPECT_NEAR(number(rows.at("listops"), "high"), expected.high, 1e-12);
  EXPECT_EQ(rows.at("listops").at("excludes 0"), expected.excludes_zero ? "yes" : "no");
  EXPECT_EQ(compare({"skyformer", "softmax", "--ci", "bootstrap", "--seed", "5", "--resamples", "4000", "--format", "csv"}).out,
            out.out);
  EXPECT_NE(out.err.find("95% percentile bootstrap interval"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find("4000 resamples, seed 5"), std::string::npos) << out.err;
}

TEST_F(CompareCommand, ExpressionsAndQuotedMethodNamesSelectTheSides) {
  {
    store::Database db(file("results.db"));
    for (std::int64_t seed = 1; seed <= 2; ++seed) {
      FakeJob odd;
      odd.method = "it's";  // a quote in a method name stays a name
      odd.dataset = "listops";
      odd.seed = seed;
      odd.results = {{"test_acc", 0.30 + 0.02 * static_cast<double>(seed)}};
      add_job(db, odd);
    }
  }
  const auto named = compare({"it's", "softmax", "--format", "csv"});
  ASSERT_EQ(named.status, 0) << named.err;
  const auto rows = csv_by_first_column(named.out);
  ASSERT_EQ(rows.size(), 1u) << named.out;
  EXPECT_NEAR(number(rows.at("listops"), "A mean"), 0.33, 1e-12);
  EXPECT_EQ(number(rows.at("listops"), "A n"), 2);

  const auto expressions =
      compare({"method = skyformer AND dataset IN (listops, text)", "method = softmax AND seed != 3", "--format", "csv"});
  ASSERT_EQ(expressions.status, 0) << expressions.err;
  const auto two = csv_by_first_column(expressions.out);
  ASSERT_TRUE(two.count("text")) << expressions.out;
  EXPECT_EQ(number(two.at("text"), "B n"), 2);
  EXPECT_NEAR(number(two.at("text"), "B mean"), 0.53, 1e-12);
}

// A sweep's keys join --by: each sparsity is compared with the same sparsity, never averaged as seeds.
TEST_F(ResultsTest, CompareKeepsASweepsValuesApart) {
  {
    store::Database db(file("sweep.db"));
    const double acc[2][2][2] = {{{0.90, 0.80}, {0.30, 0.50}}, {{0.70, 0.60}, {0.40, 0.60}}};  // method, sparsity, seed
    const char* methods[] = {"gmm_rks", "gmm_prf"};
    const char* sparsities[] = {"0.1", "0.9"};
    for (int m = 0; m < 2; ++m)
      for (int p = 0; p < 2; ++p)
        for (int seed = 0; seed < 2; ++seed) {
          FakeJob job;
          job.method = methods[m], job.dataset = "sparse_sum", job.seed = seed + 1;
          job.params = {{"datasets.sparse_sum.sparsity", sparsities[p]}};
          job.results = {{"test_acc", acc[m][p][seed]}};
          add_job(db, job);
        }
  }
  const auto out = attnlab({"compare", "gmm_rks", "gmm_prf", "--format", "csv", "--db", file("sweep.db")});
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = parse_csv(out.out);
  ASSERT_EQ(rows.size(), 3u) << out.out;
  EXPECT_EQ(rows[0][0], "dataset");
  EXPECT_EQ(rows[0][1], "datasets.sparse_sum.sparsity");
  const auto diff = std::find(rows[0].begin(), rows[0].end(), "diff") - rows[0].begin();
  EXPECT_EQ(rows[1][1], "0.1");
  EXPECT_NEAR(std::stod(rows[1][diff]), 0.85 - 0.65, 1e-12);
  EXPECT_EQ(rows[2][1], "0.9");
  EXPECT_NEAR(std::stod(rows[2][diff]), 0.40 - 0.50, 1e-12);
}

// A real mixed database: softmax in one configuration (two seeds), Performer with its features
// swept (64, 128, 256; two seeds each), both on listops and text. On listops features=256 has the
// best test accuracy but 128 the best validation; on text 256 has both.
class CompareSweepTest : public ResultsTest {
 protected:
  struct Seeds {
    double test[2], val[2];
  };
  const std::map<std::string, std::map<std::string, Seeds>> performer = {
      {"listops", {{"64", {{0.30, 0.32}, {0.31, 0.33}}}, {"128", {{0.36, 0.38}, {0.40, 0.42}}}, {"256", {{0.40, 0.42}, {0.35, 0.37}}}}},
      {"text", {{"64", {{0.50, 0.52}, {0.50, 0.52}}}, {"128", {{0.54, 0.56}, {0.55, 0.57}}}, {"256", {{0.60, 0.64}, {0.61, 0.63}}}}}};
  const std::map<std::string, Seeds> softmax = {{"listops", {{0.38, 0.40}, {0.39, 0.41}}}, {"text", {{0.58, 0.60}, {0.59, 0.61}}}};

  void SetUp() override {
    ResultsTest::SetUp();
    store::Database db(file("mixed.db"));
    auto add = [&](const std::string& method, const std::string& dataset, const Seeds& s,
                   std::vector<std::pair<std::string, std::string>> params) {
      params.emplace_back("train.lr", "0.001");  // the same everywhere: no configuration key
      for (int seed = 0; seed < 2; ++seed) {
        FakeJob job;
        job.method = method, job.dataset = dataset, job.seed = seed + 1, job.params = params;
        job.results = {{"test_acc", s.test[seed]}, {"best_val_acc", s.val[seed]}};
        add_job(db, job);
      }
    };
    for (const std::string dataset : {"listops", "text"}) {
      add("softmax", dataset, softmax.at(dataset), {});
      for (const std::string features : {"64", "128", "256"})
        add("performer", dataset, performer.at(dataset).at(features),
            {{"methods.performer.features", features}, {"methods.performer.kernel", "relu"}});
    }
  }
  testing::Output compare(std::vector<std::string> args) {
    args.insert(args.begin(), "compare");
    args.insert(args.end(), {"--db", file("mixed.db")});
    return attnlab(args);
  }
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> lines_with(const std::string& text, const std::string& part) {
  std::vector<std::string> out;
  for (const auto& line : lines_of(text))
    if (line.find(part) != std::string::npos) out.push_back(line);
  return out;
}

TEST_F(CompareSweepTest, EachSideTakesItsBestValidationConfigurationPerTaskAndSaysWhichInOneLine) {
  const auto out = compare({"softmax", "performer", "--format", "csv"});
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = csv_by_first_column(out.out);
  ASSERT_EQ(rows.size(), 2u) << out.out;
  const auto& listops = rows.at("listops");
  EXPECT_EQ(listops.at("A config"), "");
  EXPECT_EQ(listops.at("B config"), "features=128");  // the best validation, not the best test (256)
  EXPECT_EQ(number(listops, "B n"), 2);
  EXPECT_NEAR(number(listops, "B mean"), 0.37, 1e-12);
  EXPECT_NEAR(number(listops, "A mean"), 0.39, 1e-12);
  EXPECT_NEAR(number(listops, "diff"), 0.02, 1e-12);
  EXPECT_FALSE(listops.at("low").empty());  // two seeds a side: an interval
  EXPECT_EQ(rows.at("text").at("B config"), "features=256");
  EXPECT_NEAR(number(rows.at("text"), "B mean"), 0.62, 1e-12);

  // One line per side and task with a choice (softmax had none), and the whole of stderr is short.
  const auto picks = lines_with(out.err, " takes ");
  ASSERT_EQ(picks.size(), 2u) << out.err;
  EXPECT_EQ(picks[0], "listops: B takes performer features=128 of 3 configurations: best mean best_val_acc 0.4100 (2 seeds)");
  EXPECT_EQ(picks[1], "text: B takes performer features=256 of 3 configurations: best mean best_val_acc 0.6200 (2 seeds)");
  EXPECT_LT(out.err.size(), 1000u) << out.err;
  for (const auto& line : lines_of(out.err)) EXPECT_LT(line.size(), 200u) << line;
  EXPECT_EQ(lines_with(out.err, "differ in methods.performer.features: per task, each side's with the best mean best_val_acc").size(), 1u) << out.err;

  // The terminal table and JSON say the same: the lines under the table, the configuration in each row.
  const auto table = compare({"softmax", "performer"});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_EQ(lines_with(table.out, " takes "), picks) << table.out;
  const auto json = compare({"softmax", "performer", "--format", "json"});
  ASSERT_EQ(json.status, 0) << json.err;
  EXPECT_NE(json.out.find("\"B config\": \"features=128\""), std::string::npos) << json.out;
  EXPECT_EQ(lines_with(json.err, " takes "), picks) << json.err;

  // The sides swapped: the same configurations, now A's.
  const auto swapped = compare({"performer", "softmax", "--format", "csv"});
  EXPECT_EQ(csv_by_first_column(swapped.out).at("listops").at("A config"), "features=128") << swapped.out;
  EXPECT_EQ(lines_with(swapped.err, "listops: A takes performer features=128").size(), 1u) << swapped.err;
}

TEST_F(CompareSweepTest, AnExpressionNamesTheConfigurationInstead) {
  const auto out = compare({"softmax", "method = performer AND methods.performer.features = 256", "--format", "csv"});
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = csv_by_first_column(out.out);
  ASSERT_EQ(rows.size(), 2u) << out.out;
  EXPECT_NEAR(number(rows.at("listops"), "B mean"), 0.41, 1e-12);  // 256's, which best-val would not take
  EXPECT_NEAR(number(rows.at("text"), "B mean"), 0.62, 1e-12);
  EXPECT_EQ(rows.at("listops").count("B config"), 0u);  // one configuration a side: nothing to say
  EXPECT_TRUE(lines_with(out.err, " takes ").empty()) << out.err;
  EXPECT_NE(out.err.find("B = method = performer AND methods.performer.features = 256 (4 jobs)"), std::string::npos) << out.err;
}

TEST_F(CompareSweepTest, ByDatasetAndByMoreKeys) {
  const auto by_default = compare({"softmax", "performer", "--format", "csv"});
  const auto by_dataset = compare({"softmax", "performer", "--by", "dataset", "--format", "csv"});
  ASSERT_EQ(by_dataset.status, 0) << by_dataset.err;
  EXPECT_EQ(by_dataset.out, by_default.out);
  EXPECT_EQ(by_dataset.err, by_default.err);

  // By seed too: each (dataset, seed) takes its own best; seed 2 of listops still 128.
  const auto by_seed = compare({"softmax", "performer", "--by", "dataset,seed", "--format", "csv"});
  ASSERT_EQ(by_seed.status, 0) << by_seed.err;
  EXPECT_EQ(parse_csv(by_seed.out).size(), 5u) << by_seed.out;
  EXPECT_EQ(lines_with(by_seed.err, "listops / 2: B takes performer features=128").size(), 1u) << by_seed.err;
}

TEST_F(CompareSweepTest, PickAllGivesARowPerPairOfConfigurations) {
  const auto out = compare({"softmax", "performer", "--pick", "all", "--format", "csv"});
  ASSERT_EQ(out.status, 0) << out.err;
  const auto rows = parse_csv(out.out);
  ASSERT_EQ(rows.size(), 7u) << out.out;  // header + 2 tasks x 3 configurations
  ASSERT_EQ(rows[0][1], "A config");
  ASSERT_EQ(rows[0][2], "B config");
  const std::vector<std::string> features = {"features=64", "features=128", "features=256"};
  for (std::size_t r = 0; r < 6; ++r) {
    EXPECT_EQ(rows[r + 1][0], r < 3 ? "listops" : "text");
    EXPECT_EQ(rows[r + 1][2], features[r % 3]);  // numbers by value
  }
  EXPECT_TRUE(lines_with(out.err, " takes ").empty()) << out.err;
  EXPECT_EQ(lines_with(out.err, "a row for each pair of A's and B's (--pick all)").size(), 1u) << out.err;
}

TEST_F(CompareSweepTest, NoSharedTaskIsOneShortLineOfCounts) {
  // The rows told apart by features as well: softmax has none, so nothing is shared.
  const auto out = compare({"softmax", "performer", "--by", "dataset,methods.performer.features"});
  EXPECT_EQ(out.status, 2);
  EXPECT_TRUE(out.out.empty()) << out.out;
  ASSERT_EQ(lines_of(out.err).size(), 1u) << out.err;
  EXPECT_LT(out.err.size(), 200u) << out.err;
  EXPECT_NE(out.err.find("compare: A and B share no dataset / features: A has 2 (listops / (none), text / (none)), "
                         "B has 6 (listops / 64, listops / 128, listops / 256 and 3 more)"),
            std::string::npos)
      << out.err;

  const auto apart = compare({"method = softmax AND dataset = listops", "method = performer AND dataset = text"});
  EXPECT_EQ(apart.status, 2);
  ASSERT_EQ(lines_of(apart.err).size(), 1u) << apart.err;
  EXPECT_NE(apart.err.find("share no dataset: A has 1 (listops), B has 1 (text)"), std::string::npos) << apart.err;
}

// A tie on the validation goes to more seeds, then to the configuration listed first; without any
// validation result the same rule picks, and the line says so.
TEST_F(ResultsTest, ComparePicksDeterministicallyOnATieOrWithoutValidation) {
  // performer features=64 one seed, 128 two, 256 `seeds_256`; each configuration's validation 0.5.
  auto fill = [&](const std::string& name, bool validation, std::int64_t seeds_256) {
    store::Database db(file(name));
    auto add = [&](const std::string& method, const std::string& features, std::int64_t seed, double test) {
      FakeJob job;
      job.method = method, job.dataset = "listops", job.seed = seed;
      if (!features.empty()) job.params = {{"methods.performer.features", features}};
      job.results = {{"test_acc", test}};
      if (validation) job.results.emplace_back("best_val_acc", 0.5);
      add_job(db, job);
    };
    add("softmax", "", 1, 0.40), add("softmax", "", 2, 0.42);
    add("performer", "64", 1, 0.30);
    add("performer", "128", 1, 0.36), add("performer", "128", 2, 0.38);
    for (std::int64_t seed = 1; seed <= seeds_256; ++seed) add("performer", "256", seed, 0.45);
  };
  auto picked = [&](const std::string& name, const std::string& line) {
    const auto out = attnlab({"compare", "softmax", "performer", "--db", file(name), "--format", "csv"});
    ASSERT_EQ(out.status, 0) << out.err;
    EXPECT_EQ(csv_by_first_column(out.out).at("listops").at("B config"), "features=128") << out.out;
    EXPECT_EQ(lines_with(out.err, " takes "), std::vector<std::string>{"listops: B takes performer features=128 of 3 configurations: " + line})
        << out.err;
    EXPECT_EQ(attnlab({"compare", "softmax", "performer", "--db", file(name), "--format", "csv"}).out, out.out);  // every time
  };
  fill("more-seeds.db", true, 1);
  picked("more-seeds.db", "best mean best_val_acc 0.5000 (2 seeds), tied with features=64, taken for more test_acc seeds");
  fill("listed-first.db", true, 2);
  picked("listed-first.db", "best mean best_val_acc 0.5000 (2 seeds), tied with features=256, taken as listed first");
  fill("none.db", false, 2);
  picked("none.db", "none has best_val_acc, taken as listed first");
  fill("none-more-seeds.db", false, 1);
  picked("none-more-seeds.db", "none has best_val_acc, taken for more test_acc seeds");
}

TEST_F(CompareCommand, ErrorsAreOneLine) {
  auto one_line_error = [](const testing::Output& o, const std::string& part) {
    EXPECT_EQ(o.status, 2);
    EXPECT_TRUE(o.out.empty()) << o.out;
    EXPECT_NE(o.err.find(part), std::string::npos) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  };
  one_line_error(compare({"skyformer", "method = skyformer"}), "select the same 9 job(s)");
  one_line_error(compare({"method = softmax AND dataset = text", "method = skyformer AND dataset = image"}),
                 "share no dataset: A has 1 (text), B has 1 (image)");
  one_line_error(compare({"skyformer", "softmax", "--metric", "test_accuracy"}), "unknown metric 'test_accuracy'");
  one_line_error(compare({"performer", "softmax"}), "A ('performer') selects no job");
  one_line_error(compare({"skyformer", "softmax", "--ci", "wald"}), "unknown interval method 'wald'");
  one_line_error(compare({"skyformer"}), "name the two groups");
  one_line_error(compare({"skyformer", "softmax", "--pick", "best"}), "unknown pick rule 'best' (best-val or all)");
}

}  // namespace
}  // namespace attnlab::results
