// The retrieval dataset plugin: LRA Document Retrieval, pairs of ACL Anthology Network papers at
// byte level, label 1 when one cites the other; two inputs per example (a two-tower model).
#include <cstdint>
#include <string>

#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO

#include "attnlab/dataset_plugin.hpp"
#include "retrieval_format.hpp"

namespace attnlab::retrieval {
namespace {

const ParamSpec kParams[] = {
    {"path", ParamType::string, "", 0, 0, nullptr,
     "folder holding the LRA files new_aan_pairs.train.tsv, new_aan_pairs.eval.tsv (validation) and "
     "new_aan_pairs.test.tsv"},
    text::kMaxLenParam,
    text::kPadToParam,
};

class RetrievalDataset final : public Dataset {
 public:
  RetrievalDataset(const DatasetContext& ctx, const ParamValues& params)
      : cache_dir_(ctx.cache_dir),
        dir_(data_folder(ctx, params, "path", "the folder with the LRA files new_aan_pairs.{train,eval,test}.tsv",
                         "no such folder (retrieval path)")),
        shape_(text::row_shape(params)) {}

  // vocabulary, classes, max_len, inputs: two documents per example (a two-tower model)
  TaskInfo info() const override { return {kVocabSize, kNumClasses, shape_.width, 2}; }

  SizeEstimate estimate_size() const override {
    std::int64_t rows = 0;  // one line per pair
    for (const char* name : kSplitFiles) rows += static_cast<std::int64_t>(count_lines(file_in(dir_, name)));
    return {rows, 2};
  }

  SplitData load(Split split) override {
    const std::string file = split_file(dir_, kSplitFiles, split);
    const TokenCacheKey key{"retrieval", split, text::kTokeniserVersion + text::cache_words(shape_), {file}};
    return cached_split(cache_dir_, key, [&] { return padded_split(read_pairs(file, shape_), 2, shape_.width); });
  }

 private:
  std::string cache_dir_, dir_;
  text::RowShape shape_;
};

}  // namespace
}  // namespace attnlab::retrieval

ATTNLAB_PLUGIN_INFO(dataset, "retrieval", "1.0",
                    "LRA Document Retrieval: do two ACL Anthology papers cite each other? Byte level (ids byte + 1), "
                    "two inputs, 2 classes, from the LRA TSV files",
                    attnlab::retrieval::kParams);

ATTNLAB_DATASET_FACTORY(attnlab::dataset_factory<attnlab::retrieval::RetrievalDataset>)
