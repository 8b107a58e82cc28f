#include "results/paper_tables.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

#include "results/aggregate.hpp"
#include "results/sweep.hpp"

namespace attnlab::results {
namespace {

// One measured quantity of a table: which result it reads and how it is shown.
struct Quantity {
  std::string result;                     // results.name
  std::string label;                      // column label
  std::function<double(double)> convert;  // stored value → shown quantity (per seed, before averaging)
  const char* shown;                      // printf format of mean and std
};

std::vector<Quantity> quantities(PaperTable which, const PaperTableOptions& o) {
  const auto same = [](double v) { return v; };
  switch (which) {
    case PaperTable::accuracy:
      return {{o.accuracy_metric, o.accuracy_metric, same, "%.4f"}};
    case PaperTable::cost:
      // Skyformer Table 2 compares training cost: time per 1000 training steps (evaluation
      // excluded: steps_per_second counts training time only) and the peak memory of the run.
      return {{"steps_per_second", "s/1k steps", [](double sps) { return 1000.0 / sps; }, "%.1f"},
              {"peak_memory_bytes", "peak MiB", [](double b) { return b / (1024.0 * 1024.0); }, "%.1f"}};
    case PaperTable::variance:
      return {{"rsd", "RSD", same, "%.3f"}, {"pi", "PI", same, "%.2f"}, {"agv", "AGV", same, "%.3f"},
              {"va", "VA", same, "%.4f"}};
  }
  return {};
}

struct CellData {
  std::size_t jobs = 0, failed = 0, unfinished = 0;
  std::vector<std::vector<double>> values;  // per quantity, over done seeds
  std::vector<std::int64_t> runs;           // counting runs of done jobs
};

void append_unique(std::vector<std::string>& v, const std::string& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// The selected jobs as cells per (method, task): values[q] the stored values of selection.metrics[q]
// (q < count) over the done seeds; with `last_is_passes`, the last metric is variance_passes. A
// sweep's values get their own rows and columns (results/sweep.hpp): "gmm_rks lr=0.001",
// "sparse_sum sparsity=0.1".
struct Collected {
  std::size_t jobs = 0;
  std::vector<std::string> methods, tasks;  // in the order the jobs were first enqueued: the experiment file's
  std::map<std::pair<std::string, std::string>, CellData> cells;
  std::set<double> passes;
  std::vector<std::string> swept;  // the keys that split rows or columns
  std::string swept_text() const {
    std::string keys;
    for (const auto& k : swept) keys += (keys.empty() ? "" : ", ") + k;
    return keys;
  }
};

Collected collect(store::ResultsReader& db, const store::Selection& selection, std::size_t count, bool last_is_passes) {
  Collected got;
  const auto rows = store::select_jobs(db, selection);
  const Sweep sweep = find_sweep(db, rows);
  got.swept = sweep.keys;
  got.jobs = rows.size();
  for (const auto& r : rows) {
    const std::string method = sweep.row(r), task = sweep.task(r);
    auto& c = got.cells[{method, task}];
    c.values.resize(count);
    ++c.jobs;
    if (store::is_failed(r.state)) ++c.failed;
    else if (r.state != store::JobState::done) ++c.unfinished;
    else {
      c.runs.push_back(r.run_id);
      for (std::size_t q = 0; q < count && q < selection.metrics.size(); ++q)
        if (r.metrics[q] && !std::isnan(*r.metrics[q])) c.values[q].push_back(*r.metrics[q]);
      if (last_is_passes && r.metrics.back()) got.passes.insert(*r.metrics.back());
    }
    append_unique(got.tasks, task);
    append_unique(got.methods, method);
  }
  return got;
}


// --- a paper's published numbers beside ours ---------------------------------------------------

std::string printf_text(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// How numbers of a unit are shown: the papers print accuracy in % and cost to two decimals.
const char* shown_in(const std::string& unit) {
  if (unit == "fraction") return "%.4f";
  if (unit == "seconds" || unit == "MB") return "%.0f";
  return "%.2f";
}

// One column of the comparison: a task of one of the paper's tables, or a table's average.
struct Column {
  std::string task;                 // dataset; "" for an average column
  const PaperTableData* table = nullptr;
  std::size_t index = 0;            // the task's place in table->tasks
  std::string header;
};

// One row of the comparison: a printed row (or the same method's rows of several tables), or a
// method of ours the paper does not have.
struct MergedRow {
  std::string label, method;
  std::vector<std::pair<const PaperTableData*, const PaperRow*>> parts;
  const PaperRow* in(const PaperTableData* table) const {
    for (const auto& [t, r] : parts)
      if (t == table) return r;
    return nullptr;
  }
};

// Our side of one cell: the seeds' values in the paper's unit, with the job counts.
struct OursCell {
  SeedStats stats;
  const CellData* data = nullptr;
};

// The paper's tables of the kind asked: accuracy, or cost (time and memory). PaperError when it has none.
std::vector<const PaperTableData*> tables_of_kind(const Paper& paper, PaperTable which) {
  if (which == PaperTable::variance)
    throw PaperError("--paper: " + paper.file + " compares accuracy and cost tables; the variance metrics have no published table");
  std::vector<const PaperTableData*> tables;
  for (const auto& t : paper.tables)
    if ((t.metric == PaperMetric::accuracy) == (which == PaperTable::accuracy)) tables.push_back(&t);
  if (tables.empty())
    throw PaperError("--paper: " + paper.file + " has no " +
                     (which == PaperTable::accuracy ? std::string("accuracy") : std::string("time or memory")) + " table");
  return tables;
}

// Our results beside a paper's published tables of one kind (`attnlab table --paper`): columns the
// paper's tasks in its units (then each table's printed average), rows its printed rows in its
// order (then our methods it does not have); wide, ours, the paper's and their difference or ratio
// per method; long, one row per method, task and table.
class PaperComparison {
 public:
  PaperComparison(store::ResultsReader& db, PaperTable which, const PaperTableOptions& o)
      : db_(db), which_(which), o_(o), paper_(*o.paper), tables_(tables_of_kind(paper_, which)), got_(collect_ours()) {
    lay_out_columns();
    merge_rows();
    for (const auto& r : merged_)
      for (const auto& c : columns_)
        if (!c.task.empty()) fullest_ = std::max(fullest_, ours(r.method, c.task, *c.table).stats.n);
  }

  Grid grid() {
    Grid grid;
    if (o_.wide) {
      grid.header = {"method", "values"};
      for (const auto& c : columns_) grid.header.push_back(c.header);
    } else {
      grid.header = {"method", "paper_row", "task", "metric", "unit", "mean", "std", "n", "paper", "paper_seeds",
                     "difference", "ratio", "jobs", "failed", "unfinished", "fewer_seeds", "with_failed"};
    }
    for (const auto& r : merged_) add_rows(grid, r);
    if (o_.wide) add_notes(grid);
    return grid;
  }

 private:
  // One cell of a row: the paper's printed number; ours, a task's seeds or (an average column) the
  // mean of our task means over the table's tasks when each has one; the marks; the two compared.
  struct Figures {
    std::optional<double> printed, mean, compared;
    std::size_t n = 0;
    OursCell cell;
    std::string marks;
  };

  bool ratio() const { return which_ == PaperTable::cost; }

  // The accuracy metric (a misspelt --metric stays an error) and the cost results the database has.
  Collected collect_ours() {
    const auto known = store::result_names(db_);
    const auto has = [&](const std::string& name) { return std::find(known.begin(), known.end(), name) != known.end(); };
    const std::string metric_of[3] = {o_.accuracy_metric, "steps_per_second", "peak_memory_bytes"};
    store::Selection selection;
    selection.where = o_.where;
    for (const auto* t : tables_) {
      const int m = static_cast<int>(t->metric);
      if (slot_[m] >= 0) continue;
      if (t->metric == PaperMetric::accuracy ? known.empty() : !has(metric_of[m])) continue;
      slot_[m] = static_cast<int>(selection.metrics.size());
      selection.metrics.push_back(metric_of[m]);
    }
    Collected got = collect(db_, selection, selection.metrics.size(), false);
    if (!got.swept.empty()) {
      throw PaperError("--paper: the selected jobs of one method and task differ in " + got.swept_text() +
                       ", and each of the paper's cells is one configuration: choose one with --where (e.g. \"" +
                       got.swept.front() + " = VALUE\"), or drop --paper to see them side by side");
    }
    return got;
  }

  // The tasks in the paper's order (each from the first of its tables that has it; a cost task once
  // per time and memory table), then each table's printed average.
  void lay_out_columns() {
    for (const auto* t : tables_)
      for (const auto& task : t->tasks) append_unique(tasks_, task);
    const bool one_quantity = which_ == PaperTable::accuracy;
    for (const auto& task : tasks_)
      for (const auto* t : tables_) {
        const auto at = std::find(t->tasks.begin(), t->tasks.end(), task);
        if (at == t->tasks.end()) continue;
        columns_.push_back({task, t, static_cast<std::size_t>(at - t->tasks.begin()), one_quantity ? task : task + " " + t->unit});
        if (one_quantity) break;
      }
    for (const auto* t : tables_) averaged_tables_ += !t->average.empty();
    for (const auto* t : tables_)
      if (!t->average.empty()) columns_.push_back({"", t, 0, averaged_tables_ == 1 ? "average" : "average " + t->id});
  }

  // The printed rows in the paper's order (one per method across its tables; a row that is no
  // method by its label), then the methods of ours the paper does not have.
  void merge_rows() {
    for (const auto* t : tables_)
      for (const auto& r : t->rows) {
        auto it = std::find_if(merged_.begin(), merged_.end(), [&](const MergedRow& m) {
          return r.method.empty() ? m.method.empty() && m.label == r.label : m.method == r.method;
        });
        if (it == merged_.end()) it = merged_.insert(merged_.end(), MergedRow{r.label, r.method, {}});
        it->parts.push_back({t, &r});
      }
    for (const auto& m : got_.methods)
      if (std::none_of(merged_.begin(), merged_.end(), [&](const MergedRow& r) { return r.method == m; }))
        merged_.push_back(MergedRow{"", m, {}});
  }

  OursCell ours(const std::string& method, const std::string& task, const PaperTableData& t) const {
    OursCell cell;
    const auto it = got_.cells.find({method, task});
    if (method.empty() || it == got_.cells.end()) return cell;
    cell.data = &it->second;
    const int s = slot_[static_cast<int>(t.metric)];
    std::vector<double> values;
    if (s >= 0)
      for (double v : it->second.values[s]) values.push_back(to_paper_unit(t, v));
    cell.stats = seed_stats(values);
    return cell;
  }

  // The seeds a cell is measured against: the paper's for that row and table; where the paper does
  // not say, the fullest of our cells in the comparison. The notes say which were used.
  std::size_t reference_seeds(const MergedRow& r, const PaperTableData& t) {
    const PaperRow* pr = r.in(&t);
    const std::int64_t s = pr ? paper_seeds(paper_, t, *pr) : (t.seeds ? t.seeds : paper_.seeds);
    if (s > 0) return paper_said_ = true, static_cast<std::size_t>(s);
    return fell_back_ = true, fullest_;
  }

  static std::string marks_of(const OursCell& c, std::size_t reference) {
    std::string m;
    if (c.stats.n > 0 && c.stats.n < reference) m += kFewerSeedsMark;
    if (c.data && c.data->failed) m += kFailedMark;
    return m;
  }

  Figures figures(const MergedRow& r, const Column& c) {
    const PaperTableData& t = *c.table;
    Figures f;
    if (const PaperRow* pr = r.in(&t)) {
      const double v = c.task.empty() ? pr->average.value_or(NAN) : pr->values[c.index];
      if (!std::isnan(v)) f.printed = v;
    }
    if (!c.task.empty()) {
      f.cell = ours(r.method, c.task, t);
      f.marks = marks_of(f.cell, reference_seeds(r, t));
      f.n = f.cell.stats.n;
      if (f.n) f.mean = f.cell.stats.mean;
      if (f.cell.data) runs_.insert(runs_.end(), f.cell.data->runs.begin(), f.cell.data->runs.end());
    } else {
      double sum = 0;
      for (const auto& task : t.tasks) {
        const OursCell each = ours(r.method, task, t);
        const std::string m = marks_of(each, reference_seeds(r, t));
        for (const char* k : {kFewerSeedsMark, kFailedMark})
          if (m.find(k) != std::string::npos && f.marks.find(k) == std::string::npos) f.marks += k;
        if (each.stats.n) sum += each.stats.mean, ++f.n;
      }
      if (f.n == t.tasks.size()) f.mean = sum / static_cast<double>(f.n);
    }
    if (f.mean && f.printed) f.compared = ratio() ? *f.mean / *f.printed : *f.mean - *f.printed;
    return f;
  }

  // The long layout's row of one cell.
  std::vector<Cell> long_row(const MergedRow& r, const Column& c, const Figures& f) const {
    const PaperTableData& t = *c.table;
    const PaperRow* pr = r.in(&t);
    const auto number = [](const std::optional<double>& v) { return v ? Cell::of_number(*v) : Cell::none(); };
    const auto count = [&](std::size_t CellData::*field) {
      return c.task.empty() ? Cell::none() : Cell::of_integer(f.cell.data ? static_cast<long long>(f.cell.data->*field) : 0);
    };
    const std::int64_t seeds = pr ? paper_seeds(paper_, t, *pr) : 0;
    return {r.method.empty() ? Cell::none() : Cell::of_text(r.method), r.parts.empty() ? Cell::none() : Cell::of_text(r.label),
            Cell::of_text(c.task.empty() ? "average" : c.task), Cell::of_text(to_string(t.metric)), Cell::of_text(t.unit),
            number(f.mean), c.task.empty() || f.cell.stats.n < 2 ? Cell::none() : Cell::of_number(f.cell.stats.std),
            Cell::of_integer(static_cast<long long>(f.n)), number(f.printed), seeds ? Cell::of_integer(seeds) : Cell::none(),
            f.mean && f.printed ? Cell::of_number(*f.mean - *f.printed) : Cell::none(),
            f.mean && f.printed && *f.printed != 0 ? Cell::of_number(*f.mean / *f.printed) : Cell::none(),
            count(&CellData::jobs), count(&CellData::failed), count(&CellData::unfinished),
            Cell::of_integer(f.marks.find(kFewerSeedsMark) != std::string::npos),
            Cell::of_integer(f.marks.find(kFailedMark) != std::string::npos)};
  }

  // One merged row: long, a grid row per cell; wide, the lines ours, paper and Δ (or ratio).
  void add_rows(Grid& grid, const MergedRow& r) {
    std::vector<Cell> ours_line, paper_line, compared_line;
    for (const auto& c : columns_) {
      const Figures f = figures(r, c);
      if (!o_.wide) {
        grid.rows.push_back(long_row(r, c, f));
        continue;
      }
      const char* shown = shown_in(c.table->unit);
      const std::string text = !f.mean          ? std::string("-")
                               : c.task.empty() ? printf_text(shown, *f.mean) + f.marks
                                                : mean_std_text(f.cell.stats, shown) + f.marks;
      ours_line.push_back(Cell{text, f.mean, !f.mean});
      paper_line.push_back(f.printed ? Cell::of_number(*f.printed, shown) : Cell::none());
      const std::string compared = !f.compared ? "" : ratio() ? "×" + printf_text("%.2f", *f.compared) : printf_text("%+.2f", *f.compared);
      compared_line.push_back(f.compared ? Cell{compared, f.compared, false} : Cell::none());
    }
    note_printed_averages(r);
    if (!o_.wide) return;
    const std::string name = r.parts.empty()    ? r.method
                             : r.method.empty() ? r.label
                                                : r.label + " (" + r.method + ")";
    const bool ours_side = !r.method.empty(), paper_side = !r.parts.empty();
    if (ours_side) {
      ours_line.insert(ours_line.begin(), {Cell::of_text(name), Cell::of_text("ours")});
      grid.rows.push_back(std::move(ours_line));
    }
    if (paper_side) {
      paper_line.insert(paper_line.begin(), {Cell::of_text(ours_side ? "" : name), Cell::of_text("paper")});
      grid.rows.push_back(std::move(paper_line));
    }
    if (ours_side && paper_side) {
      compared_line.insert(compared_line.begin(), {Cell::of_text(""), Cell::of_text(ratio() ? "ratio" : "Δ")});
      grid.rows.push_back(std::move(compared_line));
    }
  }

  // A row's notes; and a printed average that is not the mean of its printed cells (beyond their
  // rounding) is kept as printed, and said.
  void note_printed_averages(const MergedRow& r) {
    for (const auto& [t, pr] : r.parts) {
      if (!pr->note.empty()) row_notes_.push_back(pr->label + " (" + t->id + "): " + pr->note);
      if (!pr->average || std::isnan(*pr->average)) continue;
      double sum = 0;
      bool all = true;
      for (double v : pr->values) all &= !std::isnan(v), sum += v;
      const double mean = sum / static_cast<double>(pr->values.size());
      if (all && std::fabs(mean - *pr->average) > 0.0051 && pr->note.empty())
        row_notes_.push_back(pr->label + " (" + t->id + "): the printed " + t->average + " " +
                             printf_text(shown_in(t->unit), *pr->average) + " is not the mean of its cells (" +
                             printf_text(shown_in(t->unit), mean) + "); shown as printed");
    }
  }

  void add_notes(Grid& grid) const {
    std::string which_tables;
    for (const auto* t : tables_)
      which_tables += (which_tables.empty() ? "" : "; ") + t->id + (t->caption.empty() ? "" : " (" + t->caption + ")") +
                      " in " + t->unit;
    grid.notes.push_back("paper: " + paper_.title + ", " + paper_.citation + ": " + which_tables + " (" + paper_.file + ")");
    grid.notes.push_back(std::string("ours: mean ± sample std over the seeds that ended done (n), in the paper's unit") +
                         (which_ == PaperTable::accuracy ? " (" + o_.accuracy_metric + ")" : "") +
                         "; - none (no finished seed, or no such method)");
    std::string seeds_note = kFewerSeedsMark + std::string(" fewer seeds than ");
    if (paper_said_) seeds_note += "the paper's" + (paper_.seeds ? " (" + std::to_string(paper_.seeds) + ")" : std::string());
    if (fell_back_) seeds_note += std::string(paper_said_ ? "; where it does not say, " : "") + "our fullest cell (" + std::to_string(fullest_) + ")";
    grid.notes.push_back(seeds_note + "; " + kFailedMark + " the cell has failed, diverged or oom jobs, never averaged in");
    grid.notes.push_back(comparison_note());
    for (const auto* t : tables_)
      if (!t->average.empty()) {
        std::string over;
        for (const auto& task : t->tasks) over += (over.empty() ? "" : ", ") + task;
        grid.notes.push_back((averaged_tables_ == 1 ? std::string("average") : "average " + t->id) + ": ours the mean of our task means over " +
                             over + ", only when each has one; the paper's '" + t->average + "' as printed");
      }
    for (const auto& n : row_notes_) grid.notes.push_back(n);
    std::string others;
    for (const auto& task : got_.tasks)
      if (std::find(tasks_.begin(), tasks_.end(), task) == tasks_.end()) others += (others.empty() ? "" : ", ") + task;
    if (!others.empty()) grid.notes.push_back("our tasks the paper does not have (not shown): " + others);
    if (!paper_.hardware.empty()) grid.notes.push_back("the paper ran on " + paper_.hardware);
    if (!paper_.note.empty()) grid.notes.push_back(paper_.note);
    if (which_ == PaperTable::cost)
      for (const auto& e : store::run_environments(db_, runs_)) grid.notes.push_back("ours ran on " + e);
  }

  // What Δ or the ratio is, and in which units.
  std::string comparison_note() const {
    if (which_ == PaperTable::accuracy) {
      const bool percent = std::all_of(tables_.begin(), tables_.end(), [](const PaperTableData* t) { return t->unit == "%"; });
      return std::string("Δ: ours − paper") + (percent ? ", in percentage points" : ", in the table's unit");
    }
    std::string units;
    for (const auto* t : tables_) {
      const std::string u = t->metric == PaperMetric::time
                                ? t->unit + ": the paper's " + shortest_number(t->steps) + " steps at our training speed (" +
                                      shortest_number(t->steps) + " / steps_per_second" + (t->unit == "hours" ? " / 3600" : "") +
                                      "; evaluation excluded, which the paper's time includes)"
                                : t->unit + ": peak_memory_bytes / " + (t->unit == "GB" ? "2^30" : "2^20");
      if (units.find(u) == std::string::npos) units += (units.empty() ? "" : "; ") + u;
    }
    return "ratio: ours / paper (other hardware: compare the ratios between methods); " + units;
  }

  store::ResultsReader& db_;
  const PaperTable which_;
  const PaperTableOptions& o_;
  const Paper& paper_;
  int slot_[3] = {-1, -1, -1};  // PaperMetric -> index of its result in the collected metrics
  const std::vector<const PaperTableData*> tables_;
  const Collected got_;
  std::vector<std::string> tasks_;
  std::vector<Column> columns_;
  std::size_t averaged_tables_ = 0;  // tables with a printed average
  std::vector<MergedRow> merged_;
  std::size_t fullest_ = 0;          // the most seeds of any of our cells shown
  bool paper_said_ = false, fell_back_ = false;  // reference_seeds: the paper's seeds, our fullest cell
  std::vector<std::string> row_notes_;
  std::vector<std::int64_t> runs_;   // of the cells shown, whose environments a cost table names
};

// --- our numbers alone ---------------------------------------------------------------------------

// One row per method (wide: a column per task and quantity, and the accuracy table's average), or
// one per method, task and quantity (long, for --format csv and json); the seeds' mean ± std per cell.
class OurTable {
 public:
  OurTable(store::ResultsReader& db, PaperTable which, const PaperTableOptions& options)
      : db_(db), which_(which), options_(options), qs_(quantities(which, options)),
        known_(store::result_names(db)), average_(which == PaperTable::accuracy) {
    have_all_ = std::all_of(qs_.begin(), qs_.end(), [&](const Quantity& q) {
      return std::find(known_.begin(), known_.end(), q.result) != known_.end();
    });
    select();
    if (which_ == PaperTable::variance) keep_stochastic_methods();
    fullest_ = fullest();
  }

  Grid grid() {
    Grid grid;
    header(grid);
    for (const auto& m : got_.methods) add_method(grid, m);
    if (options_.wide) notes(grid);
    return grid;
  }

 private:
  // The selected jobs' cells, each seed's value converted to the quantity shown. A database
  // without a finished run, or (variance) without a run of a stochastic method, has none of these
  // results: an empty table rather than an unknown-metric error, which stays for a misspelt --metric.
  void select() {
    store::Selection selection;
    selection.where = options_.where;
    for (const auto& q : qs_) selection.metrics.push_back(q.result);
    if (!have_all_ && (which_ == PaperTable::variance || known_.empty())) selection.metrics.clear();
    const bool passes = which_ == PaperTable::variance && have_all_;
    if (passes) selection.metrics.push_back("variance_passes");
    got_ = collect(db_, selection, qs_.size(), passes);
    for (auto& [key, c] : got_.cells)
      for (std::size_t q = 0; q < qs_.size(); ++q)
        for (double& v : c.values[q]) v = qs_[q].convert(v);
  }

  const CellData* cell(const std::string& method, const std::string& task) const {
    const auto it = got_.cells.find({method, task});
    return it == got_.cells.end() ? nullptr : &it->second;
  }

  // The variance table lists the stochastic methods only: those with a variance value somewhere.
  void keep_stochastic_methods() {
    std::vector<std::string> stochastic;
    for (const auto& m : got_.methods)
      for (const auto& t : got_.tasks)
        if (const CellData* c = cell(m, t); c && !c->values.empty() && !c->values[0].empty()) append_unique(stochastic, m);
    got_.methods = stochastic;
  }

  // "the others": the most seeds any listed cell has for the table's first quantity
  std::size_t fullest() const {
    std::size_t most = 0;
    for (const auto& m : got_.methods)
      for (const auto& t : got_.tasks)
        if (const CellData* c = cell(m, t)) most = std::max(most, c->values[0].size());
    return most;
  }

  std::string marks(const CellData* c, std::size_t n) const {
    std::string m;
    if (n < fullest_) m += kFewerSeedsMark;
    if (c && c->failed) m += kFailedMark;
    return m;
  }

  void header(Grid& grid) const {
    if (!options_.wide) {
      grid.header = {"method", "task", "metric", "mean", "std", "n", "jobs", "failed", "unfinished", "fewer_seeds",
                     "with_failed"};
      return;
    }
    grid.header = {"method"};
    for (const auto& t : got_.tasks)
      for (const auto& q : qs_) grid.header.push_back(qs_.size() == 1 ? t : t + " " + q.label);
    if (average_) grid.header.push_back("average");
  }

  // The method's cells (a wide row, or long rows), then the accuracy table's average.
  void add_method(Grid& grid, const std::string& m) {
    std::vector<Cell> row = {Cell::of_text(m)};
    double task_mean_sum = 0;
    std::size_t tasks_with_mean = 0;
    std::string average_marks;
    for (const auto& t : got_.tasks) {
      const CellData* c = cell(m, t);
      if (c) runs_.insert(runs_.end(), c->runs.begin(), c->runs.end());
      for (std::size_t q = 0; q < qs_.size(); ++q) {
        const SeedStats s = seed_stats(c ? c->values[q] : std::vector<double>{});
        const std::string mk = marks(c, c ? c->values[0].size() : 0);
        if (q == 0 && s.n > 0) task_mean_sum += s.mean, ++tasks_with_mean;
        for (const char* mark : {kFewerSeedsMark, kFailedMark})
          if (mk.find(mark) != std::string::npos && average_marks.find(mark) == std::string::npos) average_marks += mark;
        if (options_.wide)
          row.push_back(Cell{mean_std_text(s, qs_[q].shown) + mk, s.n ? std::optional<double>(s.mean) : std::nullopt, s.n == 0});
        else
          grid.rows.push_back(long_row(m, t, qs_[q], s, c, mk));
      }
    }
    if (!average_) {
      if (options_.wide) grid.rows.push_back(std::move(row));
      return;
    }
    // The average of the task means, only when every task has one (a missing task would bias it).
    const bool complete = tasks_with_mean == got_.tasks.size() && !got_.tasks.empty();
    const double mean = complete ? task_mean_sum / static_cast<double>(got_.tasks.size()) : 0;
    if (options_.wide) {
      row.push_back(complete ? Cell::of_number(mean, "%.4f") : Cell::none());
      if (complete) row.back().text += average_marks;
      grid.rows.push_back(std::move(row));
    } else {
      grid.rows.push_back({Cell::of_text(m), Cell::of_text("average"), Cell::of_text(qs_[0].label),
                           complete ? Cell::of_number(mean) : Cell::none(), Cell::none(),
                           Cell::of_integer(static_cast<long long>(tasks_with_mean)), Cell::none(), Cell::none(),
                           Cell::none(), Cell::of_integer(average_marks.find(kFewerSeedsMark) != std::string::npos),
                           Cell::of_integer(average_marks.find(kFailedMark) != std::string::npos)});
    }
  }

  static std::vector<Cell> long_row(const std::string& m, const std::string& t, const Quantity& q, const SeedStats& s,
                                    const CellData* c, const std::string& mk) {
    auto number = [&](double v) { return s.n == 0 || std::isnan(v) ? Cell::none() : Cell::of_number(v, q.shown); };
    auto count = [&](std::size_t CellData::*field) { return Cell::of_integer(c ? static_cast<long long>(c->*field) : 0); };
    return {Cell::of_text(m), Cell::of_text(t), Cell::of_text(q.label), number(s.mean), number(s.std),
            Cell::of_integer(static_cast<long long>(s.n)), count(&CellData::jobs), count(&CellData::failed),
            count(&CellData::unfinished), Cell::of_integer(mk.find(kFewerSeedsMark) != std::string::npos),
            Cell::of_integer(mk.find(kFailedMark) != std::string::npos)};
  }

  void notes(Grid& grid) const {
    if (got_.methods.empty() || known_.empty()) {
      grid.notes.push_back(got_.jobs == 0   ? "no jobs match"
                           : known_.empty() ? "no finished runs yet"
                                            : "no runs with variance metrics (runs of stochastic methods store rsd, pi, va, agv)");
      return;
    }
    grid.notes.push_back("mean ± sample std over the seeds that ended done (n); - no finished seed");
    if (!got_.swept.empty()) grid.notes.push_back("a sweep's values are kept apart, never averaged as seeds: " + got_.swept_text());
    grid.notes.push_back(std::string(kFewerSeedsMark) + " fewer seeds than the table's fullest cell (" +
                         std::to_string(fullest_) + "); " + kFailedMark +
                         " the cell has failed, diverged or oom jobs, never averaged in "
                         "(attnlab results --where \"status IN (failed, diverged, oom)\" --jobs)");
    if (average_) grid.notes.push_back("average: the mean of the task means, shown only when every task has one");
    if (which_ == PaperTable::cost) {
      grid.notes.push_back("s/1k steps: 1000 / steps_per_second (training time only, evaluation excluded); peak MiB: "
                           "the run's peak memory (CUDA allocator peak, or the job process's peak RSS on the CPU)");
      for (const auto& e : store::run_environments(db_, runs_)) grid.notes.push_back("ran on " + e);
    }
    if (which_ == PaperTable::variance) grid.notes.push_back(variance_note());
  }

  std::string variance_note() const {
    std::string r;
    for (double p : got_.passes) r += (r.empty() ? "" : ", ") + std::to_string(static_cast<long long>(p));
    return "over R fresh-draw passes per example (R = " + (r.empty() ? std::string("?") : r) +
           "), means over examples: RSD the relative std of the output, PI the passes that disagree with the "
           "majority vote; VA the vote's accuracy; AGV = VA / mean single-pass accuracy";
  }

  store::ResultsReader& db_;
  const PaperTable which_;
  const PaperTableOptions& options_;
  const std::vector<Quantity> qs_;
  const std::vector<std::string> known_;  // the result names the database holds
  const bool average_;                    // the accuracy table's last column
  bool have_all_ = false;                 // every quantity's result is in the database
  Collected got_;
  std::size_t fullest_ = 0;
  std::vector<std::int64_t> runs_;  // of the cells shown, whose environments a cost table names
};

}  // namespace

PaperTable parse_paper_table(const std::string& word) {
  if (word == "accuracy") return PaperTable::accuracy;
  if (word == "cost") return PaperTable::cost;
  if (word == "variance") return PaperTable::variance;
  throw std::invalid_argument("unknown table '" + word + "' (accuracy, cost or variance)");
}

const char* to_string(PaperTable table) {
  switch (table) {
    case PaperTable::accuracy: return "accuracy";
    case PaperTable::cost: return "cost";
    case PaperTable::variance: return "variance";
  }
  return "?";
}

Grid paper_table(store::ResultsReader& db, PaperTable which, const PaperTableOptions& options) {
  if (options.paper) return PaperComparison(db, which, options).grid();
  return OurTable(db, which, options).grid();
}

}  // namespace attnlab::results
