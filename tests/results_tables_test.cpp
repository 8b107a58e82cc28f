// Renderers (CSV and JSON parse back to the same numbers), the papers' tables with their marks,
// and `attnlab results` / `attnlab table` end to end.
#include <sqlite3.h>

#include <cmath>
#include <cstdio>

#include "attnlab/query.hpp"
#include "results/aggregate.hpp"
#include "results/paper_tables.hpp"
#include "results_support.hpp"
#include "../store/src/access.hpp"

namespace attnlab::results::testing {
namespace {

using store::Database;

// RFC 4180: fields split on commas outside quotes, "" inside quotes is a quote, rows end in CRLF.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(field), field.clear();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      rows.back().push_back(field), field.clear();
      rows.emplace_back();
      ++i;
    } else {
      field += c;
    }
  }
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

// A JSON path of a document, read by SQLite's JSON functions (no JSON library needed): the value
// as text ("NULL" for null), or "INVALID" when the document does not parse.
std::string json_at(const std::string& document, const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open(":memory:", &db);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT CASE WHEN json_valid(?1) THEN coalesce(json_extract(?1, ?2), 'NULL') ELSE 'INVALID' END",
                     -1, &st, nullptr);
  sqlite3_bind_text(st, 1, document.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, path.c_str(), -1, SQLITE_TRANSIENT);
  std::string out = "?";
  if (sqlite3_step(st) == SQLITE_ROW) {
    if (sqlite3_column_type(st, 0) == SQLITE_FLOAT) {  // SQLite's own text of a REAL has 15 digits only
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", sqlite3_column_double(st, 0));
      out = buf;
    } else {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

std::size_t column_of(const std::vector<std::string>& header, const std::string& name) {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  ADD_FAILURE() << "no column " << name;
  return 0;
}

// Two methods × two tasks; performer/sparse_sum lost a seed (still queued) and softmax/listops has
// a failed job beside its three done seeds. Accuracies chosen so means and stds are easy by hand.
class Tables : public ResultsTest {
 protected:
  void SetUp() override {
    ResultsTest::SetUp();
    db_ = std::make_unique<Database>(file("t.db"));
    const double acc[2][2][3] = {{{0.40, 0.42, 0.44}, {0.60, 0.62, 0.64}}, {{0.30, 0.33, 0.36}, {0.70, 0.80, 0.90}}};
    const char* methods[] = {"softmax", "performer"};
    const char* tasks[] = {"listops", "sparse_sum"};
    for (int m = 0; m < 2; ++m)
      for (int t = 0; t < 2; ++t)
        for (int s = 0; s < 3; ++s) {
          FakeJob f;
          f.method = methods[m], f.dataset = tasks[t], f.seed = s + 1;
          if (m == 1 && t == 1 && s == 2) f.outcome = "queued";
          f.results = {{"test_acc", acc[m][t][s]},
                       {"steps_per_second", 2.0 * (m + 1)},          // 500 or 250 s per 1000 steps
                       {"peak_memory_bytes", 1048576.0 * (100 + 10 * s)}};  // 100, 110, 120 MiB
          if (m == 1) f.results.insert(f.results.end(), {{"rsd", 0.1 * (s + 1)}, {"pi", 1.0 * s}, {"agv", 1.0},
                                                          {"va", acc[m][t][s]}, {"variance_passes", 20}});
          add_job(*db_, f);
        }
    FakeJob failed;
    failed.method = "softmax", failed.dataset = "listops", failed.seed = 4, failed.outcome = "failed";
    add_job(*db_, failed);
  }
  std::unique_ptr<Database> db_;
};

TEST(Formats, CsvQuotesAndJsonEscapesRoundTrip) {
  Grid g;
  g.header = {"name", "value", "missing"};
  g.rows.push_back({Cell::of_text("a, \"quoted\"\nline"), Cell::of_number(0.1 + 0.2), Cell::none()});
  g.rows.push_back({Cell::of_text("tab\there \\ back"), Cell::of_number(1e-300), Cell::of_number(NAN)});
  const auto csv = parse_csv(render(g, Format::csv));
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[1][0], "a, \"quoted\"\nline");
  EXPECT_EQ(std::stod(csv[1][1]), 0.1 + 0.2);  // every bit of the double
  EXPECT_EQ(csv[1][2], "");
  EXPECT_EQ(csv[2][2], "nan");
  const std::string json = render(g, Format::json);
  EXPECT_EQ(json_at(json, "$[0].name"), "a, \"quoted\"\nline");
  EXPECT_EQ(std::stod(json_at(json, "$[0].value")), 0.1 + 0.2);
  EXPECT_EQ(json_at(json, "$[0].missing"), "NULL");
  EXPECT_EQ(json_at(json, "$[1].name"), "tab\there \\ back");
  EXPECT_EQ(std::stod(json_at(json, "$[1].value")), 1e-300);
  EXPECT_EQ(json_at(json, "$[1].missing"), "NULL");  // NaN: JSON has none
  EXPECT_NE(render(g, Format::markdown).find("| name | value | missing |"), std::string::npos);
  EXPECT_THROW(parse_format("xml"), std::invalid_argument);
}

// Numbers for people are the shortest text that reads back bit-exactly: 0.361, not 0.36099999999999999.
TEST(Formats, NumbersAreShortestRoundTrip) {
  for (const double x : {0.361, 0.1, 0.1 + 0.2, 1e-300, 1e22, -2.5, 3.0, 1048576.0 * 120, 0.0001}) {
    const std::string text = shortest_number(x);
    EXPECT_EQ(std::stod(text), x) << text;
    EXPECT_LE(text.size(), 24u);
  }
  EXPECT_EQ(shortest_number(0.361), "0.361");
  EXPECT_EQ(shortest_number(0.1), "0.1");
  EXPECT_EQ(shortest_number(3.0), "3");
  EXPECT_EQ(json_number(0.361), "0.361");
  Grid g;
  g.header = {"acc", "lr"};
  g.rows.push_back({Cell::of_number(0.361), Cell::of_number(1e-4)});
  EXPECT_EQ(render(g, Format::csv), "acc,lr\r\n0.361,1e-04\r\n");
  EXPECT_EQ(render(g, Format::json).find("0.36099999"), std::string::npos);
}

TEST_F(Tables, AccuracyMarksTheMissingSeedAndTheFailedRunAndAveragesOnlyCompleteRows) {
  PaperTableOptions o;
  const Grid g = paper_table(*db_, PaperTable::accuracy, o);
  ASSERT_EQ(g.header, (std::vector<std::string>{"method", "listops", "sparse_sum", "average"}));
  ASSERT_EQ(g.rows.size(), 2u);
  // softmax: listops 0.42 ± 0.02 (3) with a failed job; sparse_sum 0.62 ± 0.02 (3); average 0.52
  EXPECT_EQ(g.rows[0][0].text, "softmax");
  EXPECT_EQ(g.rows[0][1].text, "0.4200 ± 0.0200 (3)‡");
  EXPECT_EQ(g.rows[0][2].text, "0.6200 ± 0.0200 (3)");
  EXPECT_EQ(g.rows[0][3].text, "0.5200‡");
  // performer: listops 0.33 ± 0.03 (3); sparse_sum 0.75 ± 0.0707 (2), fewer seeds
  EXPECT_EQ(g.rows[1][1].text, "0.3300 ± 0.0300 (3)");
  EXPECT_EQ(g.rows[1][2].text, "0.7500 ± 0.0707 (2)†");
  EXPECT_NEAR(*g.rows[1][3].number, (0.33 + 0.75) / 2, 1e-12);
  EXPECT_EQ(g.rows[1][3].text, "0.5400†");
  ASSERT_GE(g.notes.size(), 2u);
  EXPECT_NE(g.notes[1].find("fewer seeds than the table's fullest cell (3)"), std::string::npos);

  // A task one method never ran: "-", marked, and no average rather than a biased one.
  FakeJob only;
  only.method = "softmax", only.dataset = "text", only.results = {{"test_acc", 0.9}};
  add_job(*db_, only);
  const Grid h = paper_table(*db_, PaperTable::accuracy, o);
  ASSERT_EQ(h.header.size(), 5u);
  EXPECT_EQ(h.rows[1][3].text, "-†");
  EXPECT_TRUE(h.rows[1][3].missing);
  EXPECT_EQ(h.rows[1][4].text, "-");
  EXPECT_EQ(h.rows[0][3].text, "0.9000 (1)†");
}

TEST_F(Tables, CostAndVarianceLayouts) {
  PaperTableOptions o;
  const Grid cost = paper_table(*db_, PaperTable::cost, o);
  ASSERT_EQ(cost.header, (std::vector<std::string>{"method", "listops s/1k steps", "listops peak MiB",
                                                   "sparse_sum s/1k steps", "sparse_sum peak MiB"}));
  EXPECT_EQ(cost.rows[0][1].text, "500.0 ± 0.0 (3)‡");
  EXPECT_EQ(cost.rows[0][2].text, "110.0 ± 10.0 (3)‡");
  EXPECT_EQ(cost.rows[1][3].text, "250.0 ± 0.0 (2)†");
  EXPECT_EQ(cost.rows[1][4].text, "105.0 ± 7.1 (2)†");
  bool environment = false;
  for (const auto& n : cost.notes) environment |= n.rfind("ran on cpu", 0) == 0;
  EXPECT_TRUE(environment);

  const Grid var = paper_table(*db_, PaperTable::variance, o);
  ASSERT_EQ(var.rows.size(), 1u);  // softmax has no variance metrics: not listed
  EXPECT_EQ(var.rows[0][0].text, "performer");
  EXPECT_EQ(var.header[1], "listops RSD");
  EXPECT_EQ(var.rows[0][1].text, "0.200 ± 0.100 (3)");
  EXPECT_EQ(var.rows[0][2].text, "1.00 ± 1.00 (3)");  // PI 0, 1, 2
  EXPECT_EQ(var.rows[0][6].text, "0.50 ± 0.71 (2)†");  // sparse_sum PI 0, 1 (seed 3 queued)
  EXPECT_NE(var.notes.back().find("R = 20"), std::string::npos);

  // Long layout: one row per (method, task, metric), numbers exact.
  o.wide = false;
  const Grid long_cost = paper_table(*db_, PaperTable::cost, o);
  ASSERT_EQ(long_cost.rows.size(), 8u);
  const auto& h = long_cost.header;
  const auto& row = long_cost.rows[7];  // performer, sparse_sum, peak MiB
  EXPECT_EQ(row[column_of(h, "task")].text, "sparse_sum");
  EXPECT_DOUBLE_EQ(*row[column_of(h, "mean")].number, 105.0);
  EXPECT_DOUBLE_EQ(*row[column_of(h, "n")].number, 2);
  EXPECT_DOUBLE_EQ(*row[column_of(h, "unfinished")].number, 1);
  EXPECT_DOUBLE_EQ(*row[column_of(h, "fewer_seeds")].number, 1);
}

TEST_F(Tables, ResultsCsvAndJsonFromTheBinaryParseBackToTheSameNumbers) {
  const auto csv = attnlab({"results", "--db", file("t.db"), "--format", "csv", "--metric", "test_acc,peak_memory_bytes"});
  ASSERT_EQ(csv.status, 0) << csv.err;
  const auto rows = parse_csv(csv.out);
  ASSERT_EQ(rows.size(), 5u);  // header + 4 groups
  const auto& h = rows[0];
  // groups in enqueue order: softmax/listops, softmax/sparse_sum, performer/listops, performer/sparse_sum
  EXPECT_EQ(rows[1][column_of(h, "method")], "softmax");
  EXPECT_EQ(rows[1][column_of(h, "dataset")], "listops");
  EXPECT_NEAR(std::stod(rows[1][column_of(h, "test_acc_mean")]), 0.42, 1e-15);
  EXPECT_NEAR(std::stod(rows[1][column_of(h, "test_acc_std")]), 0.02, 1e-15);
  EXPECT_EQ(rows[1][column_of(h, "test_acc_n")], "3");
  EXPECT_EQ(rows[1][column_of(h, "failed")], "1");
  EXPECT_EQ(std::stod(rows[1][column_of(h, "peak_memory_bytes_max")]), 1048576.0 * 120);
  EXPECT_EQ(rows[4][column_of(h, "method")], "performer");
  EXPECT_EQ(rows[4][column_of(h, "dataset")], "sparse_sum");
  EXPECT_EQ(rows[4][column_of(h, "unfinished")], "1");
  EXPECT_EQ(rows[4][column_of(h, "test_acc_n")], "2");

  const auto json = attnlab({"results", "--db", file("t.db"), "--format", "json", "--where", "method = performer",
                             "--group-by", "dataset"});
  ASSERT_EQ(json.status, 0) << json.err;
  EXPECT_EQ(json_at(json.out, "$[1].dataset"), "sparse_sum");
  EXPECT_NEAR(std::stod(json_at(json.out, "$[1].test_acc_mean")), 0.75, 1e-15);
  EXPECT_NEAR(std::stod(json_at(json.out, "$[1].test_acc_std")), std::sqrt(0.005), 1e-12);
  EXPECT_EQ(json_at(json.out, "$[2]"), "NULL");  // two groups only

  // The view gives the sqlite3 prompt the same mean.
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(store::sqlite_handle(*db_),
                     "SELECT mean FROM seed_stats WHERE method = 'performer' AND dataset = 'sparse_sum' AND metric = 'test_acc'",
                     -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_double(st, 0), std::stod(json_at(json.out, "$[1].test_acc_mean")));
  sqlite3_finalize(st);
}

// A sweep's values are not seeds: a swept dataset setting gets its own column, any other swept
// setting its own row, and --paper (one configuration a cell) is refused, naming the key.
TEST_F(ResultsTest, ASweepsValuesGetTheirOwnColumnsAndRowsNeverAveragedAsSeeds) {
  Database db(file("sweep.db"));
  const auto add = [&](const char* method, const char* dataset, std::int64_t seed, const char* key, const char* value,
                       double acc) {
    FakeJob f;
    f.method = method, f.dataset = dataset, f.seed = seed;
    f.params = {{key, value}};
    f.results = {{"test_acc", acc}};
    add_job(db, f);
  };
  const char* sparsity = "datasets.sparse_sum.sparsity";
  add("gmm_rks", "sparse_sum", 1, sparsity, "0.1", 0.9);
  add("gmm_rks", "sparse_sum", 2, sparsity, "0.1", 0.8);
  add("gmm_rks", "sparse_sum", 1, sparsity, "0.9", 0.3);
  add("gmm_rks", "sparse_sum", 2, sparsity, "0.9", 0.5);
  add("gmm_prf", "sparse_sum", 1, sparsity, "0.9", 0.2);
  add("gmm_prf", "listops", 1, "train.lr", "0.001", 0.2);
  add("gmm_prf", "listops", 1, "train.lr", "0.0001", 0.4);

  PaperTableOptions o;
  const Grid g = paper_table(db, PaperTable::accuracy, o);
  ASSERT_EQ(g.header, (std::vector<std::string>{"method", "sparse_sum sparsity=0.1", "sparse_sum sparsity=0.9", "listops",
                                                "average"}));
  ASSERT_EQ(g.rows.size(), 4u);
  EXPECT_EQ(g.rows[0][0].text, "gmm_rks");
  EXPECT_EQ(g.rows[0][1].text, "0.8500 ± 0.0707 (2)");  // never 0.625 over four "seeds"
  EXPECT_EQ(g.rows[0][2].text, "0.4000 ± 0.1414 (2)");
  EXPECT_EQ(g.rows[1][0].text, "gmm_prf");  // its sparse_sum job has a sparsity but no swept other setting
  EXPECT_EQ(g.rows[1][2].text, "0.2000 (1)†");
  EXPECT_EQ(g.rows[2][0].text, "gmm_prf lr=0.001");
  EXPECT_EQ(g.rows[2][3].text, "0.2000 (1)†");
  EXPECT_EQ(g.rows[3][0].text, "gmm_prf lr=0.0001");
  EXPECT_EQ(g.rows[3][3].text, "0.4000 (1)†");
  EXPECT_NE(g.notes[1].find("never averaged as seeds: datasets.sparse_sum.sparsity, train.lr"), std::string::npos)
      << g.notes[1];

  // One configuration selected: no split.
  o.where = {"datasets.sparse_sum.sparsity = 0.1"};
  const Grid one = paper_table(db, PaperTable::accuracy, o);
  EXPECT_EQ(one.header, (std::vector<std::string>{"method", "sparse_sum", "average"}));

  const auto refused = attnlab({"table", "accuracy", "--paper", "kl", "--db", file("sweep.db")});
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("differ in datasets.sparse_sum.sparsity, train.lr, and each of the paper's cells is one "
                             "configuration: choose one with --where"),
            std::string::npos)
      << refused.err;
}

TEST_F(Tables, CommandsEndToEndAndTheirErrors) {
  const auto table = attnlab({"table", "accuracy", "--db", file("t.db")});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("0.7500 ± 0.0707 (2)†"), std::string::npos) << table.out;
  const auto md = attnlab({"table", "variance", "--db", file("t.db"), "--format", "markdown"});
  ASSERT_EQ(md.status, 0) << md.err;
  EXPECT_EQ(md.out.rfind("| method | listops RSD |", 0), 0u) << md.out;
  const auto jobs = attnlab({"results", "--db", file("t.db"), "--jobs", "--where", "status = failed"});
  ASSERT_EQ(jobs.status, 0) << jobs.err;
  EXPECT_NE(jobs.out.find("failed"), std::string::npos);
  // method and dataset once each (the default grouping is not repeated after the fixed columns)
  const auto jobs_csv = attnlab({"results", "--db", file("t.db"), "--jobs", "--where", "status = failed", "--format", "csv"});
  ASSERT_EQ(jobs_csv.status, 0) << jobs_csv.err;
  EXPECT_EQ(jobs_csv.out.substr(0, jobs_csv.out.find('\r')), "job,run,experiment,method,dataset,seed,state,test_acc") << jobs_csv.out;

  const std::vector<std::pair<std::vector<std::string>, std::string>> errors = {
      {{"results", "--db", file("none.db")}, "none.db: no such database"},
      {{"results", "--db", file("t.db"), "--where", "method = "}, "--where 'method = ': expected a value at column 10"},
      // nesting past the bound: one line, not SQLite's "parser stack overflow" (100) or a crash (10,000)
      {{"results", "--db", file("t.db"), "--where", std::string(100, '(') + "job = 1" + std::string(100, ')')},
       "nesting deeper than 12 at column 13"},
      {{"results", "--db", file("t.db"), "--where", std::string(10000, '(') + "job = 1" + std::string(10000, ')')},
       "nesting deeper than 12 at column 13"},
      {{"curves", "--db", file("t.db"), "--where", std::string(10000, '(') + "job = 1" + std::string(10000, ')')},
       "nesting deeper than 12 at column 13"},
      {{"results", "--db", file("t.db"), "--metric", "acc"}, "unknown metric 'acc'"},
      {{"results", "--db", file("t.db"), "--group-by", "train.lr"}, "unknown key 'train.lr'"},
      {{"results", "--db", file("t.db"), "--format", "xml"}, "unknown format 'xml'"},
      {{"table", "speed", "--db", file("t.db")}, "unknown table 'speed' (accuracy, cost or variance)"},
  };
  for (const auto& [args, message] : errors) {
    const auto o = attnlab(args);
    EXPECT_EQ(o.status, 2) << args[0];
    EXPECT_NE(o.err.find(message), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << o.err;  // one line
  }
  EXPECT_FALSE(fs::exists(file("none.db")));  // reading never creates a database

  // A database whose jobs have no results yet: the counts, without the default metric.
  {
    Database fresh(file("fresh.db"));
    FakeJob queued;
    queued.outcome = "queued";
    add_job(fresh, queued);
  }
  const auto counts = attnlab({"results", "--db", file("fresh.db"), "--format", "csv"});
  ASSERT_EQ(counts.status, 0) << counts.err;
  EXPECT_EQ(counts.out, "method,dataset,jobs,done,failed,unfinished\r\nsoftmax,listops,1,0,0,1\r\n");
}

// Commands that only read open the file read-only: a DELETE-journal database stays DELETE,
// byte for byte, with no -wal or -shm beside it (before, every reader switched it to WAL).
TEST_F(ResultsTest, ReadersNeverChangeTheJournalModeOrTheFile) {
  const std::string db_path = file("delete.db");
  {
    Database db(db_path);
    FakeJob f;
    f.results = {{"test_acc", 0.361}};
    add_job(db, f);
  }
  auto journal_mode = [&](const char* set) {
    sqlite3* c = nullptr;
    EXPECT_EQ(sqlite3_open_v2(db_path.c_str(), &c, set ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    const std::string sql = set ? std::string("PRAGMA journal_mode = ") + set : "PRAGMA journal_mode";
    sqlite3_prepare_v2(c, sql.c_str(), -1, &st, nullptr);
    std::string mode = sqlite3_step(st) == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(st, 0)) : "";
    sqlite3_finalize(st);
    sqlite3_close(c);
    return mode;
  };
  ASSERT_EQ(journal_mode("DELETE"), "delete");
  ASSERT_FALSE(fs::exists(db_path + "-wal"));
  const std::string before = slurp(db_path);

  const std::vector<std::vector<std::string>> readers = {
      {"results", "--db", db_path},
      {"results", "--db", db_path, "--jobs", "--format", "csv"},
      {"table", "accuracy", "--db", db_path},
      {"compare", "softmax", "softmax", "--db", db_path},
      {"curves", "--db", db_path, "--where", "job = 1"},
      {"report", "--db", db_path, "-o", file("report")},
      {"queue", "list", "--db", db_path},
      {"queue", "show", "1", "--db", db_path},
      {"bench", "--show", "--db", db_path},
      {"approx", "--show", "--db", db_path},
  };
  for (const auto& args : readers) {
    const auto o = attnlab(args);
    EXPECT_EQ(o.err.find("readonly"), std::string::npos) << args[0] << ": " << o.err;
    EXPECT_EQ(journal_mode(nullptr), "delete") << args[0] << " " << args[1];
    EXPECT_FALSE(fs::exists(db_path + "-wal")) << args[0] << " " << args[1];
    EXPECT_FALSE(fs::exists(db_path + "-shm")) << args[0] << " " << args[1];
  }
  for (std::size_t i : {0, 1, 2, 6, 7, 8, 9}) EXPECT_EQ(attnlab(readers[i]).status, 0) << readers[i][0] << " " << readers[i][1];
  EXPECT_NE(attnlab(readers[1]).out.find("0.361\r\n"), std::string::npos);  // shortest round trip in CSV
  EXPECT_EQ(slurp(db_path), before);  // not a byte changed

  // A reader refuses a database of another schema version in one line, without migrating it.
  {
    sqlite3* c = nullptr;
    sqlite3_open(db_path.c_str(), &c);
    sqlite3_exec(c, "PRAGMA user_version = 5", nullptr, nullptr, nullptr);
    sqlite3_close(c);
  }
  const auto old = attnlab({"queue", "list", "--db", db_path});
  EXPECT_EQ(old.status, 2);
  EXPECT_NE(old.err.find("run `attnlab db migrate --db " + db_path + "` first"), std::string::npos) << old.err;
  EXPECT_EQ(old.err.find('\n'), old.err.size() - 1) << old.err;
}

}  // namespace
}  // namespace attnlab::results::testing
