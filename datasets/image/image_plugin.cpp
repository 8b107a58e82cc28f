// The image dataset plugin: LRA's Image task, CIFAR-10 in grayscale as a sequence of 1024 pixel
// intensities, read from the binary version of CIFAR-10 (cifar-10-batches-bin).
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
#include "image_format.hpp"

namespace attnlab::image {
namespace {

// Bumped whenever the tokens of the same files change (conversion, layout): stale caches rebuild.
constexpr const char* kTokeniserVersion = "tokeniser=image-gray601-1";

const ParamSpec kParams[] = {
    {"path", ParamType::string, "", 0, 0, nullptr,
     "folder of the CIFAR-10 binary version (cifar-10-batches-bin): data_batch_1.bin .. data_batch_5.bin and "
     "test_batch.bin"},
    {"val_size", ParamType::integer, "5000", 1, 1000000, nullptr,
     "training records held out for validation by a seeded draw (LRA: 5000 of 50000, leaving 45000 to train)"},
    {"split_seed", ParamType::integer, "0", 0, 9007199254740992.0, nullptr,
     "seed of the train/val holdout; the same seed gives the same split on every machine"},
};

class ImageDataset final : public Dataset {
 public:
  ImageDataset(const DatasetContext& ctx, const ParamValues& params) : cache_dir_(ctx.cache_dir) {
    dir_ = params.string("path");
    val_size_ = params.integer("val_size");
    split_seed_ = params.integer("split_seed");
    if (dir_.empty())
      throw ParamError("path: must name the folder of the CIFAR-10 binary version (data_batch_1.bin .. test_batch.bin)");
    std::error_code ec;  // permission denied is a DataError too, not a filesystem_error
    if (!std::filesystem::is_directory(dir_, ec)) throw DataError(dir_ + ": no such directory (image path)");
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
    TokenCacheKey key;
    key.dataset = "image";
    key.split = split;
    key.params = kTokeniserVersion;
    if (split == Split::test) {
      key.sources.push_back(file(kTestFile));
    } else {
      for (const char* name : kTrainFiles) key.sources.push_back(file(name));
      key.params += " val_size=" + std::to_string(val_size_) + " split_seed=" + std::to_string(split_seed_);
    }
    std::error_code ec;  // permission denied is a DataError too, not a filesystem_error
    for (const auto& f : key.sources)
      if (!std::filesystem::is_regular_file(f, ec))
        throw DataError(f + ": no such file (the CIFAR-10 binary version has data_batch_1.bin .. data_batch_5.bin and "
                            "test_batch.bin)");
    return cached_split(cache_dir_, key, [&] { return build(split, key.sources); });
  }

 private:
  std::string file(const char* name) const { return (std::filesystem::path(dir_) / name).string(); }

  SplitData build(Split split, const std::vector<std::string>& sources) const {
    GrayImages all = read_batches(sources);
    const auto n = static_cast<std::int64_t>(all.size());
    if (split == Split::test) return full_length_split(std::move(all.pixels), std::move(all.labels), kPixels);

    if (val_size_ >= n)
      throw ParamError("val_size: " + std::to_string(val_size_) + " leaves no training examples (the training files hold " +
                       std::to_string(n) + " records)");
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
  return std::make_shared<ImageDataset>(ctx, params);
}

}  // namespace
}  // namespace attnlab::image

ATTNLAB_PLUGIN_INFO(dataset, "image", "1.0",
                    "LRA Image: CIFAR-10 in grayscale (ITU-R 601), 1024 pixel tokens per image, 10 classes; reads the "
                    "binary version of CIFAR-10",
                    attnlab::image::kParams);

ATTNLAB_DATASET_FACTORY(attnlab::image::create)
