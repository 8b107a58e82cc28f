#include "text_format.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <tuple>

#include "attnlab/dataset.hpp"  // attnlab::DataError

namespace attnlab::text {
namespace fs = std::filesystem;

std::int64_t encode_bytes(std::string_view bytes, std::int64_t max_len, std::int16_t* dst) {
  const auto n = std::min(static_cast<std::int64_t>(bytes.size()), max_len);
  for (std::int64_t i = 0; i < n; ++i) dst[i] = static_cast<std::int16_t>(static_cast<unsigned char>(bytes[i]) + 1);
  std::fill(dst + n, dst + max_len, kPad);
  return n;
}

// ---- Listing ------------------------------------------------------------------------------------
namespace {

// (0, id) for "<digits>_...", (1, 0) otherwise; ids too long for 64 bits count as no id.
std::pair<int, std::uint64_t> name_id(const std::string& name) {
  const std::size_t underscore = name.find('_');
  if (underscore == 0 || underscore == std::string::npos || underscore > 18) return {1, 0};
  std::uint64_t id = 0;
  for (std::size_t i = 0; i < underscore; ++i) {
    if (name[i] < '0' || name[i] > '9') return {1, 0};
    id = id * 10 + static_cast<std::uint64_t>(name[i] - '0');
  }
  return {0, id};
}

bool is_review_name(const std::string& name) {
  return name.size() > 4 && name[0] != '.' && name.compare(name.size() - 4, 4, ".txt") == 0;
}

}  // namespace

bool review_name_less(const std::string& a, const std::string& b) {
  const auto ka = name_id(a), kb = name_id(b);
  return std::tie(ka.first, ka.second, a) < std::tie(kb.first, kb.second, b);
}

std::vector<Review> list_reviews(const std::string& root, const std::string& split) {
  std::vector<Review> out;
  for (std::int64_t label = 0; label < kNumClasses; ++label) {
    const fs::path folder = fs::path(root) / split / kLabelFolders[label];
    std::error_code ec;
    if (!fs::is_directory(folder, ec))
      throw DataError(folder.string() + ": no such folder (expected the aclImdb layout with train/neg, train/pos, "
                                        "test/neg, test/pos)");
    std::vector<std::string> names;
    fs::directory_iterator it(folder, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      // Anything but a folder is a review, so that a dangling link fails loudly when read.
      std::error_code type_ec;
      if (is_review_name(name) && !it->is_directory(type_ec)) names.push_back(name);
    }
    if (ec) throw DataError(folder.string() + ": cannot list folder (" + ec.message() + ")");
    if (names.empty()) throw DataError(folder.string() + ": no review files (*.txt)");
    std::sort(names.begin(), names.end(), review_name_less);
    for (auto& name : names) out.push_back({(folder / name).string(), label});
  }
  return out;
}

// ---- Reader -------------------------------------------------------------------------------------

void check_row_shape(const char* what, RowShape shape) {
  if (shape.cut < 1) throw std::invalid_argument(std::string(what) + ": max_len must be at least 1");
  if (shape.width < shape.cut)
    throw std::invalid_argument(std::string(what) + ": rows of " + std::to_string(shape.width) + " positions cannot hold " +
                                std::to_string(shape.cut) + " tokens");
}

RowShape row_shape(const ParamValues& params) {
  const std::int64_t max_len = params.integer("max_len"), pad_to = params.integer("pad_to");
  if (pad_to != 0 && pad_to < max_len)
    throw ParamError("pad_to: " + std::to_string(pad_to) + " is less than max_len " + std::to_string(max_len));
  return {max_len, pad_to == 0 ? max_len : pad_to};
}

std::string cache_words(RowShape shape) {
  std::string words = " max_len=" + std::to_string(shape.cut);
  if (shape.width != shape.cut) words += " pad_to=" + std::to_string(shape.width);
  return words;
}

ByteRows read_reviews(const std::vector<Review>& reviews, RowShape shape) {
  check_row_shape("text", shape);
  ByteRows out;
  out.max_len = shape.width;
  out.inputs = 1;
  const auto width = static_cast<std::size_t>(shape.width), cut = static_cast<std::size_t>(shape.cut);
  out.tokens.resize(reviews.size() * width);  // kPad (0) past each review's tokens
  out.lengths.reserve(reviews.size());
  out.labels.reserve(reviews.size());

  std::string buf(cut, '\0');
  for (std::size_t r = 0; r < reviews.size(); ++r) {
    const std::string& path = reviews[r].path;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw DataError(path + ": cannot open file (" + std::strerror(errno) + ")");
    // Only the first `cut` bytes matter: the rest of a long review is never read.
    std::size_t got = 0;
    while (got < cut) {
      const ssize_t n = ::read(fd, buf.data() + got, cut - got);
      if (n == 0) break;
      if (n < 0) {
        if (errno == EINTR) continue;
        const int err = errno;
        ::close(fd);
        throw DataError(path + ": read error (" + std::strerror(err) + ")");
      }
      got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (got == 0) throw DataError(path + ": empty review file");
    out.lengths.push_back(encode_bytes(std::string_view(buf.data(), got), shape.cut, out.tokens.data() + r * width));
    out.labels.push_back(reviews[r].label);
  }
  return out;
}

}  // namespace attnlab::text
