// The fashion_mnist dataset plugin: Fashion-MNIST as a sequence of 784 pixel intensities, read from
// the IDX files Debian's package dataset-fashion-mnist installs (or any folder holding them).
#include <string>
#include <utility>

#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO

#include "attnlab/dataset_plugin.hpp"
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
    ATTNLAB_HOLDOUT_PARAMS("6000", 1000000,
                           "training images held out for validation by a seeded draw (6000 of 60000, leaving 54000 to train)",
                           ATTNLAB_HOLDOUT_SEED_DOC),
};

class FashionMnistDataset final : public Dataset {
 public:
  FashionMnistDataset(const DatasetContext& ctx, const ParamValues& params)
      : cache_dir_(ctx.cache_dir),
        dir_(data_folder(ctx, params, "path", "the folder of the Fashion-MNIST IDX files",
                         "no such directory (fashion_mnist path)" + install_hint(params.string("path")))),
        holdout_(Holdout::from(params)) {}

  TaskInfo info() const override { return {kVocabSize, kNumClasses, kPixels}; }  // vocabulary, classes, max_len

  // Test: the t10k files; train and val: a seeded holdout of the training files.
  SplitData load(Split split) override {
    const bool test = split == Split::test;
    TokenCacheKey key{"fashion_mnist", split, kTokeniserVersion, {}};
    if (!test) key.params += holdout_.key();
    key.sources = {locate(dir_, test ? kTestImages : kTrainImages), locate(dir_, test ? kTestLabels : kTrainLabels)};
    return cached_split(cache_dir_, key, [&] {
      Examples all = read_examples(key.sources[0], key.sources[1]);
      const std::string holder = key.sources[0] + " holds " + std::to_string(all.size()) + " images";
      SplitData whole = full_length_split(std::move(all.pixels), std::move(all.labels), kPixels);
      return test ? whole : holdout_.take(split, whole, holder);
    });
  }

 private:
  std::string cache_dir_, dir_;
  Holdout holdout_;
};

}  // namespace
}  // namespace attnlab::fashion_mnist

ATTNLAB_PLUGIN_INFO(dataset, "fashion_mnist", "1.0",
                    "Fashion-MNIST: 28x28 grayscale clothing images as 784 pixel tokens, 10 classes; reads the IDX "
                    "files of Debian's dataset-fashion-mnist",
                    attnlab::fashion_mnist::kParams);

ATTNLAB_DATASET_FACTORY(attnlab::dataset_factory<attnlab::fashion_mnist::FashionMnistDataset>)
