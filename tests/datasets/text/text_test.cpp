// Tests of the text dataset (datasets/text): the byte tokeniser, the aclImdb listing order, the
// review reader and its errors, and the plugin's splits (val = test, seeded holdout) through the
// token cache. Every fixture is a small aclImdb-shaped folder written by the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "attnlab/data_util.hpp"
#include "attnlab/dataset.hpp"
#include "test_support.hpp"
#include "text_format.hpp"

namespace {
namespace fs = std::filesystem;
using namespace attnlab;
using namespace attnlab::text;

struct Text : attnlab::testing::CliTest {
  std::string root() const { return path("aclImdb"); }

  // Writes <root>/<split>/<label>/<name>.
  std::string review(const std::string& split, const std::string& label, const std::string& name, const std::string& body) {
    const fs::path folder = fs::path(root()) / split / label;
    fs::create_directories(folder);
    const std::string file = (folder / name).string();
    std::ofstream(file, std::ios::binary) << body;
    return file;
  }

  // A layout with `n` reviews per label and split, each with a distinct text.
  void corpus(int n) {
    for (const char* split : {"train", "test"})
      for (const char* label : {"neg", "pos"})
        for (int i = 0; i < n; ++i)
          review(split, label, std::to_string(i) + "_" + std::to_string(i % 10 + 1) + ".txt",
                 std::string(split) + " " + label + " review " + std::to_string(i));
  }

  std::shared_ptr<Dataset> open(const std::string& cache, std::vector<std::pair<std::string, ParamValue>> set = {}) {
    const LoadedPlugin* plugin = attnlab::testing::built_plugins().find(PluginKind::dataset, "text");
    if (!plugin) throw std::runtime_error("data_text plugin not found");
    ParamValues params = plugin->defaults();
    params.set("path", root());
    for (auto& [k, v] : set) params.set(k, v);
    return plugin->make_dataset(DatasetContext{cache}, params);
  }
};

// The bytes of example i (input 0) back from its tokens.
std::string decode(const SplitData& d, std::int64_t i) {
  const auto tokens = d.tokens.contiguous();
  const auto* row = tokens.data_ptr<std::int16_t>() + i * d.tokens.size(2);
  std::string s;
  for (std::int64_t p = 0; p < d.lengths[i][0].item<std::int64_t>(); ++p) s += static_cast<char>(row[p] - 1);
  return s;
}

std::vector<std::string> texts(const SplitData& d) {
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < d.size(); ++i) out.push_back(decode(d, i));
  return out;
}

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

TEST(TextBytes, TokenIsBytePlusOneThenPadding) {
  std::vector<std::int16_t> dst(6, 77);
  EXPECT_EQ(encode_bytes(std::string_view("Ab\xff\0", 4), 6, dst.data()), 4);
  EXPECT_EQ(dst, (std::vector<std::int16_t>{'A' + 1, 'b' + 1, 256, 1, 0, 0}));
  EXPECT_EQ(encode_bytes("Hello", 2, dst.data()), 2);  // truncated, nothing written past max_len
  EXPECT_EQ(dst, (std::vector<std::int16_t>{'H' + 1, 'e' + 1, 256, 1, 0, 0}));
}

TEST(TextBytes, ReviewNamesSortByIdThenName) {
  std::vector<std::string> names = {"10_2.txt", "abc.txt", "9_1.txt", "100_7.txt", "2_3.txt", "2_10.txt", "_5.txt"};
  std::sort(names.begin(), names.end(), review_name_less);
  EXPECT_EQ(names, (std::vector<std::string>{"2_10.txt", "2_3.txt", "9_1.txt", "10_2.txt", "100_7.txt", "_5.txt", "abc.txt"}));
}

TEST_F(Text, ListingIsNegThenPosInIdOrderAndSkipsOtherFiles) {
  for (const char* name : {"10_2.txt", "9_1.txt", "100_4.txt"}) review("train", "neg", name, "x");
  for (const char* name : {"3_7.txt", "1_10.txt"}) review("train", "pos", name, "x");
  review("train", "pos", ".5_9.txt", "hidden");
  review("train", "pos", "notes.md", "not a review");
  fs::create_directories(fs::path(root()) / "train" / "pos" / "7_8.txt");  // a folder, not a review
  review("train", "unsup", "0_0.txt", "unlabelled");
  std::ofstream(fs::path(root()) / "train" / "urls_pos.txt") << "http://x\n";
  std::ofstream(fs::path(root()) / "train" / "labeledBow.feat") << "0 0:1\n";

  const auto reviews = list_reviews(root(), "train");
  std::vector<std::string> got;
  for (const auto& r : reviews) got.push_back(fs::path(r.path).parent_path().filename().string() + "/" +
                                              fs::path(r.path).filename().string() + ":" + std::to_string(r.label));
  EXPECT_EQ(got, (std::vector<std::string>{"neg/9_1.txt:0", "neg/10_2.txt:0", "neg/100_4.txt:0", "pos/1_10.txt:1",
                                           "pos/3_7.txt:1"}));
}

TEST_F(Text, ReaderTokenisesTruncatesAndPads) {
  const auto a = review("train", "neg", "1_1.txt", "Bad.");
  const auto b = review("train", "pos", "1_9.txt", "Great film\r\n\xc3\xa9");  // bytes as they are, UTF-8 included
  const ByteRows rows = read_reviews({{a, 0}, {b, 1}}, {8, 8});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows.inputs, 1);
  EXPECT_EQ(rows.lengths, (std::vector<std::int64_t>{4, 8}));
  EXPECT_EQ(rows.labels, (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(rows.tokens, (std::vector<std::int16_t>{'B' + 1, 'a' + 1, 'd' + 1, '.' + 1, 0, 0, 0, 0,  //
                                                    'G' + 1, 'r' + 1, 'e' + 1, 'a' + 1, 't' + 1, ' ' + 1, 'f' + 1, 'i' + 1}));
  const ByteRows whole = read_reviews({{b, 1}}, {20, 20});
  EXPECT_EQ(whole.lengths, (std::vector<std::int64_t>{14}));
  EXPECT_EQ(whole.tokens[10], '\r' + 1);
  EXPECT_EQ(whole.tokens[12], 0xc3 + 1);
  EXPECT_EQ(whole.tokens[13], 0xa9 + 1);
  EXPECT_EQ(whole.tokens[14], 0);
}

// The LRA authors cut at 4,000 bytes and pad to 4,096 positions: rows wider than the cut.
TEST_F(Text, ReaderCutsAtMaxLenAndPadsToTheRowWidth) {
  const auto a = review("train", "neg", "1_1.txt", "Bad.");
  const auto b = review("train", "pos", "1_9.txt", "Great film");
  const ByteRows rows = read_reviews({{a, 0}, {b, 1}}, {6, 8});
  EXPECT_EQ(rows.max_len, 8);
  EXPECT_EQ(rows.lengths, (std::vector<std::int64_t>{4, 6}));
  EXPECT_EQ(rows.tokens, (std::vector<std::int16_t>{'B' + 1, 'a' + 1, 'd' + 1, '.' + 1, 0, 0, 0, 0,  //
                                                    'G' + 1, 'r' + 1, 'e' + 1, 'a' + 1, 't' + 1, ' ' + 1, 0, 0}));
  EXPECT_THROW(read_reviews({{a, 0}}, {8, 6}), std::invalid_argument);
}

TEST_F(Text, PluginPadsToPadToAndRefusesOneBelowMaxLen) {
  corpus(1);
  auto ds = open(path("cache"), {{"max_len", std::int64_t{6}}, {"pad_to", std::int64_t{16}}});
  EXPECT_EQ(ds->info().max_len, 16);
  const SplitData train = load_checked("text", *ds, Split::train);
  EXPECT_EQ(train.tokens.size(2), 16);
  EXPECT_LE(train.lengths.max().item<std::int64_t>(), 6);
  EXPECT_EQ(train.tokens.slice(2, 6).count_nonzero().item<std::int64_t>(), 0);
  // a different width is a different cache entry, never the 6-wide rows of another run
  const SplitData narrow = load_checked("text", *open(path("cache"), {{"max_len", std::int64_t{6}}}), Split::train);
  EXPECT_EQ(narrow.tokens.size(2), 6);
  EXPECT_TRUE(narrow.tokens.equal(train.tokens.slice(2, 0, 6)));
  try {
    open(path("cache"), {{"max_len", std::int64_t{6}}, {"pad_to", std::int64_t{5}}});
    ADD_FAILURE() << "pad_to below max_len was accepted";
  } catch (const ParamError& e) {
    EXPECT_EQ(std::string(e.what()), "pad_to: 5 is less than max_len 6");
  }
}

TEST_F(Text, MalformedLayoutsAndFilesGiveOneLineErrors) {
  review("train", "neg", "1_1.txt", "fine");
  EXPECT_EQ(message([&] { list_reviews(root(), "train"); }),
            root() + "/train/pos: no such folder (expected the aclImdb layout with train/neg, train/pos, test/neg, test/pos)");
  fs::create_directories(fs::path(root()) / "train" / "pos");
  EXPECT_EQ(message([&] { list_reviews(root(), "train"); }), root() + "/train/pos: no review files (*.txt)");

  const auto empty = review("train", "pos", "4_8.txt", "");
  EXPECT_EQ(message([&] { read_reviews(list_reviews(root(), "train"), {16, 16}); }), empty + ": empty review file");
  fs::remove(empty);

  const std::string dangling = root() + "/train/pos/5_9.txt";
  fs::create_symlink(root() + "/nowhere.txt", dangling);
  EXPECT_EQ(message([&] { read_reviews(list_reviews(root(), "train"), {16, 16}); }),
            dangling + ": cannot open file (No such file or directory)");
}

TEST_F(Text, PluginDeclaresItsParametersAndTask) {
  const LoadedPlugin* plugin = attnlab::testing::built_plugins().find(PluginKind::dataset, "text");
  ASSERT_NE(plugin, nullptr);
  const ParamValues d = plugin->defaults();
  EXPECT_EQ(d.integer("max_len"), 4000);
  EXPECT_EQ(d.integer("pad_to"), 0);
  EXPECT_EQ(d.string("val"), "test");
  EXPECT_EQ(d.integer("val_size"), 2500);
  EXPECT_EQ(d.integer("split_seed"), 0);
  EXPECT_EQ(d.string("path"), "");

  try {
    plugin->make_dataset(DatasetContext{path("cache")}, d);
    ADD_FAILURE() << "an empty path was accepted";
  } catch (const ParamError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("path: ", 0), 0u) << e.what();
  }
  EXPECT_EQ(message([&] { open(path("cache")); }), root() + ": no such folder (text path)");

  corpus(1);
  const TaskInfo t = open(path("cache"), {{"max_len", std::int64_t{1000}}})->info();
  EXPECT_EQ(t.vocab_size, 257);
  EXPECT_EQ(t.num_classes, 2);
  EXPECT_EQ(t.max_len, 1000);
  EXPECT_EQ(t.inputs, 1);
}

TEST_F(Text, PluginSplitsWithValEqualToTestGoThroughTheCache) {
  corpus(3);
  review("test", "pos", "9_10.txt", std::string(40, 'z'));  // longer than max_len
  auto ds = open(path("cache"), {{"max_len", std::int64_t{24}}});
  const SplitData train = load_checked("text", *ds, Split::train);
  const SplitData val = load_checked("text", *ds, Split::val);
  const SplitData test = load_checked("text", *ds, Split::test);

  EXPECT_EQ(train.tokens.scalar_type(), at::kShort);
  EXPECT_EQ(train.tokens.sizes(), (at::IntArrayRef{6, 1, 24}));
  EXPECT_EQ(texts(train), (std::vector<std::string>{"train neg review 0", "train neg review 1", "train neg review 2",
                                                    "train pos review 0", "train pos review 1", "train pos review 2"}));
  EXPECT_EQ(train.labels.sizes(), (at::IntArrayRef{6}));
  EXPECT_TRUE(train.labels.equal(at::tensor({0, 0, 0, 1, 1, 1}, at::kLong)));
  EXPECT_EQ(train.tokens[0][0][0].item<int>(), 't' + 1);
  EXPECT_EQ(train.tokens[0][0][18].item<int>(), 0);  // "train neg review 0" is 18 bytes

  EXPECT_EQ(test.size(), 7);
  EXPECT_EQ(test.lengths[6][0].item<std::int64_t>(), 24);
  EXPECT_EQ(decode(test, 6), std::string(24, 'z'));
  EXPECT_TRUE(val.tokens.equal(test.tokens));
  EXPECT_TRUE(val.labels.equal(test.labels));
  EXPECT_EQ(train.origin.rfind("built, cached in " + path("cache") + "/tokens/text-train-", 0), 0u) << train.origin;
  EXPECT_EQ(val.origin.rfind("built, cached in " + path("cache") + "/tokens/text-test-", 0), 0u) << val.origin;
  EXPECT_EQ(test.origin.rfind("cache hit " + path("cache") + "/tokens/text-test-", 0), 0u) << test.origin;

  // a second dataset object maps the cached files; an edited review is read again
  auto again = open(path("cache"), {{"max_len", std::int64_t{24}}});
  const SplitData cached = again->load(Split::train);
  EXPECT_EQ(cached.origin.rfind("cache hit ", 0), 0u) << cached.origin;
  EXPECT_TRUE(cached.tokens.equal(train.tokens));
  review("train", "neg", "1_2.txt", "edited");
  const SplitData edited = again->load(Split::train);
  EXPECT_EQ(edited.origin.rfind("built, cached in ", 0), 0u) << edited.origin;
  EXPECT_EQ(decode(edited, 1), "edited");

  // without a cache folder the files are read directly
  EXPECT_EQ(open("", {{"max_len", std::int64_t{24}}})->load(Split::test).origin, "built (no cache folder)");
}

TEST_F(Text, HoldoutIsSeededDisjointAndTheRequestedSize) {
  corpus(5);  // 10 training reviews
  auto holdout = [&](std::int64_t seed, const std::string& cache) {
    return open(cache, {{"val", std::string("holdout")}, {"val_size", std::int64_t{3}}, {"split_seed", seed}, {"max_len", std::int64_t{32}}});
  };
  auto ds = holdout(0, path("cache"));
  const auto train = texts(load_checked("text", *ds, Split::train));
  const auto val = texts(load_checked("text", *ds, Split::val));
  const auto test = texts(load_checked("text", *ds, Split::test));
  ASSERT_EQ(train.size(), 7u);
  ASSERT_EQ(val.size(), 3u);
  EXPECT_EQ(test.size(), 10u);

  // exactly the reviews seeded_holdout picks, in file order
  const auto all = texts(open("", {{"max_len", std::int64_t{32}}})->load(Split::train));
  const IndexSplit parts = seeded_holdout(10, 3, 0);
  std::vector<std::string> want_train, want_val;
  for (auto i : parts.first) want_train.push_back(all[i]);
  for (auto i : parts.second) want_val.push_back(all[i]);
  EXPECT_EQ(train, want_train);
  EXPECT_EQ(val, want_val);
  std::set<std::string> both(train.begin(), train.end());
  both.insert(val.begin(), val.end());
  EXPECT_EQ(both.size(), 10u);  // disjoint and covering train

  // same seed, fresh cache: the same split; another seed: another one
  EXPECT_EQ(texts(holdout(0, path("cache2"))->load(Split::val)), val);
  EXPECT_NE(texts(holdout(1, path("cache"))->load(Split::val)), val);

  try {
    open(path("cache"), {{"val", std::string("holdout")}, {"val_size", std::int64_t{10}}})->load(Split::train);
    ADD_FAILURE() << "a holdout of every training review was accepted";
  } catch (const ParamError& e) {
    EXPECT_EQ(std::string(e.what()), "val_size: 10 held out of 10 training reviews leaves none to train on");
  }
}

}  // namespace
