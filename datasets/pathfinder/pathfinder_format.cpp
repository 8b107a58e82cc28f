// The reader side of pathfinder_format.hpp: layout, metadata files, PNG decoding and encoding,
// the split. The generator is in pathfinder_generator.cpp.
#include "pathfinder_format.hpp"

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include <png.h>

#include "attnlab/data_util.hpp"  // seeded_permutation
#include "attnlab/dataset.hpp"    // attnlab::DataError

namespace attnlab::pathfinder {
namespace fs = std::filesystem;

// ---- Layout -------------------------------------------------------------------------------------

bool valid_resolution(std::int64_t n) { return n == 32 || n == 64 || n == 128 || n == 256; }

const char* difficulty_folder(const std::string& d) {
  if (d == "easy") return "curv_baseline";
  if (d == "medium") return "curv_contour_length_9";
  if (d == "hard") return "curv_contour_length_14";
  return nullptr;
}

std::int64_t default_contour_length(const std::string& d) { return d == "easy" ? 6 : d == "medium" ? 9 : 14; }

std::string difficulty_dir(const std::string& root, std::int64_t resolution, const std::string& difficulty) {
  const char* folder = difficulty_folder(difficulty);
  if (!folder) throw std::invalid_argument("difficulty: '" + difficulty + "' is not one of easy|medium|hard");
  return (fs::path(root) / ("pathfinder" + std::to_string(resolution)) / folder).string();
}

// ---- Metadata -----------------------------------------------------------------------------------
namespace {

// A whole (small) file; DataError when it cannot be read.
std::string slurp(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw DataError(path + ": cannot open file (" + std::strerror(errno) + ")");
  std::string text;
  char buf[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, got);
  if (std::ferror(f.get())) throw DataError(path + ": read error");
  return text;
}

}  // namespace

std::string Index::where(const Example& e) const { return metadata[e.file] + ":" + std::to_string(e.line); }

std::vector<std::string> metadata_files(const std::string& dir) {
  const fs::path folder = fs::path(dir) / "metadata";
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw DataError(folder.string() + ": no such directory (expected the LRA layout <path>/pathfinder<N>/"
                    "<curv_baseline|curv_contour_length_9|curv_contour_length_14>/metadata/<k>.npy)");
  std::vector<std::pair<std::uint64_t, std::string>> found;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 5 || name.size() > 4 + 18 || name.compare(name.size() - 4, 4, ".npy") != 0) continue;
    std::uint64_t k = 0;
    bool digits = true;
    for (std::size_t i = 0; i + 4 < name.size(); ++i) {
      if (name[i] < '0' || name[i] > '9') digits = false;
      else k = k * 10 + static_cast<std::uint64_t>(name[i] - '0');
    }
    if (digits) found.emplace_back(k, it->path().string());
  }
  if (ec) throw DataError(folder.string() + ": cannot list directory (" + ec.message() + ")");
  if (found.empty()) throw DataError(folder.string() + ": no metadata files (<k>.npy)");
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  out.reserve(found.size());
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

Index read_index(const std::string& dir) {
  Index index;
  index.metadata = metadata_files(dir);
  std::unordered_set<std::string> folders;
  std::string last_folder;
  for (std::size_t f = 0; f < index.metadata.size(); ++f) {
    const std::string& path = index.metadata[f];
    const std::string text = slurp(path);
    std::size_t pos = 0;
    std::uint32_t lineno = 0;
    while (pos < text.size()) {  // a final '\n' ends the last line, it does not start an empty one
      std::size_t eol = text.find('\n', pos);
      if (eol == std::string::npos) eol = text.size();
      std::string_view line(text.data() + pos, eol - pos);
      pos = eol + 1;
      ++lineno;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      std::string_view fields[4];
      std::size_t count = 0, i = 0;
      while (i < line.size()) {
        if (line[i] == ' ' || line[i] == '\t') {
          ++i;
          continue;
        }
        std::size_t j = i;
        while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
        if (count < 4) fields[count] = line.substr(i, j - i);
        ++count;
        i = j;
      }
      if (count < 4)
        throw DataError(path + ":" + std::to_string(lineno) + ": expected at least 4 space-separated fields "
                        "(folder, file, index, label), found " + std::to_string(count) + " in '" + excerpt(line) + "'");
      if (fields[3] != "0" && fields[3] != "1")
        throw DataError(path + ":" + std::to_string(lineno) + ": label (field 4) '" + excerpt(fields[3], 20) +
                        "' is not 0 or 1");
      Example e;
      std::string folder = dir + "/" + std::string(fields[0]);
      e.image = folder + "/" + std::string(fields[1]);
      e.label = fields[3][0] - '0';
      e.file = static_cast<std::uint32_t>(f);
      e.line = lineno;
      index.examples.push_back(std::move(e));
      if (folder != last_folder && folders.insert(folder).second) index.image_folders.push_back(folder);
      last_folder = std::move(folder);
    }
  }
  return index;
}

// ---- PNG ----------------------------------------------------------------------------------------
// Reading goes through libpng's simplified API (png_image_*): its errors come back as a return value
// with the message in png_image::message, so no longjmp crosses our frames. Writing keeps the
// classic API for its fixed filter and compression level; it reports errors by longjmp to the
// setjmp in encode_gray, which keeps no C++ object with a destructor alive across the libpng calls
// that may jump, and its callbacks write the message into a plain buffer.
namespace {

struct PngMessage {
  char text[200];
};

void on_png_error(png_structp png, png_const_charp msg) {
  auto* m = static_cast<PngMessage*>(png_get_error_ptr(png));
  std::snprintf(m->text, sizeof m->text, "%s", msg);
  png_longjmp(png, 1);
}
void on_png_warning(png_structp, png_const_charp) {}

const char* colour_name(int type) {
  switch (type) {
    case PNG_COLOR_TYPE_GRAY: return "grayscale";
    case PNG_COLOR_TYPE_GRAY_ALPHA: return "grayscale+alpha";
    case PNG_COLOR_TYPE_RGB: return "RGB";
    case PNG_COLOR_TYPE_RGB_ALPHA: return "RGBA";
    case PNG_COLOR_TYPE_PALETTE: return "palette";
  }
  return "unknown colour type";
}

// What libpng said, as "corrupt PNG (...)"; frees the image (a no-op when libpng already has).
std::string corrupt(png_image& image) {
  // libpng's memory reader says this of a file cut short
  const bool truncated = std::strcmp(image.message, "read beyond end of data") == 0;
  const std::string problem = std::string("corrupt PNG (") + (truncated ? "truncated file" : image.message) + ")";
  png_image_free(&image);
  return problem;
}

// Decodes into `out` (size*size bytes). Returns an empty string, or what is wrong.
std::string decode_gray(const std::uint8_t* data, std::size_t bytes, std::int64_t size, std::uint8_t* out) {
  if (bytes < 8 || png_sig_cmp(data, 0, 8) != 0) return "not a PNG file (bad signature)";
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, data, bytes)) return corrupt(image);
  // Bit depth and colour type as stored, from IHDR (the first chunk, bytes 24 and 25, which
  // begin_read has just checked): the simplified API would convert any kind to PNG_FORMAT_GRAY.
  const int depth = data[24], type = data[25];
  char problem[200] = "";
  if (type != PNG_COLOR_TYPE_GRAY || depth != 8) {
    std::snprintf(problem, sizeof problem, "PNG is %d-bit %s, expected 8-bit grayscale", depth, colour_name(type));
  } else if (image.width != static_cast<png_uint_32>(size) || image.height != static_cast<png_uint_32>(size)) {
    std::snprintf(problem, sizeof problem, "image is %ux%u, expected %lldx%lld", static_cast<unsigned>(image.width),
                  static_cast<unsigned>(image.height), static_cast<long long>(size), static_cast<long long>(size));
  } else {
    // 8-bit gray to 8-bit gray is a copy, but for what the simplified API does with a file's own
    // colour information: a gAMA chunk far from sRGB's would be corrected, a tRNS chunk composed
    // away. Our writer writes neither (nor, as far as we know, did LRA's).
    image.format = PNG_FORMAT_GRAY;
    if (!png_image_finish_read(&image, nullptr, out, static_cast<png_int_32>(size), nullptr)) return corrupt(image);
  }
  png_image_free(&image);
  return problem;
}

// Reads a whole file into `buf`; returns an empty string or what went wrong.
std::string read_file(const std::string& path, std::vector<std::uint8_t>& buf) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    if (errno == ENOENT) return "no such file";
    return std::string("cannot open file (") + std::strerror(errno) + ")";
  }
  buf.clear();
  std::uint8_t chunk[1 << 15];
  std::size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) buf.insert(buf.end(), chunk, chunk + got);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  return failed ? "read error" : "";
}

// Returns false for an empty file when `skip_empty`; throws DataError for anything else wrong.
bool read_gray_png_into(const std::string& path, std::int64_t size, std::uint8_t* out, const std::string& context,
                        std::vector<std::uint8_t>& buf, bool skip_empty) {
  std::string problem = read_file(path, buf);
  if (problem.empty() && buf.empty()) {
    if (skip_empty) return false;
    problem = "empty file";
  }
  if (problem.empty()) problem = decode_gray(buf.data(), buf.size(), size, out);
  if (!problem.empty()) throw DataError(path + ": " + problem + context);
  return true;
}

}  // namespace

void read_gray_png(const std::string& path, std::int64_t size, std::uint8_t* out, const std::string& context) {
  std::vector<std::uint8_t> buf;
  read_gray_png_into(path, size, out, context, buf, false);
}

namespace {

std::string encode_gray(std::FILE* file, const std::uint8_t* pixels, std::int64_t size, png_bytep* rows) {
  PngMessage message{};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &message, on_png_error, on_png_warning);
  if (!png) return "libpng: out of memory";
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    return "libpng: out of memory";
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return std::string("libpng: ") + message.text;
  }
  png_init_io(png, file);
  // Fixed choices, so that the same pixels give the same bytes: no filter, zlib level 6.
  png_set_filter(png, 0, PNG_FILTER_NONE);
  png_set_compression_level(png, 6);
  const auto n = static_cast<png_uint_32>(size);
  png_set_IHDR(png, info, n, n, 8, PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  for (std::int64_t y = 0; y < size; ++y) rows[y] = const_cast<png_bytep>(pixels + y * size);
  png_set_rows(png, info, rows);
  png_write_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
  png_destroy_write_struct(&png, &info);
  return "";
}

}  // namespace

void write_gray_png(const std::string& path, const std::uint8_t* pixels, std::int64_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw DataError(path + ": cannot create file (" + std::strerror(errno) + ")");
  std::vector<png_bytep> rows(static_cast<std::size_t>(size));
  std::string problem = encode_gray(f, pixels, size, rows.data());
  if (std::fclose(f) != 0 && problem.empty()) problem = std::string("write error (") + std::strerror(errno) + ")";
  if (!problem.empty()) throw DataError(path + ": " + problem);
}

// ---- Reader -------------------------------------------------------------------------------------

Images read_images(const Index& index, const std::vector<std::int64_t>& indices, std::int64_t resolution,
                   unsigned threads) {
  if (!valid_resolution(resolution)) throw std::invalid_argument("resolution: must be 32, 64, 128 or 256");
  const auto pixels = static_cast<std::size_t>(resolution * resolution);
  const std::size_t n = indices.size();
  Images out;
  out.resolution = resolution;
  out.pixels.resize(n * pixels);
  std::vector<char> empty(n, 0);

  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, std::max<std::size_t>(1, n / 256)));
  // Worker t decodes the t-th contiguous range and stops at its first bad image, so the first
  // error of the lowest failing range is the first bad example overall.
  std::vector<std::string> errors(threads);
  auto work = [&](unsigned t) {
    const std::size_t begin = n * t / threads, end = n * (t + 1) / threads;
    std::vector<std::uint8_t> buf;
    for (std::size_t i = begin; i < end; ++i) {
      const Example& e = index.examples.at(static_cast<std::size_t>(indices[i]));
      try {
        // An empty file is skipped, as LRA's pipeline drops empty images.
        empty[i] = !read_gray_png_into(e.image, resolution, out.pixels.data() + i * pixels, "", buf, true);
      } catch (const DataError& err) {
        errors[t] = std::string(err.what()) + " (listed in " + index.where(e) + ")";
        return;
      }
    }
  };
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (auto& th : pool) th.join();
  }
  for (const auto& e : errors)
    if (!e.empty()) throw DataError(e);

  // Labels, and the pixels compacted over skipped (empty) images.
  out.labels.reserve(n);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (empty[i]) {
      ++out.skipped_empty;
      continue;
    }
    if (kept != i) std::memmove(out.pixels.data() + kept * pixels, out.pixels.data() + i * pixels, pixels);
    out.labels.push_back(index.examples[static_cast<std::size_t>(indices[i])].label);
    ++kept;
  }
  out.pixels.resize(kept * pixels);
  return out;
}

SplitIndices split_80_10_10(std::int64_t n, std::uint64_t seed) {
  if (n < 10)
    throw DataError("pathfinder: " + std::to_string(n) + " examples, at least 10 are needed for the 80/10/10 split");
  const std::vector<std::int64_t> perm = seeded_permutation(n, seed);
  const std::int64_t held = n / 10, train = n - 2 * held;
  SplitIndices s;
  s.train.assign(perm.begin(), perm.begin() + train);
  s.val.assign(perm.begin() + train, perm.begin() + train + held);
  s.test.assign(perm.begin() + train + held, perm.end());
  for (auto* part : {&s.train, &s.val, &s.test}) std::sort(part->begin(), part->end());
  return s;
}

}  // namespace attnlab::pathfinder
