#pragma once
// Training curves read back from the database (the view `run_curves`): one (split, name) curve per
// run, their mean over seeds, as grids (CSV and the other formats) and as plots (results/plot.hpp).
// What `attnlab curves` prints and draws, and `attnlab report` draws per (method, task).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/store.hpp"
#include "results/formats.hpp"
#include "results/plot.hpp"

namespace attnlab::results {

struct CurveSample {
  std::int64_t step = 0;
  double wall_seconds = 0;  // since the run started (a resumed run's attempts continue the clock)
  double value = 0;         // NaN where the run stored NaN (a diverged loss)
};

// One run's curve of one (split, name), by step.
struct RunCurve {
  std::int64_t run_id = 0, job_id = 0;
  std::string method, dataset;
  std::string group;  // set by group_curves: its values of the --group-by keys, "" before
  store::RunStatus status = store::RunStatus::running;
  std::int64_t seed = 0;
  std::vector<CurveSample> points;
  // Set when the reader holds the curve up to this step already: `points` are the ones after it.
  std::optional<std::int64_t> after_step;
};

// The runs' curves of (split, name), in the order of `run_ids` (each id once). Throws
// std::runtime_error, one line: a run id the database does not have, or a run without points for
// (split, name) (the line names the curves it has).
// With `left_out`, a run without points for (split, name) (one that failed before its first
// validation, say) is skipped and said there ("run 7 (performer/listops seed 1, failed): no val/acc
// points"), unless every run is such a one; without it, such a run is an error.
// `held`: runs the reader holds up to a step (run id -> its last step): only their points after it
// are read, however few (after_step set).
std::vector<RunCurve> read_run_curves(store::ResultsReader& db, const std::vector<std::int64_t>& run_ids,
                                      const std::string& split, const std::string& name,
                                      std::vector<std::string>* left_out = nullptr,
                                      const std::map<std::int64_t, std::int64_t>& held = {});

struct MeanCurvePoint {
  std::int64_t step = 0;
  double wall_seconds = 0;  // mean over the runs: x when drawn against time
  double mean = 0, std = 0, min = 0, max = 0;  // std: sample (n - 1), NaN for one run
  std::int64_t n = 0;
};

// The runs of one (method, dataset) and, at each step every one of them has, their statistics. A
// NaN value at a step makes every statistic there NaN: a diverged seed is not averaged away.
struct MeanCurve {
  std::string method, dataset;
  std::string group;  // the runs' group (group_curves), "" when grouped by method and dataset
  std::vector<std::int64_t> run_ids, seeds;
  std::vector<MeanCurvePoint> points;
};

// Labels each run with its values of `keys` (method, dataset, seed or config keys such as
// datasets.sparse_sum.sparsity): "gmm_rks sparsity=0.1" (builtin keys by value, config keys as
// last-part=value). Throws store::QueryError for a key no job has ("unknown key 'x' (did you
// mean: ...)").
void group_curves(store::ResultsReader& db, std::vector<RunCurve>& runs, const std::vector<std::string>& keys);

// Groups by the runs' group when group_curves set one, else by (method, dataset), in order of
// first appearance. Throws std::runtime_error when a group's runs share no step.
std::vector<MeanCurve> mean_over_seeds(const std::vector<RunCurve>& runs);

// CSV layouts (any Format): run,method,dataset,seed,step,wall_seconds,value and
// method,dataset,runs,step,wall_seconds,mean,std,min,max (std empty for one run).
Grid run_curves_grid(const std::vector<RunCurve>& runs);
Grid mean_curves_grid(const std::vector<MeanCurve>& means);

enum class CurveX { step, time };
CurveX parse_curve_x(const std::string& word);  // "step" | "time"; else std::invalid_argument

// Axis words: "step" or "wall-clock seconds since the run started"; "validation accuracy",
// "training loss", "learning rate", or "<split> <name>" for names it does not know.
std::string x_label(CurveX x);
std::string curve_label(const std::string& split, const std::string& name);

// Legends: "method/dataset seed S (run R)"; "method/dataset (mean ± std of N seeds)"; the group in
// place of method/dataset when there is one.
std::string legend(const RunCurve& run);
std::string legend(const MeanCurve& mean);

// One line per run, or per group with its mean ± std band (no band for a group of one run).
// An empty title gets a default naming the curve, e.g. "Validation accuracy against training time".
Plot run_curves_plot(const std::vector<RunCurve>& runs, const std::string& split, const std::string& name, CurveX x,
                     const std::string& title = "");
Plot mean_curves_plot(const std::vector<MeanCurve>& means, const std::string& split, const std::string& name,
                      CurveX x, const std::string& title = "");

}  // namespace attnlab::results
