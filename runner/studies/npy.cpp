#include "studies/npy.hpp"

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include <ATen/ops/empty.h>

// The data is read as it lies: '<f4'/'<f8' are the host's own layout only on little-endian hosts.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "read_npy assumes a little-endian host");

namespace attnlab {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw NpyError(path + ": " + what); }

// A printable, one-line excerpt of header text for error messages.
std::string excerpt(const std::string& s, std::size_t at, std::size_t max = 24) {
  std::string out;
  for (std::size_t i = at; i < s.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c < 0x20 || c >= 0x7f) ? '?' : s[i];
  }
  return out.empty() ? "end of header" : "'" + out + "'";
}

// The Python literal subset NumPy writes in a header: strings, True/False, tuples of integers.
struct Literal {
  enum Kind { string, boolean, tuple, other } kind = string;
  std::string text;  // a string's contents, or the source text of an `other` value
  bool flag = false;
  std::vector<std::int64_t> items;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  std::map<std::string, Literal> dict() {
    std::map<std::string, Literal> out;
    skip();
    expect('{', "'{' opening the header dictionary");
    for (;;) {
      skip();
      if (peek() == '}') {
        ++i_;
        break;
      }
      const std::string key = quoted("a quoted key");
      skip();
      expect(':', "':' after key '" + key + "'");
      skip();
      Literal value = literal(key);
      if (!out.emplace(key, std::move(value)).second) malformed("key '" + key + "' appears twice");
      skip();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      skip();
      expect('}', "',' or '}' after the value of '" + key + "'");
      break;
    }
    skip();
    if (i_ != s_.size()) malformed("unexpected " + excerpt(s_, i_) + " after the dictionary");
    return out;
  }

 private:
  [[noreturn]] void malformed(const std::string& what) const { fail(path_, "malformed header: " + what); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c, const std::string& what) {
    if (peek() != c) malformed("expected " + what + " at offset " + std::to_string(i_) + ", found " + excerpt(s_, i_));
    ++i_;
  }
  std::string quoted(const std::string& what) {
    const char q = peek();
    if (q != '\'' && q != '"') malformed("expected " + what + " at offset " + std::to_string(i_) + ", found " + excerpt(s_, i_));
    const std::size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) malformed("unterminated string at offset " + std::to_string(i_));
    std::string out = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return out;
  }
  std::int64_t integer() {
    const std::size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ == start) malformed("expected a non-negative integer in the shape at offset " + std::to_string(start) + ", found " + excerpt(s_, start));
    if (peek() == 'L') ++i_;  // Python 2 long, as very old NumPy wrote it
    const std::string digits = s_.substr(start, i_ - start);
    if (digits.size() > 18) malformed("shape entry " + digits + " is too large");
    return std::stoll(digits);
  }
  Literal literal(const std::string& key) {
    Literal v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = Literal::string;
      v.text = quoted("a string");
    } else if (s_.compare(i_, 4, "True") == 0 || s_.compare(i_, 5, "False") == 0) {
      v.kind = Literal::boolean;
      v.flag = s_[i_] == 'T';
      i_ += v.flag ? 4 : 5;
    } else if (c == '(') {
      v.kind = Literal::tuple;
      ++i_;
      for (;;) {
        skip();
        if (peek() == ')') {
          ++i_;
          break;
        }
        v.items.push_back(integer());
        skip();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(')', "',' or ')' in the tuple of '" + key + "'");
        break;
      }
    } else {
      // a structured dtype's list, a nested dict, ...: skipped over, then refused by the caller
      v.kind = Literal::other;
      std::size_t depth = 0;
      const std::size_t start = i_;
      for (; i_ < s_.size(); ++i_) {
        const char d = s_[i_];
        if (d == '[' || d == '(' || d == '{') ++depth;
        else if (d == ']' || d == ')' || d == '}') {
          if (depth == 0) break;
          --depth;
        } else if (d == ',' && depth == 0) break;
      }
      if (i_ == start) malformed("expected a value for '" + key + "' at offset " + std::to_string(start) + ", found " + excerpt(s_, start));
      v.text = s_.substr(start, i_ - start);
    }
    return v;
  }

  const std::string& s_;
  const std::string& path_;
  std::size_t i_ = 0;
};

}  // namespace

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

NpyHeader parse_npy_header_dict(const std::string& text, const std::string& path) {
  auto dict = HeaderParser(text, path).dict();
  for (const auto& [key, value] : dict)
    if (key != "descr" && key != "fortran_order" && key != "shape")
      fail(path, "malformed header: unexpected key '" + key + "' (expected only 'descr', 'fortran_order' and 'shape')");
  for (const char* key : {"descr", "fortran_order", "shape"})
    if (!dict.count(key)) fail(path, std::string("malformed header: no '") + key + "' key");

  NpyHeader h;
  const Literal& descr = dict["descr"];
  if (descr.kind != Literal::string)
    fail(path, "unsupported dtype " + (descr.kind == Literal::other ? descr.text : std::string("(not a type string)")) +
                   " (expected '<f4' or '<f8': little-endian float32 or float64)");
  if (descr.text != "<f4" && descr.text != "<f8")
    fail(path, "unsupported dtype '" + descr.text + "' (expected '<f4' or '<f8': little-endian float32 or float64)");
  h.descr = descr.text;

  const Literal& fortran = dict["fortran_order"];
  if (fortran.kind != Literal::boolean) fail(path, "malformed header: 'fortran_order' must be True or False");
  if (fortran.flag) fail(path, "fortran_order is True (expected False: C-ordered data; save np.ascontiguousarray(x))");

  const Literal& shape = dict["shape"];
  if (shape.kind != Literal::tuple) fail(path, "malformed header: 'shape' must be a tuple of integers");
  h.shape = shape.items;
  return h;
}

at::Tensor read_npy(const std::string& path, NpyHeader* header_out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) fail(path, "no such file (expected a .npy file)");
  if (!fs::is_regular_file(path, ec)) fail(path, "not a regular file (expected a .npy file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno));
  const auto file_size = static_cast<std::uint64_t>(fs::file_size(path, ec));
  if (ec) fail(path, "cannot read its size: " + ec.message());

  unsigned char prefix[12] = {};
  in.read(reinterpret_cast<char*>(prefix), 8);
  if (static_cast<std::size_t>(in.gcount()) < kMagicSize || std::memcmp(prefix, kMagic, kMagicSize) != 0)
    fail(path, "not a .npy file (expected the magic string \\x93NUMPY at the start)");
  if (in.gcount() < 8) fail(path, "truncated header: the file ends after the magic string (expected a format version)");
  const int major = prefix[6], minor = prefix[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(path, ".npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " is not supported (expected 1.0, 2.0 or 3.0)");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  in.read(reinterpret_cast<char*>(prefix + 8), static_cast<std::streamsize>(len_bytes));
  if (static_cast<std::size_t>(in.gcount()) != len_bytes)
    fail(path, "truncated header: the file ends inside the header length field");
  std::uint64_t header_len = prefix[8] | (static_cast<std::uint64_t>(prefix[9]) << 8);
  if (len_bytes == 4) header_len |= (static_cast<std::uint64_t>(prefix[10]) << 16) | (static_cast<std::uint64_t>(prefix[11]) << 24);
  const std::uint64_t data_offset = 8 + len_bytes + header_len;
  if (data_offset > file_size)
    fail(path, "truncated header: it declares " + std::to_string(header_len) + " bytes of header, the file has only " +
                   std::to_string(file_size - 8 - len_bytes) + " after the length field");
  std::string text(static_cast<std::size_t>(header_len), '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_len));
  if (static_cast<std::uint64_t>(in.gcount()) != header_len) fail(path, "truncated header: could not read it whole");
  if (header_len == 0) fail(path, "malformed header: it is empty (expected a Python dict with 'descr', 'fortran_order', 'shape')");

  NpyHeader h = parse_npy_header_dict(text, path);
  h.major = major;
  h.minor = minor;
  h.data_offset = static_cast<std::size_t>(data_offset);

  const std::uint64_t item = h.descr == "<f4" ? 4 : 8;
  std::uint64_t count = 1;
  for (auto d : h.shape) {
    if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / 16 / static_cast<std::uint64_t>(d))
      fail(path, "shape " + shape_text(h.shape) + " is too large");
    count *= static_cast<std::uint64_t>(d);
  }
  const std::uint64_t need = count * item;
  const std::uint64_t have = file_size - data_offset;
  if (have < need)
    fail(path, "truncated data: shape " + shape_text(h.shape) + " of '" + h.descr + "' needs " + std::to_string(need) +
                   " bytes after the header, the file has " + std::to_string(have));
  if (have > need)
    fail(path, "unexpected data: shape " + shape_text(h.shape) + " of '" + h.descr + "' needs " + std::to_string(need) +
                   " bytes after the header, the file has " + std::to_string(have));

  auto out = at::empty(h.shape, at::TensorOptions().dtype(item == 4 ? at::kFloat : at::kDouble));
  if (need > 0) {
    in.read(static_cast<char*>(out.data_ptr()), static_cast<std::streamsize>(need));
    if (static_cast<std::uint64_t>(in.gcount()) != need) fail(path, "truncated data: the read stopped early");
  }
  if (header_out) *header_out = h;
  return out;
}

}  // namespace attnlab
