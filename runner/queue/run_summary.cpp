#include "queue/run_summary.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "attnlab/query.hpp"
#include "base/quantities.hpp"
#include "results/aggregate.hpp"
#include "results/sweep.hpp"
#include "cli/text_table.hpp"

namespace attnlab {
namespace {

std::string fixed(std::optional<double> v, const char* format = "%.4f") {
  if (!v || !std::isfinite(*v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, *v);
  return buf;
}

}  // namespace

std::string runs_table(const std::vector<store::RunSummary>& runs) {
  TextTable table({"run", "method", "dataset", "seed", "status", "test acc", "majority", "best val", "time", "steps/s", "peak mem"});
  for (const auto& r : runs) {
    auto wall = r.result("wall_seconds");
    auto peak = r.result("peak_memory_bytes");
    table.add({std::to_string(r.run_id), r.method, r.dataset, std::to_string(r.seed), to_string(r.status), fixed(r.result("test_acc")),
               fixed(r.result("majority_rate")), fixed(r.result("best_val_acc")), wall ? format_duration(*wall) : "-",
               fixed(r.result("steps_per_second"), "%.2f"), peak ? format_bytes(*peak) : "-"});
  }
  return table.str();
}

std::string experiment_summary(store::ResultsReader& db, const std::vector<std::int64_t>& job_ids) {
  if (job_ids.empty()) return "";
  store::JobFilter done;
  done.ids = job_ids;
  done.states = {store::JobState::done};
  if (db.list_jobs(done).empty()) return "no job of the experiment is done yet: nothing to summarise\n";
  store::Selection selection;
  std::string ids;
  for (auto id : job_ids) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  selection.where = {"job IN (" + ids + ")"};
  selection.group_by = {"method", "dataset"};
  for (const auto& key : results::summary_keys(db, job_ids)) selection.group_by.push_back(key);  // a sweep's, precision
  const auto known = store::result_names(db);  // a sweep whose runs all failed has no results yet
  for (const char* m : {"test_acc", "majority_rate"})
    if (std::find(known.begin(), known.end(), m) != known.end()) selection.metrics.push_back(m);
  return results::render(results::results_grid(selection, store::select_jobs(db, selection), false, true),
                         results::Format::table);
}

}  // namespace attnlab
