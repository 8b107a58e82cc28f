#pragma once
// The runs' final figures, read back from the database (never from memory), as tables.
#include <cstdint>
#include <string>
#include <vector>

#include "attnlab/store.hpp"

namespace attnlab {

// One row per run: method, dataset, seed, status, test acc, majority rate, best val acc, time,
// steps/s, peak memory.
std::string runs_table(const std::vector<store::RunSummary>& runs);
// One row per (method, dataset) of these jobs: test accuracy mean ± std over the finished seeds and
// the majority-class rate, as `attnlab results` prints them (results/aggregate.hpp).
std::string experiment_summary(store::ResultsReader& db, const std::vector<std::int64_t>& job_ids);

}  // namespace attnlab
