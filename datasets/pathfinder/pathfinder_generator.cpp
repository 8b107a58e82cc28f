// The generator side of pathfinder_format.hpp: drawing Pathfinder images and writing them in the
// official layout. All geometry is integer (positions in 1/256 pixel, directions from a fixed
// table), so the pixels do not depend on the machine's floating point or libm.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#include "attnlab/data_util.hpp"  // fnv1a64, hex64
#include "attnlab/dataset.hpp"    // attnlab::DataError
#include "pathfinder_format.hpp"

namespace attnlab::pathfinder {
namespace fs = std::filesystem;
namespace {

constexpr std::int64_t kSub = 256;  // fixed point: positions in 1/256 pixel
constexpr int kDirections = 64;     // direction d points at angle d * 360/64 degrees
// cos(k * pi/32) * 2^14 for k = 0..16, rounded: the first quadrant of the direction table.
constexpr std::int64_t kCos[17] = {16384, 16305, 16069, 15679, 15137, 14449, 13623, 12665, 11585,
                                   10394, 9102,  7723,  6270,  4756,  3196,  1606,  0};
constexpr int kCosShift = 14;

std::int64_t cos_q(int d) {
  d = ((d % kDirections) + kDirections) % kDirections;
  if (d <= 16) return kCos[d];
  if (d <= 32) return -kCos[32 - d];
  if (d <= 48) return -kCos[d - 32];
  return kCos[64 - d];
}
std::int64_t sin_q(int d) { return cos_q(d - 16); }  // sin(a) = cos(a - 90 degrees)

// A length along direction d, as a fixed-point vector (truncated toward zero, so never longer).
std::int64_t along_x(std::int64_t length, int d) { return length * cos_q(d) / (std::int64_t{1} << kCosShift); }
std::int64_t along_y(std::int64_t length, int d) { return length * sin_q(d) / (std::int64_t{1} << kCosShift); }

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr int kPathAttempts = 100;    // fresh starts of one path before the image is started again
constexpr std::int64_t kDashTrials = 8;  // dashes tried per dash of a path, backtracking included
constexpr int kImageAttempts = 1000;  // fresh starts of one image before giving up

}  // namespace

Geometry geometry(std::int64_t resolution) {
  const std::int64_t u = std::max<std::int64_t>(1, resolution / 32);
  Geometry g;
  g.dash = 384 * u;
  g.gap = 384 * u;
  g.width = std::max<std::int64_t>(1, u / 2);
  g.marker_radius = u;
  g.max_turn = 6;
  // the last sample lies at most 1/4 px (+1 for truncation) before the dash's end
  g.link = (g.gap + kSub / 4 + 1 + kSub - 1) / kSub;
  return g;
}

void check_generator_params(const GeneratorParams& p) {
  if (!valid_resolution(p.resolution))
    throw std::invalid_argument("resolution: must be 32, 64, 128 or 256, got " + std::to_string(p.resolution));
  if (p.contour_length < 1 || p.contour_length > 64)
    throw std::invalid_argument("contour_length: must be in 1..64, got " + std::to_string(p.contour_length));
  if (p.distractors < 0 || p.distractors > 64)
    throw std::invalid_argument("distractors: must be in 0..64, got " + std::to_string(p.distractors));
}

// ---- Drawing ------------------------------------------------------------------------------------

ImageGenerator::ImageGenerator(const GeneratorParams& params)
    : p_(params), g_(geometry(params.resolution)), n_(params.resolution) {
  check_generator_params(p_);
  others_.assign(static_cast<std::size_t>(n_ * n_), 0);
  self_.assign(static_cast<std::size_t>(n_ * n_), 0);
  drawn_.assign(static_cast<std::size_t>(n_ * n_), 0);
}

std::uint64_t ImageGenerator::below(std::uint64_t n) {
  // Rejection keeps it exactly uniform: accept x >= 2^64 mod n, then x mod n.
  const std::uint64_t threshold = (0 - n) % n;
  std::uint64_t x = rng_();
  while (x < threshold) x = rng_();
  return x % n;
}

namespace {

// Stamps: a grid cell "is set" when it holds the current stamp; bumping the stamp clears the grid.
std::uint32_t bump(std::uint32_t& stamp, std::vector<std::uint32_t>& grid) {
  if (++stamp == 0) {
    std::fill(grid.begin(), grid.end(), 0);
    stamp = 1;
  }
  return stamp;
}

// Sets every cell within Chebyshev distance r of the given pixels.
void dilate_into(std::vector<std::uint32_t>& grid, std::uint32_t stamp, std::int64_t n, const std::int32_t* pixels,
                 std::size_t count, std::int64_t r) {
  for (std::size_t i = 0; i < count; ++i) {
    const std::int64_t x = pixels[i] % n, y = pixels[i] / n;
    for (std::int64_t yy = std::max<std::int64_t>(0, y - r); yy <= std::min(n - 1, y + r); ++yy)
      for (std::int64_t xx = std::max<std::int64_t>(0, x - r); xx <= std::min(n - 1, x + r); ++xx)
        grid[static_cast<std::size_t>(yy * n + xx)] = stamp;
  }
}

}  // namespace

void ImageGenerator::truncate_path(std::size_t size) {
  for (std::size_t i = size; i < path_pixels_.size(); ++i) drawn_[static_cast<std::size_t>(path_pixels_[i])] = 0;
  path_pixels_.resize(size);
}

bool ImageGenerator::add_pixel(std::int64_t px, std::int64_t py) {
  if (px < 0 || py < 0 || px >= n_ || py >= n_) return false;
  const auto cell = static_cast<std::size_t>(py * n_ + px);
  if (others_[cell] == image_stamp_ || self_[cell] != 0) return false;
  if (!drawn_[cell]) {  // each pixel once: the brush and the 1/4-pixel samples overlap a lot
    drawn_[cell] = 1;
    path_pixels_.push_back(static_cast<std::int32_t>(cell));
  }
  return true;
}

bool ImageGenerator::add_marker(std::int64_t px, std::int64_t py) {
  for (std::int64_t dy = -g_.marker_radius; dy <= g_.marker_radius; ++dy)
    for (std::int64_t dx = -g_.marker_radius; dx <= g_.marker_radius; ++dx)
      if (!add_pixel(px + dx, py + dy)) return false;
  return true;
}

// A dash from (x, y) along d, half-open (its end is not drawn), with its markers: one sample every
// 1/4 pixel, each stamped with the brush.
bool ImageGenerator::add_dash(std::int64_t x, std::int64_t y, int d, bool marker_first, bool marker_last) {
  const std::int64_t limit = n_ * kSub, samples = g_.dash / (kSub / 4);
  const std::int64_t lo = -(g_.width - 1) / 2, hi = g_.width / 2;
  const std::int64_t vx = along_x(g_.dash, d), vy = along_y(g_.dash, d);
  std::int64_t px = 0, py = 0;
  for (std::int64_t s = 0; s < samples; ++s) {
    const std::int64_t sx = x + vx * s / samples, sy = y + vy * s / samples;
    if (sx < 0 || sy < 0 || sx >= limit || sy >= limit) return false;
    px = sx / kSub;
    py = sy / kSub;
    for (std::int64_t dy = lo; dy <= hi; ++dy)
      for (std::int64_t dx = lo; dx <= hi; ++dx)
        if (!add_pixel(px + dx, py + dy)) return false;
    if (s == 0 && marker_first && !add_marker(px, py)) return false;
  }
  return !marker_last || add_marker(px, py);
}

// self_ counts, per cell, the pieces (two or more back) within `link`; +1 on entering a dash, -1
// when the search backs out of it.
void ImageGenerator::mark_piece(std::size_t begin, std::size_t end, std::int32_t delta) {
  const std::int64_t r = g_.link;
  for (std::size_t i = begin; i < end; ++i) {
    const std::int64_t x = path_pixels_[i] % n_, y = path_pixels_[i] / n_;
    for (std::int64_t yy = std::max<std::int64_t>(0, y - r); yy <= std::min(n_ - 1, y + r); ++yy)
      for (std::int64_t xx = std::max<std::int64_t>(0, x - r); xx <= std::min(n_ - 1, x + r); ++xx)
        self_[static_cast<std::size_t>(yy * n_ + xx)] += static_cast<std::uint32_t>(delta);
  }
}

// Dash k of `dashes` starts at (x, y) after heading `dir`: its turns in a random order (the first
// dash keeps the drawn heading), and the piece two back now counts as the path's own.
void ImageGenerator::enter(std::size_t k, std::int64_t dashes, std::int64_t x, std::int64_t y, int dir) {
  const int turns = static_cast<int>(2 * g_.max_turn + 1);
  Level& L = levels_[k];
  L.x = x;
  L.y = y;
  L.dir = dir;
  L.next = 0;
  L.begin = path_pixels_.size();
  L.candidates = k == 0 ? 1 : turns;
  for (int t = 0; t < turns; ++t) L.order[t] = k == 0 ? 0 : t - static_cast<int>(g_.max_turn);
  for (int t = L.candidates - 1; t > 0; --t) std::swap(L.order[t], L.order[below(static_cast<std::uint64_t>(t) + 1)]);
  if (k >= 2 && k < static_cast<std::size_t>(dashes)) mark_piece(levels_[k - 2].begin, levels_[k - 1].begin, +1);
}

// One attempt: start anywhere, head anywhere, then `dashes` dashes, each turned by a random step
// from the one before. A dash that does not fit tries the other turns in a random order, and when
// none fits the dash before it takes its next turn (a depth-first search with a budget of
// kDashTrials per dash); this lets long paths curl inside small images instead of running into the
// border. true when every dash found its place (path_pixels_ holds the path).
bool ImageGenerator::search_path(std::int64_t dashes, bool mark_start, bool mark_end) {
  const std::int64_t limit = n_ * kSub;
  std::fill(self_.begin(), self_.end(), 0);
  truncate_path(0);
  const auto x0 = static_cast<std::int64_t>(below(static_cast<std::uint64_t>(limit)));
  const auto y0 = static_cast<std::int64_t>(below(static_cast<std::uint64_t>(limit)));
  enter(0, dashes, x0, y0, static_cast<int>(below(kDirections)));
  std::int64_t budget = kDashTrials * dashes;
  std::int64_t k = 0;
  while (k >= 0 && k < dashes && budget > 0) {
    Level& L = levels_[static_cast<std::size_t>(k)];
    truncate_path(L.begin);
    if (L.next == L.candidates) {  // no turn fits: back out, the dash before takes its next turn
      if (k >= 2) {
        const auto j = static_cast<std::size_t>(k);
        mark_piece(levels_[j - 2].begin, levels_[j - 1].begin, -1);
      }
      --k;
      continue;
    }
    --budget;
    const int d = L.dir + L.order[L.next++];
    if (add_dash(L.x, L.y, d, k == 0 && mark_start, k == dashes - 1 && mark_end)) {
      ++k;
      const std::int64_t x = L.x + along_x(g_.dash, d) + along_x(g_.gap, d), y = L.y + along_y(g_.dash, d) + along_y(g_.gap, d);
      enter(static_cast<std::size_t>(k), dashes, x, y, d);
    }
  }
  return k == dashes;
}

// Attempts after one another (search_path). A path's pieces are its dashes, a marker belonging to
// the dash it sits on. Every pixel must be inside the image and farther than `link` from other
// paths (others_) and from the pieces of this path two or more steps back (self_), so that the path
// neither touches another nor folds back onto itself.
bool ImageGenerator::place_path(std::int64_t dashes, bool mark_start, bool mark_end, std::vector<std::int32_t>& out) {
  levels_.resize(static_cast<std::size_t>(dashes) + 1);
  for (int attempt = 0; attempt < kPathAttempts; ++attempt) {
    if (search_path(dashes, mark_start, mark_end)) {
      out.insert(out.end(), path_pixels_.begin(), path_pixels_.end());
      truncate_path(0);
      return true;
    }
  }
  truncate_path(0);
  return false;
}

int ImageGenerator::draw(std::uint64_t i, std::uint8_t* image) {
  rng_.seed(splitmix64(splitmix64(p_.seed) + i));
  const int label = label_of(i);
  // Label 1: one of the two main paths (drawn at random) carries both markers; label 0: each
  // carries a marker at its start. Either way two marked ends, two long paths, same distractors.
  const int both = label == 1 ? static_cast<int>(below(2)) : -1;
  const std::int64_t short_length = std::max<std::int64_t>(1, p_.contour_length / 3);
  std::vector<std::int32_t> lit, path;
  for (int restart = 0; restart < kImageAttempts; ++restart) {
    const std::uint32_t stamp = bump(image_stamp_, others_);
    lit.clear();
    bool ok = true;
    for (std::int64_t k = 0; ok && k < 2 + p_.distractors; ++k) {
      const bool main = k < 2;
      const bool mark_start = main && (label == 0 || both == k);
      const bool mark_end = main && label == 1 && both == k;
      path.clear();
      ok = place_path(main ? p_.contour_length : short_length, mark_start, mark_end, path);
      if (ok) {
        dilate_into(others_, stamp, n_, path.data(), path.size(), g_.link);
        lit.insert(lit.end(), path.begin(), path.end());
      }
    }
    if (ok) {
      std::memset(image, 0, static_cast<std::size_t>(n_ * n_));
      for (const std::int32_t cell : lit) image[cell] = 255;
      return label;
    }
  }
  throw DataError("pathfinder generator: image " + std::to_string(i) + ": the paths do not fit in " +
                  std::to_string(n_) + "x" + std::to_string(n_) + " pixels after " + std::to_string(kImageAttempts) +
                  " attempts (contour_length = " + std::to_string(p_.contour_length) + ", distractors = " +
                  std::to_string(p_.distractors) + "); lower them or raise the resolution");
}

// ---- Generated files ----------------------------------------------------------------------------

std::string describe(const GenerateSpec& s) {
  return "pathfinder-generator-v1 resolution=" + std::to_string(s.gen.resolution) + " difficulty=" + s.difficulty +
         " contour_length=" + std::to_string(s.gen.contour_length) +
         " distractors=" + std::to_string(s.gen.distractors) +
         " count=" + std::to_string(s.count) + " lines_per_file=" + std::to_string(s.lines_per_file) +
         " seed=" + std::to_string(s.gen.seed);
}

std::string spec_hash(const GenerateSpec& spec) { return hex64(fnv1a64(describe(spec))); }

namespace {

// "<final>.tmp.<pid>.<n>": unique per process and call.
std::string temp_name(const fs::path& final_path) {
  static std::atomic<std::uint64_t> counter{0};
  return final_path.string() + ".tmp." + std::to_string(static_cast<long long>(::getpid())) + "." +
         std::to_string(++counter);
}

// Removes "<name>.tmp.<pid>.<n>" entries of `folder` left by processes that no longer run.
void remove_stale_temps(const fs::path& folder) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::size_t at = name.find(".tmp.");
    if (at == std::string::npos) continue;
    const long long pid = std::atoll(name.c_str() + at + 5);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(it->path());
  }
  for (const auto& p : stale) fs::remove_all(p, ec);
}

void write_text_file(const fs::path& final_path, const std::string& text) {
  const std::string temp = temp_name(final_path);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw DataError(temp + ": cannot create file (" + std::strerror(errno) + ")");
    out << text;
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(temp, ec);
      throw DataError(temp + ": write error");
    }
  }
  std::error_code ec;
  fs::rename(temp, final_path, ec);
  if (ec) {
    fs::remove(temp, ec);
    throw DataError(final_path.string() + ": cannot rename the generated file (" + ec.message() + ")");
  }
}

// Metadata file k and its image folder: images first .. first + lines - 1. An image folder only
// ever gets its final name complete (renamed from a temporary one), so one that exists without its
// metadata file, left by an interrupted run or just written by a concurrent one, is kept as it is.
void write_chunk(const fs::path& dir, std::int64_t k, std::int64_t first, std::int64_t lines, ImageGenerator& gen,
                 std::int64_t n) {
  const fs::path meta = dir / "metadata" / (std::to_string(k) + ".npy");
  if (fs::is_regular_file(meta)) return;  // a concurrent run finished it
  const fs::path folder = dir / "imgs" / std::to_string(k);
  std::error_code ec;
  if (!fs::is_directory(folder)) {
    const fs::path temp = temp_name(folder);
    fs::create_directory(temp, ec);
    if (ec) throw DataError(temp.string() + ": cannot create directory (" + ec.message() + ")");
    try {
      std::vector<std::uint8_t> image(static_cast<std::size_t>(n * n));
      for (std::int64_t j = 0; j < lines; ++j) {
        gen.draw(static_cast<std::uint64_t>(first + j), image.data());
        write_gray_png((temp / ("sample_" + std::to_string(j) + ".png")).string(), image.data(), n);
      }
      fs::rename(temp, folder, ec);
      if (ec && !fs::is_directory(folder))
        throw DataError(folder.string() + ": cannot rename the generated folder (" + ec.message() + ")");
      if (ec) fs::remove_all(temp, ec);  // a concurrent run renamed its (identical) folder first
    } catch (...) {
      fs::remove_all(temp, ec);
      throw;
    }
  }
  std::string metadata;
  for (std::int64_t j = 0; j < lines; ++j)
    metadata += "imgs/" + std::to_string(k) + " sample_" + std::to_string(j) + ".png " + std::to_string(first + j) +
                " " + std::to_string(ImageGenerator::label_of(static_cast<std::uint64_t>(first + j))) + "\n";
  write_text_file(meta, metadata);
}

}  // namespace

void ensure_generated(const std::string& root, const GenerateSpec& spec, unsigned threads) {
  check_generator_params(spec.gen);
  if (spec.count < 1) throw std::invalid_argument("count: must be at least 1");
  const fs::path dir = difficulty_dir(root, spec.gen.resolution, spec.difficulty);
  if (spec.lines_per_file < 1) throw std::invalid_argument("lines_per_file: must be at least 1");
  const std::int64_t per_file = spec.lines_per_file;
  const std::int64_t chunks = (spec.count + per_file - 1) / per_file;
  std::vector<std::int64_t> missing;
  for (std::int64_t k = 0; k < chunks; ++k)
    if (!fs::is_regular_file(dir / "metadata" / (std::to_string(k) + ".npy"))) missing.push_back(k);
  if (missing.empty()) return;

  std::error_code ec;
  for (const char* sub : {"metadata", "imgs"}) {
    fs::create_directories(dir / sub, ec);
    if (ec) throw DataError((dir / sub).string() + ": cannot create directory (" + ec.message() + ")");
    remove_stale_temps(dir / sub);
  }
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, missing.size()));

  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    try {
      ImageGenerator gen(spec.gen);
      for (std::size_t m = next++; m < missing.size() && !failed; m = next++) {
        const std::int64_t k = missing[m];
        write_chunk(dir, k, k * per_file, std::min(per_file, spec.count - k * per_file), gen, spec.gen.resolution);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
  // For people looking at the cache: what the files were generated from.
  write_text_file(fs::path(root) / "generator.txt", describe(spec) + "\n");
}

}  // namespace attnlab::pathfinder
