// @NAME@: a dataset for attnlab. Say here what the task is and where its data comes from.
//
// As written it generates a tiny task, so that it works before you change anything: sequences of
// `length` random bits, labelled 1 when more than half of them are 1 (majority). Replace the
// generator with your reader; a file that cannot be read is a DataError naming the file and line.
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attnlab/dataset_plugin.hpp"  // the dataset interface, and what dataset plugins share

namespace @NAME@_plugin {
using namespace attnlab;

// What a [datasets.@NAME@] table may set: name, type, default, lower and upper bound, allowed
// words (nullptr: any), help.
const ParamSpec kParams[] = {
    {"length", ParamType::integer, "63", 1, 100000, nullptr, "tokens per sequence (odd: no ties)"},
    {"train_size", ParamType::integer, "2000", 1, 10000000, nullptr, "training examples"},
    {"val_size", ParamType::integer, "200", 1, 10000000, nullptr, "validation examples"},
    {"test_size", ParamType::integer, "200", 1, 10000000, nullptr, "test examples"},
    {"generator_seed", ParamType::integer, "0", 0, 1e15, nullptr, "the data's seed: same seed, same tokens"},
};

class Majority final : public Dataset {
 public:
  Majority(const DatasetContext& /*context: cache_dir, for data worth caching*/, const ParamValues& params)
      : length_(params.integer("length")),
        sizes_{params.integer("train_size"), params.integer("val_size"), params.integer("test_size")},
        seed_(static_cast<std::uint64_t>(params.integer("generator_seed"))) {}

  TaskInfo info() const override {
    TaskInfo t;
    t.vocab_size = 2;  // token ids 0 and 1
    t.num_classes = 2;
    t.max_len = length_;
    return t;
  }

  // Known without generating anything: the host bounds memory and disk with it.
  SizeEstimate estimate_size() const override { return {sizes_[0] + sizes_[1] + sizes_[2], 1}; }

  SplitData load(Split split) override {
    const int index = split_index(split);  // 0, 1, 2: train, val, test
    // std::mt19937_64 is specified to the bit: the same seed gives the same data on every machine
    std::mt19937_64 rng(seed_ * 3 + static_cast<std::uint64_t>(index));
    const std::int64_t n = sizes_[index];
    std::vector<std::uint8_t> tokens(static_cast<std::size_t>(n * length_));
    std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t ones = 0;
      for (std::int64_t j = 0; j < length_; ++j) ones += tokens[static_cast<std::size_t>(i * length_ + j)] = rng() & 1;
      labels[static_cast<std::size_t>(i)] = 2 * ones > length_ ? 1 : 0;
    }
    SplitData data = full_length_split(std::move(tokens), std::move(labels), length_);
    data.origin = "generated";
    return data;
  }

 private:
  std::int64_t length_;
  std::int64_t sizes_[3];
  std::uint64_t seed_;
};

}  // namespace @NAME@_plugin

// The plugin's name (what an experiment file's [datasets.NAME] says), its version, one line
// describing it, and its parameters.
ATTNLAB_PLUGIN_INFO(dataset, "@NAME@", "0.1", "@NAME@ (as written: majority of random bits, 2 classes)",
                    @NAME@_plugin::kParams);
// The factory the host calls: a Majority made from the context and the [datasets.@NAME@] table.
ATTNLAB_DATASET_FACTORY(attnlab::dataset_factory<@NAME@_plugin::Majority>)
