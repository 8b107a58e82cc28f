// The query layer: the --where language compiled to bound SQL, select_jobs over job_outcomes,
// seed aggregation against numbers worked by hand, and the views giving the same answers.
#include <sqlite3.h>

#include <algorithm>
#include <cmath>

#include "attnlab/query.hpp"
#include "results/aggregate.hpp"
#include "results_support.hpp"
#include "../store/src/access.hpp"

namespace attnlab::results::testing {
namespace {

using store::Database;
using store::QueryError;
using store::Selection;

std::vector<std::int64_t> job_ids(const std::vector<store::JobRow>& rows) {
  std::vector<std::int64_t> ids;
  for (const auto& r : rows) ids.push_back(r.job_id);
  return ids;
}

// The first column of each row of a query on the database's own connection.
std::vector<std::string> column(Database& db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(store::sqlite_handle(db), sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(store::sqlite_handle(db));
  std::vector<std::string> out;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const auto* t = sqlite3_column_text(st, 0);
    out.emplace_back(t ? reinterpret_cast<const char*>(t) : "NULL");
  }
  sqlite3_finalize(st);
  return out;
}

class Query : public ResultsTest {
 protected:
  // Two methods × two datasets × three seeds, learning rates 1e-3 and 1e-4 by seed parity, known
  // accuracies; plus one failed and one queued job of softmax on text.
  void fill(Database& db) {
    for (const std::string method : {"softmax", "skyformer"})
      for (const std::string dataset : {"listops", "image"})
        for (std::int64_t seed = 1; seed <= 3; ++seed) {
          FakeJob f;
          f.method = method, f.dataset = dataset, f.seed = seed;
          f.params = {{"train.lr", seed % 2 ? "0.001" : "0.0001"}, {"model.layers", "2"}};
          f.results = {{"test_acc", accuracy(method, dataset, seed)}, {"peak_memory_bytes", 1048576.0 * seed}};
          add_job(db, f);
        }
    FakeJob failed;
    failed.method = "softmax", failed.dataset = "text", failed.outcome = "failed";
    add_job(db, failed);
    FakeJob queued;
    queued.method = "softmax", queued.dataset = "text", queued.seed = 2, queued.outcome = "queued";
    add_job(db, queued);
  }
  static double accuracy(const std::string& method, const std::string& dataset, std::int64_t seed) {
    return (method == "softmax" ? 0.50 : 0.60) + (dataset == "image" ? 0.1 : 0.0) + 0.01 * static_cast<double>(seed);
  }
};

TEST(Filter, CompilesToConstantSqlWithEveryValueBound) {
  const auto f = store::compile_filter("dataset = listops AND (train.lr < 1e-3 OR method IN (softmax, 'sky''former'))");
  EXPECT_EQ(f.sql.find("listops"), std::string::npos);
  EXPECT_EQ(f.sql.find("train.lr"), std::string::npos);
  EXPECT_EQ(f.sql.find("former"), std::string::npos);
  ASSERT_EQ(f.params.size(), 5u);  // listops, key train.lr, 1e-3, softmax, sky'former
  EXPECT_EQ(f.params[0].text, "listops");
  EXPECT_EQ(f.params[1].text, "train.lr");
  EXPECT_EQ(f.params[2].kind, store::CompiledFilter::Param::Kind::real);
  EXPECT_DOUBLE_EQ(f.params[2].real, 1e-3);
  EXPECT_EQ(f.params[4].text, "sky'former");
  EXPECT_EQ(f.config_keys, std::vector<std::string>{"train.lr"});
}

TEST(Filter, MalformedExpressionsAreOneLineNamingTheColumn) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "the expression is empty"},
      {"method =", "expected a value at column 9"},
      {"method softmax", "expected an operator (= != < <= > >= IN) after 'method' at column 8"},
      {"(method = a", "expected ')' at column 12"},
      {"seed = one", "seed takes an integer, not 'one' at column 8"},
      {"method = 'abc", "unterminated '... at column 10"},
      {"method = a OR", "expected a key at column 14"},
      {"method IN (a b)", "expected ',' or ')' in the IN list at column 14"},
      {"method ! a", "'!' is not an operator"},
      {"method = a; DROP TABLE runs", "unexpected character ';' at column 11"},
  };
  for (const auto& [expression, message] : cases) {
    try {
      store::compile_filter(expression);
      ADD_FAILURE() << "accepted: " << expression;
    } catch (const QueryError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(message), std::string::npos) << expression << " -> " << what;
      EXPECT_EQ(what.find('\n'), std::string::npos);
      EXPECT_EQ(what.rfind("--where '" + expression + "'", 0), 0u) << what;
    }
  }
}

TEST_F(Query, FiltersOnColumnsConfigKeysAndOrAndIn) {
  Database db(file("r.db"));
  fill(db);  // jobs 1-3 softmax/listops, 4-6 softmax/image, 7-9 skyformer/listops, 10-12 skyformer/image, 13 failed, 14 queued
  auto ids = [&](std::vector<std::string> where) {
    Selection s;
    s.where = std::move(where);
    return job_ids(store::select_jobs(db, s));
  };
  using V = std::vector<std::int64_t>;
  EXPECT_EQ(ids({"method = skyformer AND dataset = listops"}), (V{7, 8, 9}));
  EXPECT_EQ(ids({"method = skyformer", "dataset = listops"}), (V{7, 8, 9}));  // several --where: all hold
  EXPECT_EQ(ids({"dataset = text OR seed = 3 AND method = skyformer"}), (V{9, 12, 13, 14}));  // AND binds tighter
  EXPECT_EQ(ids({"(dataset = text OR seed = 3) AND method = softmax"}), (V{3, 6, 13, 14}));
  EXPECT_EQ(ids({"train.lr = 1e-4"}), (V{2, 5, 8, 11}));  // numeric: 1e-4 equals the stored "0.0001"
  EXPECT_EQ(ids({"train.lr < 0.0005 AND dataset = image"}), (V{5, 11}));
  EXPECT_EQ(ids({"train.lr != 0.001 AND method = softmax"}), (V{2, 5}));  // jobs without the key never match
  EXPECT_EQ(ids({"seed IN (1, 3) AND dataset IN ('image')"}), (V{4, 6, 10, 12}));
  EXPECT_EQ(ids({"method NOT IN (softmax)"}), (V{7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(ids({"NOT (status = done)"}), (V{13, 14}));
  EXPECT_EQ(ids({"status IN (failed, queued)"}), (V{13, 14}));
  EXPECT_EQ(ids({"seed >= 3 AND model.layers = 2"}), (V{3, 6, 9, 12}));
  EXPECT_EQ(ids({"model.layers = '2.0'"}), (V{}));  // quoted: compared as text
  EXPECT_EQ(ids({"job <= 2 or job > 13"}), (V{1, 2, 14}));  // keywords in any case
}

// Nesting (parentheses, NOT chains) is bounded by the parser: at the bound the query runs on
// SQLite, one deeper is a one-line QueryError, and a pathological depth neither crashes nor
// reaches SQLite's "parser stack overflow" (blamed on the database before).
TEST_F(Query, NestingIsBoundedBeforeSqliteOrTheStackOverflow) {
  Database db(file("r.db"));
  fill(db);
  auto run = [&](const std::string& where) {
    Selection s;
    s.where = {where};
    return job_ids(store::select_jobs(db, s));
  };
  auto parens = [](int n, const std::string& inner) { return std::string(n, '(') + inner + std::string(n, ')'); };
  std::string nots;
  for (int i = 0; i < store::kMaxWhereNesting; ++i) nots += "NOT ";
  using V = std::vector<std::int64_t>;
  const int max = store::kMaxWhereNesting;
  EXPECT_EQ(run(parens(max, "job = 3 OR job = 4 AND seed = 1")), (V{3, 4}));
  EXPECT_EQ(run(nots + "job != 2"), (V{1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}));  // 12 NOTs: even
  // every level an AND/OR chain around the next: still one SQL level per user level
  std::string chained = "job = 1";
  for (int i = 1; i < max; ++i) chained = "job = " + std::to_string(i % 14 + 1) + " OR seed = 9 AND (" + chained + ")";
  EXPECT_EQ(run(chained), (V{max}));  // the outermost "job = max": every inner level sits under "seed = 9 AND"
  // the costliest shapes for SQLite's parser stack, at the bound, under a second filter
  std::string costly = "experiment = x OR seed = 2 AND (job = 1 OR seed IN (1, 2)) AND NOT method NOT IN (a)";
  for (int i = 0; i + 3 <= max; i += 2) costly = "job = 1 OR seed = 2 AND NOT (" + costly + ")";
  {
    Selection s;
    s.where = {"job = 1 OR seed = 2 AND (job = 3)", costly};
    EXPECT_NO_THROW(store::select_jobs(db, s)) << costly;
  }
  std::string chain_parens = "job = 1 OR seed = 2 AND NOT method NOT IN (a)";
  for (int i = 0; i + 1 < max; ++i) chain_parens = "job = 1 OR seed = 2 AND (" + chain_parens + ")";
  EXPECT_NO_THROW(run(chain_parens));
  // mixed, at the bound: NOT (NOT (...)) and a NOT IN inside
  std::string mixed = "method NOT IN (softmax)";
  for (int i = 0; i < max / 2; ++i) mixed = "NOT (" + mixed + ")";
  EXPECT_EQ(run(mixed), (V{7, 8, 9, 10, 11, 12}));

  std::string many_nots;
  for (int i = 0; i < 30000; ++i) many_nots += "NOT ";
  for (const std::string& where : {parens(max + 1, "job = 1"), nots + "NOT job = 1", parens(10000, "job = 1"),
                                   many_nots + "job = 1"}) {
    try {
      run(where);
      ADD_FAILURE() << "accepted " << where.size() << " characters";
    } catch (const QueryError& e) {
      const std::string what = e.what();
      // the column of the first level too many: parenthesis 13, or the 13th "NOT " at 4 * 12 + 1
      const std::size_t column = where[0] == '(' ? max + 1 : 4 * max + 1;
      EXPECT_NE(what.find("nesting deeper than " + std::to_string(max) + " at column " + std::to_string(column)),
                std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos);
      EXPECT_LT(what.size(), 200u);
    }
  }
  // a flat chain is bounded too: SQLite's expression tree is as deep as the chain is long
  std::string in = "job IN (1";
  for (int i = 1; i < store::kMaxWhereComparisons; ++i) in += ", 1";
  EXPECT_EQ(run(in + ")"), (V{1}));
  try {
    run(in + ", 2)");
    ADD_FAILURE() << "accepted " << store::kMaxWhereComparisons + 1 << " comparisons";
  } catch (const QueryError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 500 comparisons at column"), std::string::npos) << e.what();
  }
}

TEST_F(Query, UnknownKeysAndMetricsAreRefusedWithWhatExists) {
  Database db(file("r.db"));
  fill(db);
  Selection s;
  s.where = {"train.lrr = 0.001"};
  try {
    store::select_jobs(db, s);
    ADD_FAILURE();
  } catch (const QueryError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown key 'train.lrr' (did you mean: train.lr)"), std::string::npos) << e.what();
  }
  Selection m;
  m.metrics = {"test_accuracy"};
  try {
    store::select_jobs(db, m);
    ADD_FAILURE();
  } catch (const QueryError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown metric 'test_accuracy' (did you mean: test_acc)"), std::string::npos)
        << e.what();
  }
}

TEST_F(Query, AnInjectionAttemptIsStoredAndReturnedAsText) {
  Database db(file("r.db"));
  const std::string evil = "x'); DROP TABLE runs; --";
  FakeJob f;
  f.params = {{"datasets.listops.path", evil}};
  f.results = {{"test_acc", 0.25}};
  add_job(db, f);
  FakeJob other;
  other.seed = 2;
  other.params = {{"datasets.listops.path", "/data/listops"}};
  other.results = {{"test_acc", 0.5}};
  add_job(db, other);

  Selection s;
  s.where = {"datasets.listops.path = \"" + evil + "\""};
  s.group_by = {"datasets.listops.path"};
  s.metrics = {"test_acc"};
  const auto rows = store::select_jobs(db, s);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].group, std::vector<std::string>{evil});
  EXPECT_EQ(rows[0].metrics[0], 0.25);
  EXPECT_EQ(column(db, "SELECT COUNT(*) FROM runs"), std::vector<std::string>{"2"});  // the table is still there
}

TEST_F(Query, CountingRunsAndStates) {
  Database db(file("r.db"));
  fill(db);
  FakeJob diverged;
  diverged.dataset = "text", diverged.seed = 3, diverged.outcome = "diverged";
  diverged.results = {{"test_acc", std::nan("")}};
  add_job(db, diverged);
  Selection s;
  s.where = {"dataset = text"};
  s.metrics = {"test_acc"};
  const auto rows = store::select_jobs(db, s);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].state, store::JobState::failed);
  EXPECT_NE(rows[0].run_id, 0);                   // its newest (third) attempt
  EXPECT_FALSE(rows[0].metrics[0].has_value());   // a failed attempt stored no results
  EXPECT_EQ(rows[1].state, store::JobState::queued);
  EXPECT_EQ(rows[1].run_id, 0);
  EXPECT_EQ(rows[2].state, store::JobState::diverged);
  ASSERT_TRUE(rows[2].metrics[0].has_value());
  EXPECT_TRUE(std::isnan(*rows[2].metrics[0]));  // stored NaN (NULL) is not "missing"
  EXPECT_EQ(column(db, "SELECT attempts FROM job_outcomes WHERE state = 'failed'"), std::vector<std::string>{"3"});
}

// The fixture's learning rate differs within each (method, dataset) (seed parity): a sweep's key,
// which the default grouping adds so that 1e-3 and 1e-4 are never averaged as seeds; model.layers
// is the same everywhere and the seed is what groups summarise over.
TEST_F(Query, TheDefaultGroupingAddsTheKeysASweepVaries) {
  Database db(file("r.db"));
  fill(db);
  std::vector<std::int64_t> ids;
  for (const auto& row : store::select_jobs(db, Selection{})) ids.push_back(row.job_id);
  EXPECT_EQ(store::keys_varying_within_groups(db, ids), std::vector<std::string>{"train.lr"});
  EXPECT_TRUE(store::keys_varying_within_groups(db, {ids[0], ids[2]}).empty());  // seeds 1 and 3: both 1e-3
  const auto out = attnlab({"results", "--db", file("r.db"), "--format", "csv"});
  ASSERT_EQ(out.status, 0) << out.err;
  EXPECT_EQ(out.out.substr(0, out.out.find('\n')).rfind("method,dataset,train.lr,jobs", 0), 0u) << out.out;
  EXPECT_NE(out.out.find("skyformer,image,0.001,2,2,"), std::string::npos) << out.out;  // seeds 1 and 3
  EXPECT_NE(out.out.find("skyformer,image,0.0001,1,1,"), std::string::npos) << out.out;
}

// A precision other than fp32 is always shown, even when every job shares it; fp32 (and jobs stored
// before the key existed) is not, unless it varies.
// The keys a sweep varies and the distinct (key, value) pairs of some jobs are read as rows and told
// apart in C++ (issue 58: SQL's GROUP BY and DISTINCT sorted every row); they are what the SQL
// that used to compute them gives, for a few jobs (read by their primary key) as for most of them
// (one scan of the table), a key only some jobs have and an empty value included.
TEST_F(Query, ConfigKeysReadTheSameForAFewJobsAsForMost) {
  Database db(file("k.db"));
  for (const std::string method : {"softmax", "performer"})
    for (const std::string dataset : {"listops", "image"})
      for (std::int64_t seed = 1; seed <= 6; ++seed) {
        FakeJob f;
        f.method = method, f.dataset = dataset, f.seed = seed;
        f.params = {{"train.steps", "100"}, {"train.lr", method == "performer" && dataset == "image" && seed % 2 ? "0.001" : "0.0001"},
                    {"train.checkpoint_every", std::to_string(seed)}};
        if (method == "performer") f.params.push_back({"methods.performer.features", seed <= 3 ? "" : "64"});
        add_job(db, f);
      }
  std::vector<std::int64_t> all;
  for (const auto& row : store::select_jobs(db, Selection{})) all.push_back(row.job_id);
  ASSERT_EQ(all.size(), 24u);
  const auto listed = [](const std::vector<std::int64_t>& ids) {
    std::string text = "'[";
    for (std::size_t i = 0; i < ids.size(); ++i) text += (i ? "," : "") + std::to_string(ids[i]);
    return text + "]'";
  };
  for (const std::vector<std::int64_t>& ids : std::vector<std::vector<std::int64_t>>{
           all, {all[18], all[19]}, {all[20], all[22]}, {all[12], all[13], all[15], all[18], all[19], all[20], all[23]}, {}}) {
    const auto varying = column(db, "SELECT DISTINCT key FROM (SELECT p.key AS key FROM job_params AS p JOIN jobs AS j "
                                    "ON j.id = p.job_id WHERE p.job_id IN (SELECT value FROM json_each(" + listed(ids) + ")) "
                                    "AND p.key NOT IN ('method', 'dataset', 'seed', 'train.checkpoint_every', "
                                    "'train.accuracy_checkpoints') GROUP BY j.method, j.dataset, p.key "
                                    "HAVING count(DISTINCT p.value) > 1) ORDER BY key");
    EXPECT_EQ(store::keys_varying_within_groups(db, ids), varying) << listed(ids);
    std::vector<std::string> pairs;
    for (const auto& [key, value] : store::config_key_values(db, ids)) pairs.push_back(key + "=" + value);
    EXPECT_EQ(pairs, column(db, "SELECT DISTINCT key || '=' || value FROM job_params WHERE job_id IN (SELECT value FROM "
                                "json_each(" + listed(ids) + ")) ORDER BY key, value")) << listed(ids);
  }
  EXPECT_EQ(store::keys_varying_within_groups(db, all), (std::vector<std::string>{"methods.performer.features", "train.lr"}));
  EXPECT_EQ(store::keys_varying_within_groups(db, {all[20], all[22]}), std::vector<std::string>{"methods.performer.features"});
}

TEST_F(Query, ANonFp32PrecisionIsShownEvenWhenEveryJobSharesIt) {
  {
    Database db(file("p.db"));
    for (std::int64_t seed = 1; seed <= 2; ++seed) {
      FakeJob f;
      f.method = "softmax", f.dataset = "listops", f.seed = seed;
      f.params = {{"train.precision", "bf16"}};
      f.results = {{"test_acc", 0.3 + 0.1 * seed}};
      add_job(db, f);
      FakeJob old = f;  // stored before precision existed: no key
      old.method = "performer";
      old.params = {};
      add_job(db, old);
    }
  }
  auto first_line = [](const std::string& text) { return text.substr(0, text.find('\n')); };
  const auto out = attnlab({"results", "--db", file("p.db"), "--format", "csv"});
  ASSERT_EQ(out.status, 0) << out.err;
  EXPECT_EQ(first_line(out.out).rfind("method,dataset,train.precision,jobs", 0), 0u) << out.out;
  EXPECT_NE(out.out.find("softmax,listops,bf16,2,2,"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("performer,listops,,2,2,"), std::string::npos) << out.out;
  const auto old_only = attnlab({"results", "--db", file("p.db"), "--where", "method = performer", "--format", "csv"});
  ASSERT_EQ(old_only.status, 0) << old_only.err;
  EXPECT_EQ(first_line(old_only.out).rfind("method,dataset,jobs", 0), 0u) << old_only.out;
}

TEST_F(Query, SeedAggregationMatchesHandWorkedNumbersAndTheView) {
  Database db(file("r.db"));
  fill(db);
  Selection s;
  s.metrics = {"test_acc"};
  s.group_by = {"method", "dataset"};
  const auto groups = summarize(store::select_jobs(db, s), 1);
  ASSERT_EQ(groups.size(), 5u);  // softmax × 3 (text has no finished seed), skyformer × 2
  // in the order the jobs were enqueued (the experiment file's), not alphabetically
  std::vector<std::vector<std::string>> keys;
  for (const auto& g : groups) keys.push_back(g.key);
  EXPECT_EQ(keys, (std::vector<std::vector<std::string>>{{"softmax", "listops"}, {"softmax", "image"},
                                                         {"softmax", "text"}, {"skyformer", "listops"},
                                                         {"skyformer", "image"}}));
  // skyformer/image: 0.71, 0.72, 0.73: mean 0.72, sample std 0.01
  const auto& image = groups[4];
  EXPECT_EQ(image.metrics[0].n, 3u);
  EXPECT_NEAR(image.metrics[0].mean, 0.72, 1e-12);
  EXPECT_NEAR(image.metrics[0].std, 0.01, 1e-12);
  EXPECT_NEAR(image.metrics[0].min, 0.71, 1e-12);
  EXPECT_NEAR(image.metrics[0].max, 0.73, 1e-12);
  const auto& text = groups[2];
  EXPECT_EQ(text.key, (std::vector<std::string>{"softmax", "text"}));
  EXPECT_EQ(text.jobs, 2u);
  EXPECT_EQ(text.failed, 1u);
  EXPECT_EQ(text.unfinished, 1u);
  EXPECT_EQ(text.metrics[0].n, 0u);
  EXPECT_TRUE(std::isnan(text.metrics[0].mean));

  // Grouped by a config key: lr 0.001 = seeds 1 and 3 of the twelve done jobs.
  Selection by_lr;
  by_lr.metrics = {"peak_memory_bytes"};
  by_lr.group_by = {"train.lr"};
  by_lr.where = {"status = done"};
  const auto lr = summarize(store::select_jobs(db, by_lr), 1);
  ASSERT_EQ(lr.size(), 2u);
  EXPECT_EQ(lr[0].key[0], "0.0001");  // ordered as numbers
  EXPECT_EQ(lr[0].metrics[0].n, 4u);
  EXPECT_DOUBLE_EQ(lr[0].metrics[0].mean, 2 * 1048576.0);
  EXPECT_EQ(lr[1].metrics[0].n, 8u);  // seeds 1 and 3: 1 MiB four times, 3 MiB four times
  EXPECT_DOUBLE_EQ(lr[1].metrics[0].mean, 2 * 1048576.0);
  EXPECT_NEAR(lr[1].metrics[0].std, std::sqrt(8.0 / 7.0) * 1048576.0, 1e-6);

  // The view seed_stats gives the same numbers at the sqlite3 prompt, the learning rates apart as
  // `results` keeps them (seeds 1 and 3: 0.71 and 0.73; seed 2: 0.72).
  EXPECT_EQ(column(db, "SELECT printf('%s %.12f %.12f %d %d %d', config, mean, coalesce(std, -1), n, jobs, failed) "
                       "FROM seed_stats WHERE method = 'skyformer' AND dataset = 'image' AND metric = 'test_acc' "
                       "ORDER BY config"),
            (std::vector<std::string>{"train.lr=0.0001 0.720000000000 -1.000000000000 1 1 0",
                                      "train.lr=0.001 0.720000000000 0.014142135624 2 2 0"}));
  EXPECT_EQ(column(db, "SELECT COUNT(*) FROM seed_stats WHERE dataset = 'text'"), std::vector<std::string>{"0"});
  EXPECT_EQ(column(db, "SELECT COUNT(*) FROM job_results WHERE metric = 'test_acc'"), std::vector<std::string>{"12"});
}

// The sweep: softmax on sparse_sum at four (sparsity, lr) configurations × two seeds, and
// performer beside it at one. The view seed_stats gives the groups `attnlab results` prints, n, mean
// and std each, never the eight runs pooled as one group (what it gave before schema 15: n = 8).
TEST_F(Query, TheViewSeedStatsKeepsASweepsConfigurationsApartAsResultsDoes) {
  {
    Database db(file("s.db"));
    for (const std::string sparsity : {"0.1", "0.3"})
      for (const std::string lr : {"0.001", "0.0001"})
        for (std::int64_t seed = 1; seed <= 2; ++seed) {
          FakeJob f;
          f.method = "softmax", f.dataset = "sparse_sum", f.seed = seed;
          f.params = {{"datasets.sparse_sum.sparsity", sparsity}, {"train.lr", lr}, {"model.layers", "2"}};
          f.results = {{"test_acc", 0.2 + std::stod(sparsity) + (lr == "0.001" ? 0.1 : 0.0) + 0.03 * static_cast<double>(seed)}};
          add_job(db, f);
          if (sparsity != "0.1" || lr != "0.001") continue;
          f.method = "performer", f.params.push_back({"methods.performer.features", "64"});
          f.results = {{"test_acc", 0.25 + 0.02 * static_cast<double>(seed)}};
          add_job(db, f);
        }
  }
  const auto out = attnlab({"results", "--db", file("s.db"), "--format", "csv"});
  ASSERT_EQ(out.status, 0) << out.err;
  // method,dataset,<the sweep's keys>,...,test_acc_mean,test_acc_std,test_acc_n,...: each group as
  // "method dataset key=value ... n mean std", the view's `config` written the same way
  std::vector<std::string> lines;
  for (std::size_t at = 0; at < out.out.size();) {
    const std::size_t end = out.out.find('\n', at);
    lines.push_back(out.out.substr(at, end - at));
    at = end + 1;
  }
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    for (std::size_t at = 0;;) {
      const std::size_t comma = line.find(',', at);
      cells.push_back(line.substr(at, comma - at));
      if (comma == std::string::npos) return cells;
      at = comma + 1;
    }
  };
  const auto header = split(lines.at(0));
  const auto at = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name << " in " << lines.at(0);
    return static_cast<std::size_t>(it - header.begin());
  };
  const std::vector<std::string> keys = {"datasets.sparse_sum.sparsity", "train.lr"};
  std::vector<std::string> printed;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const auto cells = split(lines[i]);
    std::string config;
    for (const auto& key : keys)
      if (!cells.at(at(key)).empty() && cells.at(at(key)) != "-") config += (config.empty() ? "" : " ") + key + "=" + cells.at(at(key));
    char numbers[96];
    std::snprintf(numbers, sizeof numbers, " %s %.6f %.6f", cells.at(at("test_acc_n")).c_str(),
                  std::stod(cells.at(at("test_acc_mean"))),
                  cells.at(at("test_acc_std")).empty() ? -1.0 : std::stod(cells.at(at("test_acc_std"))));
    printed.push_back(cells.at(0) + " " + cells.at(1) + " " + config + numbers);
  }
  Database db(file("s.db"), Database::Open::existing);
  auto viewed = column(db, "SELECT method || ' ' || dataset || ' ' || config || printf(' %d %.6f %.6f', n, mean, "
                           "coalesce(std, -1)) FROM seed_stats WHERE metric = 'test_acc'");
  std::sort(printed.begin(), printed.end());
  std::sort(viewed.begin(), viewed.end());
  EXPECT_EQ(viewed, printed) << out.out;
  ASSERT_EQ(viewed.size(), 5u);
  EXPECT_EQ(viewed[1], "softmax sparse_sum datasets.sparse_sum.sparsity=0.1 train.lr=0.0001 2 0.345000 0.021213");
  // performer varies in nothing, but a row of the file says the sweep's keys, as `results` does
  EXPECT_EQ(viewed[0], "performer sparse_sum datasets.sparse_sum.sparsity=0.1 train.lr=0.001 2 0.280000 0.014142");
}

// A configuration whose value holds a space, a quote or a backslash, or is empty: `config` quotes it
// (schema 17), so the text splits back into its pairs; version 15 wrote "k=a b" bare.
TEST_F(Query, TheViewSeedStatsQuotesAValueThatWouldNotSplitBack) {
  {
    Database db(file("s.db"));
    for (const std::string note : {"two words", "say \"hi\"", "back\\slash", "", "plain"}) {
      FakeJob f;
      f.method = "softmax", f.dataset = "sparse_sum", f.params = {{"train.note", note}}, f.results = {{"test_acc", 0.5}};
      add_job(db, f);
    }
  }
  Database db(file("s.db"), Database::Open::existing);
  auto configs = column(db, "SELECT config FROM seed_stats WHERE metric = 'test_acc'");
  std::sort(configs.begin(), configs.end());
  EXPECT_EQ(configs, (std::vector<std::string>{"train.note=\"\"", "train.note=\"back\\\\slash\"",
                                               "train.note=\"say \\\"hi\\\"\"", "train.note=\"two words\"",
                                               "train.note=plain"}));
}

// Every query store/README.md offers for pasting into sqlite3 runs on a filled database.
TEST_F(Query, EveryReadmeQueryRuns) {
  Database db(file("r.db"));
  fill(db);
  const std::string readme = slurp(std::string(ATTNLAB_SOURCE_DIR) + "/store/README.md");
  std::size_t blocks = 0, statements = 0;
  for (std::size_t at = readme.find("```sql\n"); at != std::string::npos; at = readme.find("```sql\n", at)) {
    const std::size_t begin = at + 7, end = readme.find("```", begin);
    ASSERT_NE(end, std::string::npos);
    const std::string block = readme.substr(begin, end - begin);
    ++blocks;
    const char* tail = block.c_str();
    while (*tail) {
      sqlite3_stmt* st = nullptr;
      ASSERT_EQ(sqlite3_prepare_v2(store::sqlite_handle(db), tail, -1, &st, &tail), SQLITE_OK)
          << sqlite3_errmsg(store::sqlite_handle(db)) << "\n" << block;
      if (!st) break;  // only whitespace left
      ++statements;
      int rc;
      while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      }
      EXPECT_EQ(rc, SQLITE_DONE) << sqlite3_errmsg(store::sqlite_handle(db)) << "\n" << block;
      sqlite3_finalize(st);
    }
    at = end + 3;
  }
  EXPECT_GE(blocks, 10u);
  EXPECT_GE(statements, blocks);
}

// A version 4 file (version 5 only adds views; 6 rebuilds the tables it reads; 7 and 8 add the spectrum and gradient tables, dropped here, as 10's and 11's columns) with finished jobs: readers refuse it in one line,
// `db migrate` (Open::migrate) adds the views, and they see the jobs that were there.
TEST_F(Query, Version4FilesGetTheViewsByMigration) {
  {
    Database db(file("old.db"));
    fill(db);
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(store::sqlite_handle(db),
                           "DROP VIEW job_results; DROP VIEW seed_stats; DROP VIEW run_curves; DROP VIEW job_outcomes; "
                           "DROP TABLE spectrum_results; DROP TABLE spectrum_summaries; DROP TABLE gradient_stats; DROP TABLE accuracy_marks; DROP TABLE run_phases; DROP TABLE experiment_jobs; "
                           "ALTER TABLE approx_results DROP COLUMN device_name; "
                           "ALTER TABLE approx_results DROP COLUMN threads; "
                           "ALTER TABLE bench_results DROP COLUMN host_seconds_median; "
                           "ALTER TABLE bench_results DROP COLUMN ops_per_step; "
                           "ALTER TABLE bench_results DROP COLUMN step_mode; "
                           "ALTER TABLE bench_results DROP COLUMN concurrent; "
                           "ALTER TABLE runs DROP COLUMN step_mode; ALTER TABLE runs DROP COLUMN warnings; PRAGMA user_version = 4",
                           nullptr, nullptr, &err),
              SQLITE_OK)
        << (err ? err : "");
  }
  const auto refused = attnlab({"results", "--db", file("old.db")});
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("database schema version 4 is older than this attnlab needs (17): run `attnlab db migrate"),
            std::string::npos)
      << refused.err;
  const auto migrated = attnlab({"db", "migrate", "--db", file("old.db")});
  ASSERT_EQ(migrated.status, 0) << migrated.err;
  EXPECT_EQ(migrated.out, file("old.db") + ": schema version 4 -> 17\n");
  Database db(file("old.db"), Database::Open::existing);
  EXPECT_EQ(column(db, "SELECT config || ' ' || n || ' ' || failed FROM seed_stats WHERE method = 'softmax' "
                       "AND dataset = 'listops' AND metric = 'test_acc' ORDER BY config"),
            (std::vector<std::string>{"train.lr=0.0001 1 0", "train.lr=0.001 2 0"}));
  EXPECT_EQ(column(db, "SELECT COUNT(*) FROM job_outcomes WHERE run_id IS NULL"), std::vector<std::string>{"1"});
}

TEST(Aggregate, GroupsListNumbersByValueAndTextInTheOrderFirstNamed) {
  GroupOrder order;
  for (const auto& key : std::vector<std::vector<std::string>>{
           {"softmax", "128"}, {"performer", "64"}, {"softmax", "1e3"}, {"linear", "64"}, {"performer", "auto"}})
    order.see(key);
  std::vector<std::vector<std::string>> keys = {{"linear", "64"},   {"performer", "auto"}, {"softmax", "1e3"},
                                                {"performer", "64"}, {"softmax", "128"}};
  std::sort(keys.begin(), keys.end(), order);
  EXPECT_EQ(keys, (std::vector<std::vector<std::string>>{{"softmax", "128"}, {"softmax", "1e3"}, {"performer", "64"},
                                                         {"performer", "auto"}, {"linear", "64"}}));
  EXPECT_TRUE(order({"softmax", "64"}, {"softmax", "64.0"}));  // one number spelled twice: the first named first
  EXPECT_FALSE(order({"softmax", "64.0"}, {"softmax", "64"}));
  EXPECT_TRUE(order({"linear", "1"}, {"unseen", "1"}));  // a value never seen goes last
}

TEST(Aggregate, SeedStatsSkipNaNAndKeepInfinity) {
  const auto s = seed_stats({1.0, std::nan(""), 3.0});
  EXPECT_EQ(s.n, 2u);
  EXPECT_DOUBLE_EQ(s.mean, 2.0);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(2.0));
  const auto one = seed_stats({0.5});
  EXPECT_EQ(one.n, 1u);
  EXPECT_TRUE(std::isnan(one.std));
  EXPECT_TRUE(std::isinf(seed_stats({1.0, HUGE_VAL}).mean));
}

}  // namespace
}  // namespace attnlab::results::testing
