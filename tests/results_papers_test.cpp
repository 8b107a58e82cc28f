// The papers' published numbers as data (conf/papers/*.toml): the shipped files checked cell by
// cell against the papers (the numbers typed in below, from Skyformer's Tables 1 and 2 and the
// KL-Transformer's Tables 2 and 5), `attnlab table accuracy|cost --paper` on databases filled
// through the store API with hand-worked differences, and malformed paper files refused in one line.
#include <cmath>
#include <set>

#include "results/paper_data.hpp"
#include "results/paper_tables.hpp"
#include "results_support.hpp"

namespace attnlab::results::testing {
namespace {

using store::Database;

const std::string kPapers = std::string(ATTNLAB_SOURCE_DIR) + "/conf/papers/";

// The published rows: label as printed, attnlab method, the cells in the paper's column order, and
// the printed average (NAN: the table has none).
struct Published {
  const char* label;
  const char* method;
  std::vector<double> values;
  double average;
};

// Every attnlab method a paper row may name (plugins/), and the LRA datasets (datasets/).
const std::set<std::string> kMethods = {
    "softmax", "kernelized", "nystromformer", "linformer", "informer", "performer", "reformer",
    "bigbird", "skyformer", "synthesizer", "sinkhorn", "sparse_transformer", "local", "longformer",
    "linear_elu", "gmm_rks", "fastfood_rks", "generative_rks", "gmm_prf", "fastfood_prf", "generative_prf"};
const std::set<std::string> kLraTasks = {"listops", "text", "retrieval", "pathfinder", "image"};

void expect_table(const PaperTableData& t, const std::vector<std::string>& tasks, const std::vector<Published>& rows) {
  EXPECT_EQ(t.tasks, tasks) << t.id;
  ASSERT_EQ(t.rows.size(), rows.size()) << t.id;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const PaperRow& got = t.rows[i];
    EXPECT_EQ(got.label, rows[i].label) << t.id << " row " << i;
    EXPECT_EQ(got.method, rows[i].method) << t.id << " " << rows[i].label;
    ASSERT_EQ(got.values.size(), rows[i].values.size()) << t.id << " " << rows[i].label;
    for (std::size_t j = 0; j < rows[i].values.size(); ++j)
      EXPECT_EQ(got.values[j], rows[i].values[j]) << t.id << " " << rows[i].label << " " << tasks[j];
    if (std::isnan(rows[i].average)) {
      EXPECT_FALSE(got.average.has_value()) << t.id << " " << rows[i].label;
    } else {
      ASSERT_TRUE(got.average.has_value()) << t.id << " " << rows[i].label;
      EXPECT_EQ(*got.average, rows[i].average) << t.id << " " << rows[i].label;
    }
    if (!got.method.empty()) EXPECT_TRUE(kMethods.count(got.method)) << got.method;
  }
  for (const auto& task : t.tasks) EXPECT_TRUE(kLraTasks.count(task)) << task;
}

TEST(PaperData, SkyformerTablesOneAndTwoCellByCell) {
  const Paper p = load_paper(kPapers + "skyformer.toml");
  EXPECT_EQ(p.name, "skyformer");
  EXPECT_EQ(p.seeds, 3);
  EXPECT_NE(p.citation.find("NeurIPS 2021"), std::string::npos);
  ASSERT_EQ(p.tables.size(), 3u);
  const std::vector<std::string> tasks = {"text", "listops", "retrieval", "pathfinder", "image"};

  const PaperTableData& t1 = p.tables[0];
  EXPECT_EQ(t1.id, "Table 1");
  EXPECT_EQ(t1.metric, PaperMetric::accuracy);
  EXPECT_EQ(t1.unit, "%");
  EXPECT_EQ(t1.columns, (std::vector<std::string>{"Text", "ListOps", "Retrieval", "Pathfinder", "Image"}));
  EXPECT_EQ(t1.average, "AVG");
  expect_table(t1, tasks,
               {{"Self-Attention", "softmax", {61.95, 38.37, 80.69, 65.26, 40.57}, 57.37},
                {"Kernelized Attention", "kernelized", {60.22, 38.78, 81.77, 70.73, 41.29}, 58.56},
                {"Nystromformer", "nystromformer", {64.83, 38.51, 80.52, 69.48, 41.30}, 58.93},
                {"Linformer", "linformer", {58.93, 37.45, 78.19, 60.93, 37.96}, 54.69},
                {"Informer", "informer", {62.64, 32.53, 77.57, 57.83, 38.10}, 53.73},
                {"Performer", "performer", {64.19, 38.02, 80.04, 66.30, 41.43}, 58.00},
                {"Reformer", "reformer", {62.93, 37.68, 78.99, 66.49, 48.87}, 58.99},
                {"BigBird", "bigbird", {63.86, 39.25, 80.28, 68.72, 43.16}, 59.05},
                {"Skyformer", "skyformer", {64.70, 38.69, 82.06, 70.73, 40.77}, 59.39}});
  // Table 1's AVG is the mean of its five cells, to the printed rounding, on every row.
  for (const auto& r : t1.rows) {
    double sum = 0;
    for (double v : r.values) sum += v;
    EXPECT_NEAR(sum / 5, *r.average, 0.0051) << r.label;
  }

  const PaperTableData& time = p.tables[1];
  EXPECT_EQ(time.id, "Table 2");
  EXPECT_EQ(time.metric, PaperMetric::time);
  EXPECT_EQ(time.unit, "hours");
  EXPECT_EQ(time.steps, 50000);
  expect_table(time, tasks,
               {{"Self-Attention", "softmax", {4.30, 2.24, 8.33, 2.57, 4.22}, NAN},
                {"Kernelized Attention", "kernelized", {3.91, 1.99, 7.46, 2.42, 4.05}, NAN},
                {"Nystromformer", "nystromformer", {0.71, 0.71, 1.29, 1.49, 2.70}, NAN},
                {"Linformer", "linformer", {0.65, 0.60, 1.13, 1.09, 2.19}, NAN},
                {"Informer", "informer", {1.60, 1.19, 2.91, 2.39, 3.90}, NAN},
                {"Performer", "performer", {0.77, 0.73, 1.41, 1.40, 2.55}, NAN},
                {"Reformer", "reformer", {0.94, 0.85, 1.73, 1.70, 3.08}, NAN},
                {"BigBird", "bigbird", {2.00, 1.88, 3.81, 3.39, 6.53}, NAN},
                {"Skyformer", "skyformer", {1.02, 1.29, 1.86, 2.03, 3.40}, NAN}});

  const PaperTableData& memory = p.tables[2];
  EXPECT_EQ(memory.id, "Table 2");
  EXPECT_EQ(memory.metric, PaperMetric::memory);
  EXPECT_EQ(memory.unit, "GB");
  expect_table(memory, tasks,
               {{"Self-Attention", "softmax", {10.37, 5.37, 10.77, 5.74, 11.47}, NAN},
                {"Kernelized Attention", "kernelized", {5.73, 5.94, 10.46, 6.38, 6.38}, NAN},
                {"Nystromformer", "nystromformer", {1.21, 1.37, 2.39, 3.35, 6.71}, NAN},
                {"Linformer", "linformer", {0.99, 0.99, 1.89, 1.97, 3.94}, NAN},
                {"Informer", "informer", {5.12, 4.85, 5.77, 4.75, 9.51}, NAN},
                {"Performer", "performer", {1.09, 1.09, 2.16, 2.20, 4.39}, NAN},
                {"Reformer", "reformer", {1.61, 1.61, 2.98, 3.21, 6.42}, NAN},
                {"BigBird", "bigbird", {2.83, 2.71, 4.97, 4.97, 9.95}, NAN},
                {"Skyformer", "skyformer", {1.59, 1.75, 3.15, 4.13, 8.26}, NAN}});
}

TEST(PaperData, KlTransformerTablesTwoAndFiveCellByCell) {
  const Paper p = load_paper(kPapers + "kl-transformer.toml");
  EXPECT_EQ(p.name, "kl-transformer");
  EXPECT_EQ(p.seeds, 0);  // not stated
  EXPECT_NE(p.citation.find("TMLR 2022"), std::string::npos);
  ASSERT_EQ(p.tables.size(), 2u);
  const PaperTableData& t2 = p.tables[0];
  EXPECT_EQ(t2.id, "Table 2");
  EXPECT_EQ(t2.unit, "%");
  EXPECT_EQ(t2.average, "Avg");
  EXPECT_EQ(t2.columns, (std::vector<std::string>{"ListOps", "Text", "Retrieval"}));
  expect_table(t2, {"listops", "text", "retrieval"},
               {{"Random Predictor", "", {10.00, 50.00, 50.00}, 36.67},
                {"Softmax Trans.", "softmax", {36.38, 64.27, 57.46}, 52.70},
                {"Synthesizer", "synthesizer", {36.50, 61.68, 54.67}, 50.95},
                {"Sinkhorn", "sinkhorn", {34.20, 61.20, 53.83}, 49.74},
                {"Sparse Trans.", "sparse_transformer", {35.78, 63.58, 59.59}, 52.98},
                {"Reformer", "reformer", {36.30, 56.10, 53.40}, 48.60},
                {"Local Attention", "local", {15.95, 52.98, 53.39}, 40.77},
                {"Longformer", "longformer", {36.03, 62.85, 56.89}, 51.92},
                {"Linformer", "linformer", {35.49, 53.49, 52.27}, 52.56},  // as printed (the mean is 47.08)
                {"Big Bird", "bigbird", {37.08, 64.02, 59.29}, 53.46},
                {"LinearElu", "linear_elu", {17.15, 65.90, 53.09}, 45.38},
                {"Performer", "performer", {36.00, 65.40, 53.82}, 51.74},
                {"GMM-RKS", "gmm_rks", {18.55, 63.95, 58.64}, 47.05},
                {"FASTFOOD-RKS", "fastfood_rks", {18.65, 65.67, 61.92}, 48.75},
                {"GENERATIVE-RKS", "generative_rks", {18.50, 66.50, 64.76}, 49.92},
                {"GMM-PRF", "gmm_prf", {36.96, 62.64, 65.27}, 54.96},
                {"FASTFOOD-PRF", "fastfood_prf", {37.05, 64.66, 71.13}, 57.61},
                {"GENERATIVE-PRF", "generative_prf", {37.42, 62.90, 69.81}, 56.71}});
  // Every printed Avg but Linformer's is the mean of its cells (to the rounding); Linformer's is
  // kept as printed and carries a note saying so.
  for (const auto& r : t2.rows) {
    double sum = 0;
    for (double v : r.values) sum += v;
    if (r.method == "linformer") {
      EXPECT_NEAR(sum / 3, 47.08, 0.005);
      EXPECT_NE(r.note.find("as printed"), std::string::npos);
    } else {
      EXPECT_NEAR(sum / 3, *r.average, 0.0051) << r.label;
    }
  }

  const PaperTableData& t5 = p.tables[1];
  EXPECT_EQ(t5.id, "Table 5");
  EXPECT_TRUE(t5.average.empty());
  const double image[] = {10.00, 42.44, 41.61, 41.23, 44.24, 38.07, 41.46, 42.22, 38.56,
                          40.83, 42.34, 42.77, 42.33, 36.74, 39.84, 39.94, 38.31, 40.01};
  std::vector<Published> rows;
  for (std::size_t i = 0; i < t2.rows.size(); ++i)  // the same rows as Table 2, in its order
    rows.push_back({t2.rows[i].label.c_str(), t2.rows[i].method.c_str(), {image[i]}, NAN});
  expect_table(t5, {"image"}, rows);
}

// The build's copies (what the binary finds by name) are the source files.
TEST(PaperData, BundledCopiesMatchTheSource) {
  const fs::path build_papers = fs::path(ATTNLAB_BINARY).parent_path().parent_path() / "conf" / "papers";
  for (const char* name : {"skyformer", "kl-transformer"}) {
    EXPECT_EQ(find_paper(name, {build_papers.string()}), (build_papers / (std::string(name) + ".toml")).string());
    EXPECT_EQ(slurp((build_papers / (std::string(name) + ".toml")).string()), slurp(kPapers + name + ".toml")) << name;
  }
  EXPECT_EQ(paper_names({build_papers.string(), kPapers}), (std::vector<std::string>{"kl-transformer", "skyformer"}));
  // a unique first word names its paper; an unknown one lists what there is
  EXPECT_EQ(find_paper("kl", {kPapers}), kPapers + "kl-transformer.toml");
  try {
    find_paper("kl-t", {kPapers});
    ADD_FAILURE() << "kl-t was found";
  } catch (const PaperError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--paper 'kl-t': no such paper (bundled: kl-transformer, skyformer;", 0), 0u) << e.what();
  }
}

// What a malformed file says: one line, the file, the line, the key.
std::string refusal(const std::string& text) {
  try {
    parse_paper(text, "bad.toml");
  } catch (const PaperError& e) {
    return e.what();
  }
  return "(accepted)";
}

const std::string kHead = "[paper]\nname = \"p\"\ntitle = \"T\"\ncitation = \"C\"\n";                 // lines 1-4
const std::string kTable = "[[tables]]\nid = \"Table 1\"\nmetric = \"accuracy\"\nunit = \"%\"\n"    // lines 5-8
                           "tasks = [\"listops\", \"text\"]\ncolumns = [\"LO\", \"TC\"]\n";          // lines 9-10

TEST(PaperData, MalformedFilesAreRefusedInOneLineNamingFileAndKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {kHead + kTable + "rows = [\n  { label = \"A\", method = \"softmax\", values = [1.0] },\n]\n",
       "bad.toml:12: tables[0].rows[0].values: expected 2 numbers (one per task: listops, text), got 1"},
      {kHead + kTable + "rows = [ { label = \"A\", method = \"softmax\", values = [1.0, \"x\"] } ]\n",
       "bad.toml:11: tables[0].rows[0].values[1]: expected a number (nan: not printed)"},
      {kHead + kTable + "rows = [ { label = \"A\", methd = \"softmax\", values = [1.0, 2.0] } ]\n",
       "bad.toml:11: tables[0].rows[0].methd: unknown key (known: label, method, values, average, seeds, note)"},
      {kHead + kTable + "rows = [ { label = \"A\", method = \"Soft Max\", values = [1.0, 2.0] } ]\n",
       "bad.toml:11: tables[0].rows[0].method: 'Soft Max' is not a method name"},
      {kHead + kTable + "average = \"AVG\"\nrows = [ { label = \"A\", values = [1.0, 2.0] } ]\n",
       "bad.toml:12: tables[0].rows[0].average: missing: the table prints an average column ('AVG')"},
      {kHead + kTable + "rows = [ { label = \"A\", values = [1, 2] }, { label = \"A\", values = [3, 4] } ]\n",
       "tables[0].rows[1].label: 'A' is named twice in this table"},
      {kHead + "[[tables]]\nid = \"T\"\nmetric = \"speed\"\n", "bad.toml:7: tables[0].metric: unknown metric 'speed' (accuracy, time or memory)"},
      {kHead + "[[tables]]\nid = \"T\"\nmetric = \"memory\"\nunit = \"GiB\"\n",
       "bad.toml:8: tables[0].unit: unknown unit 'GiB' for metric memory (GB, MB)"},
      {kHead + "[[tables]]\nid = \"T\"\nmetric = \"time\"\nunit = \"hours\"\ntasks = [\"text\"]\ncolumns = [\"TC\"]\n",
       "tables[0].steps: missing: a time table names the training steps its time is for"},
      {kHead + kTable + "columns = [\"LO\"]\n", "TOML syntax"},
      {"[paper]\nname = \"p\"\ntitle = \"T\"\n", "bad.toml:1: paper.citation: missing (a string)"},
      {"[tables]\n", "bad.toml: paper: missing: [paper] with name, title and citation"},
      {kHead + "seeds = 0\n[[tables]]\n", "bad.toml:5: paper.seeds: expected a positive integer"},
      {kHead, "bad.toml: tables: missing: at least one [[tables]]"},
  };
  for (const auto& [text, message] : cases) {
    const std::string got = refusal(text);
    EXPECT_NE(got.find(message), std::string::npos) << "got: " << got << "\nwanted: " << message;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
    EXPECT_EQ(got.rfind("bad.toml", 0), 0u) << got;
  }
}

// Our cells beside Skyformer's Table 1. softmax: text 3 seeds, listops 2 of 3 (one still queued),
// image 3 done and one failed, every task; kernelized: text only; skyformer: no runs at all;
// linear_elu: not in the paper; sparse_sum: a task the paper does not have.
class PaperTables : public ResultsTest {
 protected:
  void SetUp() override {
    ResultsTest::SetUp();
    db_ = std::make_unique<Database>(file("p.db"));
    const auto add = [&](const std::string& method, const std::string& task, std::vector<double> acc, int queued = 0,
                         int failed = 0) {
      std::int64_t seed = 1;
      for (double a : acc) {
        FakeJob f;
        f.method = method, f.dataset = task, f.seed = seed++;
        f.results = {{"test_acc", a}, {"steps_per_second", 10.0}, {"peak_memory_bytes", 2.0 * 1073741824.0}};
        add_job(*db_, f);
      }
      for (int i = 0; i < queued + failed; ++i) {
        FakeJob f;
        f.method = method, f.dataset = task, f.seed = seed++, f.outcome = i < queued ? "queued" : "failed";
        add_job(*db_, f);
      }
    };
    add("softmax", "text", {0.60, 0.62, 0.64});
    add("softmax", "listops", {0.38, 0.40}, 1);
    add("softmax", "retrieval", {0.80, 0.81, 0.82});
    add("softmax", "pathfinder", {0.65, 0.66, 0.67});
    add("softmax", "image", {0.40, 0.41, 0.42}, 0, 1);
    add("softmax", "sparse_sum", {0.9});
    add("kernelized", "text", {0.5, 0.6, 0.7});
    add("linear_elu", "text", {0.55});
    paper_ = load_paper(kPapers + "skyformer.toml");
  }

  // The wide grid's row whose first two cells are (name, which); name "" continues the row above.
  static const std::vector<Cell>* line(const Grid& g, const std::string& name, const std::string& which) {
    for (std::size_t i = 0; i < g.rows.size(); ++i)
      if (g.rows[i][0].text == name)
        for (std::size_t j = i; j < g.rows.size() && (j == i || g.rows[j][0].text.empty()); ++j)
          if (g.rows[j][1].text == which) return &g.rows[j];
    ADD_FAILURE() << "no line " << name << " / " << which;
    return nullptr;
  }

  std::unique_ptr<Database> db_;
  Paper paper_;
};

TEST_F(PaperTables, AccuracyBesideSkyformerTableOneWithHandWorkedDifferences) {
  PaperTableOptions o;
  o.paper = &paper_;
  const Grid g = paper_table(*db_, PaperTable::accuracy, o);
  ASSERT_EQ(g.header, (std::vector<std::string>{"method", "values", "text", "listops", "retrieval", "pathfinder", "image",
                                                "average"}));
  // rows in the paper's order, then linear_elu (ours only)
  std::vector<std::string> names;
  for (const auto& r : g.rows)
    if (!r[0].text.empty()) names.push_back(r[0].text);
  EXPECT_EQ(names, (std::vector<std::string>{"Self-Attention (softmax)", "Kernelized Attention (kernelized)",
                                             "Nystromformer (nystromformer)", "Linformer (linformer)", "Informer (informer)",
                                             "Performer (performer)", "Reformer (reformer)", "BigBird (bigbird)",
                                             "Skyformer (skyformer)", "linear_elu"}));
  EXPECT_EQ(g.rows.size(), 9u * 3 + 1);

  const auto* ours = line(g, "Self-Attention (softmax)", "ours");
  const auto* paper = line(g, "", "paper");  // the first paper line: softmax's
  const auto* delta = line(g, "", "Δ");
  ASSERT_TRUE(ours && paper && delta);
  // text: 60, 62, 64 -> 62.00 ± 2.00 (3); paper 61.95; Δ +0.05
  EXPECT_EQ((*ours)[2].text, "62.00 ± 2.00 (3)");
  EXPECT_EQ((*paper)[2].text, "61.95");
  EXPECT_EQ((*delta)[2].text, "+0.05");
  EXPECT_NEAR(*(*delta)[2].number, 0.05, 1e-9);
  // listops: 38, 40 and a seed still queued -> 39.00 ± 1.41 (2), fewer than the paper's 3; Δ 39 − 38.37
  EXPECT_EQ((*ours)[3].text, "39.00 ± 1.41 (2)†");
  EXPECT_EQ((*delta)[3].text, "+0.63");
  // retrieval 81 − 80.69, pathfinder 66 − 65.26
  EXPECT_EQ((*delta)[4].text, "+0.31");
  EXPECT_EQ((*delta)[5].text, "+0.74");
  // image: 41.00 ± 1.00 (3) with a failed job; Δ 41 − 40.57
  EXPECT_EQ((*ours)[6].text, "41.00 ± 1.00 (3)‡");
  EXPECT_EQ((*delta)[6].text, "+0.43");
  // average (62 + 39 + 81 + 66 + 41) / 5 = 57.80, carrying both marks; Δ 57.80 − 57.37
  EXPECT_EQ((*ours)[7].text, "57.80†‡");
  EXPECT_EQ((*paper)[7].text, "57.37");
  EXPECT_NEAR(*(*delta)[7].number, 0.43, 1e-9);

  // kernelized: text 50, 60, 70 -> 60.00 ± 10.00 (3), Δ 60 − 60.22 = −0.22; the other tasks none,
  // and no average rather than a biased one
  const auto* k = line(g, "Kernelized Attention (kernelized)", "ours");
  const auto* kd = line(g, "Kernelized Attention (kernelized)", "Δ");
  EXPECT_EQ((*k)[2].text, "60.00 ± 10.00 (3)");
  EXPECT_EQ((*kd)[2].text, "-0.22");
  EXPECT_EQ((*k)[3].text, "-");
  EXPECT_TRUE((*k)[3].missing);
  EXPECT_EQ((*k)[7].text, "-");
  EXPECT_EQ((*kd)[7].text, "-");
  // skyformer: no runs: ours all "-", the paper's numbers still there
  const auto* s = line(g, "Skyformer (skyformer)", "ours");
  for (std::size_t c = 2; c < 8; ++c) EXPECT_EQ((*s)[c].text, "-");
  EXPECT_EQ((*line(g, "Skyformer (skyformer)", "paper"))[2].text, "64.70");
  // linear_elu: ours only, one seed, marked
  const auto* extra = line(g, "linear_elu", "ours");
  EXPECT_EQ((*extra)[2].text, "55.00 (1)†");

  std::string notes;
  for (const auto& n : g.notes) notes += n + "\n";
  EXPECT_NE(notes.find("fewer seeds than the paper's (3)"), std::string::npos) << notes;
  EXPECT_NE(notes.find("not have (not shown): sparse_sum"), std::string::npos) << notes;
  EXPECT_NE(notes.find("Skyformer: Remodel Self-Attention"), std::string::npos) << notes;
}

TEST_F(PaperTables, LongLayoutCostAndTheKlTransformer) {
  PaperTableOptions o;
  o.paper = &paper_;
  o.wide = false;
  const Grid g = paper_table(*db_, PaperTable::accuracy, o);
  const auto col = [&](const std::string& name) {
    for (std::size_t i = 0; i < g.header.size(); ++i)
      if (g.header[i] == name) return i;
    ADD_FAILURE() << name;
    return std::size_t{0};
  };
  ASSERT_EQ(g.rows.size(), 10u * 6);  // (9 paper rows + linear_elu) x (5 tasks + average)
  const auto& text = g.rows[0];       // softmax, text
  EXPECT_EQ(text[col("method")].text, "softmax");
  EXPECT_EQ(text[col("paper_row")].text, "Self-Attention");
  EXPECT_EQ(text[col("task")].text, "text");
  EXPECT_NEAR(*text[col("mean")].number, 62.0, 1e-9);
  EXPECT_NEAR(*text[col("std")].number, 2.0, 1e-9);
  EXPECT_EQ(*text[col("paper")].number, 61.95);
  EXPECT_EQ(*text[col("paper_seeds")].number, 3);
  EXPECT_NEAR(*text[col("difference")].number, 0.05, 1e-9);
  const auto& listops = g.rows[1];
  EXPECT_EQ(*listops[col("n")].number, 2);
  EXPECT_EQ(*listops[col("unfinished")].number, 1);
  EXPECT_EQ(*listops[col("fewer_seeds")].number, 1);
  const auto& sky = g.rows[8 * 6];  // skyformer, text: nothing of ours
  EXPECT_EQ(sky[col("method")].text, "skyformer");
  EXPECT_TRUE(sky[col("mean")].missing);
  EXPECT_TRUE(sky[col("difference")].missing);
  EXPECT_EQ(*sky[col("paper")].number, 64.70);
  const auto& extra = g.rows[9 * 6];  // linear_elu, text: no paper side
  EXPECT_TRUE(extra[col("paper_row")].missing);
  EXPECT_TRUE(extra[col("paper")].missing);

  // cost: 50,000 steps at 10 steps/s = 1.39 hours against 4.30 (ratio 0.32); 2 GB against 10.37
  o.wide = true;
  const Grid cost = paper_table(*db_, PaperTable::cost, o);
  EXPECT_EQ(cost.header[2], "text hours");
  EXPECT_EQ(cost.header[3], "text GB");
  const auto* hours = line(cost, "Self-Attention (softmax)", "ours");
  const auto* ratio = line(cost, "Self-Attention (softmax)", "ratio");
  EXPECT_EQ((*hours)[2].text, "1.39 ± 0.00 (3)");
  EXPECT_NEAR(*(*ratio)[2].number, 50000.0 / 10 / 3600 / 4.30, 1e-12);
  EXPECT_EQ((*ratio)[2].text, "×0.32");
  EXPECT_EQ((*hours)[3].text, "2.00 ± 0.00 (3)");
  EXPECT_NEAR(*(*ratio)[3].number, 2.0 / 10.37, 1e-12);

  // The KL-Transformer: Table 2's three tasks and Table 5's image, its Avg over the three; the
  // random predictor a paper line only; Linformer's printed Avg noted.
  const Paper kl = load_paper(kPapers + "kl-transformer.toml");
  o.paper = &kl;
  const Grid k = paper_table(*db_, PaperTable::accuracy, o);
  ASSERT_EQ(k.header, (std::vector<std::string>{"method", "values", "listops", "text", "retrieval", "image", "average"}));
  EXPECT_EQ(k.rows[0][0].text, "Random Predictor");
  EXPECT_EQ(k.rows[0][1].text, "paper");
  EXPECT_EQ(k.rows[0][5].text, "10.00");
  EXPECT_EQ(k.rows[0][6].text, "36.67");
  EXPECT_EQ(k.rows[1][0].text, "Softmax Trans. (softmax)");
  EXPECT_EQ(k.rows[1][2].text, "39.00 ± 1.41 (2)†");  // the KL-Transformer states no seeds: our fullest cell (3)
  // softmax average over listops, text, retrieval: (39 + 62 + 81) / 3 against 52.70
  EXPECT_NEAR(*k.rows[3][6].number, (39.0 + 62 + 81) / 3 - 52.70, 1e-9);
  std::string notes;
  for (const auto& n : k.notes) notes += n + "\n";
  EXPECT_NE(notes.find("Linformer (Table 2): Avg as printed"), std::string::npos) << notes;
  EXPECT_NE(notes.find("our fullest cell (3)"), std::string::npos) << notes;
}

TEST_F(PaperTables, TheCommandByNameAndByFileAndItsErrors) {
  const auto table = attnlab({"table", "accuracy", "--paper", "skyformer", "--db", file("p.db")});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("62.00 ± 2.00 (3)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("+0.05"), std::string::npos) << table.out;
  const auto md = attnlab({"table", "cost", "--paper", kPapers + "skyformer.toml", "--db", file("p.db"), "--format", "markdown"});
  ASSERT_EQ(md.status, 0) << md.err;
  EXPECT_EQ(md.out.rfind("| method | values | text hours | text GB |", 0), 0u) << md.out;
  const auto csv = attnlab({"table", "accuracy", "--paper", "kl-transformer", "--db", file("p.db"), "--format", "csv"});
  ASSERT_EQ(csv.status, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("method,paper_row,task,metric,unit,mean,std,n,paper,paper_seeds,difference,ratio,", 0), 0u) << csv.out;

  {
    std::ofstream bad(file("bad.toml"));
    bad << kHead << kTable << "rows = [\n  { label = \"A\", method = \"softmax\", values = [1.0] },\n]\n";
  }
  const std::vector<std::pair<std::vector<std::string>, std::string>> errors = {
      {{"table", "accuracy", "--paper", file("bad.toml"), "--db", file("p.db")},
       file("bad.toml") + ":12: tables[0].rows[0].values: expected 2 numbers"},
      {{"table", "accuracy", "--paper", "nosuch", "--db", file("p.db")},
       "--paper 'nosuch': no such paper (bundled: kl-transformer, skyformer;"},
      {{"table", "accuracy", "--paper", file("none.toml"), "--db", file("p.db")}, "none.toml: no such paper file"},
      {{"table", "variance", "--paper", "skyformer", "--db", file("p.db")}, "the variance metrics have no published table"},
  };
  for (const auto& [args, message] : errors) {
    const auto o = attnlab(args);
    EXPECT_EQ(o.status, 2) << args[3];
    EXPECT_NE(o.err.find(message), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find('\n'), o.err.size() - 1) << o.err;  // one line
  }
}

}  // namespace
}  // namespace attnlab::results::testing
