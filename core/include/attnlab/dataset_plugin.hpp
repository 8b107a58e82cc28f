#pragma once
// The plumbing every dataset plugin shares, so that a plugin is its reader and its parameters:
// the folder it reads (checked once, in the plugin's own words), the file of a split, a seeded
// train/validation holdout, a split made from the reader's row vectors, parameter checks of
// LibTorch-free code turned into ParamErrors, and the factory. One include gives a plugin the
// dataset interface, parameters, the token cache and data_util.hpp as well.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/ScalarType.h>

#include "attnlab/data_util.hpp"
#include "attnlab/dataset.hpp"
#include "attnlab/params.hpp"
#include "attnlab/plugin.hpp"
#include "attnlab/token_cache.hpp"

namespace attnlab {

// 0, 1, 2 for train, val and test: a split's place in per-split arrays (file names, sizes, seeds).
constexpr int split_index(Split split) { return static_cast<int>(split); }

// <folder>/<name>: a file of the folder a dataset reads.
std::string file_in(const std::string& folder, const std::string& name);
// The file of `split` in `folder`, given the names of the train, val and test files in that order.
std::string split_file(const std::string& folder, const char* const (&names)[3], Split split);

// A path parameter that must be set: its value, or ParamError "<param>: must name <what>".
std::string required_path(const ParamValues& params, const std::string& param, const std::string& what);

// `folder` when it is a folder, else DataError "<folder>: <missing>", also when it cannot be looked
// at (permission denied, a name too long): never a std::filesystem_error, which the job process
// would retry where a DataError ends the job at once.
std::string existing_folder(const std::string& folder, const std::string& missing);

// The folder a path parameter names, checked as the two above do, except where the host only asks
// for the task (ctx.describe_only): then the parameter's text, set or not, unchecked.
std::string data_folder(const DatasetContext& ctx, const ParamValues& params, const std::string& param,
                        const std::string& what, const std::string& missing);
// The same for a regular file: DataError "<file>: <missing>".
std::string existing_file(const std::string& file, const std::string& missing);

// Where generated data of `dataset` goes: <cache_dir>/<dataset>-<spec_hash>, the hash naming the
// generator's parameters. DataError "<dataset>: no cache directory to generate the data into"
// when there is no cache directory.
std::string generated_folder(const std::string& cache_dir, const std::string& dataset, const std::string& spec_hash);

// Runs a LibTorch-free check that throws std::invalid_argument "<param>: ..." (a generator's
// parameters) and throws its message again as the ParamError the host expects of a plugin.
template <typename Check>
void check_params(Check&& check) {
  try {
    check();
  } catch (const std::invalid_argument& e) {
    throw ParamError(e.what());
  }
}

// The largest seed a dataset parameter takes: 2^53, every seed up to it exactly a TOML number.
inline constexpr double kMaxSeed = 9007199254740992.0;

// The two rows of a plugin's schema that Holdout::from reads, for its kParams array: val_size
// (how many of its training examples, at most `size_max`; `size_doc` says which) and split_seed.
#define ATTNLAB_HOLDOUT_PARAMS(size_default, size_max, size_doc, seed_doc)                            \
  {"val_size", ::attnlab::ParamType::integer, size_default, 1, size_max, nullptr, size_doc},         \
      {"split_seed", ::attnlab::ParamType::integer, "0", 0, ::attnlab::kMaxSeed, nullptr, seed_doc}
#define ATTNLAB_HOLDOUT_SEED_DOC "seed of the train/val holdout; the same seed gives the same split on every machine"

// Validation drawn out of the training examples: `size` of the n examples, picked by
// seeded_holdout(n, size, seed), are the val split, the others the train split, each part in
// file order, so that the same seed gives the same split on every machine.
struct Holdout {
  std::int64_t size = 0;
  std::uint64_t seed = 0;

  // From the parameters "val_size" and "split_seed" (ATTNLAB_HOLDOUT_PARAMS).
  static Holdout from(const ParamValues& params);
  // What it adds to a token cache key's parameters: " val_size=<size> split_seed=<seed>".
  std::string key() const;
  // The examples of `split` (train or val) among n, sorted (std::invalid_argument when size > n).
  std::vector<std::int64_t> rows(Split split, std::int64_t n) const;
  // The examples of `split` (train or val) out of every training example, `all`: its rows
  // rows(split, all.size()), in that order. ParamError "val_size: <size> leaves no training
  // examples (<holder>)" when size >= all.size(); `holder` says what holds them.
  SplitData take(Split split, const SplitData& all, const std::string& holder) const;
};

// A split from a reader's rows, each input padded to max_len: tokens row-major
// [N, inputs, max_len] of uint8, int16, int32 or int64, lengths [N, inputs], labels [N]. The
// vectors' storage is handed to the tensors without a copy. std::invalid_argument when the sizes
// disagree.
template <typename T>
SplitData padded_split(std::vector<T>&& tokens, std::vector<std::int64_t>&& lengths, std::vector<std::int64_t>&& labels,
                       std::int64_t inputs, std::int64_t max_len) {
  const auto n = static_cast<std::int64_t>(labels.size());
  if (static_cast<std::int64_t>(tokens.size()) != n * inputs * max_len || static_cast<std::int64_t>(lengths.size()) != n * inputs)
    throw std::invalid_argument("padded_split: " + std::to_string(tokens.size()) + " tokens and " + std::to_string(lengths.size()) +
                                " lengths for " + std::to_string(n) + " examples of " + std::to_string(inputs) + " x " +
                                std::to_string(max_len));
  SplitData out;
  out.tokens = adopt_vector(std::move(tokens), {n, inputs, max_len}, c10::CppTypeToScalarType<T>::value);
  out.lengths = adopt_vector(std::move(lengths), {n, inputs}, at::kLong);
  out.labels = adopt_vector(std::move(labels), {n}, at::kLong);
  return out;
}
// The same from a reader's result, any struct with the vectors tokens, lengths and labels (moved from).
template <typename Rows>
SplitData padded_split(Rows&& rows, std::int64_t inputs, std::int64_t max_len) {
  return padded_split(std::move(rows.tokens), std::move(rows.lengths), std::move(rows.labels), inputs, max_len);
}

// The factory of a Dataset class whose constructor takes (context, parameters):
//   ATTNLAB_DATASET_FACTORY(attnlab::dataset_factory<my_plugin::MyDataset>)
template <typename D>
std::shared_ptr<Dataset> dataset_factory(const DatasetContext& context, const ParamValues& params) {
  return std::make_shared<D>(context, params);
}

}  // namespace attnlab
