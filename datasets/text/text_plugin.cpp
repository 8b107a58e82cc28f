// The text dataset plugin: LRA Text, IMDB sentiment at byte level, from the official aclImdb
// folders. Validation is either the test set (as LRA did) or a seeded holdout of train.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO

#include "attnlab/dataset_plugin.hpp"
#include "text_format.hpp"

namespace attnlab::text {
namespace {

const ParamSpec kParams[] = {
    {"path", ParamType::string, "", 0, 0, nullptr,
     "the aclImdb folder (holding train/neg, train/pos, test/neg, test/pos with one review per .txt file)"},
    kMaxLenParam,
    kPadToParam,
    {"val", ParamType::string, "test", 0, 0, "test|holdout",
     "validation split: 'test' evaluates on the test set as LRA did; 'holdout' holds val_size reviews out of train"},
    ATTNLAB_HOLDOUT_PARAMS("2500", 100000000, "reviews held out of train when val = \"holdout\"",
                           "seed of the holdout draw (val = \"holdout\"); the same seed gives the same split on every machine"),
};

class TextDataset final : public Dataset {
 public:
  TextDataset(const DatasetContext& ctx, const ParamValues& params)
      : cache_dir_(ctx.cache_dir),
        root_(data_folder(ctx, params, "path", "the aclImdb folder (with train/ and test/)", "no such folder (text path)")),
        shape_(row_shape(params)),
        val_is_holdout_(params.string("val") == "holdout"),
        holdout_(Holdout::from(params)) {}

  TaskInfo info() const override { return {kVocabSize, kNumClasses, shape_.width}; }  // vocabulary, classes, max_len

  SizeEstimate estimate_size() const override {
    return {static_cast<std::int64_t>(list_reviews(root_, "train").size() + list_reviews(root_, "test").size()), 2};
  }

  SplitData load(Split split) override {
    // With val = test the val split is the test split, cached once under the test key.
    if (split == Split::test || (split == Split::val && !val_is_holdout_))
      return load_files(Split::test, list_reviews(root_, "test"), {});
    auto reviews = list_reviews(root_, "train");
    if (!val_is_holdout_) return load_files(Split::train, std::move(reviews), {});
    const auto n = static_cast<std::int64_t>(reviews.size());
    if (holdout_.size >= n)  // in text's own words, older than Holdout::take's
      throw ParamError("val_size: " + std::to_string(holdout_.size) + " held out of " + std::to_string(n) +
                       " training reviews leaves none to train on");
    return load_files(split, std::move(reviews), holdout_.rows(split, n));
  }

 private:
  // The reviews `pick` selects (all when empty), through the token cache. The key's sources are
  // every file listed, since the holdout drawn depends on all of them.
  SplitData load_files(Split split, std::vector<Review> reviews, const std::vector<std::int64_t>& pick) {
    TokenCacheKey key{"text", split, kTokeniserVersion + cache_words(shape_), {}};
    if (val_is_holdout_ && split != Split::test) key.params += " holdout" + holdout_.key();
    key.sources.reserve(reviews.size());
    for (const auto& r : reviews) key.sources.push_back(r.path);
    return cached_split(cache_dir_, key, [&] {
      return padded_split(read_reviews(pick.empty() ? reviews : gather_rows(reviews, 1, pick), shape_), 1, shape_.width);
    });
  }

  std::string cache_dir_, root_;
  RowShape shape_;
  bool val_is_holdout_ = false;
  Holdout holdout_;
};

}  // namespace
}  // namespace attnlab::text

ATTNLAB_PLUGIN_INFO(dataset, "text", "1.0",
                    "LRA Text: IMDB review sentiment at byte level (ids byte + 1), 2 classes, from the aclImdb folders",
                    attnlab::text::kParams);

ATTNLAB_DATASET_FACTORY(attnlab::dataset_factory<attnlab::text::TextDataset>)
