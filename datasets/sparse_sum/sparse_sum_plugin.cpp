// The sparse_sum dataset plugin: the KL-Transformer paper's sparsity task, generated in memory and
// routed through the token cache (so repeated runs map the same bytes instead of drawing again).
#include <string>
#include <utility>

#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO

#include "attnlab/dataset_plugin.hpp"
#include "sparse_sum_format.hpp"

namespace attnlab::sparse_sum {
namespace {

constexpr double kMaxCount = 100000000;  // 1e8 examples per split
constexpr double kMaxLength = 1000000;   // 1e6 positions per sequence

const ParamSpec kParams[] = {
    {"length", ParamType::integer, "200", 4, kMaxLength, nullptr,
     "positions per sequence, L (every sequence has exactly this length)"},
    {"sparsity", ParamType::real, "0.05", 0, 1, nullptr,
     "p = P(a_i = 1), the probability that a position counts towards the sum; must be in (0, 1]"},
    {"train_size", ParamType::integer, "9000", 9, kMaxCount, nullptr,
     "training examples, a multiple of 9 (the same number in each of the 9 classes)"},
    {"val_size", ParamType::integer, "1800", 9, kMaxCount, nullptr, "validation examples, a multiple of 9"},
    {"test_size", ParamType::integer, "1800", 9, kMaxCount, nullptr, "test examples, a multiple of 9"},
    {"generator_seed", ParamType::integer, "0", 0, kMaxSeed, nullptr,
     "seed of the generator; each split draws from its own sub-seed, so the same parameters give the same "
     "tokens on any machine"},
};

class SparseSumDataset final : public Dataset {
 public:
  SparseSumDataset(const DatasetContext& ctx, const ParamValues& params) : cache_dir_(ctx.cache_dir) {
    spec_.gen.length = params.integer("length");
    spec_.gen.sparsity = params.real("sparsity");
    spec_.train_size = params.integer("train_size");
    spec_.val_size = params.integer("val_size");
    spec_.test_size = params.integer("test_size");
    spec_.gen.seed = static_cast<std::uint64_t>(params.integer("generator_seed"));
    check_params([&] { check_spec(spec_); });
  }

  // vocabulary, classes, max_len, inputs, many_hot: a token is the bit mask of kFeatures features
  TaskInfo info() const override { return {kVocabSize, kNumClasses, spec_.gen.length, 1, kFeatures}; }

  SizeEstimate estimate_size() const override { return {spec_.train_size + spec_.val_size + spec_.test_size, 1}; }

  SplitData load(Split split) override {
    const int index = split_index(split);
    // no source files: the parameters are the whole key
    return cached_split(cache_dir_, {"sparse_sum", split, describe_split(spec_, index), {}}, [&] {
      SplitTokens rows = generate(spec_, index);
      return full_length_split(std::move(rows.tokens), std::move(rows.labels), rows.length);
    });
  }

 private:
  std::string cache_dir_;
  GenerateSpec spec_;
};

}  // namespace
}  // namespace attnlab::sparse_sum

ATTNLAB_PLUGIN_INFO(dataset, "sparse_sum", "1.0",
                    "KL-Transformer sparsity task (Chowdhury et al. 2022, App. E): the sum of v_i * a_i over L "
                    "many-hot positions (v in {-1, 1}, a ~ Bernoulli(sparsity)), 9 balanced classes -4..4",
                    attnlab::sparse_sum::kParams);

ATTNLAB_DATASET_FACTORY(attnlab::dataset_factory<attnlab::sparse_sum::SparseSumDataset>)
