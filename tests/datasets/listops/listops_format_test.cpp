// Tests of the ListOps format library (datasets/listops/listops_format.*): the reader of the
// official TSV files, its errors, the writer, the evaluator and the generator. Generated rows are
// checked with an evaluator written here, over the text, independent of the library's.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "attnlab/dataset.hpp"
#include "listops_format.hpp"

namespace fs = std::filesystem;
using namespace attnlab::listops;

namespace {

class ListOps : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("attnlab_listops_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path dir_;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// What the test knows about one Source string, computed from its text alone.
struct Parsed {
  int value = -1;
  std::int64_t tokens = 0;     // tokens other than parentheses
  std::int64_t depth = 0;      // levels: the root is 1, a value inside k operators is at k + 1
  std::int64_t min_args = 1 << 30, max_args = 0;
  std::int64_t parens = 0;     // "(" count
  std::int64_t expected_parens = 0;  // sum over operators of (arguments + 1), LRA's spelling
  bool balanced = true;
};

// Stack evaluator over the text tokens: "[OP" opens a frame, a digit is an argument of the
// innermost frame, "]" closes it and its result becomes an argument of the enclosing frame.
Parsed parse_text(const std::string& source) {
  struct Frame {
    std::string op;
    std::vector<int> args;
  };
  Parsed p;
  std::vector<Frame> stack;
  std::int64_t open_parens = 0;
  auto give = [&](int v) {
    if (stack.empty()) p.value = v;
    else stack.back().args.push_back(v);
  };
  for (const auto& tok : split(source, ' ')) {
    if (tok.empty()) continue;
    if (tok == "(") {
      ++p.parens;
      ++open_parens;
      continue;
    }
    if (tok == ")") {
      if (--open_parens < 0) p.balanced = false;
      continue;
    }
    ++p.tokens;
    if (tok[0] == '[') {
      stack.push_back({tok, {}});
      p.depth = std::max<std::int64_t>(p.depth, static_cast<std::int64_t>(stack.size()));
    } else if (tok == "]") {
      Frame f = stack.back();
      stack.pop_back();
      auto& a = f.args;
      const auto k = static_cast<std::int64_t>(a.size());
      p.min_args = std::min(p.min_args, k);
      p.max_args = std::max(p.max_args, k);
      p.expected_parens += k + 1;
      int r = 0;
      if (f.op == "[MIN") {
        r = 10;
        for (int x : a) r = x < r ? x : r;
      } else if (f.op == "[MAX") {
        r = -1;
        for (int x : a) r = x > r ? x : r;
      } else if (f.op == "[SM") {
        for (int x : a) r += x;
        r %= 10;
      } else if (f.op == "[MED") {
        std::sort(a.begin(), a.end());
        const std::size_t n = a.size();
        // numpy's median is the mean of the two middle values; int() truncates (all >= 0)
        r = n % 2 ? a[n / 2] : static_cast<int>((a[n / 2 - 1] + a[n / 2]) / 2.0);
      } else {
        ADD_FAILURE() << "operator " << f.op;
      }
      give(r);
    } else {
      EXPECT_EQ(tok.size(), 1u) << tok;
      give(tok[0] - '0');
      p.depth = std::max<std::int64_t>(p.depth, static_cast<std::int64_t>(stack.size()) + 1);
    }
  }
  EXPECT_TRUE(stack.empty()) << source;
  if (open_parens != 0) p.balanced = false;
  return p;
}

void expect_data_error(const std::string& path, const std::string& where, const std::string& what_part) {
  try {
    read_tsv(path, 16);
    ADD_FAILURE() << "no DataError for " << path;
  } catch (const attnlab::DataError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(where), std::string::npos) << msg << " (expected '" << where << "')";
    EXPECT_NE(msg.find(what_part), std::string::npos) << msg << " (expected '" << what_part << "')";
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

}  // namespace

TEST(ListOpsVocab, FixedIds) {
  EXPECT_EQ(kVocabSize, 16);
  const char* texts[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "[MIN", "[MAX", "[MED", "[SM", "]"};
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(token_id(texts[i]), i + 1) << texts[i];
    EXPECT_STREQ(token_text(static_cast<std::int16_t>(i + 1)), texts[i]);
  }
  EXPECT_EQ(token_id("("), kParen);
  EXPECT_EQ(token_id(")"), kParen);
  EXPECT_EQ(token_id("[FIRST"), kUnknown);
  EXPECT_EQ(token_id("10"), kUnknown);
  EXPECT_EQ(token_id("MIN"), kUnknown);
}

TEST_F(ListOps, ReadsOfficialFormat) {
  const std::string path = write("basic_train.tsv",
                                 "Source\tTarget\r\n"
                                 "( ( ( [MAX 2 ) ( ( ( [MIN 9 ) 4 ) ] ) ) ] )\t4\r\n"
                                 "( ( ( ( [SM 2 ) 6 ) 5 ) ] )\t3\n"  // "\n" alone is accepted too
                                 "7\t7\r\n"
                                 "( ( ( ( ( [MED 1 ) 2 ) 9 ) 9 ) ] )\t5");  // no final newline
  const SplitTokens s = read_tsv(path, 6);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s.max_len, 6);
  EXPECT_EQ(s.tokens.size(), 4u * 6u);
  const std::vector<std::int16_t> want = {
      12, 3, 11, 10, 5, 15,  // [MAX 2 [MIN 9 4 ] | ] truncated
      14, 3, 7, 6, 15, 0,    // [SM 2 6 5 ] pad
      8, 0, 0, 0, 0, 0,      // 7
      13, 2, 3, 10, 10, 15,  // [MED 1 2 9 9 ]
  };
  EXPECT_EQ(s.tokens, want);
  EXPECT_EQ(s.full_lengths, (std::vector<std::int64_t>{7, 5, 1, 6}));
  EXPECT_EQ(s.lengths, (std::vector<std::int64_t>{6, 5, 1, 6}));
  EXPECT_EQ(s.labels, (std::vector<std::int64_t>{4, 3, 7, 5}));

  // max_len larger than every row: no truncation, padding with 0
  const SplitTokens wide = read_tsv(path, 9);
  EXPECT_EQ(wide.lengths, wide.full_lengths);
  EXPECT_EQ(std::vector<std::int16_t>(wide.tokens.begin(), wide.tokens.begin() + 9),
            (std::vector<std::int16_t>{12, 3, 11, 10, 5, 15, 15, 0, 0}));

  // header only: zero rows
  EXPECT_EQ(read_tsv(write("empty_ok.tsv", "Source\tTarget\n"), 4).size(), 0u);
}

// close_bracket = "drop", the pipeline the Skyformer and Nystromformer authors' data came from: the
// same rows as operators and digits alone, shorter by their `]`s, one per operator.
TEST_F(ListOps, DroppedClosingBracketsLeaveOperatorsAndDigits) {
  const std::string path = write("basic_val.tsv",
                                 "Source\tTarget\n"
                                 "( ( ( [MAX 2 ) ( ( ( [MIN 9 ) 4 ) ] ) ) ] )\t4\n"
                                 "( ( ( ( [SM 2 ) 6 ) 5 ) ] )\t3\n"
                                 "7\t7\n");
  const SplitTokens s = read_tsv(path, 5, CloseBracket::drop);
  EXPECT_EQ(s.tokens, (std::vector<std::int16_t>{12, 3, 11, 10, 5,  // [MAX 2 [MIN 9 4: no ] ]
                                                 14, 3, 7, 6, 0,    // [SM 2 6 5
                                                 8, 0, 0, 0, 0}));  // 7
  EXPECT_EQ(s.full_lengths, (std::vector<std::int64_t>{5, 4, 1}));
  EXPECT_EQ(read_tsv(path, 5, CloseBracket::token).full_lengths, (std::vector<std::int64_t>{7, 5, 1}));
  // a generated tree of 219 tokens: as many `]` as operators, all gone
  GeneratorParams p;
  p.min_length = 200;
  p.max_length = 260;
  TreeGenerator generator(p);
  std::vector<std::int16_t> tree;
  while (tree.size() != 219) tree = generator.next();
  const auto brackets = std::count(tree.begin(), tree.end(), kEnd);
  EXPECT_EQ(brackets, std::count_if(tree.begin(), tree.end(), [](std::int16_t id) { return is_operator_id(id); }));
  const std::string one = write("one.tsv", std::string("Source\tTarget\n") + to_lra_string(tree) + "\t" +
                                               std::to_string(evaluate(tree)) + "\n");
  EXPECT_EQ(read_tsv(one, 300, CloseBracket::drop).full_lengths.front(), 219 - brackets);
}

TEST_F(ListOps, MalformedFilesNameFileAndLine) {
  const std::string good = "( ( ( [MAX 2 ) 9 ) ] )\t9\r\n";
  expect_data_error((dir_ / "missing.tsv").string(), "missing.tsv", "cannot open");
  expect_data_error(write("empty.tsv", ""), ":1:", "header");
  expect_data_error(write("no_header.tsv", good + good), ":1:", "header");
  expect_data_error(write("bad_header.tsv", "Target\tSource\n" + good), ":1:", "header");
  expect_data_error(write("three_cols.tsv", "Source\tTarget\n" + good + "( [MIN 1 2 ] )\t1\t2\n"), ":3:",
                    "found 3");
  expect_data_error(write("one_col.tsv", "Source\tTarget\n" + good + good + "( [MIN 1 2 ] ) 1\n"), ":4:",
                    "found 1");
  expect_data_error(write("blank_line.tsv", "Source\tTarget\n" + good + "\n" + good), ":3:", "columns");
  expect_data_error(write("unknown_token.tsv", "Source\tTarget\n" + good + "( ( ( [FIRST 2 ) 9 ) ] )\t2\n"), ":3:",
                    "[FIRST");
  expect_data_error(write("two_digits.tsv", "Source\tTarget\n( ( ( [MAX 2 ) 19 ) ] )\t9\n"), ":2:", "'19'");
  expect_data_error(write("label_10.tsv", "Source\tTarget\n" + good + good + "( ( ( [MAX 2 ) 9 ) ] )\t10\n"), ":4:",
                    "0..9");
  expect_data_error(write("label_neg.tsv", "Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t-1\n"), ":2:", "0..9");
  expect_data_error(write("label_text.tsv", "Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\tx\n"), ":2:", "0..9");
  expect_data_error(write("label_empty.tsv", "Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t\n"), ":2:", "0..9");
  expect_data_error(write("empty_source.tsv", "Source\tTarget\n" + good + "\t3\n"), ":3:", "empty Source");
  expect_data_error(write("parens_only.tsv", "Source\tTarget\n( ( ) )\t3\n"), ":2:", "empty Source");
}

TEST(ListOpsTree, WriterSpellsLikeLra) {
  // MAX(2, 9, MIN(4, 7), 0)
  const std::vector<std::int16_t> t = {kMax, 3, 10, kMin, 5, 8, kEnd, 1, kEnd};
  EXPECT_EQ(to_lra_string(t), "( ( ( ( ( [MAX 2 ) 9 ) ( ( ( [MIN 4 ) 7 ) ] ) ) 0 ) ] )");
  EXPECT_EQ(evaluate(t), 9);
  EXPECT_EQ(to_lra_string({kMax, 3, kMin, 10, 5, kEnd, kEnd}), "( ( ( [MAX 2 ) ( ( ( [MIN 9 ) 4 ) ] ) ) ] )");
  EXPECT_EQ(to_lra_string({6}), "5");
  std::ostringstream row;
  write_header(row);
  write_row(row, {kSum, 3, 7, 6, kEnd}, 3);
  EXPECT_EQ(row.str(), "Source\tTarget\r\n( ( ( ( [SM 2 ) 6 ) 5 ) ] )\t3\r\n");
  EXPECT_THROW(to_lra_string({kMax, 3}), std::invalid_argument);
  EXPECT_THROW(evaluate({kMax, 3, kEnd, kEnd}), std::invalid_argument);
  EXPECT_THROW(evaluate({3, 4}), std::invalid_argument);
}

TEST(ListOpsTree, Evaluator) {
  auto d = [](int v) { return static_cast<std::int16_t>(kDigit0 + v); };
  EXPECT_EQ(evaluate({kMed, d(3), d(4), kEnd}), 3);              // median 3.5 -> 3
  EXPECT_EQ(evaluate({kMed, d(1), d(2), d(9), d(9), kEnd}), 5);  // (2 + 9) / 2 = 5.5 -> 5
  EXPECT_EQ(evaluate({kMed, d(8), d(0), d(5), kEnd}), 5);
  EXPECT_EQ(evaluate({kSum, d(9), d(9), d(5), kEnd}), 3);
  EXPECT_EQ(evaluate({kMin, d(9), d(4), d(7), kEnd}), 4);
  EXPECT_EQ(evaluate({kMax, d(1), kMed, d(2), d(6), kEnd, kEnd}), 4);
}

TEST_F(ListOps, GeneratedRowsAreValid) {
  GenerateSpec spec;
  spec.train_size = 300;
  spec.val_size = 20;
  spec.test_size = 20;
  spec.gen.max_depth = 6;
  spec.gen.max_args = 5;
  spec.gen.min_length = 20;
  spec.gen.max_length = 200;
  spec.gen.seed = 7;
  generate_files(dir_.string(), spec);

  std::int64_t rows = 0;
  for (int s = 0; s < 3; ++s) {
    const fs::path file = dir_ / kSplitFiles[s];
    const std::string text = slurp(file);
    auto lines = split(text, '\n');
    ASSERT_EQ(lines.back(), "");  // ends with a newline
    lines.pop_back();
    ASSERT_EQ(lines.at(0), "Source\tTarget\r");
    const std::int64_t want_rows = s == 0 ? spec.train_size : s == 1 ? spec.val_size : spec.test_size;
    ASSERT_EQ(static_cast<std::int64_t>(lines.size()) - 1, want_rows);
    const SplitTokens read = read_tsv(file.string(), 256);
    ASSERT_EQ(static_cast<std::int64_t>(read.size()), want_rows);
    for (std::size_t i = 1; i < lines.size(); ++i) {
      std::string line = lines[i];
      ASSERT_EQ(line.back(), '\r');
      line.pop_back();
      const auto cols = split(line, '\t');
      ASSERT_EQ(cols.size(), 2u) << line;
      const Parsed p = parse_text(cols[0]);
      EXPECT_EQ(std::to_string(p.value), cols[1]) << cols[0];
      EXPECT_GT(p.tokens, spec.gen.min_length);
      EXPECT_LT(p.tokens, spec.gen.max_length);
      EXPECT_LE(p.depth, spec.gen.max_depth);
      EXPECT_GE(p.min_args, 2);
      EXPECT_LE(p.max_args, spec.gen.max_args);
      EXPECT_TRUE(p.balanced) << cols[0];
      EXPECT_EQ(p.parens, p.expected_parens) << cols[0];
      EXPECT_EQ(read.full_lengths[i - 1], p.tokens);
      EXPECT_EQ(read.labels[i - 1], p.value);
      ++rows;
    }
  }
  EXPECT_EQ(rows, 340);
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(ListOpsGenerator, LraDefaultsRespectBounds) {
  GeneratorParams p;  // LRA: depth 10, 2..10 arguments, 500 < length < 2000, VALUE_P 0.25
  TreeGenerator gen(p);
  std::int64_t deepest = 0;
  for (int i = 0; i < 30; ++i) {
    const auto& t = gen.next();
    const std::string text = to_lra_string(t);
    const Parsed parsed = parse_text(text);
    EXPECT_GT(parsed.tokens, 500);
    EXPECT_LT(parsed.tokens, 2000);
    EXPECT_EQ(parsed.tokens, static_cast<std::int64_t>(t.size()));
    EXPECT_LE(parsed.depth, 10);
    EXPECT_LE(parsed.max_args, 10);
    EXPECT_EQ(parsed.value, evaluate(t));
    deepest = std::max(deepest, parsed.depth);
  }
  EXPECT_GE(deepest, 5);
}

TEST_F(ListOps, SameSeedSameBytesOtherSeedOtherBytes) {
  GenerateSpec spec;
  spec.train_size = 50;
  spec.val_size = 10;
  spec.test_size = 10;
  spec.gen.max_depth = 5;
  spec.gen.max_args = 4;
  spec.gen.min_length = 10;
  spec.gen.max_length = 100;
  spec.gen.seed = 123;
  GenerateSpec other = spec;
  other.gen.seed = 124;
  generate_files((dir_ / "a").string(), spec);
  generate_files((dir_ / "b").string(), spec);
  generate_files((dir_ / "c").string(), other);
  for (const char* name : kSplitFiles) {
    const std::string a = slurp(dir_ / "a" / name), b = slurp(dir_ / "b" / name), c = slurp(dir_ / "c" / name);
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, b) << name;
    EXPECT_NE(a, c) << name;
  }
  EXPECT_EQ(spec_hash(spec), spec_hash(GenerateSpec(spec)));
  EXPECT_NE(spec_hash(spec), spec_hash(other));

  // No tree appears twice across the splits (LRA keeps a set).
  std::vector<std::string> all;
  for (const char* name : kSplitFiles) {
    auto lines = split(slurp(dir_ / "a" / name), '\n');
    all.insert(all.end(), lines.begin() + 1, lines.end() - 1);
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
}

TEST(ListOpsGenerator, PinnedOutput) {
  // std::mt19937_64 and our mappings are exact, so these trees are the same on every machine.
  GeneratorParams p;
  p.max_depth = 4;
  p.max_args = 3;
  p.min_length = 5;
  p.max_length = 30;
  p.seed = 42;
  TreeGenerator gen(p);
  const std::string first = to_lra_string(gen.next());
  const std::string second = to_lra_string(gen.next());
  EXPECT_EQ(first,
            "( ( ( ( [MAX ( ( ( ( [MED ( ( ( ( [MED 0 ) 3 ) 2 ) ] ) ) ( ( ( ( [MIN 3 ) 2 ) 8 ) ] ) ) 6 ) ] ) ) 7 ) 4 ) ] )");
  EXPECT_EQ(second, "( ( ( ( [MAX ( ( ( ( [MED 5 ) ( ( ( [MED 7 ) 9 ) ] ) ) 2 ) ] ) ) 5 ) 4 ) ] )");
}

TEST_F(ListOps, EnsureGeneratedReusesCompleteFiles) {
  GenerateSpec spec;
  spec.train_size = 5;
  spec.val_size = 2;
  spec.test_size = 2;
  spec.gen.max_depth = 4;
  spec.gen.max_args = 3;
  spec.gen.min_length = 5;
  spec.gen.max_length = 40;
  const std::string dir = (dir_ / ("listops-" + spec_hash(spec))).string();
  ensure_generated(dir, spec);
  const std::string val = slurp(fs::path(dir) / "basic_val.tsv");
  // complete: left alone
  write((fs::path("listops-" + spec_hash(spec)) / "basic_train.tsv").string(), "Source\tTarget\n1\t1\n");
  ensure_generated(dir, spec);
  EXPECT_EQ(read_tsv((fs::path(dir) / "basic_train.tsv").string(), 8).size(), 1u);
  // incomplete (a file missing): generated again, the same bytes
  fs::remove(fs::path(dir) / "basic_val.tsv");
  ensure_generated(dir, spec);
  EXPECT_EQ(slurp(fs::path(dir) / "basic_val.tsv"), val);
  EXPECT_EQ(read_tsv((fs::path(dir) / "basic_train.tsv").string(), 8).size(), 5u);
}

TEST(ListOpsGenerator, ImpossibleParametersAreRefused) {
  GeneratorParams p;
  p.max_depth = 2;
  p.max_args = 3;  // longest tree: 2 + 3 = 5 tokens
  p.min_length = 5;
  EXPECT_THROW(check_generator_params(p), std::invalid_argument);
  p.min_length = 4;
  EXPECT_NO_THROW(check_generator_params(p));
  p.max_length = 5;
  EXPECT_THROW(check_generator_params(p), std::invalid_argument);  // nothing strictly between 4 and 5
  GeneratorParams q;
  q.max_args = 1;
  EXPECT_THROW(TreeGenerator{q}, std::invalid_argument);
}

TEST_F(ListOps, TooFewDistinctTreesIsAnError) {
  GenerateSpec spec;  // only the ten single digits have 0 < length < 2
  spec.train_size = 11;
  spec.val_size = 1;
  spec.test_size = 1;
  spec.gen.min_length = 0;
  spec.gen.max_length = 2;
  EXPECT_THROW(generate_files(dir_.string(), spec), attnlab::DataError);
  for (const auto& e : fs::directory_iterator(dir_)) ADD_FAILURE() << "left behind: " << e.path();
}
