#pragma once
// The runs' final figures, read back from the database (never from memory), as tables.
#include <string>
#include <vector>

#include "attnlab/store.hpp"

namespace attnlab {

// One row per run: method, dataset, seed, status, test acc, majority rate, best val acc, time,
// steps/s, peak memory.
std::string runs_table(const std::vector<store::RunSummary>& runs);
// One row per (method, dataset): test accuracy mean ± std over the finished seeds, next to the
// majority-class rate of the test split.
std::string seeds_table(const std::vector<store::RunSummary>& runs);

}  // namespace attnlab
