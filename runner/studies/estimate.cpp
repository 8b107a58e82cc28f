#include "studies/estimate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <queue>

#include "base/quantities.hpp"
#include "cli/text_table.hpp"
#include "results/bench_measured.hpp"

namespace attnlab {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// A forward-only batch (validation, test, variance passes) against a training step: forward is
// about a third of forward, backward and update.
constexpr double kForwardShare = 1.0 / 3.0;

std::string fixed(double x, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

// The newest matching row at each measured length.
std::map<std::int64_t, const store::BenchResult*> rows_by_length(const std::vector<store::BenchResult>& rows,
                                                               const JobWork& job, const std::string& device,
                                                               std::int64_t at_once) {
  std::map<std::int64_t, const store::BenchResult*> by_length;
  for (const auto& r : rows) {
    if (r.status != "done" || r.method != job.method || r.dataset != job.dataset || r.batch_size != job.batch ||
        r.device != device || std::max<std::int64_t>(r.concurrent, 1) != at_once)
      continue;
    const auto measured = results::bench_measured(r.config_toml);
    if (measured.part != "step" || measured.precision != job.precision || measured.model != job.model ||
        measured.method_params != job.method_params)
      continue;
    auto& slot = by_length[r.seq_len];
    if (!slot || r.id > slot->id) slot = &r;
  }
  return by_length;
}

}  // namespace

StepFigure step_figure(const std::vector<store::BenchResult>& rows, const JobWork& job, const std::string& device,
                       std::int64_t at_once) {
  StepFigure f;
  const auto by_length = rows_by_length(rows, job, device, at_once);
  if (by_length.empty()) {
    f.missing = job.method + " on " + job.dataset + " at " + std::to_string(job.length) + " tokens, batch " +
                std::to_string(job.batch) + ", " + job.precision + ", on " + device +
                (at_once > 1 ? ", " + std::to_string(at_once) + " at once" : "");
    return f;
  }
  f.found = true;
  if (const auto exact = by_length.find(job.length); exact != by_length.end()) {
    f.seconds = exact->second->step_seconds_median;
    f.peak_bytes = exact->second->peak_memory_bytes;
    f.source = std::to_string(job.length) + " tokens";
    return f;
  }
  if (by_length.size() == 1) {
    const auto& [length, row] = *by_length.begin();
    const double ratio = static_cast<double>(job.length) / static_cast<double>(length);
    f.seconds = row->step_seconds_median * ratio;
    f.peak_bytes = row->peak_memory_bytes * ratio;
    f.source = "from " + std::to_string(length) + " tokens in proportion (one length measured)";
    return f;
  }
  // the two measured lengths around the job's, or the two nearest on its side
  auto above = by_length.lower_bound(job.length);
  if (above == by_length.end()) --above;
  if (above == by_length.begin()) ++above;
  auto below = std::prev(above);
  const double n0 = static_cast<double>(below->first), n1 = static_cast<double>(above->first);
  const double n = static_cast<double>(job.length);
  auto on_line = [&](double y0, double y1, double* slope) {
    *slope = std::log(y1 / y0) / std::log(n1 / n0);
    return y0 * std::pow(n / n0, *slope);
  };
  double time_slope = 0, memory_slope = 0;
  f.seconds = on_line(below->second->step_seconds_median, above->second->step_seconds_median, &time_slope);
  f.peak_bytes = on_line(below->second->peak_memory_bytes, above->second->peak_memory_bytes, &memory_slope);
  f.source = "scaled from " + std::to_string(below->first) + " and " + std::to_string(above->first) + " tokens as n^" +
             fixed(time_slope, 2);
  return f;
}

std::vector<std::string> bench_commands_for(const std::vector<JobWork>& jobs, const std::string& device,
                                            std::int64_t at_once, const std::string& bench_command) {
  // (dataset, length, batch, precision) -> methods, in the jobs' order
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const auto& job : jobs) {
    const std::string where = " --dataset " + job.dataset + " --lengths " + std::to_string(job.length) +
                              " --batch-size " + std::to_string(job.batch) + " --precision " + job.precision;
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == where; });
    if (group == groups.end()) group = groups.insert(groups.end(), {where, {}});
    if (std::find(group->second.begin(), group->second.end(), job.method) == group->second.end())
      group->second.push_back(job.method);
  }
  std::vector<std::string> commands;
  for (const auto& [where, methods] : groups) {
    std::string names;
    for (const auto& m : methods) names += (names.empty() ? "" : ",") + m;
    commands.push_back(bench_command + " --methods " + names + where + " --device " + device +
                       (at_once > 1 ? " --concurrent " + std::to_string(at_once) : ""));
  }
  return commands;
}

std::int64_t jobs_per_device_for(const std::vector<double>& peaks, double device_memory_bytes, int cores, int devices,
                                 std::string* why) {
  auto say = [&](const std::string& text) {
    if (why) *why = text;
  };
  double peak = 0;
  for (const double p : peaks) {
    if (!(p > 0)) {
      say("a job's peak memory is not measured");
      return 1;
    }
    peak = std::max(peak, p);
  }
  if (peaks.empty() || !(device_memory_bytes > 0)) {
    say(peaks.empty() ? "no jobs" : "the device's memory is unknown");
    return 1;
  }
  const auto by_memory = static_cast<std::int64_t>(std::floor(0.9 * device_memory_bytes / peak));
  const std::int64_t by_cores = std::max(1, cores / std::max(1, devices));
  constexpr std::int64_t kMost = 8;
  const auto n = std::max<std::int64_t>(1, std::min({by_memory, by_cores, kMost}));
  say(n == by_memory ? "90% of " + format_bytes(device_memory_bytes) + " at a peak of " + format_bytes(peak)
      : n == by_cores ? std::to_string(by_cores) + " host core(s) for the device"
                      : "at most " + std::to_string(kMost));
  return n;
}

ExperimentEstimate estimate_experiment(const std::vector<JobWork>& jobs, const std::vector<store::BenchResult>& rows,
                                       const std::string& device, std::int64_t devices, std::int64_t per_device,
                                       const std::string& bench_command) {
  ExperimentEstimate e;
  e.devices = devices;
  e.per_device = per_device;
  std::vector<JobWork> unmeasured;
  for (const auto& job : jobs) {
    JobEstimate j{job, step_figure(rows, job, device, per_device), kNaN};
    if (j.step.found) {
      j.seconds = j.step.seconds * (static_cast<double>(job.steps) + kForwardShare * job.forward_batches);
    } else {
      e.missing.push_back(j.step.missing);
      unmeasured.push_back(job);
    }
    e.jobs.push_back(std::move(j));
  }
  e.bench_commands = bench_commands_for(unmeasured, device, per_device, bench_command);
  // longest first onto the slot that frees first
  std::vector<double> times;
  for (const auto& j : e.jobs) times.push_back(j.seconds);
  std::sort(times.begin(), times.end(), std::greater<>());
  std::priority_queue<double, std::vector<double>, std::greater<>> slots;
  for (std::int64_t i = 0; i < devices * per_device; ++i) slots.push(0.0);
  double wall = 0, total = 0;
  for (const double t : times) {
    const double end = slots.top() + t;
    slots.pop();
    slots.push(end);
    wall = std::max(wall, end);
    total += t;
  }
  const bool complete = e.missing.empty();
  e.wall_seconds = complete ? wall : kNaN;
  e.device_hours = complete ? wall * static_cast<double>(devices) / 3600 : kNaN;
  e.job_hours = complete ? total / 3600 : kNaN;
  return e;
}

std::string estimate_report(const ExperimentEstimate& e, const std::string& device) {
  TextTable table({"job", "length", "batch", "precision", "steps", "step (s)", "from", "job"});
  for (const auto& j : e.jobs)
    table.add({j.job.label, std::to_string(j.job.length), std::to_string(j.job.batch), j.job.precision,
               std::to_string(j.job.steps), j.step.found ? fixed(j.step.seconds, 4) : "-",
               j.step.found ? j.step.source : "not measured", format_duration(j.seconds)});
  std::string out = table.str();
  out += "\n" + std::to_string(e.jobs.size()) + " job(s) on " + std::to_string(e.devices) + " x " + device + ", " +
         std::to_string(e.per_device) + " at once on each: ";
  if (!e.missing.empty()) {
    out += "no total, " + std::to_string(e.missing.size()) + " job(s) without a bench figure; measure them with:\n";
    for (const auto& command : e.bench_commands) out += "  " + command + "\n";
    return out;
  }
  out += "wall " + format_duration(e.wall_seconds) + ", " + fixed(e.device_hours, 2) + " device-hours (" +
         fixed(e.job_hours, 2) + " job-hours)\n";
  out += "(a forward-only batch, of validation, test or variance passes, taken as a third of a step; process starts "
         "and data loading not included)\n";
  // the passes whose split sizes only the data knows, once per kind
  std::map<std::string, std::int64_t> uncounted;
  for (const auto& j : e.jobs)
    for (const auto& pass : j.job.uncounted) ++uncounted[pass];
  for (const auto& [pass, jobs] : uncounted)
    out += "not counted: the " + pass + " passes of " + std::to_string(jobs) +
           " job(s) (their split's size is in its data, not its parameters)\n";
  return out;
}

}  // namespace attnlab
