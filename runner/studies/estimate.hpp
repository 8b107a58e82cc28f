#pragma once
// attnlab estimate: before anything is queued, how long each job of an experiment and the whole of
// it would take on a device, from `attnlab bench`'s figures for the jobs' methods, lengths, batch
// sizes and precision; and how many jobs a device takes at once (`--jobs-per-device auto`, shared
// with `attnlab run` and `attnlab worker`). No LibTorch: figures and arithmetic only.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/store/studies.hpp"

namespace attnlab {

// What a job's time depends on, as the estimate reads it from the job's configuration.
struct JobWork {
  std::string label;                 // "softmax x listops, seed 1"
  std::string method, dataset, precision, model, method_params;  // model, method_params: their tables as text
  std::int64_t length = 0, batch = 0, steps = 0;
  std::int64_t forward_batches = 0;  // validation, test and variance passes: forward only
  std::vector<std::string> uncounted;  // passes left out: their split's size is known only to its data
};

// A job's training step on a device, from the bench rows: its time, its peak memory, and where
// they come from ("2048 tokens", "scaled from 1024 and 4096 tokens as n^1.87"), or what is missing.
struct StepFigure {
  bool found = false;
  double seconds = 0, peak_bytes = 0;
  std::string source;   // found
  std::string missing;  // not found: "softmax on listops at 2000 tokens, batch 32, fp32, on cuda:0"
};

// The figure for `job` on `device` with `at_once` jobs running there together: rows of its method,
// dataset, batch size, precision, model and method parameters, done, at that concurrency; at its
// length, else the nearest measured lengths on a log-log line (the method's own growth, measured),
// else from one length in proportion to it.
StepFigure step_figure(const std::vector<store::BenchResult>& rows, const JobWork& job, const std::string& device,
                       std::int64_t at_once);

// The `attnlab bench` commands that measure what `jobs` lack: one per dataset, length, batch size
// and precision, naming every method missing there. `bench_command` starts each ("attnlab bench
// --config FILE --db DB": the experiment's [model], [train] and method parameters apply).
std::vector<std::string> bench_commands_for(const std::vector<JobWork>& jobs, const std::string& device,
                                            std::int64_t at_once, const std::string& bench_command);

// Jobs a device takes at once: as many as fit 90% of its memory at the largest peak among
// `peaks` (bytes), at most one per host core the device has (`cores` shared among `devices`), at
// most 8; 1 where a peak is unknown (0). `why` says what decided.
std::int64_t jobs_per_device_for(const std::vector<double>& peaks, double device_memory_bytes, int cores, int devices,
                                 std::string* why = nullptr);

// The whole: each job's time (its steps, and its forward-only batches taken as a third of a step),
// the jobs placed on devices x per_device slots longest first, the wall time, and the device-hours.
struct JobEstimate {
  JobWork job;
  StepFigure step;
  double seconds = 0;  // NaN where the figure is missing
};
struct ExperimentEstimate {
  std::vector<JobEstimate> jobs;
  std::int64_t devices = 1, per_device = 1;
  double wall_seconds = 0;    // NaN where a figure is missing
  double device_hours = 0;    // wall time x devices
  double job_hours = 0;       // the jobs' times summed
  std::vector<std::string> missing;         // one line per job whose figure is missing
  std::vector<std::string> bench_commands;  // what measures them (bench_commands_for)
};
ExperimentEstimate estimate_experiment(const std::vector<JobWork>& jobs, const std::vector<store::BenchResult>& rows,
                                       const std::string& device, std::int64_t devices, std::int64_t per_device,
                                       const std::string& bench_command);

// The estimate as a table (a row per job) and its totals, or the commands that measure what is missing.
std::string estimate_report(const ExperimentEstimate& estimate, const std::string& device);

}  // namespace attnlab
