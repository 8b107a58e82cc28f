#pragma once
// The memory and disk a dataset configuration will need, estimated before anything is built
// (Dataset::estimate_size), and the bound past which enqueueing or loading it is refused unless
// the user passes --force: a max_len of 1000000 pads every example to a million tokens.
#include <cstdint>
#include <string>

#include "attnlab/dataset.hpp"

namespace attnlab {

// Bytes of the three splits' arrays (tokens, lengths, labels), as a job process holds them and as
// the token cache stores them; 0 when the plugin cannot estimate its size.
std::uint64_t estimated_data_bytes(const TaskInfo& task, const SizeEstimate& size);

// The bound: the smaller of half this machine's physical memory and the free disk space of the
// cache folder's file system (plus the token cache files of `dataset` already there, which a
// rebuild replaces). ATTNLAB_DATA_BOUND=BYTES replaces it. `why` says which one applies.
struct DataBound {
  std::uint64_t bytes = 0;
  std::string why;
};
DataBound data_bound(const std::string& dataset, const std::string& cache_dir);

// Throws DataSizeError in one line naming the dataset, max_len, the estimate and the bound when
// the estimate is past the bound; nothing when it is within it or unknown.
struct DataSizeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
void check_data_size(const std::string& dataset, const Dataset& data, const TaskInfo& task, const std::string& cache_dir);

// "1.5 GB" (powers of 1000, 3 significant digits).
std::string human_bytes(std::uint64_t bytes);

}  // namespace attnlab
