// Tests of the retrieval dataset (datasets/retrieval): the label column, the reader of the AAN TSV
// files and its errors, the plugin's two-input splits through the token cache, and a two-tower
// training run end to end through the attnlab binary on tiny files written by the test.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "attnlab/dataset.hpp"
#include "retrieval_format.hpp"
#include "test_support.hpp"

namespace {
namespace fs = std::filesystem;
using attnlab::DataError;
using attnlab::Split;
using attnlab::SplitData;
using attnlab::testing::query_one;
using namespace attnlab::retrieval;

struct Retrieval : attnlab::testing::CliTest {
  std::string write(const std::string& name, const std::string& text) const {
    const std::string file = path(name);
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

  std::shared_ptr<attnlab::Dataset> open(const std::string& data_dir, std::int64_t max_len, std::int64_t pad_to = 0) const {
    const auto* plugin = attnlab::testing::built_plugins().find(attnlab::PluginKind::dataset, "retrieval");
    if (!plugin) throw std::runtime_error("data_retrieval plugin not found");
    attnlab::ParamValues params = plugin->defaults();
    params.set("path", data_dir);
    params.set("max_len", max_len);
    params.set("pad_to", pad_to);
    return plugin->make_dataset(attnlab::DatasetContext{path("cache")}, params);
  }

  // `n` pairs whose label is learnable: 1 iff both texts start with the same letter (a..d). The
  // label is drawn first (half positive), then the second text's first letter to match it.
  static std::string pairs(int n, std::uint32_t seed) {
    std::string out;
    std::uint32_t x = seed * 2654435761u + 12345u;
    auto next = [&x] { return x = x * 1664525u + 1013904223u, x >> 8; };
    for (int i = 0; i < n; ++i) {
      const int label = static_cast<int>(next() % 2);
      const char a = static_cast<char>('a' + next() % 4);
      const char b = label ? a : static_cast<char>('a' + (a - 'a' + 1 + next() % 3) % 4);
      std::string t1(1, a), t2(1, b);
      for (int k = 0; k < 12; ++k) t1 += static_cast<char>('a' + next() % 4), t2 += static_cast<char>('a' + next() % 4);
      out += (label ? "1.0" : "0.0") + std::string("\tdoc") + std::to_string(i) + "\tdoc" + std::to_string(i + 1000) + "\t" +
             t1 + "\t" + t2 + "\n";
    }
    return out;
  }
};

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

TEST(RetrievalLabel, ZeroOrOneWrittenAsIntegerOrFloat) {
  for (const char* one : {"1", "1.0", "1.00"}) EXPECT_EQ(parse_label(one), 1) << one;
  for (const char* zero : {"0", "0.0", "0.000"}) EXPECT_EQ(parse_label(zero), 0) << zero;
  for (const char* bad : {"", "2", "0.5", "1.", "-1", "1e0", " 1", "10", "true", ".0"}) EXPECT_EQ(parse_label(bad), -1) << bad;
}

TEST_F(Retrieval, ReaderTokenisesBothTextsTruncatesAndPads) {
  const auto file = write("pairs.tsv",
                          "1.0\tA1\tB1\tabc\tWXYZ12\r\n"
                          "0\tA2\tB2\tq\t\xff\n"
                          "0.0\tA3\tB3\tlast line\tno newline");
  const ByteRows rows = read_pairs(file, {4, 4});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows.inputs, 2);
  EXPECT_EQ(rows.labels, (std::vector<std::int64_t>{1, 0, 0}));
  EXPECT_EQ(rows.lengths, (std::vector<std::int64_t>{3, 4, 1, 1, 4, 4}));
  EXPECT_EQ(rows.tokens, (std::vector<std::int16_t>{'a' + 1, 'b' + 1, 'c' + 1, 0,  'W' + 1, 'X' + 1, 'Y' + 1, 'Z' + 1,  //
                                                    'q' + 1, 0,       0,       0,  256,     0,       0,       0,        //
                                                    'l' + 1, 'a' + 1, 's' + 1, 't' + 1, 'n' + 1, 'o' + 1, ' ' + 1, 'n' + 1}));
}

TEST_F(Retrieval, MalformedLinesGiveOneLineErrorsNamingFileAndLine) {
  const std::string good = "1\ta\tb\tx\ty\n";
  auto error = [&](const std::string& text) {
    const auto file = write("bad.tsv", text);
    return message([&] { read_pairs(file, {8, 8}); });
  };
  const std::string f = path("bad.tsv");
  EXPECT_EQ(error(good + "1\ta\tb\tx\n"), f + ":2: expected 5 tab-separated columns (label, id1, id2, text1, text2), found 4");
  EXPECT_EQ(error(good + good + "0\ta\tb\tx\ty\tz\r\n"),
            f + ":3: expected 5 tab-separated columns (label, id1, id2, text1, text2), found 6");
  EXPECT_EQ(error(good + "\n" + good), f + ":2: expected 5 tab-separated columns (label, id1, id2, text1, text2), found 1");
  EXPECT_EQ(error("2\ta\tb\tx\ty\n"), f + ":1: label '2' is not 0 or 1");
  EXPECT_EQ(error(good + "0.5\ta\tb\tx\ty\n"), f + ":2: label '0.5' is not 0 or 1");
  EXPECT_EQ(error(good + good + "0\ta\tb\tx\t\n"), f + ":3: empty text2 (column 5)");
  EXPECT_EQ(error("0\ta\tb\t\ty\n"), f + ":1: empty text1 (column 4)");
  EXPECT_EQ(error(""), f + ": no pairs (empty file)");
  EXPECT_EQ(message([&] { read_pairs(path("absent.tsv"), {8, 8}); }), path("absent.tsv") + ": cannot open file (No such file or directory)");
}

TEST_F(Retrieval, PluginLoadsTwoInputSplitsThroughTheCache) {
  const std::string data = path("aan");
  fs::create_directories(data);
  std::ofstream(data + "/new_aan_pairs.train.tsv") << "1\tp\tq\thello\tworld, again\n0\tr\ts\tab\tc\n";
  std::ofstream(data + "/new_aan_pairs.eval.tsv") << "0.0\tp\tq\tx\ty\n";

  auto ds = open(data, 8);
  const attnlab::TaskInfo t = ds->info();
  EXPECT_EQ(t.vocab_size, 257);
  EXPECT_EQ(t.num_classes, 2);
  EXPECT_EQ(t.inputs, 2);
  EXPECT_EQ(t.max_len, 8);

  const SplitData train = attnlab::load_checked("retrieval", *ds, Split::train);
  EXPECT_EQ(train.tokens.scalar_type(), at::kShort);
  EXPECT_EQ(train.tokens.sizes(), (at::IntArrayRef{2, 2, 8}));
  EXPECT_TRUE(train.lengths.equal(at::tensor({5, 8, 2, 1}, at::kLong).view({2, 2})));
  EXPECT_TRUE(train.labels.equal(at::tensor({1, 0}, at::kLong)));
  EXPECT_EQ(train.tokens[0][1][7].item<int>(), 'a' + 1);  // "world, a|gain"
  EXPECT_EQ(train.tokens[1][1][0].item<int>(), 'c' + 1);
  EXPECT_EQ(train.tokens[1][1][1].item<int>(), 0);
  EXPECT_EQ(train.origin.rfind("built, cached in " + path("cache") + "/tokens/retrieval-train-", 0), 0u) << train.origin;

  const SplitData again = open(data, 8)->load(Split::train);
  EXPECT_EQ(again.origin.rfind("cache hit ", 0), 0u) << again.origin;
  EXPECT_TRUE(again.tokens.equal(train.tokens));
  EXPECT_EQ(ds->load(Split::val).size(), 1);
  EXPECT_EQ(message([&] { ds->load(Split::test); }), data + "/new_aan_pairs.test.tsv: no such file");

  try {
    open("", 8);
    ADD_FAILURE() << "an empty path was accepted";
  } catch (const attnlab::ParamError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("path: ", 0), 0u) << e.what();
  }
  EXPECT_EQ(message([&] { open(path("nowhere"), 8); }), path("nowhere") + ": no such folder (retrieval path)");
}

// The LRA authors' rows: documents cut at max_len, both padded to pad_to positions.
TEST_F(Retrieval, PluginPadsBothDocumentsToPadTo) {
  const std::string data = path("aan");
  fs::create_directories(data);
  std::ofstream(data + "/new_aan_pairs.train.tsv") << "1\tp\tq\thello\tworld, again\n";
  auto ds = open(data, 8, 12);
  EXPECT_EQ(ds->info().max_len, 12);
  const SplitData train = attnlab::load_checked("retrieval", *ds, Split::train);
  EXPECT_EQ(train.tokens.sizes(), (at::IntArrayRef{1, 2, 12}));
  EXPECT_TRUE(train.lengths.equal(at::tensor({5, 8}, at::kLong).view({1, 2})));
  EXPECT_EQ(train.tokens.slice(2, 8).count_nonzero().item<std::int64_t>(), 0);
  EXPECT_TRUE(open(data, 8)->load(Split::train).tokens.equal(train.tokens.slice(2, 0, 8)));
  try {
    open(data, 8, 7);
    ADD_FAILURE() << "pad_to below max_len was accepted";
  } catch (const attnlab::ParamError& e) {
    EXPECT_EQ(std::string(e.what()), "pad_to: 7 is less than max_len 8");
  }
}

TEST_F(Retrieval, TwoTowerRunThroughTheCliFinishesWithATestAccuracy) {
  const std::string data = path("aan");
  fs::create_directories(data);
  std::ofstream(data + "/new_aan_pairs.train.tsv") << pairs(64, 1);
  std::ofstream(data + "/new_aan_pairs.eval.tsv") << pairs(16, 2);
  std::ofstream(data + "/new_aan_pairs.test.tsv") << pairs(16, 3);
  const std::string file = path("aan.toml");
  std::ofstream(file) << "[experiment]\nname = \"aan-tiny\"\nseeds = [1]\n"
                      << "[model]\nlayers = 1\ndim = 16\nffn_dim = 32\nheads = 2\n"
                      << "[train]\nsteps = 30\nbatch_size = 8\nlr = 0.003\nwarmup = 2\neval_every = 10\nlog_every = 5\n"
                      << "[methods.softmax]\n"
                      << "[datasets.retrieval]\npath = \"" << data << "\"\nmax_len = 16\n";
  std::string out;
  ASSERT_EQ(attnlab("run " + file + " --db " + path("r.db") + " --cache-dir " + path("cache") + " --threads 1", out), 0) << out;
  const std::string db = path("r.db");
  EXPECT_EQ(query_one(db, "SELECT status FROM runs WHERE id = 1"), "done") << out;
  EXPECT_EQ(query_one(db, "SELECT dataset FROM jobs WHERE id = 1"), "retrieval");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM results WHERE run_id = 1 AND name = 'test_acc' AND value BETWEEN 0 AND 1"), "1");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM results WHERE run_id = 1 AND name = 'steps_done' AND value = 30"), "1");
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM run_plugins WHERE run_id = 1 AND kind = 'dataset' AND name = 'retrieval'"), "1");
}

}  // namespace
