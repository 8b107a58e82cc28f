#include "listops_format.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <unordered_set>

#include <unistd.h>

#include "attnlab/data_util.hpp"  // fnv1a64, hex64
#include "attnlab/dataset.hpp"    // attnlab::DataError

namespace attnlab::listops {
namespace fs = std::filesystem;

// ---- Vocabulary ---------------------------------------------------------------------------------

const char* token_text(std::int16_t id) {
  static const char* const kText[kVocabSize] = {"<pad>", "0", "1", "2", "3", "4", "5", "6", "7", "8",
                                                "9",     "[MIN", "[MAX", "[MED", "[SM", "]"};
  return id >= 0 && id < kVocabSize ? kText[id] : nullptr;
}

int token_id(std::string_view t) {
  if (t.size() == 1) {
    const char c = t[0];
    if (c >= '0' && c <= '9') return kDigit0 + (c - '0');
    if (c == '(' || c == ')') return kParen;
    if (c == ']') return kEnd;
    return kUnknown;
  }
  if (t == "[MIN") return kMin;
  if (t == "[MAX") return kMax;
  if (t == "[MED") return kMed;
  if (t == "[SM") return kSum;
  return kUnknown;
}

// ---- Reader -------------------------------------------------------------------------------------
namespace {

[[noreturn]] void fail(const std::string& path, std::int64_t line, const std::string& what) {
  throw DataError(path + ":" + std::to_string(line) + ": " + what);
}

}  // namespace

SplitTokens read_tsv(const std::string& path, std::int64_t max_len, CloseBracket close) {
  if (max_len < 1) throw std::invalid_argument("listops: max_len must be at least 1");
  std::ifstream in;
  std::vector<char> iobuf(1 << 20);
  in.rdbuf()->pubsetbuf(iobuf.data(), static_cast<std::streamsize>(iobuf.size()));
  in.open(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open file (" + std::strerror(errno) + ")");

  SplitTokens out;
  out.max_len = max_len;
  const std::size_t reserve = count_lines(path);
  if (reserve > 0 && reserve <= std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(max_len)) {
    out.tokens.reserve((reserve - 1) * static_cast<std::size_t>(max_len));
    out.lengths.reserve(reserve - 1);
    out.full_lengths.reserve(reserve - 1);
    out.labels.reserve(reserve - 1);
  }

  std::string line;
  std::int64_t lineno = 0;
  auto next_line = [&]() -> bool {
    if (!std::getline(in, line)) return false;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };

  if (!next_line()) fail(path, 1, "empty file, expected the header line 'Source\\tTarget'");
  if (line.size() >= 3 && static_cast<unsigned char>(line[0]) == 0xEF && static_cast<unsigned char>(line[1]) == 0xBB &&
      static_cast<unsigned char>(line[2]) == 0xBF)
    line.erase(0, 3);  // a UTF-8 byte order mark
  if (line != kHeader)
    fail(path, 1, "expected the header line 'Source\\tTarget', got '" + excerpt(line) + "'");

  const auto width = static_cast<std::size_t>(max_len);
  while (next_line()) {
    const std::string_view row(line);
    const std::size_t tab = row.find('\t');
    if (tab == std::string_view::npos || row.find('\t', tab + 1) != std::string_view::npos) {
      const auto columns = 1 + static_cast<std::size_t>(std::count(row.begin(), row.end(), '\t'));
      fail(path, lineno,
           "expected 2 tab-separated columns (Source, Target), found " + std::to_string(columns));
    }
    const std::string_view source = row.substr(0, tab);
    const std::string_view target = row.substr(tab + 1);
    if (target.size() != 1 || target[0] < '0' || target[0] > '9')
      fail(path, lineno, "Target '" + excerpt(target) + "' is not an integer in 0..9");

    const std::size_t base = out.tokens.size();
    out.tokens.resize(base + width, kPad);
    std::int16_t* dst = out.tokens.data() + base;
    std::int64_t n = 0;
    std::size_t i = 0;
    while (i < source.size()) {
      if (source[i] == ' ') {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < source.size() && source[j] != ' ') ++j;
      const std::string_view tok = source.substr(i, j - i);
      const int id = token_id(tok);
      if (id == kUnknown)
        fail(path, lineno,
             "unknown token '" + excerpt(tok, 20) + "' in Source (expected ( ) ] [MIN [MAX [MED [SM or a digit)");
      if (id != kParen && !(id == kEnd && close == CloseBracket::drop)) {
        if (n < max_len) dst[n] = static_cast<std::int16_t>(id);
        ++n;
      }
      i = j;
    }
    if (n == 0) fail(path, lineno, "empty Source (no tokens)");
    out.full_lengths.push_back(n);
    out.lengths.push_back(std::min(n, max_len));
    out.labels.push_back(target[0] - '0');
  }
  if (in.bad()) throw DataError(path + ":" + std::to_string(lineno + 1) + ": read error");
  return out;
}

// ---- Evaluator and writer -----------------------------------------------------------------------
namespace {

int apply(std::int16_t op, const int* args, std::size_t n) {
  switch (op) {
    case kMin: return *std::min_element(args, args + n);
    case kMax: return *std::max_element(args, args + n);
    case kSum: {
      int s = 0;
      for (std::size_t i = 0; i < n; ++i) s += args[i];
      return s % 10;
    }
    case kMed: {
      // int(np.median(args)): counting sort of the digits, then the middle one or the floor of
      // the mean of the two middle ones.
      int count[10] = {};
      for (std::size_t i = 0; i < n; ++i) ++count[args[i]];
      auto kth = [&](std::size_t k) {  // 0-based k-th smallest
        for (int v = 0; v < 10; ++v) {
          if (k < static_cast<std::size_t>(count[v])) return v;
          k -= static_cast<std::size_t>(count[v]);
        }
        return 9;
      };
      if (n % 2 == 1) return kth(n / 2);
      return (kth(n / 2 - 1) + kth(n / 2)) / 2;
    }
  }
  throw std::invalid_argument("listops: not an operator");
}

}  // namespace

int evaluate(const std::vector<std::int16_t>& tree) {
  std::vector<int> values;
  std::vector<std::pair<std::int16_t, std::size_t>> frames;  // operator, first argument index
  for (std::size_t i = 0; i < tree.size(); ++i) {
    const std::int16_t t = tree[i];
    if (is_digit_id(t)) {
      if (frames.empty() && (!values.empty() || i + 1 != tree.size()))
        throw std::invalid_argument("listops: value outside an operator");
      values.push_back(t - kDigit0);
    } else if (is_operator_id(t)) {
      if (frames.empty() && i != 0) throw std::invalid_argument("listops: tokens after the end of the tree");
      frames.emplace_back(t, values.size());
    } else if (t == kEnd) {
      if (frames.empty()) throw std::invalid_argument("listops: ']' without an operator");
      const auto [op, first] = frames.back();
      frames.pop_back();
      if (values.size() == first) throw std::invalid_argument("listops: operator without arguments");
      const int v = apply(op, values.data() + first, values.size() - first);
      values.resize(first);
      values.push_back(v);
      if (frames.empty() && i + 1 != tree.size())
        throw std::invalid_argument("listops: tokens after the end of the tree");
    } else {
      throw std::invalid_argument("listops: token id " + std::to_string(t) + " in a tree");
    }
  }
  if (!frames.empty() || values.size() != 1) throw std::invalid_argument("listops: unterminated tree");
  return values[0];
}

namespace {

// `pairs[i]` for an operator at i: how many "( " it opens, its argument count + 1.
std::size_t write_node(const std::vector<std::int16_t>& tree, const std::vector<std::int32_t>& pairs,
                       std::size_t pos, std::string& out) {
  const std::int16_t t = tree[pos];
  if (is_digit_id(t)) {
    out += static_cast<char>('0' + (t - kDigit0));
    return pos + 1;
  }
  // LRA pairs left to right: ((((op a1) a2) ...) ak) ]), so the k arguments and the closing ']'
  // are each followed by " )" and all k+1 "( " open up front.
  for (std::int32_t i = 0; i < pairs[pos]; ++i) out += "( ";
  out += token_text(t);
  ++pos;
  while (tree[pos] != kEnd) {
    out += ' ';
    pos = write_node(tree, pairs, pos, out);
    out += " )";
  }
  out += " ] )";
  return pos + 1;
}

}  // namespace

std::string to_lra_string(const std::vector<std::int16_t>& tree) {
  evaluate(tree);  // checks the structure
  // Number of "( " an operator opens: its argument count + 1.
  std::vector<std::int32_t> pairs(tree.size(), 0);
  std::vector<std::size_t> open;
  for (std::size_t i = 0; i < tree.size(); ++i) {
    const std::int16_t t = tree[i];
    if (t == kEnd) {
      open.pop_back();
    } else {
      if (!open.empty()) ++pairs[open.back()];
      if (is_operator_id(t)) {
        pairs[i] = 1;
        open.push_back(i);
      }
    }
  }
  std::string out;
  out.reserve(tree.size() * 4);
  write_node(tree, pairs, 0, out);
  return out;
}

void write_header(std::ostream& out) { out << kHeader << "\r\n"; }

void write_row(std::ostream& out, const std::vector<std::int16_t>& tree, int label) {
  out << to_lra_string(tree) << '\t' << label << "\r\n";
}

// ---- Generator ----------------------------------------------------------------------------------

void check_generator_params(const GeneratorParams& p) {
  // Messages start with the parameter's name, like attnlab::ParamError's.
  if (p.max_depth < 1) throw std::invalid_argument("max_depth: must be at least 1");
  if (p.max_args < 2) throw std::invalid_argument("max_args: must be at least 2");
  if (p.min_length < 0) throw std::invalid_argument("min_length: must not be negative");
  if (!(p.operator_p >= 0.0 && p.operator_p <= 1.0)) throw std::invalid_argument("operator_p: must be in [0, 1]");
  if (p.max_length <= p.min_length + 1)
    throw std::invalid_argument("max_length: must be at least min_length + 2 (kept trees have min_length < length < "
                                "max_length), got min_length = " + std::to_string(p.min_length) +
                                ", max_length = " + std::to_string(p.max_length));
  // Longest tree the depth and argument limits allow: L(max_depth) = 1, L(d) = 2 + max_args * L(d+1).
  double longest = 1;
  for (std::int64_t d = p.max_depth - 1; d >= 1 && longest <= static_cast<double>(p.min_length); --d)
    longest = 2 + static_cast<double>(p.max_args) * longest;
  if (longest <= static_cast<double>(p.min_length))
    throw std::invalid_argument("min_length: no tree is longer than " + std::to_string(p.min_length) +
                                " tokens with max_depth = " + std::to_string(p.max_depth) +
                                " and max_args = " + std::to_string(p.max_args));
  if (p.operator_p == 0.0 && p.min_length >= 1)
    throw std::invalid_argument("operator_p: 0 makes every tree a single digit, not longer than min_length");
}

TreeGenerator::TreeGenerator(const GeneratorParams& params) : p_(params), rng_(params.seed) {
  check_generator_params(p_);
}

std::uint64_t TreeGenerator::below(std::uint64_t n) {
  // Rejection keeps it exactly uniform: accept x >= 2^64 mod n, then x mod n.
  const std::uint64_t threshold = (0 - n) % n;
  std::uint64_t x = rng_();
  while (x < threshold) x = rng_();
  return x % n;
}

double TreeGenerator::unit() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

bool TreeGenerator::grow(std::int64_t depth) {
  std::vector<std::int16_t>& out = *buf_;
  const bool op = depth < p_.max_depth && unit() <= p_.operator_p;
  if (!op) {
    out.push_back(static_cast<std::int16_t>(kDigit0 + below(10)));
    return static_cast<std::int64_t>(out.size()) + pending_ < p_.max_length;
  }
  const auto nargs = static_cast<std::int64_t>(2 + below(static_cast<std::uint64_t>(p_.max_args - 1)));
  const std::size_t slot = out.size();
  out.push_back(kEnd);  // placeholder for the operator, drawn after its arguments
  // Tokens committed so far: everything in `out` plus the ']' owed by each open operator
  // (pending_). The final length is at least that, so reaching max_length means rejection.
  ++pending_;
  if (static_cast<std::int64_t>(out.size()) + pending_ >= p_.max_length) return false;
  for (std::int64_t i = 0; i < nargs; ++i)
    if (!grow(depth + 1)) return false;
  out[slot] = static_cast<std::int16_t>(kMin + below(4));
  out.push_back(kEnd);
  --pending_;
  return true;
}

bool TreeGenerator::attempt(std::vector<std::int16_t>& out) {
  ++attempts_;
  out.clear();
  buf_ = &out;
  pending_ = 0;
  const bool complete = grow(1);
  buf_ = nullptr;
  const auto n = static_cast<std::int64_t>(out.size());
  return complete && n > p_.min_length && n < p_.max_length;
}

const std::vector<std::int16_t>& TreeGenerator::next(std::uint64_t give_up) {
  for (std::uint64_t i = 0; i < give_up; ++i)
    if (attempt(tree_)) return tree_;
  throw DataError("listops generator: no tree with " + std::to_string(p_.min_length) + " < length < " +
                  std::to_string(p_.max_length) + " in " + std::to_string(give_up) +
                  " attempts; check min_length, max_length, max_depth, max_args and operator_p");
}

// ---- Generated files ----------------------------------------------------------------------------
namespace {

// 128-bit digest of a tree, to keep trees distinct across the splits without storing them.
struct Digest {
  std::uint64_t a, b;
  bool operator==(const Digest& o) const { return a == o.a && b == o.b; }
};
struct DigestHash {
  std::size_t operator()(const Digest& d) const { return static_cast<std::size_t>(d.a ^ (d.b * 0x9e3779b97f4a7c15ull)); }
};
Digest digest(const std::vector<std::int16_t>& tree) {
  std::uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull ^ tree.size();
  for (std::int16_t t : tree) {
    a = (a ^ static_cast<std::uint64_t>(t)) * 0x100000001b3ull;
    b = (b + static_cast<std::uint64_t>(t) + 1) * 0x9e3779b97f4a7c15ull;
    b ^= b >> 29;
  }
  return {a, b};
}

constexpr std::uint64_t kMaxDuplicates = 1000000;

std::string temp_name(const fs::path& final_path) {
  static std::uint64_t counter = 0;
  return final_path.string() + ".tmp." + std::to_string(static_cast<long long>(::getpid())) + "." +
         std::to_string(++counter);
}

}  // namespace

std::string describe(const GenerateSpec& s) {
  std::uint64_t bits = 0;
  static_assert(sizeof bits == sizeof s.gen.operator_p);
  std::memcpy(&bits, &s.gen.operator_p, sizeof bits);
  return "listops-generator-v1 train_size=" + std::to_string(s.train_size) + " val_size=" + std::to_string(s.val_size) +
         " test_size=" + std::to_string(s.test_size) + " max_depth=" + std::to_string(s.gen.max_depth) +
         " max_args=" + std::to_string(s.gen.max_args) + " min_length=" + std::to_string(s.gen.min_length) +
         " max_length=" + std::to_string(s.gen.max_length) + " operator_p_bits=" + hex64(bits) +
         " seed=" + std::to_string(s.gen.seed);
}

std::string spec_hash(const GenerateSpec& spec) { return hex64(fnv1a64(describe(spec))); }

void generate_files(const std::string& dir, const GenerateSpec& spec) {
  if (spec.train_size < 0 || spec.val_size < 0 || spec.test_size < 0)
    throw std::invalid_argument("listops: split sizes must not be negative");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw DataError(dir + ": cannot create directory (" + ec.message() + ")");

  TreeGenerator gen(spec.gen);
  std::unordered_set<Digest, DigestHash> seen;
  seen.reserve(static_cast<std::size_t>(spec.train_size + spec.val_size + spec.test_size));
  const std::int64_t sizes[3] = {spec.train_size, spec.val_size, spec.test_size};
  std::string temps[3];
  try {
    for (int s = 0; s < 3; ++s) {
      const fs::path final_path = fs::path(dir) / kSplitFiles[s];
      temps[s] = temp_name(final_path);
      std::ofstream out(temps[s], std::ios::binary | std::ios::trunc);
      if (!out) throw DataError(temps[s] + ": cannot create file (" + std::strerror(errno) + ")");
      write_header(out);
      std::uint64_t duplicates = 0;  // in a row
      for (std::int64_t i = 0; i < sizes[s];) {
        const auto& tree = gen.next();
        if (!seen.insert(digest(tree)).second) {  // a duplicate: LRA keeps a set
          if (++duplicates == kMaxDuplicates)
            throw DataError("listops generator: only " + std::to_string(seen.size()) + " distinct trees after " +
                            std::to_string(kMaxDuplicates) + " duplicates in a row; the parameters allow too few "
                            "trees for train_size + val_size + test_size");
          continue;
        }
        duplicates = 0;
        write_row(out, tree, evaluate(tree));
        ++i;
      }
      out.close();
      if (!out) throw DataError(temps[s] + ": write error");
    }
    for (int s = 0; s < 3; ++s) {
      const fs::path final_path = fs::path(dir) / kSplitFiles[s];
      fs::rename(temps[s], final_path, ec);
      if (ec) throw DataError(final_path.string() + ": cannot rename the generated file (" + ec.message() + ")");
      temps[s].clear();
    }
  } catch (...) {
    for (const auto& t : temps)
      if (!t.empty()) fs::remove(t, ec);
    throw;
  }
  // For people looking at the cache: what the files were generated from.
  std::ofstream info(fs::path(dir) / "generator.txt", std::ios::binary | std::ios::trunc);
  info << describe(spec) << "\n";
}

void ensure_generated(const std::string& dir, const GenerateSpec& spec) {
  std::error_code ec;
  bool complete = true;
  for (const char* name : kSplitFiles) complete = complete && fs::is_regular_file(fs::path(dir) / name, ec);
  if (!complete) generate_files(dir, spec);
}

}  // namespace attnlab::listops
