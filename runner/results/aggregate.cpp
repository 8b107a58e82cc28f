#include "results/aggregate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>

namespace attnlab::results {
namespace {

bool parse_number(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

SeedStats seed_stats(const std::vector<double>& values) {
  SeedStats s;
  s.mean = s.std = s.min = s.max = kNaN;
  std::vector<double> v;
  for (double x : values)
    if (!std::isnan(x)) v.push_back(x);
  s.n = v.size();
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  // two passes, as the view seed_stats does: the same numbers at the sqlite3 prompt
  if (v.size() > 1) {
    double squares = 0;
    for (double x : v) squares += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(squares / static_cast<double>(v.size() - 1));
  }
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  return s;
}

void GroupOrder::see(const std::vector<std::string>& key) {
  if (first_seen_.size() < key.size()) first_seen_.resize(key.size());
  for (std::size_t i = 0; i < key.size(); ++i) first_seen_[i].emplace(key[i], first_seen_[i].size());
}

bool GroupOrder::operator()(const std::vector<std::string>& a, const std::vector<std::string>& b) const {
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] == b[i]) continue;
    double x, y;
    const bool nx = parse_number(a[i], x), ny = parse_number(b[i], y);
    if (nx != ny) return nx;  // numbers first
    if (nx && x != y) return x < y;
    // text, or one number spelled two ways: the first named comes first (unseen values last, by text)
    static const std::map<std::string, std::size_t> kUnseen;
    const auto& seen = i < first_seen_.size() ? first_seen_[i] : kUnseen;
    const auto ra = seen.find(a[i]), rb = seen.find(b[i]);
    const std::size_t none = seen.size();
    const std::size_t ia = ra == seen.end() ? none : ra->second, ib = rb == seen.end() ? none : rb->second;
    if (ia != ib) return ia < ib;
    return a[i] < b[i];
  }
  return a.size() < b.size();
}

std::vector<GroupSummary> summarize(const std::vector<store::JobRow>& rows, std::size_t metric_count) {
  GroupOrder order;
  for (const auto& r : rows) order.see(r.group);
  std::map<std::vector<std::string>, std::vector<const store::JobRow*>, GroupOrder> groups(order);
  for (const auto& r : rows) groups[r.group].push_back(&r);

  std::vector<GroupSummary> out;
  for (const auto& [key, jobs] : groups) {
    GroupSummary g;
    g.key = key;
    g.jobs = jobs.size();
    std::vector<std::vector<double>> values(metric_count);
    for (const auto* r : jobs) {
      if (r->state == store::JobState::done) {
        ++g.done;
        for (std::size_t m = 0; m < metric_count && m < r->metrics.size(); ++m)
          if (r->metrics[m]) values[m].push_back(*r->metrics[m]);
      } else if (store::is_failed(r->state)) {
        ++g.failed;
      } else {
        ++g.unfinished;
      }
    }
    for (const auto& v : values) g.metrics.push_back(seed_stats(v));
    out.push_back(std::move(g));
  }
  return out;
}

Cell metric_cell(const std::string& metric, double value) {
  if (!std::isfinite(value)) return Cell::of_number(value);
  if (ends_with(metric, "_bytes")) {
    char buf[64];
    const double mib = value / (1024.0 * 1024.0);
    if (mib >= 1024) std::snprintf(buf, sizeof buf, "%.2f GiB", mib / 1024);
    else std::snprintf(buf, sizeof buf, "%.1f MiB", mib);
    return Cell{buf, value, false};
  }
  if (ends_with(metric, "_seconds")) return Cell::of_number(value, "%.1f");
  if (metric == "param_count" || metric == "steps_done" || metric == "best_step" || metric == "variance_passes")
    return Cell::of_number(value, "%.0f");
  if (std::fabs(value) >= 1000) return Cell::of_number(value, "%.1f");
  return Cell::of_number(value, "%.4f");
}

std::string mean_std_text(const SeedStats& s, const char* shown) {
  if (s.n == 0) return "-";
  char mean[48], sd[48];
  std::snprintf(mean, sizeof mean, shown, s.mean);
  if (s.n < 2 || std::isnan(s.std)) return std::string(mean) + " (" + std::to_string(s.n) + ")";
  std::snprintf(sd, sizeof sd, shown, s.std);
  return std::string(mean) + " ± " + sd + " (" + std::to_string(s.n) + ")";
}

Grid results_grid(const store::Selection& selection, const std::vector<store::JobRow>& rows, bool per_job,
                  bool compact) {
  Grid grid;
  if (per_job) {
    grid.header = {"job", "run", "experiment", "method", "dataset", "seed", "state"};
    // a grouping key that is already one of those columns (the default method, dataset) is not repeated
    std::vector<bool> shown_group;
    for (const auto& g : selection.group_by) {
      shown_group.push_back(std::find(grid.header.begin(), grid.header.begin() + 7, g) == grid.header.begin() + 7);
      if (shown_group.back()) grid.header.push_back(g);
    }
    for (const auto& m : selection.metrics) grid.header.push_back(m);
    for (const auto& r : rows) {
      std::vector<Cell> row = {Cell::of_integer(r.job_id), r.run_id ? Cell::of_integer(r.run_id) : Cell::none(),
                               Cell::of_text(r.experiment), Cell::of_text(r.method), Cell::of_text(r.dataset),
                               Cell::of_integer(r.seed), Cell::of_text(to_string(r.state))};
      for (std::size_t g = 0; g < r.group.size(); ++g)
        if (shown_group[g]) row.push_back(Cell::of_text(r.group[g]));
      for (std::size_t m = 0; m < selection.metrics.size(); ++m)
        row.push_back(r.metrics[m] ? metric_cell(selection.metrics[m], *r.metrics[m]) : Cell::none());
      grid.rows.push_back(std::move(row));
    }
    return grid;
  }

  grid.header = selection.group_by;
  for (const char* h : {"jobs", "done", "failed", "unfinished"}) grid.header.push_back(h);
  for (const auto& m : selection.metrics) {
    if (compact) {
      grid.header.push_back(m + " mean ± std (n)");
      grid.header.push_back(m + " min – max");
      continue;
    }
    for (const char* stat : {"mean", "std", "n", "min", "max"}) grid.header.push_back(m + "_" + stat);
  }
  for (const auto& g : summarize(rows, selection.metrics.size())) {
    std::vector<Cell> row;
    for (const auto& k : g.key) row.push_back(Cell::of_text(k));
    for (std::size_t count : {g.jobs, g.done, g.failed, g.unfinished}) row.push_back(Cell::of_integer(static_cast<long long>(count)));
    for (std::size_t m = 0; m < selection.metrics.size(); ++m) {
      const auto& s = g.metrics[m];
      const std::string& name = selection.metrics[m];
      auto value = [&](double v) { return s.n == 0 || std::isnan(v) ? Cell::none() : metric_cell(name, v); };
      if (compact) {
        // the mean's own display (MiB, seconds, ...) for mean and std alike
        Cell mean = value(s.mean);
        if (s.n > 1 && !std::isnan(s.std)) mean.text += " ± " + value(s.std).text;
        if (s.n > 0) mean.text += " (" + std::to_string(s.n) + ")";
        row.push_back(mean);
        row.push_back(s.n == 0 ? Cell::none() : Cell::of_text(value(s.min).text + " – " + value(s.max).text));
        continue;
      }
      row.push_back(value(s.mean));
      row.push_back(value(s.std));
      row.push_back(Cell::of_integer(static_cast<long long>(s.n)));
      row.push_back(value(s.min));
      row.push_back(value(s.max));
    }
    grid.rows.push_back(std::move(row));
  }
  grid.notes.push_back("over the seeds of the jobs that ended done (std: sample, n - 1); failed = failed, diverged, oom "
                       "or blocked (refused before training: never averaged in); unfinished = queued, running, submitted "
                       "or cancelled");
  return grid;
}

}  // namespace attnlab::results
