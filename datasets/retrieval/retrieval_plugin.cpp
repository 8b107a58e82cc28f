// The retrieval dataset plugin: LRA Document Retrieval, pairs of ACL Anthology Network papers at
// byte level, label 1 when one cites the other; two inputs per example (a two-tower model).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include <ATen/core/Tensor.h>
#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO

#include "attnlab/data_util.hpp"
#include "attnlab/dataset.hpp"
#include "attnlab/params.hpp"
#include "attnlab/plugin.hpp"
#include "attnlab/token_cache.hpp"
#include "retrieval_format.hpp"

namespace attnlab::retrieval {
namespace {

const ParamSpec kParams[] = {
    {"path", ParamType::string, "", 0, 0, nullptr,
     "folder holding the LRA files new_aan_pairs.train.tsv, new_aan_pairs.eval.tsv (validation) and "
     "new_aan_pairs.test.tsv"},
    {"max_len", ParamType::integer, "4000", 1, 1000000, nullptr,
     "bytes per document: longer texts are truncated, shorter ones padded with id 0 (LRA: 4000)"},
};

class RetrievalDataset final : public Dataset {
 public:
  RetrievalDataset(const DatasetContext& ctx, const ParamValues& params) : cache_dir_(ctx.cache_dir) {
    dir_ = params.string("path");
    max_len_ = params.integer("max_len");
    if (dir_.empty()) throw ParamError("path: must name the folder with the LRA files new_aan_pairs.{train,eval,test}.tsv");
    std::error_code ec;  // permission denied is a DataError too, not a filesystem_error
    if (!std::filesystem::is_directory(dir_, ec)) throw DataError(dir_ + ": no such folder (retrieval path)");
  }

  TaskInfo info() const override {
    TaskInfo t;
    t.vocab_size = kVocabSize;
    t.num_classes = kNumClasses;
    t.max_len = max_len_;
    t.inputs = 2;
    return t;
  }

  SizeEstimate estimate_size() const override {
    std::int64_t rows = 0;  // one line per pair
    for (const char* name : kSplitFiles)
      rows += static_cast<std::int64_t>(count_lines((std::filesystem::path(dir_) / name).string()));
    return {rows, 2};
  }

  SplitData load(Split split) override {
    const int index = split == Split::train ? 0 : split == Split::val ? 1 : 2;
    const std::string file = (std::filesystem::path(dir_) / kSplitFiles[index]).string();
    TokenCacheKey key;
    key.dataset = "retrieval";
    key.split = split;
    key.params = std::string(text::kTokeniserVersion) + " max_len=" + std::to_string(max_len_);
    key.sources = {file};
    return cached_split(cache_dir_, key, [&] {
      ByteRows rows = read_pairs(file, max_len_);
      const auto n = static_cast<std::int64_t>(rows.size());
      SplitData out;
      out.tokens = adopt_vector(std::move(rows.tokens), {n, 2, max_len_}, at::kShort);
      out.lengths = adopt_vector(std::move(rows.lengths), {n, 2}, at::kLong);
      out.labels = adopt_vector(std::move(rows.labels), {n}, at::kLong);
      return out;
    });
  }

 private:
  std::string cache_dir_;
  std::string dir_;
  std::int64_t max_len_ = 0;
};

std::shared_ptr<Dataset> create(const DatasetContext& ctx, const ParamValues& params) {
  return std::make_shared<RetrievalDataset>(ctx, params);
}

}  // namespace
}  // namespace attnlab::retrieval

ATTNLAB_PLUGIN_INFO(dataset, "retrieval", "1.0",
                    "LRA Document Retrieval: do two ACL Anthology papers cite each other? Byte level (ids byte + 1), "
                    "two inputs, 2 classes, from the LRA TSV files",
                    attnlab::retrieval::kParams);

ATTNLAB_DATASET_FACTORY(attnlab::retrieval::create)
