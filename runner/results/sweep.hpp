// A sweep's values are not seeds. Where the selected jobs of one (method, dataset) differ in a
// config key (store::keys_varying_within_groups: a swept sparsity, learning rate, feature count),
// every summary over seeds (`table`, `compare`, `curves`, `report`) keeps those values apart,
// labelled as `curves --group-by` labels them: a dataset's keys beside the task ("sparse_sum
// sparsity=0.1"), the others beside the method ("gmm_rks lr=0.001").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "attnlab/query.hpp"

namespace attnlab::results {

// "sparsity=0.1" for datasets.sparse_sum.sparsity = 0.1: the key's last part and the value.
std::string key_value_label(const std::string& key, const std::string& value);

struct Sweep {
  std::vector<std::string> keys;                 // the swept keys, sorted; empty: nothing swept
  std::map<std::int64_t, std::string> task_of;   // job id -> its task label, where it differs from the dataset
  std::map<std::int64_t, std::string> row_of;    // job id -> its row label, where it differs from the method
  std::string task(const store::JobRow& job) const;  // "sparse_sum sparsity=0.1", or the dataset
  std::string row(const store::JobRow& job) const;   // "gmm_rks lr=0.001", or the method
};

// The config keys a summary over seeds groups by beside method and dataset: a sweep's keys
// (store::keys_varying_within_groups), and train.precision whenever a job is not fp32, even when
// every job shares it: a mixed-precision figure always says so.
std::vector<std::string> summary_keys(store::ResultsReader& db, const std::vector<std::int64_t>& job_ids);

// The sweep among `jobs` (rows of store::select_jobs).
Sweep find_sweep(store::ResultsReader& db, const std::vector<store::JobRow>& jobs);

}  // namespace attnlab::results
