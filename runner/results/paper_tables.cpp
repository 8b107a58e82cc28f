#include "results/paper_tables.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

#include "results/aggregate.hpp"

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

Grid paper_table(store::Database& db, PaperTable which, const PaperTableOptions& options) {
  const auto qs = quantities(which, options);
  store::Selection selection;
  selection.where = options.where;
  for (const auto& q : qs) selection.metrics.push_back(q.result);
  // A database without a finished run, or (variance) without a run of a stochastic method, has
  // none of these results: an empty table rather than an unknown-metric error, which stays for a
  // misspelt --metric.
  const auto known = store::result_names(db);
  const bool have_all = std::all_of(qs.begin(), qs.end(), [&](const Quantity& q) {
    return std::find(known.begin(), known.end(), q.result) != known.end();
  });
  if (!have_all && (which == PaperTable::variance || known.empty())) selection.metrics.clear();
  if (which == PaperTable::variance && have_all) selection.metrics.push_back("variance_passes");
  const auto rows = store::select_jobs(db, selection);

  // methods and tasks in the order the jobs were first enqueued: the experiment file's order
  std::vector<std::string> methods, tasks;
  std::map<std::pair<std::string, std::string>, CellData> cells;
  std::set<double> passes;
  for (const auto& r : rows) {
    auto& c = cells[{r.method, r.dataset}];
    c.values.resize(qs.size());
    ++c.jobs;
    if (is_failed_state(r.state)) ++c.failed;
    else if (r.state != store::JobState::done) ++c.unfinished;
    else {
      c.runs.push_back(r.run_id);
      for (std::size_t q = 0; q < qs.size() && q < selection.metrics.size(); ++q)
        if (r.metrics[q] && !std::isnan(*r.metrics[q])) c.values[q].push_back(qs[q].convert(*r.metrics[q]));
      if (selection.metrics.size() > qs.size() && r.metrics.back()) passes.insert(*r.metrics.back());
    }
    append_unique(tasks, r.dataset);
    append_unique(methods, r.method);
  }
  // The variance table lists the stochastic methods only: those with a variance value somewhere.
  if (which == PaperTable::variance) {
    std::vector<std::string> stochastic;
    for (const auto& m : methods)
      for (const auto& t : tasks) {
        const auto it = cells.find({m, t});
        if (it != cells.end() && !it->second.values.empty() && !it->second.values[0].empty()) {
          append_unique(stochastic, m);
        }
      }
    methods = stochastic;
  }

  // "the others": the most seeds any listed cell has for the table's first quantity
  std::size_t most = 0;
  for (const auto& m : methods)
    for (const auto& t : tasks) {
      const auto it = cells.find({m, t});
      if (it != cells.end()) most = std::max(most, it->second.values[0].size());
    }
  const auto marks = [&](const CellData* c, std::size_t n) {
    std::string m;
    if (n < most) m += kFewerSeedsMark;
    if (c && c->failed) m += kFailedMark;
    return m;
  };

  Grid grid;
  std::vector<std::int64_t> runs;
  const bool average = which == PaperTable::accuracy;
  if (options.wide) {
    grid.header = {"method"};
    for (const auto& t : tasks)
      for (const auto& q : qs) grid.header.push_back(qs.size() == 1 ? t : t + " " + q.label);
    if (average) grid.header.push_back("average");
  } else {
    grid.header = {"method", "task", "metric", "mean", "std", "n", "jobs", "failed", "unfinished", "fewer_seeds",
                   "with_failed"};
  }
  for (const auto& m : methods) {
    std::vector<Cell> row = {Cell::of_text(m)};
    double task_mean_sum = 0;
    std::size_t tasks_with_mean = 0;
    std::string average_marks;
    for (const auto& t : tasks) {
      const auto it = cells.find({m, t});
      const CellData* c = it == cells.end() ? nullptr : &it->second;
      if (c) runs.insert(runs.end(), c->runs.begin(), c->runs.end());
      for (std::size_t q = 0; q < qs.size(); ++q) {
        const SeedStats s = seed_stats(c ? c->values[q] : std::vector<double>{});
        const std::string mk = marks(c, c ? c->values[0].size() : 0);
        if (q == 0 && s.n > 0) task_mean_sum += s.mean, ++tasks_with_mean;
        for (const char* mark : {kFewerSeedsMark, kFailedMark})
          if (mk.find(mark) != std::string::npos && average_marks.find(mark) == std::string::npos) average_marks += mark;
        if (options.wide) {
          row.push_back(Cell{mean_std_text(s, qs[q].shown) + mk, s.n ? std::optional<double>(s.mean) : std::nullopt, s.n == 0});
          continue;
        }
        auto number = [&](double v) { return s.n == 0 || std::isnan(v) ? Cell::none() : Cell::of_number(v, qs[q].shown); };
        grid.rows.push_back({Cell::of_text(m), Cell::of_text(t), Cell::of_text(qs[q].label), number(s.mean),
                             number(s.std), Cell::of_integer(static_cast<long long>(s.n)),
                             Cell::of_integer(c ? static_cast<long long>(c->jobs) : 0),
                             Cell::of_integer(c ? static_cast<long long>(c->failed) : 0),
                             Cell::of_integer(c ? static_cast<long long>(c->unfinished) : 0),
                             Cell::of_integer(mk.find(kFewerSeedsMark) != std::string::npos),
                             Cell::of_integer(mk.find(kFailedMark) != std::string::npos)});
      }
    }
    if (!average) {
      if (options.wide) grid.rows.push_back(std::move(row));
      continue;
    }
    // The average of the task means, only when every task has one (a missing task would bias it).
    const bool complete = tasks_with_mean == tasks.size() && !tasks.empty();
    const double mean = complete ? task_mean_sum / static_cast<double>(tasks.size()) : 0;
    if (options.wide) {
      row.push_back(complete ? Cell::of_number(mean, "%.4f") : Cell::none());
      if (complete) row.back().text += average_marks;
      grid.rows.push_back(std::move(row));
    } else {
      grid.rows.push_back({Cell::of_text(m), Cell::of_text("average"), Cell::of_text(qs[0].label),
                           complete ? Cell::of_number(mean) : Cell::none(), Cell::none(),
                           Cell::of_integer(static_cast<long long>(tasks_with_mean)), Cell::none(), Cell::none(),
                           Cell::none(), Cell::of_integer(average_marks.find(kFewerSeedsMark) != std::string::npos),
                           Cell::of_integer(average_marks.find(kFailedMark) != std::string::npos)});
    }
  }

  if (!options.wide) return grid;
  if (methods.empty() || known.empty()) {
    grid.notes.push_back(rows.empty()     ? "no jobs match"
                         : known.empty()  ? "no finished runs yet"
                                          : "no runs with variance metrics (runs of stochastic methods store rsd, pi, va, agv)");
    return grid;
  }
  grid.notes.push_back("mean ± sample std over the seeds that ended done (n); - no finished seed");
  grid.notes.push_back(std::string(kFewerSeedsMark) + " fewer seeds than the table's fullest cell (" +
                       std::to_string(most) + "); " + kFailedMark +
                       " the cell has failed, diverged or oom jobs, never averaged in "
                       "(attnlab results --where \"status IN (failed, diverged, oom)\" --jobs)");
  if (average) grid.notes.push_back("average: the mean of the task means, shown only when every task has one");
  if (which == PaperTable::cost) {
    grid.notes.push_back("s/1k steps: 1000 / steps_per_second (training time only, evaluation excluded); peak MiB: "
                         "the run's peak memory (CUDA allocator peak, or the job process's peak RSS on the CPU)");
  }
  if (which == PaperTable::variance) {
    std::string r;
    for (double p : passes) r += (r.empty() ? "" : ", ") + std::to_string(static_cast<long long>(p));
    grid.notes.push_back("over R fresh-draw passes per example (R = " + (r.empty() ? std::string("?") : r) +
                         "), means over examples: RSD the relative std of the output, PI the passes that disagree with the "
                         "majority vote; VA the vote's accuracy; AGV = VA / mean single-pass accuracy");
  }
  if (which == PaperTable::cost)
    for (const auto& e : store::run_environments(db, runs)) grid.notes.push_back("ran on " + e);
  return grid;
}

}  // namespace attnlab::results
