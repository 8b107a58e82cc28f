// The listops dataset plugin: LRA ListOps, from the official TSV files or generated with the LRA
// generator's rules (then written in the same format and read back by the same reader).
#include <algorithm>
#include <cstdint>
#include <string>

#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO

#include "attnlab/dataset_plugin.hpp"
#include "listops_format.hpp"

namespace attnlab::listops {
namespace {

constexpr double kMaxCount = 100000000;  // 1e8 rows per split
constexpr double kMaxTokens = 1000000;   // 1e6 tokens per row

const ParamSpec kParams[] = {
    {"source", ParamType::string, "generate", 0, 0, "generate|files",
     "where the data comes from: 'generate' writes the three files with the LRA generator's rules into the cache "
     "directory (reused when complete); 'files' reads basic_{train,val,test}.tsv from `path`"},
    {"path", ParamType::string, "", 0, 0, nullptr,
     "directory holding the official LRA files basic_train.tsv, basic_val.tsv, basic_test.tsv (source = files)"},
    {"max_len", ParamType::integer, "2000", 1, kMaxTokens, nullptr,
     "tokens per input: longer sources are truncated, shorter ones padded with id 0"},
    {"close_bracket", ParamType::string, "token", 0, 0, "token|drop",
     "`]`, which closes the innermost operator: a token (LRA's pipeline, the KL authors'), or dropped (LRA's pipeline "
     "before 2021-03-04, which the Skyformer and Nystromformer authors' data came from: operators and digits only; id "
     "15 then never occurs)"},
    {"train_size", ParamType::integer, "96000", 1, kMaxCount, nullptr, "generated training rows (LRA: 96000)"},
    {"val_size", ParamType::integer, "2000", 1, kMaxCount, nullptr, "generated validation rows (LRA: 2000)"},
    {"test_size", ParamType::integer, "2000", 1, kMaxCount, nullptr, "generated test rows (LRA: 2000)"},
    {"max_depth", ParamType::integer, "10", 1, 64, nullptr,
     "generator: depth of the root is 1, nodes at max_depth are always values (LRA: 10)"},
    {"max_args", ParamType::integer, "10", 2, 1000, nullptr, "generator: an operator takes 2..max_args arguments (LRA: 10)"},
    {"min_length", ParamType::integer, "500", 0, kMaxTokens, nullptr,
     "generator: keep trees with min_length < tokens < max_length, tokens counted without parentheses (LRA: 500)"},
    {"max_length", ParamType::integer, "2000", 2, kMaxTokens, nullptr,
     "generator: upper bound, exclusive (LRA: 2000); growth stops once a tree reaches it"},
    {"operator_p", ParamType::real, "0.25", 0, 1, nullptr,
     "generator: LRA's VALUE_P; below max_depth a node is an operator when u <= operator_p (u uniform in [0, 1)), "
     "otherwise a digit (LRA: 0.25, i.e. 25% operators)"},
    {"generator_seed", ParamType::integer, "0", 0, kMaxSeed, nullptr,
     "generator: seed of its std::mt19937_64; the same parameters give byte-identical files on any machine"},
};

class ListOpsDataset final : public Dataset {
 public:
  ListOpsDataset(const DatasetContext& ctx, const ParamValues& params) : cache_dir_(ctx.cache_dir) {
    const std::string& source = params.string("source");
    max_len_ = params.integer("max_len");
    close_ = params.choice<CloseBracket>("close_bracket", {{"token", CloseBracket::token}, {"drop", CloseBracket::drop}});
    spec_.train_size = params.integer("train_size");
    spec_.val_size = params.integer("val_size");
    spec_.test_size = params.integer("test_size");
    spec_.gen.max_depth = params.integer("max_depth");
    spec_.gen.max_args = params.integer("max_args");
    spec_.gen.min_length = params.integer("min_length");
    spec_.gen.max_length = params.integer("max_length");
    spec_.gen.operator_p = params.real("operator_p");
    spec_.gen.seed = static_cast<std::uint64_t>(params.integer("generator_seed"));

    if (source == "files") {
      generate_ = false;
      dir_ = data_folder(ctx, params, "path", "the directory with the LRA files when source = \"files\"",
                         "no such directory (listops path)");
    } else if (source == "generate") {
      generate_ = true;
      check_params([&] { check_generator_params(spec_.gen); });
      dir_ = generated_folder(ctx.cache_dir, "listops", spec_hash(spec_));
    } else {
      throw ParamError("source: '" + source + "' is not one of generate|files");
    }
  }

  TaskInfo info() const override { return {kVocabSize, kNumClasses, max_len_}; }  // vocabulary, classes, max_len

  SizeEstimate estimate_size() const override {
    if (generate_) return {spec_.train_size + spec_.val_size + spec_.test_size, 2};
    std::int64_t rows = 0;  // one line per row, after a header line
    for (const char* name : kSplitFiles) {
      const auto lines = static_cast<std::int64_t>(count_lines(file_in(dir_, name)));
      rows += std::max<std::int64_t>(lines - 1, 0);
    }
    return {rows, 2};
  }

  SplitData load(Split split) override {
    if (generate_ && !generated_) {
      ensure_generated(dir_, spec_);
      generated_ = true;
    }
    const std::string file = split_file(dir_, kSplitFiles, split);
    const std::string dropped = close_ == CloseBracket::drop ? " close_bracket=drop" : "";
    const TokenCacheKey key{"listops", split, "tokeniser=listops-1" + dropped + " max_len=" + std::to_string(max_len_), {file}};
    return cached_split(cache_dir_, key, [&] { return padded_split(read_tsv(file, max_len_, close_), 1, max_len_); });
  }

 private:
  std::string cache_dir_;
  bool generate_ = true;
  bool generated_ = false;
  std::string dir_;
  std::int64_t max_len_ = 0;
  CloseBracket close_ = CloseBracket::token;
  GenerateSpec spec_;
};

}  // namespace
}  // namespace attnlab::listops

ATTNLAB_PLUGIN_INFO(dataset, "listops", "1.0",
                    "LRA ListOps: nested MIN/MAX/MED/SM expressions over digits, 10 classes; official TSV files "
                    "or generated with the LRA generator's rules",
                    attnlab::listops::kParams);

ATTNLAB_DATASET_FACTORY(attnlab::dataset_factory<attnlab::listops::ListOpsDataset>)
