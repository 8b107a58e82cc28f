#pragma once
// What a dataset plugin makes: a description of the task and its three tokenised splits.
// Batching, shuffling and device transfer are the host's job (core/data_loader), so that data
// order is fixed by the run's seed the same way for every dataset.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include <ATen/core/Tensor.h>

#include "attnlab/params.hpp"
#include "attnlab/plugin.hpp"

namespace attnlab {

enum class Split { train, val, test };
inline const char* to_string(Split s) { return s == Split::train ? "train" : s == Split::val ? "val" : "test"; }

struct TaskInfo {
  std::int64_t vocab_size = 0;   // token ids are in [0, vocab_size)
  std::int64_t num_classes = 0;
  std::int64_t max_len = 0;      // tokens per input
  std::int64_t inputs = 1;       // 1: single sequence; 2: a pair (two-tower, shared encoder)
};

// One split, whole. tokens: [N, inputs, max_len], any integer dtype; lengths: [N, inputs] int64,
// positions at or past a row's length are padding (whatever id they hold); labels: [N] int64.
struct SplitData {
  at::Tensor tokens;
  at::Tensor lengths;
  at::Tensor labels;
  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Where a dataset may keep generated files and caches, and the machine's thread budget.
struct DatasetContext {
  std::string cache_dir;
};

// Bad or missing data: the message names the file, the line or record, and what was expected.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual TaskInfo info() const = 0;
  virtual SplitData load(Split split) = 0;  // throws DataError
};

using DatasetFactory = std::shared_ptr<Dataset>(const DatasetContext&, const ParamValues&);

}  // namespace attnlab

#include <boost/dll/alias.hpp>
#define ATTNLAB_DATASET_FACTORY(fn) BOOST_DLL_ALIAS(fn, attnlab_create)
