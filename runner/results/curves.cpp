#include "results/curves.hpp"

#include "attnlab/query.hpp"
#include "results/sweep.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

namespace attnlab::results {
namespace {

// "train/acc (12), val/loss (12) ...": what a run has, for the error that it lacks one.
std::string curves_of(store::ResultsReader& db, std::int64_t run_id) {
  std::map<std::pair<std::string, std::string>, std::int64_t> counts;  // (split, name) -> points
  for (const auto& p : db.curve(run_id)) ++counts[{p.split, p.name}];
  std::string list;
  for (const auto& [curve, n] : counts)
    list += (list.empty() ? "" : ", ") + curve.first + "/" + curve.second + " (" + std::to_string(n) + ")";
  return list;
}

std::string capitalised(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text;
}

std::string default_title(const std::string& split, const std::string& name, CurveX x, bool mean) {
  return capitalised(curve_label(split, name)) + (x == CurveX::time ? " against training time" : " by training step") +
         (mean ? ", mean ± std over seeds" : "");
}

// A page's selection with no (split, name) point at all: left out when its runs have no points of
// any curve (they ended before the first), but a curve name none of them has while they have
// others is a mistake (a typo, the wrong split): one line saying what they have.
void throw_if_another_curve(store::ResultsReader& db, const std::vector<std::int64_t>& ids, const std::string& split,
                            const std::string& name) {
  for (const std::int64_t id : ids)
    if (const std::string has = curves_of(db, id); !has.empty())
      throw std::runtime_error("no run selected has " + split + "/" + name + " points; run " + std::to_string(id) + " has " + has);
}

}  // namespace

std::vector<RunCurve> read_run_curves(store::ResultsReader& db, const std::vector<std::int64_t>& run_ids,
                                      const std::string& split, const std::string& name, std::vector<std::string>* left_out,
                                      const std::map<std::int64_t, std::int64_t>& held) {
  // Every run's summary and points in two statements, each prepared once (a statement of each per
  // run took two thirds of a curves answer of 400 runs), then the runs in the order asked.
  std::vector<std::int64_t> ids;
  std::set<std::int64_t> seen;
  for (const std::int64_t id : run_ids)
    if (seen.insert(id).second) ids.push_back(id);
  std::map<std::int64_t, store::RunSummary> summaries;
  for (auto& summary : store::run_summaries_of(db, ids)) summaries.emplace(summary.run_id, std::move(summary));
  std::vector<std::pair<std::int64_t, std::int64_t>> after(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto holds = held.find(ids[i]);
    after[i] = {ids[i], holds == held.end() ? std::numeric_limits<std::int64_t>::min() : holds->second};
  }
  std::vector<std::vector<CurveSample>> points(ids.size());
  store::each_curve_point(db, after, split, name, [&](std::size_t i, std::int64_t step, double wall_seconds, double value) {
    points[i].push_back({step, wall_seconds, value});
  });
  std::vector<RunCurve> runs;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t id = ids[i];
    const auto who = summaries.find(id);
    if (who == summaries.end()) throw std::runtime_error("no run " + std::to_string(id) + " in " + db.path());
    RunCurve run;
    run.run_id = who->second.run_id;
    run.job_id = who->second.job_id;
    run.method = who->second.method;
    run.dataset = who->second.dataset;
    run.seed = who->second.seed;
    run.status = who->second.status;
    if (held.count(id)) run.after_step = held.at(id);
    run.points = std::move(points[i]);
    if (run.points.empty() && !run.after_step) {
      const std::string who = "run " + std::to_string(id) + " (" + run.method + "/" + run.dataset + " seed " +
                              std::to_string(run.seed) + ", " + to_string(run.status) + ")";
      // the command refuses; a page (left_out) names it and draws the others, or no chart at all
      if (!left_out) {
        const std::string has = curves_of(db, id);
        throw std::runtime_error(who + " has no " + split + "/" + name + " points; " +
                                 (has.empty() ? "it has no curve points at all" : "it has " + has));
      }
      left_out->push_back(who + ": no " + split + "/" + name + " points");
      continue;
    }
    runs.push_back(std::move(run));
  }
  if (left_out && runs.empty()) throw_if_another_curve(db, ids, split, name);
  return runs;
}

std::vector<MeanCurve> mean_over_seeds(const std::vector<RunCurve>& runs) {
  std::vector<MeanCurve> means;
  std::vector<std::vector<const RunCurve*>> members;
  for (const auto& run : runs) {
    auto it = std::find_if(means.begin(), means.end(), [&](const MeanCurve& m) {
      return run.group.empty() ? m.method == run.method && m.dataset == run.dataset : m.group == run.group;
    });
    if (it == means.end()) {
      means.push_back({run.method, run.dataset, run.group, {}, {}, {}});
      members.emplace_back();
      it = means.end() - 1;
    }
    it->run_ids.push_back(run.run_id);
    it->seeds.push_back(run.seed);
    members[static_cast<std::size_t>(it - means.begin())].push_back(&run);
  }

  for (std::size_t g = 0; g < means.size(); ++g) {
    const auto& group = members[g];
    std::vector<std::map<std::int64_t, CurveSample>> by_step(group.size());
    for (std::size_t r = 0; r < group.size(); ++r)
      for (const auto& p : group[r]->points) by_step[r][p.step] = p;
    for (const auto& [step, first] : by_step[0]) {
      std::vector<CurveSample> at;
      for (const auto& steps : by_step) {
        const auto found = steps.find(step);
        if (found == steps.end()) break;
        at.push_back(found->second);
      }
      if (at.size() != group.size()) continue;  // not every run has this step

      MeanCurvePoint point;
      point.step = step;
      point.n = static_cast<std::int64_t>(at.size());
      double value_sum = 0, wall_sum = 0;
      point.min = at[0].value;
      point.max = at[0].value;
      for (const auto& s : at) {
        value_sum += s.value;
        wall_sum += s.wall_seconds;
        point.min = std::min(point.min, s.value);
        point.max = std::max(point.max, s.value);
      }
      point.mean = value_sum / static_cast<double>(at.size());
      point.wall_seconds = wall_sum / static_cast<double>(at.size());
      double squares = 0;  // two passes: no cancellation from sum of squares minus squared sum
      for (const auto& s : at) squares += (s.value - point.mean) * (s.value - point.mean);
      point.std = at.size() > 1 ? std::sqrt(squares / static_cast<double>(at.size() - 1)) : kNaN;
      if (std::isnan(point.mean)) point.min = point.max = point.std = kNaN;  // std::min/max skip NaN
      means[g].points.push_back(point);
    }
    if (means[g].points.empty()) {
      std::string ids;
      for (const auto id : means[g].run_ids) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
      throw std::runtime_error(means[g].method + "/" + means[g].dataset + ": its runs (" + ids +
                               ") share no step to average over");
    }
  }
  return means;
}

// Grouped curves (group_curves) lead with their group's label.
template <class Curve>
void add_group_column(Grid& grid, const std::vector<Curve>& curves) {
  if (std::all_of(curves.begin(), curves.end(), [](const Curve& c) { return c.group.empty(); })) return;
  grid.header.insert(grid.header.begin(), "group");
  std::size_t row = 0;
  for (const auto& c : curves)
    for (std::size_t i = 0; i < c.points.size(); ++i, ++row)
      grid.rows[row].insert(grid.rows[row].begin(), Cell::of_text(c.group));
}

Grid run_curves_grid(const std::vector<RunCurve>& runs) {
  Grid grid;
  grid.header = {"run", "method", "dataset", "seed", "step", "wall_seconds", "value"};
  for (const auto& run : runs)
    for (const auto& p : run.points)
      grid.rows.push_back({Cell::of_integer(run.run_id), Cell::of_text(run.method), Cell::of_text(run.dataset),
                           Cell::of_integer(run.seed), Cell::of_integer(p.step), Cell::of_number(p.wall_seconds, "%.2f"),
                           Cell::of_number(p.value, "%.6g")});
  add_group_column(grid, runs);
  return grid;
}

Grid mean_curves_grid(const std::vector<MeanCurve>& means) {
  Grid grid;
  grid.header = {"method", "dataset", "runs", "step", "wall_seconds", "mean", "std", "min", "max"};
  for (const auto& m : means)
    for (const auto& p : m.points)
      grid.rows.push_back({Cell::of_text(m.method), Cell::of_text(m.dataset), Cell::of_integer(p.n),
                           Cell::of_integer(p.step), Cell::of_number(p.wall_seconds, "%.2f"),
                           Cell::of_number(p.mean, "%.6g"),
                           p.n > 1 ? Cell::of_number(p.std, "%.6g") : Cell::none(),
                           Cell::of_number(p.min, "%.6g"), Cell::of_number(p.max, "%.6g")});
  add_group_column(grid, means);
  grid.notes.push_back("std: sample standard deviation (n - 1) over the runs at that step; the band drawn is mean ± std");
  return grid;
}

void group_curves(store::ResultsReader& db, std::vector<RunCurve>& runs, const std::vector<std::string>& keys) {
  store::Selection selection;
  selection.group_by = keys;
  std::map<std::int64_t, std::string> by_job;
  for (const auto& row : store::select_jobs(db, selection)) {
    std::string label;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const std::string& key = keys[k];
      const std::string value = row.group[k].empty() ? "-" : row.group[k];
      const std::string part = store::is_builtin_key(key) ? (key == "seed" ? "seed " + value : value)
                                                          : key_value_label(key, value);
      label += (label.empty() ? "" : " ") + part;
    }
    by_job[row.job_id] = label;
  }
  for (auto& run : runs) run.group = by_job[run.job_id];
}

CurveX parse_curve_x(const std::string& word) {
  if (word == "step") return CurveX::step;
  if (word == "time") return CurveX::time;
  throw std::invalid_argument("unknown x axis '" + word + "' (step or time)");
}

std::string x_label(CurveX x) { return x == CurveX::step ? "step" : "wall-clock seconds since the run started"; }

std::string curve_label(const std::string& split, const std::string& name) {
  if (name == "lr") return "learning rate";
  if (name == "beta1") return "AdamW beta1";
  const std::string split_word = split == "train" ? "training" : split == "val" ? "validation" : split;
  const std::string name_word = name == "acc" ? "accuracy" : name == "tau" ? "instability score tau" : name;
  return split_word + " " + name_word;
}

std::string legend(const RunCurve& run) {
  return (run.group.empty() ? run.method + "/" + run.dataset : run.group) + " seed " + std::to_string(run.seed) + " (run " + std::to_string(run.run_id) +
         ")";
}

std::string legend(const MeanCurve& mean) {
  const std::string group = mean.group.empty() ? mean.method + "/" + mean.dataset : mean.group;
  if (mean.run_ids.size() == 1)
    return group + " seed " + std::to_string(mean.seeds[0]) + " (run " + std::to_string(mean.run_ids[0]) + ", one run: no band)";
  const std::set<std::int64_t> seeds(mean.seeds.begin(), mean.seeds.end());
  // Two runs of one seed (attempts named by hand) are not two seeds: say runs.
  const std::string what = seeds.size() == mean.seeds.size() ? " seeds)" : " runs)";
  return group + " (mean ± std of " + std::to_string(mean.run_ids.size()) + what;
}

Plot run_curves_plot(const std::vector<RunCurve>& runs, const std::string& split, const std::string& name, CurveX x,
                     const std::string& title) {
  Plot plot;
  plot.title = title.empty() ? default_title(split, name, x, false) : title;
  plot.x_label = x_label(x);
  plot.y_label = curve_label(split, name);
  for (const auto& run : runs) {
    Series s;
    s.title = legend(run);
    for (const auto& p : run.points) {
      s.x.push_back(x == CurveX::step ? static_cast<double>(p.step) : p.wall_seconds);
      s.y.push_back(p.value);
    }
    plot.series.push_back(std::move(s));
  }
  return plot;
}

Plot mean_curves_plot(const std::vector<MeanCurve>& means, const std::string& split, const std::string& name,
                      CurveX x, const std::string& title) {
  Plot plot;
  plot.title = title.empty() ? default_title(split, name, x, true) : title;
  plot.x_label = x_label(x);
  plot.y_label = curve_label(split, name);
  for (const auto& m : means) {
    Series s;
    s.title = legend(m);
    const bool band = m.run_ids.size() > 1;
    for (const auto& p : m.points) {
      s.x.push_back(x == CurveX::step ? static_cast<double>(p.step) : p.wall_seconds);
      s.y.push_back(p.mean);
      if (band) {
        s.low.push_back(p.mean - p.std);
        s.high.push_back(p.mean + p.std);
      }
    }
    plot.series.push_back(std::move(s));
  }
  return plot;
}

}  // namespace attnlab::results
