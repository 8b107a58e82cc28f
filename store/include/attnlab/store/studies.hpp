#pragma once
// The studies' measurements (attnlab bench, approx, spectrum, gradients): their records and the
// functions that store and read them, over a Database (attnlab/store.hpp). Each store is one
// transaction; each row carries its Provenance.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/store.hpp"

namespace attnlab::store {

// One `attnlab bench` measurement: a training step of one method at one sequence length.
struct BenchResult : Provenance {
  std::string method;
  std::string dataset;        // whose task config (vocabulary, classes) the model was built for
  std::int64_t seq_len = 0;
  std::int64_t batch_size = 0;
  std::int64_t steps_timed = 0;
  double step_seconds_median = 0;  // forward + backward + optimiser step
  double step_seconds_min = 0;
  double step_seconds_max = 0;
  // The host's part of a step (schema 11): from the step's start until the host has issued all of
  // it, before waiting for the device; on the CPU the step itself. NaN in rows stored before.
  double host_seconds_median = std::numeric_limits<double>::quiet_NaN();
  std::int64_t ops_per_step = 0;   // ops one step runs, nested ones included (bench --ops); 0: not counted
  std::string step_mode;           // how the steps ran: "cuda graph", "eager (…)" (schema 11)
  std::int64_t concurrent = 1;     // measurements running at once on the device (bench --concurrent; schema 11)
  double peak_memory_bytes = 0;    // CUDA allocator peak, or the peak RSS of a fresh process (CPU)
  std::string status;              // done | oom | failed
  std::string error;
  std::string config_toml;         // model + method parameters used
  std::string created_at;          // filled when read back
  std::int64_t id = 0;             // filled when read back
};

// One cell of `attnlab approx`: spectral-norm error of a method against exact attention at one
// sequence length and one number of features/landmarks, over heads and repeated draws.
struct ApproxResult : Provenance {
  std::string method;
  std::string reference;     // softmax | kernelized
  std::string source;        // "init:<dataset>", "run:<id>", or "npy:<dir>"
  std::string param;         // the parameter varied (e.g. landmarks)
  std::int64_t features = 0; // its value d
  std::int64_t seq_len = 0;
  std::int64_t samples = 0;  // heads x draws averaged
  double abs_error_mean = 0, abs_error_std = 0;  // ||A_method - A_exact||_2
  double rel_error_mean = 0, rel_error_std = 0;  // ... / ||A_exact||_2
  std::string created_at;    // filled when read back
};

// One `attnlab gradients` measurement: a stored run's weights from the validation at which its
// accuracy first reached `mark`, the first `examples` examples of `split` passed `repeats` times,
// each with a fresh draw of the attention's randomness; per neuron of `parameter` (the
// classifier's hidden layer) the mean |gradient| and the sample std over the repeats, averaged
// over its `neurons` (the KL-Transformer's Table 14). Identified by (run_id, mark, parameter).
struct GradientStats : Provenance {
  std::int64_t run_id = 0;
  double mark = 0;            // the accuracy mark, a fraction (0.4)
  std::string parameter;      // e.g. "head_in.bias"
  std::int64_t step = 0;      // the training step the weights are from
  std::string split = "val";
  std::int64_t examples = 0, repeats = 0, neurons = 0;
  double abs_mean = 0, std = 0;
  std::string created_at;  // filled when read back
};

// One value index of an `attnlab spectrum` measurement: the i-th singular value over the matrices
// measured (mean and sample std), normalised by each matrix's largest (σ_i / σ_1), and its share
// of the energy (σ_i² / Σσ², mean).
struct SpectrumValue {
  double sigma_mean = 0, sigma_std = 0;
  double normalised_mean = 0, normalised_std = 0;
  double energy_mean = 0;
};

// One `attnlab spectrum` measurement: the singular values of a stored run's attention output at
// one layer, over the real rows of each of the first `batch` test examples (each input of a pair
// task is its own matrix). Identified by (run_id, layer, stage, batch).
struct SpectrumResult : Provenance {
  std::int64_t run_id = 0;
  std::int64_t layer = 0;      // 1-based
  std::string stage;           // "out" (after the output projection) | "heads" (the heads concatenated)
  std::int64_t batch = 0;      // test examples taken
  std::string split = "test";
  std::int64_t matrices = 0;   // matrices averaged: examples x inputs
  std::int64_t width = 0;      // columns of each matrix
  std::int64_t rows_min = 0, rows_max = 0;  // real rows per matrix
  double rank90_mean = 0, rank90_std = 0;   // smallest k with Σ_{i<=k} σ_i² >= 90% of Σσ², per matrix
  double rank99_mean = 0, rank99_std = 0;
  double stable_rank_mean = 0;              // Σσ² / σ_1²
  std::vector<SpectrumValue> values;        // index i = 1..k at values[i - 1]
  std::string created_at;  // filled when read back
};

// attnlab bench (schema version 2): the row's id; reads in insertion order.
std::int64_t add_bench_result(Database& db, const BenchResult& result);
std::vector<BenchResult> bench_results(ResultsReader& db);
std::optional<BenchResult> bench_result(ResultsReader& db, std::int64_t id);  // the row add_bench_result returned the id of

// attnlab approx (schema version 2): returns how many were stored; reads in insertion order.
std::int64_t add_approx_results(Database& db, const std::vector<ApproxResult>& results);
std::vector<ApproxResult> approx_results(ResultsReader& db);

// attnlab spectrum (schema version 7): stores a measurement, replacing one of the same (run,
// layer, stage, batch). The run must exist (StoreError otherwise).
void set_spectrum(Database& db, const SpectrumResult& result);
// Every stored measurement with its values, or those of `run_ids` only; by run, layer, stage, batch.
std::vector<SpectrumResult> spectrum_results(ResultsReader& db, const std::vector<std::int64_t>& run_ids = {});

// attnlab gradients (schema version 8): stores the measurements, each replacing one of the same
// run, mark and parameter; reads back those of `run_ids` (all when empty), by run then mark.
void set_gradient_stats(Database& db, const std::vector<GradientStats>& stats);
std::vector<GradientStats> gradient_stats(ResultsReader& db, const std::vector<std::int64_t>& run_ids = {});

}  // namespace attnlab::store
