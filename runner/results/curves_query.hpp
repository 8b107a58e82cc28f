// What `attnlab curves` asks of a database, in one place: the command line and `attnlab serve`'s
// /api/curves select, label and average runs through the same code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attnlab/store.hpp"
#include "results/curves.hpp"

namespace attnlab::results {

struct CurvesQuery {
  std::vector<std::int64_t> run_ids;  // these runs, in this order
  std::vector<std::string> where;     // and the runs that count for the jobs these select (all must hold)
  std::string split = "val", name = "loss";
  std::vector<std::string> group_by;  // empty: by method and dataset, plus a sweep's varying keys
  bool mean = false;                  // also the mean over seeds of each group
  bool leave_out_empty = false;       // a run without points is left out (CurvesAnswer::left_out), not an error
  bool running_too = false;           // `where` also selects a running job's attempt (its curve so far)
  // Runs the caller holds up to a step (run id -> last step held): only their later points are read
  // (RunCurve::after_step). Ignored with `mean`, which needs every point.
  std::map<std::int64_t, std::int64_t> held;
};

struct CurvesAnswer {
  std::vector<RunCurve> runs;
  std::vector<MeanCurve> means;           // filled when query.mean
  std::size_t jobs_without_run = 0;       // selected by `where`, but with no run that counts yet (nor running, with running_too)
  std::vector<std::string> left_out;      // with leave_out_empty: each run left out, and why
};

// Throws std::runtime_error, one line: no runs named, a run id the database lacks, a filter that
// selects no job or only jobs without a finished run, a run without points for (split, name), a
// group whose runs share no step; store::QueryError for a malformed filter or an unknown key.
CurvesAnswer curves_for(store::ResultsReader& db, const CurvesQuery& query);

}  // namespace attnlab::results
