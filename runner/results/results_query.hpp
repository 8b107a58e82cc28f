// What `attnlab results` asks of a database, in one place: the command line and `attnlab serve`'s
// /api/results answer a query through the same code, so the two can never disagree.
#pragma once

#include <string>
#include <vector>

#include "attnlab/query.hpp"
#include "results/formats.hpp"

namespace attnlab::results {

struct ResultsQuery {
  std::vector<std::string> where;     // --where expressions, all must hold
  std::vector<std::string> group_by;  // empty: method, dataset and summary_keys (a sweep's, a precision)
  std::vector<std::string> metrics;   // empty: test_acc, or none while no run has stored a result
  bool per_job = false;               // one row per job instead of groups
};

// The grid `attnlab results` prints for `query` (`compact`: the table's "mean ± std (n)" columns).
// A malformed filter, an unknown key or metric: store::QueryError, one line naming it.
Grid results_for(store::ResultsReader& db, const ResultsQuery& query, bool compact);

}  // namespace attnlab::results
