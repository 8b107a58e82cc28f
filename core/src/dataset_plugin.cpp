#include "attnlab/dataset_plugin.hpp"

#include <filesystem>
#include <system_error>

#include <ATen/ops/index_select.h>

namespace attnlab {
namespace fs = std::filesystem;

std::string file_in(const std::string& folder, const std::string& name) { return (fs::path(folder) / name).string(); }

std::string split_file(const std::string& folder, const char* const (&names)[3], Split split) {
  return file_in(folder, names[split_index(split)]);
}

std::string required_path(const ParamValues& params, const std::string& param, const std::string& what) {
  const std::string& value = params.string(param);
  if (value.empty()) throw ParamError(param + ": must name " + what);
  return value;
}

std::string existing_folder(const std::string& folder, const std::string& missing) {
  std::error_code ec;  // the overload with an error code throws nothing: unreadable reads as missing
  if (!fs::is_directory(folder, ec)) throw DataError(folder + ": " + missing);
  return folder;
}

std::string data_folder(const DatasetContext& ctx, const ParamValues& params, const std::string& param,
                        const std::string& what, const std::string& missing) {
  if (ctx.describe_only) return params.string(param);
  return existing_folder(required_path(params, param, what), missing);
}

std::string existing_file(const std::string& file, const std::string& missing) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) throw DataError(file + ": " + missing);
  return file;
}

std::string generated_folder(const std::string& cache_dir, const std::string& dataset, const std::string& spec_hash) {
  if (cache_dir.empty()) throw DataError(dataset + ": no cache directory to generate the data into");
  return (fs::path(cache_dir) / (dataset + "-" + spec_hash)).string();
}

Holdout Holdout::from(const ParamValues& params) {
  return {params.integer("val_size"), static_cast<std::uint64_t>(params.integer("split_seed"))};
}

std::string Holdout::key() const { return " val_size=" + std::to_string(size) + " split_seed=" + std::to_string(seed); }

std::vector<std::int64_t> Holdout::rows(Split split, std::int64_t n) const {
  IndexSplit parts = seeded_holdout(n, size, seed);
  return split == Split::train ? std::move(parts.first) : std::move(parts.second);
}

SplitData Holdout::take(Split split, const SplitData& all, const std::string& holder) const {
  if (size >= all.size()) throw ParamError("val_size: " + std::to_string(size) + " leaves no training examples (" + holder + ")");
  const auto keep = rows(split, all.size());
  const auto index = at::from_blob(const_cast<std::int64_t*>(keep.data()), {static_cast<std::int64_t>(keep.size())}, at::kLong);
  SplitData out;
  out.tokens = at::index_select(all.tokens, 0, index);
  out.lengths = at::index_select(all.lengths, 0, index);
  out.labels = at::index_select(all.labels, 0, index);
  return out;
}

}  // namespace attnlab
