#pragma once
// The papers' tables, read from the database: accuracy per method × task with the average column
// (Skyformer Table 1, KL-Transformer Table 2), training time and peak memory per method × task
// (Skyformer Table 2), and RSD / PI / AGV / VA per method × task (the KL-Transformer's §4.1
// metrics, its Fig. 5). Each cell is mean ± std over the seeds that ended done, with n; a cell with
// fewer seeds than the table's fullest, or with failed runs, is marked, and a cell without a
// finished seed is "-", never zero.
#include <string>
#include <vector>

#include "attnlab/query.hpp"
#include "results/formats.hpp"
#include "results/paper_data.hpp"

namespace attnlab::results {

enum class PaperTable { accuracy, cost, variance };

// "accuracy" | "cost" | "variance"; anything else is std::invalid_argument naming the choices.
PaperTable parse_paper_table(const std::string& word);
const char* to_string(PaperTable table);

struct PaperTableOptions {
  std::vector<std::string> where;          // --where filters, as for `attnlab results`
  std::string accuracy_metric = "test_acc";
  // true: the paper's layout, one row per method, columns per task (tables, Markdown);
  // false: one row per (method, task, metric) with mean, std, n, counts and marks (CSV, JSON).
  bool wide = true;
  // Set: the paper's published numbers beside ours (accuracy: its accuracy tables; cost: its time
  // and memory tables; a paper without such a table is a PaperError). Rows in the paper's order,
  // then our methods it does not have; columns the paper's tasks, in its units.
  const Paper* paper = nullptr;
};

// The marks, as printed in wide layouts and explained in the grid's notes.
inline constexpr const char* kFewerSeedsMark = "†";
inline constexpr const char* kFailedMark = "‡";

// With options.paper set, wide: per paper row an "ours" line (mean ± std (n) in the paper's unit,
// with the marks; † fewer seeds than the paper's), a "paper" line and a "Δ" line (accuracy: ours −
// paper, in the unit's points) or "ratio" line (time, memory: ours / paper: the hardware differs);
// a row that is no method (a random predictor) has its paper line only, a method of ours the paper
// lacks its ours line only. Long: one row per (row, task or average) with both sides' numbers.
Grid paper_table(store::ResultsReader& db, PaperTable which, const PaperTableOptions& options);

}  // namespace attnlab::results
