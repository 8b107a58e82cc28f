#include "retrieval_format.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <vector>

#include "attnlab/data_util.hpp"  // excerpt, count_lines
#include "attnlab/dataset.hpp"    // attnlab::DataError

namespace attnlab::retrieval {
namespace {

constexpr std::size_t kColumns = 5;

[[noreturn]] void fail(const std::string& path, std::int64_t line, const std::string& what) {
  throw DataError(path + ":" + std::to_string(line) + ": " + what);
}

}  // namespace

int parse_label(std::string_view text) {
  if (text.empty() || (text[0] != '0' && text[0] != '1')) return -1;
  if (text.size() > 1) {
    if (text[1] != '.' || text.size() == 2) return -1;
    for (char c : text.substr(2))
      if (c != '0') return -1;
  }
  return text[0] - '0';
}

ByteRows read_pairs(const std::string& path, text::RowShape shape) {
  text::check_row_shape("retrieval", shape);
  std::ifstream in;
  std::vector<char> iobuf(1 << 20);
  in.rdbuf()->pubsetbuf(iobuf.data(), static_cast<std::streamsize>(iobuf.size()));
  in.open(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot open file (" + std::strerror(errno) + ")");

  ByteRows out;
  out.max_len = shape.width;
  out.inputs = 2;
  const auto width = static_cast<std::size_t>(shape.width);
  const std::size_t reserve = count_lines(path);
  if (reserve > 0 && reserve <= std::numeric_limits<std::size_t>::max() / (2 * width)) {
    out.tokens.reserve(reserve * 2 * width);
    out.lengths.reserve(reserve * 2);
    out.labels.reserve(reserve);
  }

  std::string line;
  std::int64_t lineno = 0;
  std::array<std::string_view, kColumns> cols;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string_view row(line);
    const auto columns = 1 + static_cast<std::size_t>(std::count(row.begin(), row.end(), '\t'));
    if (columns != kColumns)
      fail(path, lineno,
           "expected 5 tab-separated columns (label, id1, id2, text1, text2), found " + std::to_string(columns));
    std::size_t start = 0;
    for (std::size_t c = 0; c < kColumns; ++c) {
      const std::size_t tab = c + 1 < kColumns ? row.find('\t', start) : row.size();
      cols[c] = row.substr(start, tab - start);
      start = tab + 1;
    }
    const int label = parse_label(cols[0]);
    if (label < 0) fail(path, lineno, "label '" + excerpt(cols[0]) + "' is not 0 or 1");
    for (std::size_t t = 0; t < 2; ++t)
      if (cols[3 + t].empty()) fail(path, lineno, "empty text" + std::to_string(t + 1) + " (column " + std::to_string(4 + t) + ")");

    const std::size_t base = out.tokens.size();
    out.tokens.resize(base + 2 * width);  // kPad (0) past each text's tokens
    for (std::size_t t = 0; t < 2; ++t)
      out.lengths.push_back(text::encode_bytes(cols[3 + t], shape.cut, out.tokens.data() + base + t * width));
    out.labels.push_back(label);
  }
  if (in.bad()) throw DataError(path + ":" + std::to_string(lineno + 1) + ": read error");
  if (out.labels.empty()) throw DataError(path + ": no pairs (empty file)");
  return out;
}

}  // namespace attnlab::retrieval
