#pragma once
// LRA Text (IMDB reviews, byte level) without LibTorch: the byte tokeniser shared with the
// retrieval dataset, the listing of the official aclImdb folders in a fixed order, and the reader
// of review files. The plugin (text_plugin.cpp) only chooses the files and makes tensors.
//
// Errors in data are reported as attnlab::DataError (declared in attnlab/dataset.hpp), one line
// naming the file or folder and the problem.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/params.hpp"

namespace attnlab::text {

// ---- Byte tokeniser -----------------------------------------------------------------------------
// A byte b is token b + 1, so ids are 1..256 and 0 is left to padding (as tfds's ByteTextEncoder,
// which LRA used). The version string goes into every token cache key: change it when the
// mapping changes.
inline constexpr std::int64_t kVocabSize = 257;
inline constexpr std::int16_t kPad = 0;
inline constexpr const char* kTokeniserVersion = "bytes-v1";

// Writes the tokens of `bytes` into dst[0, max_len): the first max_len bytes as byte + 1, then
// kPad. Returns the number of real tokens, min(bytes.size(), max_len).
std::int64_t encode_bytes(std::string_view bytes, std::int64_t max_len, std::int16_t* dst);

// Where a text is cut and how wide its row is: its first `cut` bytes become tokens, then padding
// up to `width` positions (width >= cut). The LRA authors cut documents at 4,000 bytes and pad them
// to 4,096 positions; attnlab's default pads to the cut.
struct RowShape {
  std::int64_t cut = 0;
  std::int64_t width = 0;
};

// Tokenised examples with `inputs` texts each: example i, input j has its tokens at
// tokens[(i*inputs + j)*max_len, +max_len) and its length at lengths[i*inputs + j].
struct ByteRows {
  std::int64_t max_len = 0;  // the row's width
  std::int64_t inputs = 1;
  std::vector<std::int16_t> tokens;
  std::vector<std::int64_t> lengths;  // min(bytes, cut), >= 1
  std::vector<std::int64_t> labels;
  std::size_t size() const { return labels.size(); }
};

// ---- IMDB (aclImdb) -----------------------------------------------------------------------------
inline constexpr std::int64_t kNumClasses = 2;  // neg = 0, pos = 1
inline constexpr const char* kLabelFolders[2] = {"neg", "pos"};

struct Review {
  std::string path;
  std::int64_t label = 0;
};

// The order of review files in a folder: by the number before the first '_' ("123_8.txt" -> 123),
// then by name; names without such a number come after all numbered ones, by name. It does not
// depend on the order the file system lists them in.
bool review_name_less(const std::string& a, const std::string& b);

// The reviews of one split ("train" or "test") of the aclImdb folder `root`: every entry named
// *.txt (not starting with '.') that is not a folder, in <root>/<split>/neg (label 0), then in
// <root>/<split>/pos (label 1), each folder in review_name_less order. Other files and folders (unsup, urls_*.txt,
// labeledBow.feat) are not looked at. Throws DataError naming the folder when it is missing or
// holds no review file.
std::vector<Review> list_reviews(const std::string& root, const std::string& split);

// Reads and tokenises the reviews, in the order given, cut and padded as `shape` says; only the
// first shape.cut bytes of a file are read. Throws DataError naming the file for a file that
// cannot be opened or read and for an empty one; std::invalid_argument for a shape with cut < 1 or
// width < cut.
ByteRows read_reviews(const std::vector<Review>& reviews, RowShape shape);
// Throws std::invalid_argument "<what>: ..." unless 1 <= shape.cut <= shape.width.
void check_row_shape(const char* what, RowShape shape);

// The parameters max_len and pad_to that the text and retrieval plugins share, and the shape they
// give: cut at max_len, padded to pad_to (0: to max_len).
inline constexpr ParamSpec kMaxLenParam = {"max_len", ParamType::integer, "4000", 1, 1000000, nullptr,
                                           "bytes per text: longer texts are cut, shorter ones padded with id 0 (LRA: "
                                           "1000, 2000 or 4000)"};
inline constexpr ParamSpec kPadToParam = {"pad_to", ParamType::integer, "0", 0, 1000000, nullptr,
                                          "positions per text, at least max_len (0: max_len): the LRA authors cut at 4000 "
                                          "bytes and pad to 4096, so their mean pooling divides by 4096"};
// ParamError "pad_to: 4000 is less than max_len 4096" when pad_to is neither 0 nor >= max_len.
RowShape row_shape(const ParamValues& params);
// What the shape adds to a token cache key: " max_len=<cut>", then " pad_to=<width>" when wider.
std::string cache_words(RowShape shape);

}  // namespace attnlab::text
