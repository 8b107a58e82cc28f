// The text dataset plugin: LRA Text, IMDB sentiment at byte level, from the official aclImdb
// folders. Validation is either the test set (as LRA did) or a seeded holdout of train.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO

#include "attnlab/data_util.hpp"
#include "attnlab/dataset.hpp"
#include "attnlab/params.hpp"
#include "attnlab/plugin.hpp"
#include "attnlab/token_cache.hpp"
#include "text_format.hpp"

namespace attnlab::text {
namespace {

const ParamSpec kParams[] = {
    {"path", ParamType::string, "", 0, 0, nullptr,
     "the aclImdb folder (holding train/neg, train/pos, test/neg, test/pos with one review per .txt file)"},
    {"max_len", ParamType::integer, "4000", 1, 1000000, nullptr,
     "bytes per review: longer reviews are truncated, shorter ones padded with id 0 (LRA: 1000, 2000 or 4000)"},
    {"val", ParamType::string, "test", 0, 0, "test|holdout",
     "validation split: 'test' evaluates on the test set as LRA did; 'holdout' holds val_size reviews out of train"},
    {"val_size", ParamType::integer, "2500", 1, 100000000, nullptr, "reviews held out of train when val = \"holdout\""},
    {"split_seed", ParamType::integer, "0", 0, 9007199254740992.0, nullptr,
     "seed of the holdout draw (val = \"holdout\"); the same seed gives the same split on every machine"},
};

class TextDataset final : public Dataset {
 public:
  TextDataset(const DatasetContext& ctx, const ParamValues& params) : cache_dir_(ctx.cache_dir) {
    root_ = params.string("path");
    max_len_ = params.integer("max_len");
    holdout_ = params.string("val") == "holdout";
    val_size_ = params.integer("val_size");
    split_seed_ = static_cast<std::uint64_t>(params.integer("split_seed"));
    if (root_.empty()) throw ParamError("path: must name the aclImdb folder (with train/ and test/)");
    std::error_code ec;  // permission denied is a DataError too, not a filesystem_error
    if (!std::filesystem::is_directory(root_, ec)) throw DataError(root_ + ": no such folder (text path)");
  }

  TaskInfo info() const override {
    TaskInfo t;
    t.vocab_size = kVocabSize;
    t.num_classes = kNumClasses;
    t.max_len = max_len_;
    t.inputs = 1;
    return t;
  }

  SizeEstimate estimate_size() const override {
    return {static_cast<std::int64_t>(list_reviews(root_, "train").size() + list_reviews(root_, "test").size()), 2};
  }

  SplitData load(Split split) override {
    // With val = test the val split is the test split, cached once under the test key.
    if (split == Split::test || (split == Split::val && !holdout_)) return load_files(Split::test, list_reviews(root_, "test"), {});
    auto reviews = list_reviews(root_, "train");
    if (!holdout_) return load_files(Split::train, std::move(reviews), {});
    const auto n = static_cast<std::int64_t>(reviews.size());
    if (val_size_ >= n)
      throw ParamError("val_size: " + std::to_string(val_size_) + " held out of " + std::to_string(n) +
                       " training reviews leaves none to train on");
    const IndexSplit parts = seeded_holdout(n, val_size_, split_seed_);
    return load_files(split, std::move(reviews), split == Split::train ? parts.first : parts.second);
  }

 private:
  // The reviews `pick` selects (all when empty), through the token cache. The key's sources are
  // every file listed, since the holdout drawn depends on all of them.
  SplitData load_files(Split split, std::vector<Review> reviews, const std::vector<std::int64_t>& pick) {
    TokenCacheKey key;
    key.dataset = "text";
    key.split = split;
    key.params = std::string(kTokeniserVersion) + " max_len=" + std::to_string(max_len_);
    if (holdout_ && split != Split::test)
      key.params += " holdout val_size=" + std::to_string(val_size_) + " split_seed=" + std::to_string(split_seed_);
    key.sources.reserve(reviews.size());
    for (const auto& r : reviews) key.sources.push_back(r.path);

    return cached_split(cache_dir_, key, [&] {
      std::vector<Review> chosen;
      if (pick.empty()) {
        chosen = reviews;
      } else {
        chosen.reserve(pick.size());
        for (const auto i : pick) chosen.push_back(reviews[static_cast<std::size_t>(i)]);
      }
      ByteRows rows = read_reviews(chosen, max_len_);
      const auto count = static_cast<std::int64_t>(rows.size());
      SplitData out;
      out.tokens = adopt_vector(std::move(rows.tokens), {count, 1, max_len_}, at::kShort);
      out.lengths = adopt_vector(std::move(rows.lengths), {count, 1}, at::kLong);
      out.labels = adopt_vector(std::move(rows.labels), {count}, at::kLong);
      return out;
    });
  }

  std::string cache_dir_;
  std::string root_;
  std::int64_t max_len_ = 0;
  bool holdout_ = false;
  std::int64_t val_size_ = 0;
  std::uint64_t split_seed_ = 0;
};

std::shared_ptr<Dataset> create(const DatasetContext& ctx, const ParamValues& params) {
  return std::make_shared<TextDataset>(ctx, params);
}

}  // namespace
}  // namespace attnlab::text

ATTNLAB_PLUGIN_INFO(dataset, "text", "1.0",
                    "LRA Text: IMDB review sentiment at byte level (ids byte + 1), 2 classes, from the aclImdb folders",
                    attnlab::text::kParams);

ATTNLAB_DATASET_FACTORY(attnlab::text::create)
