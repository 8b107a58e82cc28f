// The image dataset plugin: LRA's Image task, CIFAR-10 in grayscale as a sequence of 1024 pixel
// intensities, read from the binary version of CIFAR-10 (cifar-10-batches-bin).
#include <cstdint>
#include <string>
#include <utility>

#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO

#include "attnlab/dataset_plugin.hpp"
#include "image_format.hpp"

namespace attnlab::image {
namespace {

// Bumped whenever the tokens of the same files change (conversion, layout): stale caches rebuild.
constexpr const char* kTokeniserVersion = "tokeniser=image-gray601-1";

const ParamSpec kParams[] = {
    {"path", ParamType::string, "", 0, 0, nullptr,
     "folder of the CIFAR-10 binary version (cifar-10-batches-bin): data_batch_1.bin .. data_batch_5.bin and "
     "test_batch.bin"},
    ATTNLAB_HOLDOUT_PARAMS("5000", 1000000,
                           "training records held out for validation by a seeded draw (LRA: 5000 of 50000, leaving 45000 to train)",
                           ATTNLAB_HOLDOUT_SEED_DOC),
};

class ImageDataset final : public Dataset {
 public:
  ImageDataset(const DatasetContext& ctx, const ParamValues& params)
      : cache_dir_(ctx.cache_dir),
        dir_(data_folder(ctx, params, "path", "the folder of the CIFAR-10 binary version (data_batch_1.bin .. test_batch.bin)",
                         "no such directory (image path)")),
        holdout_(Holdout::from(params)) {}

  TaskInfo info() const override { return {kVocabSize, kNumClasses, kPixels}; }  // vocabulary, classes, max_len

  // Test: test_batch.bin; train and val: a seeded holdout of the five training batches.
  SplitData load(Split split) override {
    const bool test = split == Split::test;
    TokenCacheKey key{"image", split, kTokeniserVersion, {}};
    if (test) {
      key.sources = {file_in(dir_, kTestFile)};
    } else {
      for (const char* name : kTrainFiles) key.sources.push_back(file_in(dir_, name));
      key.params += holdout_.key();
    }
    for (const auto& f : key.sources)
      existing_file(f, "no such file (the CIFAR-10 binary version has data_batch_1.bin .. data_batch_5.bin and test_batch.bin)");
    return cached_split(cache_dir_, key, [&] {
      GrayImages all = read_batches(key.sources);
      const std::string holder = "the training files hold " + std::to_string(all.size()) + " records";
      SplitData whole = full_length_split(std::move(all.pixels), std::move(all.labels), kPixels);
      return test ? whole : holdout_.take(split, whole, holder);
    });
  }

 private:
  std::string cache_dir_, dir_;
  Holdout holdout_;
};

}  // namespace
}  // namespace attnlab::image

ATTNLAB_PLUGIN_INFO(dataset, "image", "1.0",
                    "LRA Image: CIFAR-10 in grayscale (ITU-R 601), 1024 pixel tokens per image, 10 classes; reads the "
                    "binary version of CIFAR-10",
                    attnlab::image::kParams);

ATTNLAB_DATASET_FACTORY(attnlab::dataset_factory<attnlab::image::ImageDataset>)
