#pragma once
// ListOps (Long Range Arena) without LibTorch: the fixed vocabulary, the tokeniser and reader of
// the official TSV files, the tree generator with the LRA generator's rules, an evaluator and the
// TSV writer. The plugin (listops_plugin.cpp) only turns what the reader returns into tensors.
//
// Errors in data files are reported as attnlab::DataError (declared in attnlab/dataset.hpp); the
// message is one line: "<file>:<line>: <problem>".
#include <cstdint>
#include <iosfwd>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace attnlab::listops {

// ---- Fixed vocabulary ---------------------------------------------------------------------------
// LRA built its vocabulary from a Python set (so its ids depend on hashing); ours is fixed:
//   0 padding, 1..10 the digits 0..9 (id = digit + 1), 11 [MIN, 12 [MAX, 13 [MED, 14 [SM, 15 ].
// Parentheses carry no information beyond `]` and are dropped.
inline constexpr std::int16_t kPad = 0;
inline constexpr std::int16_t kDigit0 = 1;  // digit d -> kDigit0 + d
inline constexpr std::int16_t kMin = 11;
inline constexpr std::int16_t kMax = 12;
inline constexpr std::int16_t kMed = 13;
inline constexpr std::int16_t kSum = 14;  // [SM: sum mod 10
inline constexpr std::int16_t kEnd = 15;  // ]
inline constexpr std::int64_t kVocabSize = 16;
inline constexpr std::int64_t kNumClasses = 10;

inline bool is_digit_id(std::int16_t id) { return id >= kDigit0 && id < kDigit0 + 10; }
inline bool is_operator_id(std::int16_t id) { return id >= kMin && id <= kSum; }

// The text of a token id as it appears in the files ("<pad>" for 0); nullptr for an unknown id.
const char* token_text(std::int16_t id);

// Id of one whitespace-separated token of a Source field: a vocabulary id, kParen for "(" or ")"
// (dropped), or kUnknown.
inline constexpr int kParen = -1;
inline constexpr int kUnknown = -2;
int token_id(std::string_view token);

// File names of the three splits in a data directory (LRA's task name is "basic").
inline constexpr const char* kSplitFiles[3] = {"basic_train.tsv", "basic_val.tsv", "basic_test.tsv"};
inline constexpr const char* kHeader = "Source\tTarget";

// ---- Reader -------------------------------------------------------------------------------------
// One split, tokenised: row i's tokens are tokens[i*max_len, (i+1)*max_len), truncated to max_len
// and padded with kPad.
struct SplitTokens {
  std::int64_t max_len = 0;
  std::vector<std::int16_t> tokens;
  std::vector<std::int64_t> lengths;       // min(full length, max_len)
  std::vector<std::int64_t> full_lengths;  // tokens in the Source field (>= 1)
  std::vector<std::int64_t> labels;        // 0..9
  std::size_t size() const { return labels.size(); }
};

// What the reader makes of `]`, which closes the innermost operator: a token (LRA's pipeline, which
// rewrites it as X since 2021-03-04, and the KL authors', which reserves it), or nothing (LRA's pipeline
// before that, which the Skyformer and Nystromformer authors' data came from: its tokenizer split on
// every non-alphanumeric character, so an expression is its operators and digits alone).
enum class CloseBracket { token, drop };

// Reads one TSV file in the official format: the header line "Source<TAB>Target", then one row per
// line, "\n" or "\r\n" terminated. Throws attnlab::DataError naming the file and line for a missing
// or unreadable file, a missing header, a row without exactly two columns, an unknown token, an
// empty Source (no tokens besides parentheses) and a Target that is not one digit 0..9.
SplitTokens read_tsv(const std::string& path, std::int64_t max_len, CloseBracket close = CloseBracket::token);

// ---- Trees, evaluator, writer -------------------------------------------------------------------
// A tree is its token ids in prefix order, exactly what the reader makes of its Source string:
// a value is one digit id; an operator node is the operator id, its arguments, then kEnd.

// Value of a tree: MIN, MAX, MED, SM (sum mod 10). MED is LRA's int(np.median(args)): the middle
// value for an odd count, the mean of the two middle values rounded down for an even count.
// Throws std::invalid_argument for a malformed sequence.
int evaluate(const std::vector<std::int16_t>& tree);

// The Source string as LRA's generator spells it (its to_string): an operator with arguments
// a1..ak is written as k+1 opening parentheses, the operator, then " a_i )" for each argument,
// then " ] )"; e.g. MAX(2, MIN(9, 4)) is "( ( ( [MAX 2 ) ( ( ( [MIN 9 ) 4 ) ] ) ) ] )".
// Throws std::invalid_argument for a malformed sequence.
std::string to_lra_string(const std::vector<std::int16_t>& tree);

// Writes the header line / one row ("<Source>\t<Target>"). Lines end in "\r\n" like the official
// files (Python's csv.writer default); the reader accepts "\n" too.
void write_header(std::ostream& out);
void write_row(std::ostream& out, const std::vector<std::int16_t>& tree, int label);

// ---- Generator ----------------------------------------------------------------------------------
struct GeneratorParams {
  std::int64_t max_depth = 10;    // depth of the root is 1; nodes at max_depth are values
  std::int64_t max_args = 10;     // an operator takes 2..max_args arguments
  std::int64_t min_length = 500;  // keep trees with min_length < tokens < max_length (LRA: strict)
  std::int64_t max_length = 2000;
  double operator_p = 0.25;       // LRA's VALUE_P: below max_depth a node is an operator when
                                  // u <= operator_p (u uniform in [0, 1)), else a value
  std::uint64_t seed = 0;
};

// Throws std::invalid_argument when the parameters cannot produce any tree (max_args < 2,
// max_depth < 1, max_length <= min_length + 1, longest possible tree not longer than min_length,
// operator_p outside [0, 1]).
void check_generator_params(const GeneratorParams& p);

// Draws trees with the LRA generator's rules. Random numbers come from std::mt19937_64 seeded with
// `seed` through exact mappings of our own (the standard distributions are implementation-defined),
// so the same parameters give the same trees on every machine. The order of draws at a node:
// u (only below max_depth); for a value its digit; for an operator its argument count, then its
// arguments (depth first), then the operator (LRA draws it after the arguments too).
class TreeGenerator {
 public:
  explicit TreeGenerator(const GeneratorParams& params);
  // One attempt: grows a tree into `out` and returns whether it is accepted (length strictly
  // between min_length and max_length). Growth stops as soon as the tree has max_length tokens,
  // which cannot be accepted any more; the accepted trees are distributed as without the cut.
  bool attempt(std::vector<std::int16_t>& out);
  // Attempts until one tree is accepted. Throws attnlab::DataError after `give_up` attempts in a
  // row without one.
  const std::vector<std::int16_t>& next(std::uint64_t give_up = 100000000);
  std::uint64_t attempts() const { return attempts_; }

 private:
  bool grow(std::int64_t depth);
  std::uint64_t below(std::uint64_t n);  // uniform in [0, n)
  double unit();                         // uniform in [0, 1), 53 bits

  GeneratorParams p_;
  std::mt19937_64 rng_;
  std::vector<std::int16_t>* buf_ = nullptr;  // the tree being grown
  std::int64_t pending_ = 0;                   // open operators, each owing a ']'
  std::vector<std::int16_t> tree_;
  std::uint64_t attempts_ = 0;
};

// Sizes and generator parameters of a generated data set.
struct GenerateSpec {
  std::int64_t train_size = 96000;
  std::int64_t val_size = 2000;
  std::int64_t test_size = 2000;
  GeneratorParams gen;
};

// Canonical one-line description of a spec (every field, operator_p as its exact bit pattern) and a
// 16-hex-digit FNV-1a hash of it: the name of the cache directory is "listops-" + hash.
std::string describe(const GenerateSpec& spec);
std::string spec_hash(const GenerateSpec& spec);

// Generates train_size + val_size + test_size distinct trees (LRA keeps a set, so no tree appears
// twice across the splits), in that order, and writes the three official files into `dir`
// (created if needed). Each file is written under a temporary name and renamed, so a file with
// its final name is always complete. Does nothing when all three files already exist.
void ensure_generated(const std::string& dir, const GenerateSpec& spec);
// Writes the files unconditionally (same procedure).
void generate_files(const std::string& dir, const GenerateSpec& spec);

}  // namespace attnlab::listops
