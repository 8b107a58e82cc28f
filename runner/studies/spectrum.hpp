#pragma once
// attnlab spectrum: the singular values of a trained run's attention output at one layer, per
// sequence, over one test batch (Skyformer appendix B, Fig. 4: "decay rate as task difficulty").
// The numerics here, the command in cmd_spectrum.cpp; store::SpectrumResult is what is kept.
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "attnlab/store.hpp"
#include "attnlab/store/studies.hpp"
#include "results/plot.hpp"

namespace attnlab {

// The singular values, in double, of each matrix's real rows: outputs [M, N, D] (any floating
// dtype, any device), valid [M, N] bool (real rows). Returns [M, K] double on the CPU, each row in
// non-increasing order, with K = min(D, the most real rows of any matrix); a matrix with fewer
// real rows r than K has zeros past its min(r, D) values (its exact spectrum: X has rank <= r).
at::Tensor real_row_singular_values(const at::Tensor& outputs, const at::Tensor& valid);

// The smallest k with σ_1² + ... + σ_k² >= fraction * Σσ² (singular values in non-increasing
// order; a relative tolerance of 1e-12 absorbs rounding). 0 for an all-zero spectrum.
std::int64_t energy_rank(const std::vector<double>& sigma, double fraction);

// The statistics stored per measurement, from the singular values [M, K] of M matrices (rows as
// real_row_singular_values gives them): per index the mean and sample std (n - 1; NaN for one
// matrix) of σ_i, of σ_i / σ_1 and the mean of σ_i² / Σσ²; rank@90%, rank@99% (mean, std) and
// the stable rank Σσ² / σ_1² (mean). A matrix that is all zero (σ_1 = 0) is refused: its
// normalised spectrum is undefined. Fills values, matrices, the ranks; the caller the rest.
store::SpectrumResult spectrum_statistics(const at::Tensor& singular_values);

// "out" | "heads"; anything else is a std::invalid_argument naming the word.
std::string parse_spectrum_stage(const std::string& word);

// The summary table, one row per measurement: run, task, method, layer, stage, matrices, rows,
// rank@90%, rank@99%, stable rank, then σ_i / σ_1 for i = 2..5. `method` and `task` are looked up
// by run id in the two maps' order (runs missing from them show "?").
struct SpectrumRunInfo {
  std::int64_t run_id = 0;
  std::string method, task;
};
std::string spectrum_table(const std::vector<store::SpectrumResult>& rows, const std::vector<SpectrumRunInfo>& runs);

// The picture: one line per measurement, x the index i, y σ_i / σ_1 (or, raw, the mean σ_i, as
// Skyformer's Fig. 4 plots it) on a log scale; a zero is left out (a gap).
results::Plot spectrum_plot(const std::vector<store::SpectrumResult>& rows, const std::vector<SpectrumRunInfo>& runs, bool raw,
                            const std::string& title);

}  // namespace attnlab
