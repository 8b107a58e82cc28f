#pragma once
// What a dataset plugin makes: a description of the task and its three tokenised splits.
// Batching, shuffling and device transfer are the host's job (core/data_loader), so that data
// order is fixed by the run's seed the same way for every dataset.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/TensorOptions.h>

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
  // 0: a token is an id. F > 0: a token is a many-hot vector of F binary features written as the
  // bit mask sum_f bit_f << f (vocab_size must then be 2^F); the model embeds it as the sum of
  // its active features' embeddings, i.e. a linear map of the many-hot vector.
  std::int64_t many_hot = 0;
};

// One split, whole. tokens: [N, inputs, max_len], any integer dtype; lengths: [N, inputs] int64,
// positions at or past a row's length are padding (whatever id they hold); labels: [N] int64.
struct SplitData {
  at::Tensor tokens;
  at::Tensor lengths;
  at::Tensor labels;
  std::string origin;  // where it came from, for the user: "cache hit <file>", "built, cached in <file>", ...
  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Where a dataset may keep generated files and caches. `describe_only`: the host asks for info()
// alone (bench and estimate build a model for the task on random tokens): a dataset whose data is
// not on this machine describes its task all the same (the *_path helpers of dataset_plugin.hpp
// taking the context then check nothing), and is never loaded.
struct DatasetContext {
  std::string cache_dir;
  bool describe_only = false;
};

// Bad or missing data: the message names the file, the line or record, and what was expected.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a configuration will hold once loaded, known before loading it (from its parameters, a
// line count, a folder listing): examples over the three splits, and bytes per stored token.
// examples = 0: unknown. The host bounds memory and disk with it before anything is built.
struct SizeEstimate {
  std::int64_t examples = 0;
  std::int64_t token_bytes = 0;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual TaskInfo info() const = 0;
  virtual SplitData load(Split split) = 0;  // throws DataError
  // Cheap next to load(): no parsing, no generating. The default says "unknown".
  virtual SizeEstimate estimate_size() const { return {}; }
};

// Checks a loaded split against its task before anything trains on it: shapes [N, inputs, max_len],
// [N, inputs], [N]; integer dtypes; token ids in [0, vocab_size) on real positions; lengths in
// [1, max_len]; labels in [0, num_classes).
// Throws DataError "<dataset> <split>: example i: ...". `name` is the dataset's name.
void check_split(const std::string& name, Split split, const TaskInfo& task, const SplitData& data);

// Loads a split and checks it (check_split): what every host calls instead of Dataset::load.
SplitData load_checked(const std::string& name, Dataset& dataset, Split split);

// A vector's storage handed to a tensor without a copy; the tensor's deleter frees it.
template <typename T>
at::Tensor adopt_vector(std::vector<T>&& data, std::vector<std::int64_t> sizes, c10::ScalarType dtype) {
  const auto options = at::TensorOptions().dtype(dtype);
  if (data.empty()) return at::empty(sizes, options);
  auto* owner = new std::vector<T>(std::move(data));
  return at::from_blob(owner->data(), sizes, [owner](void*) { delete owner; }, options);
}

// A single-input split of uint8 tokens (row-major [N, len]) whose every example fills all `len`
// positions: pixels, generated sequences. A token 0 there is data, never padding.
SplitData full_length_split(std::vector<std::uint8_t>&& tokens, std::vector<std::int64_t>&& labels, std::int64_t len);

}  // namespace attnlab

#include <boost/dll/alias.hpp>
#define ATTNLAB_DATASET_FACTORY(fn) BOOST_DLL_ALIAS(fn, attnlab_create)
