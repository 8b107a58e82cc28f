#include "results/report_folder.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>


#include "attnlab/query.hpp"
#include "results/compare.hpp"
#include "results/curves.hpp"
#include "results/formats.hpp"
#include "results/paper_tables.hpp"
#include "results/sweep.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab::results {
namespace fs = std::filesystem;
namespace {

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) throw std::runtime_error(path.string() + ": cannot write");
}

const char* extension(PictureFormat f) { return f == PictureFormat::png ? ".png" : ".svg"; }

// The curves every report draws: (split, name, against) and the words used in file names.
struct CurveKind {
  const char* split;
  const char* name;
  CurveX x;
  const char* file;
};
constexpr CurveKind kCurves[] = {
    {"val", "acc", CurveX::time, "val-acc-time"},
    {"val", "loss", CurveX::time, "val-loss-time"},
    {"train", "loss", CurveX::step, "train-loss-step"},
};

// The curves of those runs that have (split, name); the others are named in `skipped`.
std::vector<RunCurve> curves_that_exist(store::ResultsReader& db, const std::vector<std::int64_t>& runs, const CurveKind& k,
                                        std::vector<std::string>& skipped) {
  std::vector<RunCurve> out;
  for (std::int64_t id : runs) {
    try {
      auto c = read_run_curves(db, {id}, k.split, k.name);
      out.insert(out.end(), c.begin(), c.end());
    } catch (const std::exception& e) {
      skipped.push_back(std::string(k.split) + " " + k.name + " of run " + std::to_string(id) + ": " + e.what());
    }
  }
  return out;
}

// A Markdown code fence longer than any run of backticks in `text`, so that no line of it ends
// the block early.
std::string fence_for(const std::string& text) {
  std::size_t longest = 0, run = 0;
  for (char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return std::string(std::max<std::size_t>(3, longest + 1), '`');
}

class Report {
 public:
  Report(store::ResultsReader& db, const ReportOptions& o) : db_(db), o_(o), root_(o.out_dir) {}

  ReportSummary write() {
    fs::create_directories(root_);
    readme_ = "# attnlab report\n\nDatabase `" + db_.path() + "`, written " + now_utc() +
              ". Tables: mean ± sample std over the seeds that ended done, (n) seeds; the marks are "
              "explained under each table. CSV files hold the exact values, one row per method, task "
              "and metric.\n\n";
    method_order();
    tables();
    comparisons();
    curves();
    bench();
    approx();
    settings();
    if (!summary_.skipped.empty()) {
      readme_ += "## Not drawn\n\n";
      for (const auto& s : summary_.skipped) readme_ += "- " + s + "\n";
      readme_ += "\n";
    }
    put("README.md", readme_);
    return summary_;
  }

 private:
  static std::string now_utc() {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
    return buf;
  }

  void put(const std::string& relative, const std::string& text) {
    write_text(root_ / relative, text);
    summary_.files.push_back(relative);
  }

  void picture(const std::string& relative, const Plot& plot) {
    fs::create_directories((root_ / relative).parent_path());
    draw(plot, (root_ / relative).string(), o_.pictures);
    summary_.files.push_back(relative);
  }

  // Every method gets its place once, before any picture: the methods of the selected jobs in the
  // order their first job was enqueued (the experiment file's order), then those only `bench` or
  // `approx` measured, by name. The place is the method's colour in every picture.
  void method_order() {
    store::Selection s;
    s.where = o_.where;
    for (const auto& r : store::select_jobs(db_, s)) {
      if (std::find(methods_.begin(), methods_.end(), r.method) == methods_.end()) methods_.push_back(r.method);
      job_ids_.push_back(r.job_id);
    }
    std::set<std::string> studied;
    for (const auto& r : store::bench_results(db_)) studied.insert(r.method);
    for (const auto& r : store::approx_results(db_)) studied.insert(r.method);
    for (const auto& m : studied)
      if (std::find(methods_.begin(), methods_.end(), m) == methods_.end()) methods_.push_back(m);
  }

  int colour_of(const std::string& method) const {
    const auto it = std::find(methods_.begin(), methods_.end(), method);
    return it == methods_.end() ? -1 : static_cast<int>(it - methods_.begin());
  }

  // The experiment files as enqueued, each once: the settings every number below came from
  // (each job's resolved configuration: attnlab queue show JOB).
  void settings() {
    const auto experiments = db_.experiments_of_jobs(job_ids_);
    if (experiments.empty()) return;
    readme_ += "## Settings\n\nThe experiment files as they were enqueued (each job's resolved configuration: "
               "`attnlab queue show JOB`).\n\n";
    for (const auto& e : experiments) {
      const std::string file = "settings/" + std::to_string(e.id) + "-" + file_safe(e.name) + ".toml";
      put(file, e.config_text);
      const std::string fence = fence_for(e.config_text);
      readme_ += "### " + e.name + " ([" + file + "](" + file + ")" +
                 (e.source_path.empty() ? "" : ", from `" + e.source_path + "`") + ")\n\n" + fence + "toml\n" +
                 e.config_text + (e.config_text.empty() || e.config_text.back() == '\n' ? "" : "\n") + fence + "\n\n";
    }
  }

  // What always answering a task's most frequent class scores on its test split: the floor any
  // accuracy above is to be read against. From the runs' `majority_rate` results.
  void majority_baseline() {
    const auto known = store::result_names(db_);
    if (std::find(known.begin(), known.end(), "majority_rate") == known.end()) return;
    store::Selection s;
    s.where = o_.where;
    s.where.push_back("status = done");
    s.metrics = {"majority_rate"};
    std::vector<std::string> tasks;
    std::map<std::string, std::vector<double>> rates;
    for (const auto& r : store::select_jobs(db_, s)) {
      if (!r.metrics[0] || std::isnan(*r.metrics[0])) continue;
      if (!rates.count(r.dataset)) tasks.push_back(r.dataset);
      rates[r.dataset].push_back(*r.metrics[0]);
    }
    if (tasks.empty()) return;
    Grid grid;
    grid.header = {"task", "majority-class rate", "runs"};
    for (const auto& t : tasks) {
      const auto [low, high] = std::minmax_element(rates[t].begin(), rates[t].end());
      Cell rate = Cell::of_number(*low, "%.4f");
      if (*high != *low) rate.text += " to " + Cell::of_number(*high, "%.4f").text;  // runs on different data
      grid.rows.push_back({Cell::of_text(t), rate, Cell::of_integer(static_cast<long long>(rates[t].size()))});
    }
    grid.notes.push_back("the accuracy of always answering the test split's most frequent class (result "
                         "majority_rate of the runs that ended done); a range: the runs' data settings differ");
    const std::string md = render(grid, Format::markdown);
    put("majority.md", md);
    readme_ += "## Majority-class baseline ([majority.md](majority.md))\n\n" + md + "\n";
  }

  // Each method against the baseline (softmax when there is one, else the first method), task by
  // task: what `attnlab compare METHOD BASELINE` prints.
  void comparisons() {
    store::Selection s;
    s.where = o_.where;
    s.where.push_back("status = done");
    std::vector<std::string> done;
    for (const auto& r : store::select_jobs(db_, s))
      if (std::find(done.begin(), done.end(), r.method) == done.end()) done.push_back(r.method);
    if (done.size() < 2) return;
    std::vector<std::string> ordered;  // the report's method order
    for (const auto& m : methods_)
      if (std::find(done.begin(), done.end(), m) != done.end()) ordered.push_back(m);
    const std::string baseline =
        std::find(ordered.begin(), ordered.end(), "softmax") != ordered.end() ? "softmax" : ordered.front();
    std::string text = "Each method (A) against " + baseline +
                       " (B; softmax when the database has it, else the first method) on the test accuracy of the "
                       "tasks both ran: `attnlab compare A " + baseline + "`.\n\n";
    for (const auto& m : ordered) {
      if (m == baseline) continue;
      text += "### " + m + " against " + baseline + "\n\n";
      CompareOptions c;
      c.a = m;
      c.b = baseline;
      c.where = o_.where;
      try {
        Comparison result = compare(db_, c);
        result.grid.notes = result.notes;
        text += render(result.grid, Format::markdown) + "\n";
      } catch (const std::exception& e) {
        text += "Not compared: " + std::string(e.what()) + "\n\n";
      }
    }
    put("compare.md", text);
    readme_ += "## Compared with " + baseline + " ([compare.md](compare.md))\n\n" + text;
  }

  void tables() {
    for (PaperTable t : {PaperTable::accuracy, PaperTable::cost, PaperTable::variance}) {
      PaperTableOptions wide;
      wide.where = o_.where;
      const std::string name = to_string(t);
      const std::string md = render(paper_table(db_, t, wide), Format::markdown);
      PaperTableOptions long_form = wide;
      long_form.wide = false;
      put(name + ".md", md);
      put(name + ".csv", render(paper_table(db_, t, long_form), Format::csv));
      readme_ += "## " + std::string(t == PaperTable::accuracy ? "Accuracy" : t == PaperTable::cost ? "Cost" : "Variance") +
                 " ([" + name + ".md](" + name + ".md), [" + name + ".csv](" + name + ".csv))\n\n" + md + "\n";
      if (t == PaperTable::accuracy) majority_baseline();
    }
  }

  void curves() {
    store::Selection s;
    s.where = o_.where;
    s.where.push_back("status = done");
    const auto rows = store::select_jobs(db_, s);
    if (rows.empty()) return;
    // A sweep's values are not seeds: a task per swept dataset setting, a line per swept other setting.
    const Sweep sweep = find_sweep(db_, rows);
    std::vector<std::string> tasks;
    std::map<std::string, std::vector<std::int64_t>> runs_of_task;
    std::map<std::int64_t, std::string> line_of_run;
    for (const auto& r : rows) {
      const std::string task = sweep.task(r);
      if (std::find(tasks.begin(), tasks.end(), task) == tasks.end()) tasks.push_back(task);
      runs_of_task[task].push_back(r.run_id);
      line_of_run[r.run_id] = sweep.row(r);
    }
    readme_ += "## Curves\n\nPer task, every method's mean over seeds with a ± 1 std band (validation against "
               "wall-clock time since the run started, training loss against step); per method and task, every "
               "seed. Each picture's data (.dat) and gnuplot script (.gp) sit beside it.\n\n";
    for (const auto& task : tasks) {
      readme_ += "### " + task + "\n\n";
      for (const auto& k : kCurves) {
        auto runs = curves_that_exist(db_, runs_of_task[task], k, summary_.skipped);
        if (runs.empty()) continue;
        if (!sweep.keys.empty())
          for (auto& run : runs) run.group = line_of_run[run.run_id];
        std::vector<MeanCurve> means;
        try {
          means = mean_over_seeds(runs);
        } catch (const std::exception& e) {
          summary_.skipped.push_back(task + " " + k.file + ": " + e.what());
          continue;
        }
        const std::string file = "curves/" + file_safe(task) + "-" + k.file + extension(o_.pictures);
        Plot plot = mean_curves_plot(means, k.split, k.name, k.x, task + ": " + curve_label(k.split, k.name));
        for (std::size_t i = 0; i < means.size(); ++i) plot.series[i].colour = colour_of(means[i].method);
        picture(file, plot);
        readme_ += "![" + task + " " + k.file + "](" + file + ")\n\n";
        // each (method, task) group's seeds, one picture per group and curve
        std::map<std::string, std::vector<RunCurve>> by_method;
        for (const auto& r : runs) by_method[r.method].push_back(r);
        for (const auto& method : methods_) {
          if (!by_method.count(method)) continue;
          const auto& group = by_method[method];
          const std::string seeds = "curves/" + file_safe(task) + "/" + file_safe(method) + "-" + k.file + extension(o_.pictures);
          picture(seeds, run_curves_plot(group, k.split, k.name, k.x, method + " on " + task + ": " + curve_label(k.split, k.name)));
          readme_ += "[" + method + " " + k.file + " per seed](" + seeds + ") ";
        }
        readme_ += "\n\n";
      }
    }
  }

  // Step time and peak memory against sequence length, per device: the newest done measurement of
  // each (method, length, batch size).
  void bench() {
    const auto rows = store::bench_results(db_);
    std::map<std::string, std::map<std::string, std::map<std::int64_t, store::BenchResult>>> by;  // device/batch → method → n
    for (const auto& r : rows)
      if (r.status == "done") by[r.device + " batch " + std::to_string(r.batch_size)][r.method][r.seq_len] = r;  // newest wins
    if (by.empty()) return;
    readme_ += "## Bench (`attnlab bench`)\n\nThe newest measurement of each method and length: median "
               "training-step time and peak memory.\n\n";
    Grid grid;
    grid.header = {"device", "batch_size", "method", "seq_len", "step_seconds_median", "peak_memory_bytes"};
    for (const auto& [setting, methods] : by) {
      Plot time{"Training step time (" + setting + ")", "sequence length", "seconds per step (median)", {}, true, true};
      Plot memory{"Peak memory (" + setting + ")", "sequence length", "peak memory (MiB)", {}, true, true};
      time.marks = memory.marks = true;
      for (const auto& method : methods_) {
        if (!methods.count(method)) continue;
        const auto& lengths = methods.at(method);
        Series t{method, {}, {}, {}, {}, colour_of(method)}, m{method, {}, {}, {}, {}, colour_of(method)};
        for (const auto& [n, r] : lengths) {
          t.x.push_back(static_cast<double>(n));
          t.y.push_back(r.step_seconds_median);
          m.x.push_back(static_cast<double>(n));
          m.y.push_back(r.peak_memory_bytes / (1024.0 * 1024.0));
          grid.rows.push_back({Cell::of_text(r.device), Cell::of_integer(r.batch_size), Cell::of_text(method),
                               Cell::of_integer(n), Cell::of_number(r.step_seconds_median),
                               Cell::of_number(r.peak_memory_bytes, "%.0f")});
        }
        time.series.push_back(std::move(t));
        memory.series.push_back(std::move(m));
      }
      const std::string base = "bench/" + file_safe(setting);
      picture(base + "-time" + extension(o_.pictures), time);
      picture(base + "-memory" + extension(o_.pictures), memory);
      readme_ += "![" + setting + " time](" + base + "-time" + extension(o_.pictures) + ")\n![" + setting + " memory](" +
                 base + "-memory" + extension(o_.pictures) + ")\n\n";
    }
    put("bench/bench.csv", render(grid, Format::csv));
    readme_ += "Values: [bench/bench.csv](bench/bench.csv)\n\n";
  }

  // Relative spectral-norm error against d, one picture per sequence length and reference, a line
  // per method with a ± 1 std band over heads and draws (Skyformer Fig. 1).
  void approx() {
    const auto rows = store::approx_results(db_);
    if (rows.empty()) return;
    std::map<std::pair<std::int64_t, std::string>, std::map<std::string, std::map<std::int64_t, store::ApproxResult>>> by;
    for (const auto& r : rows) by[{r.seq_len, r.reference + " from " + r.source}][r.method][r.features] = r;
    readme_ += "## Approximation error (`attnlab approx`)\n\n";
    Grid grid;
    grid.header = {"seq_len", "reference", "source", "method", "param", "features", "samples", "rel_error_mean", "rel_error_std"};
    for (const auto& [key, methods] : by) {
      Plot p{"Relative error against exact " + key.second + ", n = " + std::to_string(key.first),
             "d (landmarks or features)", "relative spectral-norm error", {}, true, false};  // errors near 0: linear y
      p.marks = true;
      for (const auto& method : methods_) {
        if (!methods.count(method)) continue;
        const auto& ds = methods.at(method);
        Series s{method, {}, {}, {}, {}, colour_of(method)};
        for (const auto& [d, r] : ds) {
          s.x.push_back(static_cast<double>(d));
          s.y.push_back(r.rel_error_mean);
          s.low.push_back(r.rel_error_mean - r.rel_error_std);
          s.high.push_back(r.rel_error_mean + r.rel_error_std);
          grid.rows.push_back({Cell::of_integer(r.seq_len), Cell::of_text(r.reference), Cell::of_text(r.source),
                               Cell::of_text(method), Cell::of_text(r.param), Cell::of_integer(d),
                               Cell::of_integer(r.samples), Cell::of_number(r.rel_error_mean, "%.5f"),
                               Cell::of_number(r.rel_error_std, "%.5f")});
        }
        p.series.push_back(std::move(s));
      }
      const std::string file = "approx/n" + std::to_string(key.first) + "-" + file_safe(key.second) + extension(o_.pictures);
      picture(file, p);
      readme_ += "![" + p.title + "](" + file + ")\n\n";
    }
    put("approx/approx.csv", render(grid, Format::csv));
    readme_ += "Values: [approx/approx.csv](approx/approx.csv)\n\n";
  }

  store::ResultsReader& db_;
  const ReportOptions& o_;
  fs::path root_;
  std::string readme_;
  ReportSummary summary_;
  std::vector<std::string> methods_;     // method_order(): a method's place is its colour
  std::vector<std::int64_t> job_ids_;    // the jobs the report covers (--where)
};

}  // namespace

std::string file_safe(const std::string& name) {
  std::string out;
  for (char c : name)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '_';
  return out.empty() ? "_" : out;
}

ReportSummary write_report(store::ResultsReader& db, const ReportOptions& options) { return Report(db, options).write(); }

}  // namespace attnlab::results
