// core/'s data helpers: seeded splits, the token cache (hit, invalidation, corruption), the split
// check every host runs before training, and the many-hot token embedding.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <thread>

#include <ATen/ATen.h>

#include "attnlab/data_util.hpp"
#include "attnlab/dataset_plugin.hpp"
#include "attnlab/token_cache.hpp"
#include "attnlab/train/model.hpp"

namespace attnlab {
namespace {
namespace fs = std::filesystem;

TEST(DataUtil, SeededPermutationIsAPermutationFixedBySeed) {
  const auto a = seeded_permutation(1000, 7), b = seeded_permutation(1000, 7), c = seeded_permutation(1000, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  // pinned: computed by an independent Python mt19937_64 + the same Fisher-Yates, so the order
  // cannot drift with the standard library or the machine
  EXPECT_EQ(seeded_permutation(8, 42), (std::vector<std::int64_t>{7, 0, 5, 1, 2, 4, 3, 6}));
  EXPECT_EQ(seeded_permutation(1, 3), std::vector<std::int64_t>{0});
  EXPECT_TRUE(seeded_permutation(0, 3).empty());
}

TEST(DataUtil, HoldoutIsDisjointCompleteAndSorted) {
  const auto s = seeded_holdout(100, 30, 1);
  ASSERT_EQ(s.first.size(), 70u);
  ASSERT_EQ(s.second.size(), 30u);
  EXPECT_TRUE(std::is_sorted(s.first.begin(), s.first.end()));
  EXPECT_TRUE(std::is_sorted(s.second.begin(), s.second.end()));
  std::set<std::int64_t> all(s.first.begin(), s.first.end());
  all.insert(s.second.begin(), s.second.end());
  EXPECT_EQ(all.size(), 100u);
  EXPECT_NE(seeded_holdout(100, 30, 2).second, s.second);
  EXPECT_THROW(seeded_holdout(10, 11, 0), std::invalid_argument);
}

TEST(DataUtil, FnvMatchesItsDefinition) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(hex64(fnv1a64("a")), "af63dc4c8601ec8c");  // published FNV-1a 64 test vector
}

// dataset_plugin.hpp: the plumbing the dataset plugins share.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(DatasetPlugin, PathsAndTheirErrors) {
  EXPECT_EQ(split_index(Split::train), 0);
  EXPECT_EQ(split_index(Split::test), 2);
  const char* const names[3] = {"a.tsv", "b.tsv", "c.tsv"};
  EXPECT_EQ(split_file("/d", names, Split::val), "/d/b.tsv");
  EXPECT_EQ(file_in("/d/", "x"), "/d/x");

  ParamValues params;
  params.set("path", std::string(""));
  EXPECT_THROW(required_path(params, "path", "the folder"), ParamError);
  EXPECT_EQ(error_of([&] { required_path(params, "path", "the folder of X"); }), "path: must name the folder of X");
  params.set("path", std::string("/tmp"));
  EXPECT_EQ(required_path(params, "path", "the folder"), "/tmp");

  const std::string tmp = fs::temp_directory_path().string();
  EXPECT_EQ(existing_folder(tmp, "no such directory"), tmp);
  const std::string too_long = tmp + "/" + std::string(300, 'a');  // a filesystem_error once
  EXPECT_EQ(error_of([&] { existing_folder(too_long, "no such folder (x path)"); }), too_long + ": no such folder (x path)");
  EXPECT_THROW(existing_folder(too_long, "gone"), DataError);
  EXPECT_THROW(existing_file(tmp, "not a file"), DataError);
  EXPECT_EQ(error_of([&] { existing_file(too_long, "no such file"); }), too_long + ": no such file");

  EXPECT_EQ(generated_folder("/c", "listops", "0123"), "/c/listops-0123");
  EXPECT_EQ(error_of([&] { generated_folder("", "toy", "0123"); }), "toy: no cache directory to generate the data into");
  EXPECT_THROW(generated_folder("", "toy", "0123"), DataError);

  EXPECT_EQ(error_of([] { check_params([] { throw std::invalid_argument("max_depth: too deep"); }); }), "max_depth: too deep");
  EXPECT_THROW(check_params([] { throw std::invalid_argument("x"); }), ParamError);
  EXPECT_NO_THROW(check_params([] {}));
}

TEST(DatasetPlugin, HoldoutIsSeededHoldoutOfTheTrainingRows) {
  ParamValues params;
  params.set("val_size", std::int64_t{3});
  params.set("split_seed", std::int64_t{5});
  const Holdout holdout = Holdout::from(params);
  EXPECT_EQ(holdout.size, 3);
  EXPECT_EQ(holdout.seed, 5u);
  EXPECT_EQ(holdout.key(), " val_size=3 split_seed=5");
  const IndexSplit parts = seeded_holdout(10, 3, 5);
  EXPECT_EQ(holdout.rows(Split::train, 10), parts.first);
  EXPECT_EQ(holdout.rows(Split::val, 10), parts.second);

  // take: the same rows of every tensor, as gather_rows would pick them
  std::vector<std::uint8_t> pixels(10 * 4);
  std::iota(pixels.begin(), pixels.end(), 0);
  std::vector<std::int64_t> labels(10);
  std::iota(labels.begin(), labels.end(), 100);
  const SplitData all = full_length_split(std::vector<std::uint8_t>(pixels), std::vector<std::int64_t>(labels), 4);
  for (const Split split : {Split::train, Split::val}) {
    const auto keep = holdout.rows(split, 10);
    const SplitData part = holdout.take(split, all, "unused");
    const SplitData expected = full_length_split(gather_rows(pixels, 4, keep), gather_rows(labels, 1, keep), 4);
    EXPECT_TRUE(at::equal(part.tokens, expected.tokens));
    EXPECT_TRUE(at::equal(part.lengths, expected.lengths));
    EXPECT_TRUE(at::equal(part.labels, expected.labels));
    EXPECT_TRUE(part.tokens.is_contiguous());
  }
  EXPECT_EQ(error_of([&] { Holdout{10, 0}.take(Split::train, all, "f holds 10 rows"); }),
            "val_size: 10 leaves no training examples (f holds 10 rows)");
  EXPECT_THROW((Holdout{10, 0}.take(Split::val, all, "")), ParamError);
}

struct ToyRows {
  std::vector<std::int16_t> tokens;
  std::vector<std::int64_t> lengths, labels;
};

TEST(DatasetPlugin, PaddedSplitAdoptsTheReadersRows) {
  ToyRows rows{{1, 2, 0, 3, 4, 5, 6, 0, 0, 7, 8, 0}, {2, 3, 1, 2}, {0, 1}};  // 2 examples, 2 inputs, 3 tokens
  const SplitData d = padded_split(std::move(rows), 2, 3);
  EXPECT_EQ(d.tokens.sizes().vec(), (std::vector<std::int64_t>{2, 2, 3}));
  EXPECT_EQ(d.tokens.scalar_type(), at::kShort);
  EXPECT_EQ(d.tokens[1][0][0].item<int>(), 6);
  EXPECT_EQ(d.lengths.sizes().vec(), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(d.lengths[0][1].item<std::int64_t>(), 3);
  EXPECT_EQ(d.labels[1].item<std::int64_t>(), 1);
  EXPECT_EQ(padded_split(std::vector<std::uint8_t>{1, 2}, {1, 2}, {0, 0}, 1, 1).tokens.scalar_type(), at::kByte);
  EXPECT_THROW(padded_split(std::vector<std::int32_t>{1, 2, 3}, {1}, {0}, 1, 2), std::invalid_argument);
}

class ToyDataset final : public Dataset {
 public:
  ToyDataset(const DatasetContext& context, const ParamValues& params)
      : cache_dir(context.cache_dir), length(params.integer("length")) {}
  TaskInfo info() const override { return {2, 2, length, 1}; }
  SplitData load(Split) override { return {}; }
  std::string cache_dir;
  std::int64_t length;
};

TEST(DatasetPlugin, FactoryConstructsFromContextAndParameters) {
  ParamValues params;
  params.set("length", std::int64_t{7});
  const auto dataset = dataset_factory<ToyDataset>(DatasetContext{"/cache"}, params);
  EXPECT_EQ(dataset->info().max_len, 7);
  EXPECT_EQ(static_cast<ToyDataset&>(*dataset).cache_dir, "/cache");
}

class TokenCache : public testing::CliTest {
 protected:
  int builds = 0;
  std::string source;

  void SetUp() override {
    CliTest::SetUp();
    source = path("source.txt");
    write_source("abc");
  }
  void write_source(const std::string& text) {
    std::ofstream(source, std::ios::trunc) << text;
  }
  SplitData build_from_source() {
    ++builds;
    std::ifstream in(source);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    const auto n = static_cast<std::int64_t>(text.size());
    SplitData d;
    d.tokens = at::empty({n, 1, 4}, at::kShort);
    for (std::int64_t i = 0; i < n; ++i) d.tokens[i][0].fill_(static_cast<int>(text[i]));
    d.lengths = at::full({n, 1}, 4, at::kLong);
    d.labels = at::arange(n, at::kLong);
    return d;
  }
  SplitData load() {
    return cached_split(path("cache"), key(), [&] { return build_from_source(); });
  }
  TokenCacheKey key() const { return {"toy", Split::val, "version=1", {source}}; }
};

TEST_F(TokenCache, SecondLoadIsMappedAndEqual) {
  const SplitData first = load();
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(first.origin.rfind("built, cached in ", 0), 0u) << first.origin;
  const SplitData second = load();
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(second.origin, "cache hit " + token_cache_path(path("cache"), key()));
  EXPECT_TRUE(at::equal(first.tokens, second.tokens));
  EXPECT_TRUE(at::equal(first.lengths, second.lengths));
  EXPECT_TRUE(at::equal(first.labels, second.labels));
  EXPECT_EQ(second.tokens.scalar_type(), at::kShort);
  // writing into a mapped split never reaches the file (private mapping)
  second.tokens.fill_(0);
  EXPECT_TRUE(at::equal(load().tokens, first.tokens));
}

TEST_F(TokenCache, ChangedSourceOrParametersRebuild) {
  load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a new modification time
  write_source("abd");
  const SplitData changed = load();
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(changed.tokens[2][0][0].item<int>(), 'd');
  // same path, same key: the file is rewritten in place, not duplicated
  EXPECT_EQ(std::distance(fs::directory_iterator(path("cache/tokens")), fs::directory_iterator{}), 1);
  TokenCacheKey other = key();
  other.params = "version=2";
  cached_split(path("cache"), other, [&] { return build_from_source(); });
  EXPECT_EQ(builds, 3);
}

TEST_F(TokenCache, TruncatedOrForeignCacheFileIsRebuilt) {
  load();
  const std::string file = token_cache_path(path("cache"), key());
  fs::resize_file(file, fs::file_size(file) - 3);
  EXPECT_EQ(load().labels[2].item<std::int64_t>(), 2);
  EXPECT_EQ(builds, 2);
  std::ofstream(file, std::ios::trunc) << "not a cache file";
  load();
  EXPECT_EQ(builds, 3);
  EXPECT_EQ(load().origin.rfind("cache hit", 0), 0u);
}

// Bytes changed in place, size kept: every header check passes, only the checksum sees it.
TEST_F(TokenCache, CorruptedCacheFileIsRebuiltNotUsed) {
  write_source(std::string(300, 'a') + "xyz");  // 303 examples: the arrays span several blocks
  const SplitData original = load();
  const std::string file = token_cache_path(path("cache"), key());
  const auto size = fs::file_size(file);
  {
    std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.write("\x7f\x7f", 2);
  }
  ASSERT_EQ(fs::file_size(file), size);
  ::testing::internal::CaptureStderr();
  const SplitData reloaded = load();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(err, "attnlab: token cache " + file + " is corrupt (checksum mismatch); rebuilding it\n");
  EXPECT_EQ(reloaded.origin, "built, cached in " + file);
  EXPECT_TRUE(at::equal(reloaded.tokens, original.tokens));
  EXPECT_TRUE(at::equal(reloaded.lengths, original.lengths));
  EXPECT_TRUE(at::equal(reloaded.labels, original.labels));
  const SplitData hit = load();  // the rewritten file is whole again
  EXPECT_EQ(builds, 2);
  EXPECT_TRUE(at::equal(hit.tokens, original.tokens));
}

TEST_F(TokenCache, MissingSourceIsADataErrorNamingIt) {
  fs::remove(source);
  try {
    load();
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), source + ": no such file");
  }
}

// Issue 13, item 7: a data folder that cannot even be looked at (here a name longer than the
// file system allows, where a filesystem_error used to escape) is a DataError naming it, for
// every dataset plugin that reads a folder: the job process ends a DataError's job at once.
TEST(DatasetPlugins, UnreadableDataFolderIsADataError) {
  const auto& registry = attnlab::testing::built_plugins();
  ASSERT_NE(registry.find(PluginKind::dataset, "listops"), nullptr);
  const std::string folder = (fs::temp_directory_path() / std::string(300, 'a')).string();
  int checked = 0;
  for (const auto& name : registry.names(PluginKind::dataset)) {
    const LoadedPlugin* plugin = registry.find(PluginKind::dataset, name);
    ParamValues params = plugin->defaults();
    if (!params.has("path")) continue;  // generated only
    if (params.has("source")) params.set("source", std::string("files"));
    params.set("path", folder);
    try {
      auto dataset = plugin->make_dataset(DatasetContext{""}, params);
      for (const Split split : {Split::train, Split::val, Split::test}) dataset->load(split);
      ADD_FAILURE() << name << ": no error";
    } catch (const DataError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(folder, 0), 0u) << name << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": not a DataError: " << e.what();
    }
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

TEST_F(TokenCache, NoCacheFolderBuildsEveryTime) {
  cached_split("", key(), [&] { return build_from_source(); });
  cached_split("", key(), [&] { return build_from_source(); });
  EXPECT_EQ(builds, 2);
  EXPECT_FALSE(fs::exists(path("cache")));
}

SplitData valid_split() {
  SplitData d;
  d.tokens = at::zeros({3, 1, 5}, at::kByte);
  d.tokens[1][0][1] = 7;
  d.lengths = at::tensor({5, 2, 1}, at::kLong).unsqueeze(1);
  d.labels = at::tensor({0, 1, 2}, at::kLong);
  return d;
}

std::string check_error(const SplitData& d, const TaskInfo& task) {
  try {
    check_split("toy", Split::train, task, d);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(CheckSplit, AcceptsAValidSplitAndNamesEachProblem) {
  const TaskInfo task{8, 3, 5, 1};
  EXPECT_EQ(check_error(valid_split(), task), "");
  auto d = valid_split();
  d.tokens[1][0][1] = 8;
  EXPECT_EQ(check_error(d, task), "toy train: example 1: token 8 at position 1 outside the vocabulary [0, 8)");
  d = valid_split();
  d.tokens[2][0][3] = 200;  // padding may hold anything
  EXPECT_EQ(check_error(d, task), "");
  d = valid_split();
  d.labels[2] = 3;
  EXPECT_EQ(check_error(d, task), "toy train: example 2: label 3 outside [0, 3)");
  d = valid_split();
  d.lengths[1][0] = 0;
  EXPECT_EQ(check_error(d, task), "toy train: example 1: length 0 outside [1, 5]");
  EXPECT_EQ(check_error(valid_split(), TaskInfo{8, 3, 6, 1}),
            "toy train: tokens have shape [3, 1, 5], expected [3, 1, 6]");
}

// [model] mask = "nonzero_tokens", the LRA authors' mask = ids != 0: a token 0 is padding wherever
// it stands (a black pixel), for attention and pooling alike; past the length it stays padding.
TEST(Model, NonzeroTokensMaskHidesEveryZeroTokenFromAttentionAndPooling) {
  at::manual_seed(0);
  ModelConfig mc = testing::tiny_model();
  mc.dropout = 0;
  const TaskInfo task{8, 3, 5, 1};
  const auto tokens = at::tensor({3, 0, 5, 0, 7, 0, 2, 2, 2, 4}, at::kLong).view({2, 5});
  const auto lengths = at::tensor({3, 5}, at::kLong);
  for (const bool zero_masked : {false, true}) {
    mc.zero_tokens_masked = zero_masked;
    const auto* softmax = testing::built_plugins().find(PluginKind::attention, "softmax");
    EncoderClassifier model(mc, task, [softmax](const AttentionShape& s) { return softmax->make_attention(s, softmax->defaults()); });
    const auto valid = model->embed(tokens, lengths).second;
    const auto want = (zero_masked ? at::tensor({1, 0, 1, 0, 0, 0, 1, 1, 1, 1}) : at::tensor({1, 1, 1, 0, 0, 1, 1, 1, 1, 1}))
                          .to(at::kBool)
                          .view({2, 5});
    EXPECT_TRUE(valid.equal(want)) << zero_masked << ": " << valid;
  }
}

TEST(Model, ManyHotTokensEmbedAsTheSumOfTheirFeatures) {
  at::manual_seed(0);
  ModelConfig mc = testing::tiny_model();
  mc.dropout = 0;
  TaskInfo task{8, 9, 6, 1};
  task.many_hot = 3;
  EncoderClassifier model(mc, task, [](const AttentionShape& s) {
    return testing::built_plugins().find(PluginKind::attention, "softmax")->make_attention(
        s, testing::built_plugins().find(PluginKind::attention, "softmax")->defaults());
  });
  model->eval();
  const auto features = model->named_parameters()["features"];
  ASSERT_EQ(features.sizes(), (at::IntArrayRef{3, 16}));
  // The first layer's input minus the same position's input for token 0 (no feature active) is
  // the token's embedding: token 5 = features 0 and 2, token 6 = features 1 and 2.
  const auto tokens = at::tensor({5, 6, 0, 1, 0, 0}, at::kLong).view({1, 1, 6});
  const auto zeros = at::zeros({1, 6}, at::kLong);
  const auto lengths = at::full({1, 1}, 6, at::kLong);
  const auto x = model->embed(tokens.select(1, 0), lengths.select(1, 0)).first -
                 model->embed(zeros, lengths.select(1, 0)).first;
  EXPECT_TRUE(at::allclose(x[0][0], features[0] + features[2]));
  EXPECT_TRUE(at::allclose(x[0][1], features[1] + features[2]));
  EXPECT_TRUE(at::allclose(x[0][3], features[0]));
  EXPECT_TRUE(at::allclose(x[0][2], at::zeros({16})));
  // a gradient reaches every feature row through the lookup
  model->train();
  model->forward(tokens, lengths).sum().backward();
  EXPECT_GT(features.grad().abs().sum(1).min().item<double>(), 0.0);
  task.vocab_size = 10;
  EXPECT_THROW(EncoderClassifier(mc, task, [](const AttentionShape&) { return std::shared_ptr<AttentionMethod>(); }),
               std::invalid_argument);
}

}  // namespace
}  // namespace attnlab
