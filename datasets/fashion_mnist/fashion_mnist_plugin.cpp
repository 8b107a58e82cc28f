// The fashion_mnist dataset plugin: Fashion-MNIST as a sequence of 784 pixel intensities, read from
// the IDX files Debian's package dataset-fashion-mnist installs (or any folder holding them).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO

#include "attnlab/data_util.hpp"
#include "attnlab/dataset.hpp"
#include "attnlab/params.hpp"
#include "attnlab/plugin.hpp"
#include "attnlab/token_cache.hpp"
#include "fashion_mnist_format.hpp"

namespace attnlab::fashion_mnist {
namespace {

// Bumped whenever the tokens of the same files change: stale caches rebuild.
constexpr const char* kTokeniserVersion = "tokeniser=fashion_mnist-pixels-1";

const ParamSpec kParams[] = {
    {"path", ParamType::string, "/usr/share/datasets/fashion-mnist", 0, 0, nullptr,
     "folder of the four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
     "t10k-labels-idx1-ubyte), each gzip-compressed (.gz) or not; the default is where Debian's package "
     "dataset-fashion-mnist installs them"},
    {"val_size", ParamType::integer, "6000", 1, 1000000, nullptr,
     "training images held out for validation by a seeded draw (6000 of 60000, leaving 54000 to train)"},
    {"split_seed", ParamType::integer, "0", 0, 9007199254740992.0, nullptr,
     "seed of the train/val holdout; the same seed gives the same split on every machine"},
};

class FashionMnistDataset final : public Dataset {
 public:
  FashionMnistDataset(const DatasetContext& ctx, const ParamValues& params) : cache_dir_(ctx.cache_dir) {
    dir_ = params.string("path");
    val_size_ = params.integer("val_size");
    split_seed_ = params.integer("split_seed");
    if (dir_.empty()) throw ParamError("path: must name the folder of the Fashion-MNIST IDX files");
    std::error_code ec;  // permission denied is a DataError too, not a filesystem_error
    if (!std::filesystem::is_directory(dir_, ec))
      throw DataError(dir_ + ": no such directory (fashion_mnist path)" + install_hint(dir_));
  }

  TaskInfo info() const override {
    TaskInfo t;
    t.vocab_size = kVocabSize;
    t.num_classes = kNumClasses;
    t.max_len = kPixels;
    t.inputs = 1;
    return t;
  }

  SplitData load(Split split) override {
    const bool test = split == Split::test;
    TokenCacheKey key;
    key.dataset = "fashion_mnist";
    key.split = split;
    key.params = kTokeniserVersion;
    if (!test) key.params += " val_size=" + std::to_string(val_size_) + " split_seed=" + std::to_string(split_seed_);
    key.sources = {locate(dir_, test ? kTestImages : kTrainImages), locate(dir_, test ? kTestLabels : kTrainLabels)};
    return cached_split(cache_dir_, key, [&] { return build(split, key.sources[0], key.sources[1]); });
  }

 private:
  SplitData build(Split split, const std::string& images, const std::string& labels) const {
    Examples all = read_examples(images, labels);
    if (split == Split::test) return full_length_split(std::move(all.pixels), std::move(all.labels), kPixels);

    const auto n = static_cast<std::int64_t>(all.size());
    if (val_size_ >= n)
      throw ParamError("val_size: " + std::to_string(val_size_) + " leaves no training examples (" + images +
                       " holds " + std::to_string(n) + " images)");
    const IndexSplit parts = seeded_holdout(n, val_size_, static_cast<std::uint64_t>(split_seed_));
    const std::vector<std::int64_t>& keep = split == Split::train ? parts.first : parts.second;
    return full_length_split(gather_rows(all.pixels, kPixels, keep), gather_rows(all.labels, 1, keep), kPixels);
  }

  std::string cache_dir_;
  std::string dir_;
  std::int64_t val_size_ = 0;
  std::int64_t split_seed_ = 0;
};

std::shared_ptr<Dataset> create(const DatasetContext& ctx, const ParamValues& params) {
  return std::make_shared<FashionMnistDataset>(ctx, params);
}

}  // namespace
}  // namespace attnlab::fashion_mnist

ATTNLAB_PLUGIN_INFO(dataset, "fashion_mnist", "1.0",
                    "Fashion-MNIST: 28x28 grayscale clothing images as 784 pixel tokens, 10 classes; reads the IDX "
                    "files of Debian's dataset-fashion-mnist",
                    attnlab::fashion_mnist::kParams);

ATTNLAB_DATASET_FACTORY(attnlab::fashion_mnist::create)
