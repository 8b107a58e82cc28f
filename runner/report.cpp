#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "progress.hpp"
#include "table.hpp"

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
    table.add({std::to_string(r.run_id), r.method, r.dataset, std::to_string(r.seed), r.status, fixed(r.result("test_acc")),
               fixed(r.result("majority_rate")), fixed(r.result("best_val_acc")), wall ? format_duration(*wall) : "-",
               fixed(r.result("steps_per_second"), "%.2f"), peak ? format_bytes(*peak) : "-"});
  }
  return table.str();
}

std::string seeds_table(const std::vector<store::RunSummary>& runs) {
  struct Group {
    std::vector<double> test;
    std::optional<double> majority;
    int unfinished = 0;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  for (const auto& r : runs) {
    auto& g = groups[{r.method, r.dataset}];
    auto acc = r.result("test_acc");
    if (r.status == "done" && acc) g.test.push_back(*acc);
    else ++g.unfinished;
    if (auto m = r.result("majority_rate")) g.majority = m;
  }
  TextTable table({"method", "dataset", "test acc (mean ± std)", "n", "not done", "majority rate"});
  for (const auto& [key, g] : groups) {
    std::string cell = "-";
    if (!g.test.empty()) {
      double mean = 0, var = 0;
      for (double x : g.test) mean += x;
      mean /= g.test.size();
      for (double x : g.test) var += (x - mean) * (x - mean);
      const double sd = g.test.size() > 1 ? std::sqrt(var / (g.test.size() - 1)) : 0.0;  // sample std
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.4f ± %.4f", mean, sd);
      cell = buf;
    }
    table.add({key.first, key.second, cell, std::to_string(g.test.size()), std::to_string(g.unfinished), fixed(g.majority)});
  }
  return table.str();
}

}  // namespace attnlab
