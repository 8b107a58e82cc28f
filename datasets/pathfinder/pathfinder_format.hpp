#pragma once
// Pathfinder (Long Range Arena) without LibTorch: the official folder layout, its metadata files,
// 8-bit grayscale PNG reading and writing (libpng), the seeded 80/10/10 split, and a generator of
// Pathfinder images that writes the same layout. The plugin (pathfinder_plugin.cpp) only turns
// what the reader returns into tensors.
//
// Errors in data files are reported as attnlab::DataError (declared in attnlab/dataset.hpp); the
// message is one line naming the file, and for an image also the metadata line that lists it.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace attnlab::pathfinder {

inline constexpr std::int64_t kVocabSize = 256;  // token = pixel value; 0 (black) is a real token
inline constexpr std::int64_t kNumClasses = 2;

// ---- Layout -------------------------------------------------------------------------------------
// <root>/pathfinder<N>/<difficulty folder>/metadata/<k>.npy and the PNGs they name (LRA keeps them
// in imgs/<k>/sample_<j>.png). Difficulty: easy, medium, hard (LRA's "intermediate" is medium).
bool valid_resolution(std::int64_t n);               // 32, 64, 128, 256
const char* difficulty_folder(const std::string& difficulty);  // nullptr for an unknown one
std::int64_t default_contour_length(const std::string& difficulty);  // easy 6, medium 9, hard 14
// <root>/pathfinder<resolution>/<difficulty folder>
std::string difficulty_dir(const std::string& root, std::int64_t resolution, const std::string& difficulty);

// ---- Metadata -----------------------------------------------------------------------------------
// One example as a metadata line names it. Despite their extension the metadata files are text:
// one example per line, space-separated fields; field 0 is the image folder relative to the
// difficulty folder ("imgs/0"), field 1 the PNG's file name, field 3 the label (0 or 1); the
// other fields are not used.
struct Example {
  std::string image;         // <difficulty dir>/<field 0>/<field 1>
  std::int64_t label = 0;    // 0 or 1
  std::uint32_t file = 0;    // index into Index::metadata
  std::uint32_t line = 0;    // 1-based line in that file
};

struct Index {
  std::vector<std::string> metadata;       // the metadata files read, in order
  std::vector<std::string> image_folders;  // distinct <difficulty dir>/<field 0>, first-seen order
  std::vector<Example> examples;
  // "<metadata file>:<line>" of an example, for error messages.
  std::string where(const Example& e) const;
};

// Files `<k>.npy` (k decimal) of `<dir>/metadata`, sorted by k. Other names are ignored. Throws
// DataError for a missing folder or one without metadata files.
std::vector<std::string> metadata_files(const std::string& dir);

// Reads every metadata file of a difficulty folder. Throws DataError "<file>:<line>: <problem>" for
// a line with fewer than 4 fields (a blank line included) or a label other than 0 or 1, and for a
// file that cannot be read. Images are not opened here.
Index read_index(const std::string& dir);

// ---- PNG ----------------------------------------------------------------------------------------
// Decodes an 8-bit grayscale PNG of size x size pixels into `out` (size*size bytes, row-major).
// Throws DataError "<path>: <problem><context>" for a missing or unreadable file, a corrupt or
// truncated PNG, another colour type or bit depth, or another size; `context` is appended to the
// message (e.g. " (listed in <metadata>:<line>)").
void read_gray_png(const std::string& path, std::int64_t size, std::uint8_t* out, const std::string& context = "");

// Writes an 8-bit grayscale PNG (no filtering, zlib level 6, no time stamp: the same pixels give
// the same bytes with the same zlib). Throws DataError for a file that cannot be written.
void write_gray_png(const std::string& path, const std::uint8_t* pixels, std::int64_t size);

// ---- Reader -------------------------------------------------------------------------------------
// Images of the examples `indices` (into index.examples), in that order: pixels[i*N*N, (i+1)*N*N).
// An empty (0-byte) PNG is skipped, as LRA's input pipeline drops empty images (one of the official
// pathfinder32 files is empty); any other problem throws DataError naming the PNG and its metadata
// line. Decoding uses up to `threads` threads (0: the machine's cores); the error reported is the
// one of the first bad example in `indices`, whatever the thread count.
struct Images {
  std::int64_t resolution = 0;
  std::vector<std::uint8_t> pixels;
  std::vector<std::int64_t> labels;
  std::int64_t skipped_empty = 0;
  std::size_t size() const { return labels.size(); }
};
Images read_images(const Index& index, const std::vector<std::int64_t>& indices, std::int64_t resolution,
                   unsigned threads = 0);

// The seeded 80/10/10 split of n examples: val and test get n/10 each (rounded down), train the
// rest; drawn from attnlab::seeded_permutation(n, seed) (train = its first part, then val, then
// test), each part sorted so that examples keep their file order. Throws DataError when n < 10.
struct SplitIndices {
  std::vector<std::int64_t> train, val, test;
};
SplitIndices split_80_10_10(std::int64_t n, std::uint64_t seed);

// ---- Generator ----------------------------------------------------------------------------------
// Geometry at resolution N, u = N/32 (everything scales with the image). A path is a chain of
// dashes: a dash is `dash` long (in 1/256 pixel; drawn half-open, sampled every 1/4 pixel, with a
// width x width brush), then comes a `gap` before the next one; after each dash the heading turns
// by a step in -max_turn..max_turn of 64 directions (5.625 degrees each). Markers are squares of
// side 2*marker_radius+1 centred on a path's first or last drawn pixel.
//   N = 32: dash 1.5 px, gap 1.5 px, width 1, markers 3x3, turns up to 33.75 degrees, link 2.
struct Geometry {
  std::int64_t dash = 384, gap = 384;  // 1/256 pixel
  std::int64_t width = 1, marker_radius = 1, max_turn = 6;
  // Chebyshev distance (pixels) within which consecutive dashes of one path always lie; pixels of
  // different paths, and pieces of one path two or more dashes apart, are always farther apart.
  std::int64_t link = 2;
};
Geometry geometry(std::int64_t resolution);

struct GeneratorParams {
  std::int64_t resolution = 32;
  std::int64_t contour_length = 14;  // dashes of each of the two main paths
  std::int64_t distractors = 4;      // extra unmarked paths of max(1, contour_length / 3) dashes
  std::uint64_t seed = 0;
};

// Throws std::invalid_argument (message starting with the parameter's name) for a resolution not
// in 32/64/128/256, contour_length < 1 or > 64, distractors < 0 or > 64.
void check_generator_params(const GeneratorParams& p);

// Draws Pathfinder images. Example i uses its own std::mt19937_64 seeded from (seed, i) (so images
// can be drawn in any order, in parallel, with the same result) and exact mappings of our own
// (the standard distributions are implementation-defined): the same parameters give the same
// pixels on every machine. Label of example i: i % 2 (exactly balanced).
//
// An image is black (0) with two main paths of contour_length dashes and `distractors` shorter
// paths, all bright (255). Label 1: markers on both ends of one main path (drawn first or second
// at random). Label 0: a marker at the start of each main path. Both classes thus show the same
// number of paths and markers. Paths stay inside the image and keep more than geometry().link
// pixels (Chebyshev) from each other and from their own dashes two or more steps away; a dash
// that does not fit tries other turns (a depth-first search over the turns with a budget), a path
// that does not fit is started elsewhere, an image whose paths do not fit is started again.
class ImageGenerator {
 public:
  explicit ImageGenerator(const GeneratorParams& params);
  // Draws example i into `pixels` (N*N bytes) and returns its label. Throws attnlab::DataError when
  // the paths do not fit after many attempts (parameters too dense for the resolution).
  int draw(std::uint64_t i, std::uint8_t* pixels);
  static int label_of(std::uint64_t i) { return static_cast<int>(i % 2); }

 private:
  bool place_path(std::int64_t dashes, bool mark_start, bool mark_end, std::vector<std::int32_t>& pixels);
  // place_path's steps (pathfinder_generator.cpp), on path_pixels_, drawn_, self_ and levels_
  bool search_path(std::int64_t dashes, bool mark_start, bool mark_end);
  void enter(std::size_t k, std::int64_t dashes, std::int64_t x, std::int64_t y, int dir);
  bool add_dash(std::int64_t x, std::int64_t y, int d, bool marker_first, bool marker_last);
  bool add_marker(std::int64_t px, std::int64_t py);
  bool add_pixel(std::int64_t px, std::int64_t py);
  void mark_piece(std::size_t begin, std::size_t end, std::int32_t delta);
  void truncate_path(std::size_t size);
  std::uint64_t below(std::uint64_t n);  // uniform in [0, n)

  GeneratorParams p_;
  Geometry g_;
  std::int64_t n_;
  std::mt19937_64 rng_;
  std::vector<std::uint32_t> others_;  // == image_stamp_: within `link` of an accepted path
  std::vector<std::uint32_t> self_;    // > 0: within `link` of an older piece of this path
  std::vector<std::uint8_t> drawn_;    // 1: in path_pixels_
  std::vector<std::int32_t> path_pixels_;
  struct Level {  // the search state of place_path at one dash
    std::int64_t x, y;  // where the dash starts
    int dir;            // heading of the dash before (the first dash: the drawn heading)
    int order[17];      // the turns -max_turn..max_turn (max_turn <= 8) in the order tried
    int candidates, next;
    std::size_t begin;  // its pixels start here
  };
  std::vector<Level> levels_;
  std::uint32_t image_stamp_ = 0;
};

// Sizes and generator parameters of a generated data set.
struct GenerateSpec {
  std::string difficulty = "hard";  // names the folder only; the geometry is in `gen`
  std::int64_t count = 200000;         // images
  std::int64_t lines_per_file = 1000;  // images per metadata file and image folder (LRA: 1000)
  GeneratorParams gen;
};

// Canonical one-line description of a spec and a 16-hex-digit FNV-1a hash of it: the cache
// directory is "pathfinder-" + hash.
std::string describe(const GenerateSpec& spec);
std::string spec_hash(const GenerateSpec& spec);

// Writes the official layout under `root`: <root>/pathfinder<N>/<difficulty folder>/imgs/<k>/
// sample_<j>.png and metadata/<k>.npy for k = 0..ceil(count/lines_per_file)-1, lines
// "imgs/<k> sample_<j>.png <i> <label>" (i = k * lines_per_file + j, the example's number). Each
// image folder is written under a temporary name and renamed, then its metadata file (also
// renamed into place), so a metadata file with its final name always lists complete images.
// Only what is missing is written (an interrupted run resumes; an image folder that has its
// final name is complete and kept); temporary entries of processes that no longer run are
// removed. Uses up to `threads` threads (0: the machine's cores); the files do not depend on it.
void ensure_generated(const std::string& root, const GenerateSpec& spec, unsigned threads = 0);

}  // namespace attnlab::pathfinder
