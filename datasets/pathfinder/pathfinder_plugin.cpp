// The pathfinder dataset plugin: LRA Pathfinder, from the official files or generated (then
// written in the same layout and read back by the same reader). Pixels are the tokens.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO

#include "attnlab/dataset_plugin.hpp"
#include "pathfinder_format.hpp"

namespace attnlab::pathfinder {
namespace {


const ParamSpec kParams[] = {
    {"source", ParamType::string, "generate", 0, 0, "generate|files",
     "where the data comes from: 'generate' draws Pathfinder images into the cache directory in the official layout "
     "(reused when complete); 'files' reads the official LRA layout under `path`"},
    {"path", ParamType::string, "", 0, 0, nullptr,
     "folder holding pathfinder<N>/<curv_baseline|curv_contour_length_9|curv_contour_length_14>/ (LRA's lra_release/; "
     "source = files)"},
    {"resolution", ParamType::integer, "32", 32, 256, nullptr,
     "image side N: 32, 64, 128 or 256 (LRA's pathfinder32..pathfinder256); an example is N*N pixel tokens"},
    {"difficulty", ParamType::string, "hard", 0, 0, "easy|medium|hard",
     "curv_baseline, curv_contour_length_9 or curv_contour_length_14 (LRA reports hard)"},
    {"split_seed", ParamType::integer, "0", 0, kMaxSeed, nullptr,
     "seed of the 80/10/10 train/val/test split of all examples of the folder"},
    {"count", ParamType::integer, "200000", 10, 10000000, nullptr,
     "generator: images in all (LRA: 200000 per folder), split 80/10/10 like the official files"},
    {"contour_length", ParamType::integer, "0", 0, 64, nullptr,
     "generator: dashes per main path; 0 takes the difficulty's (easy 6, medium 9, hard 14)"},
    {"distractors", ParamType::integer, "4", 0, 64, nullptr,
     "generator: unmarked distractor paths of max(1, contour_length / 3) dashes, besides the two main paths"},
    {"generator_seed", ParamType::integer, "0", 0, kMaxSeed, nullptr,
     "generator: seed; the same parameters give the same pixels on any machine"},
};

class PathfinderDataset final : public Dataset {
 public:
  PathfinderDataset(const DatasetContext& ctx, const ParamValues& params) : cache_dir_(ctx.cache_dir) {
    const std::string& source = params.string("source");
    const std::string& difficulty = params.string("difficulty");
    resolution_ = params.integer("resolution");
    if (!valid_resolution(resolution_))
      throw ParamError("resolution: must be 32, 64, 128 or 256, got " + std::to_string(resolution_));
    if (!difficulty_folder(difficulty))
      throw ParamError("difficulty: '" + difficulty + "' is not one of easy|medium|hard");
    split_seed_ = static_cast<std::uint64_t>(params.integer("split_seed"));

    if (source == "files") {
      // cache keys name absolute files
      const std::string path = ctx.describe_only ? params.string("path")
                                                 : required_path(params, "path", "the folder with the LRA files when source = \"files\"");
      root_ = path.empty() ? path : std::filesystem::absolute(path).lexically_normal().string();
      dir_ = difficulty_dir(root_, resolution_, difficulty);
      if (!ctx.describe_only) existing_folder(dir_, "no such directory (pathfinder path)");
    } else if (source == "generate") {
      generate_ = true;
      spec_.difficulty = difficulty;
      spec_.count = params.integer("count");
      spec_.gen.resolution = resolution_;
      const std::int64_t contour = params.integer("contour_length");
      spec_.gen.contour_length = contour == 0 ? default_contour_length(difficulty) : contour;
      spec_.gen.distractors = params.integer("distractors");
      spec_.gen.seed = static_cast<std::uint64_t>(params.integer("generator_seed"));
      check_params([&] { check_generator_params(spec_.gen); });
      root_ = std::filesystem::absolute(generated_folder(cache_dir_, "pathfinder", spec_hash(spec_))).lexically_normal().string();
      dir_ = difficulty_dir(root_, resolution_, difficulty);
    } else {
      throw ParamError("source: '" + source + "' is not one of generate|files");
    }
  }

  // vocabulary, classes, max_len: N*N pixels
  TaskInfo info() const override { return {kVocabSize, kNumClasses, resolution_ * resolution_}; }

  // Generated: the count asked for; official files: unknown without reading their metadata.
  SizeEstimate estimate_size() const override { return generate_ ? SizeEstimate{spec_.count, 1} : SizeEstimate{}; }

  SplitData load(Split split) override {
    if (generate_ && !generated_) {
      ensure_generated(root_, spec_);
      generated_ = true;
    }
    if (!index_) index_ = std::make_unique<Index>(read_index(dir_));
    TokenCacheKey key{"pathfinder", split,
                      "pathfinder-tokens-v1 resolution=" + std::to_string(resolution_) +
                          " split=80/10/10 split_seed=" + std::to_string(split_seed_),
                      {}};
    // The metadata files and the image folders: a PNG added, removed or renamed changes its
    // folder's modification time; one edited in place under the same name is not noticed.
    key.sources = index_->metadata;
    key.sources.insert(key.sources.end(), index_->image_folders.begin(), index_->image_folders.end());
    return cached_split(cache_dir_, key, [&] {
      const SplitIndices parts = split_80_10_10(static_cast<std::int64_t>(index_->examples.size()), split_seed_);
      const auto& part = split == Split::train ? parts.train : split == Split::val ? parts.val : parts.test;
      Images images = read_images(*index_, part, resolution_);
      return full_length_split(std::move(images.pixels), std::move(images.labels), resolution_ * resolution_);
    });
  }

 private:
  std::string cache_dir_, root_, dir_;
  std::int64_t resolution_ = 32;
  std::uint64_t split_seed_ = 0;
  bool generate_ = false, generated_ = false;
  GenerateSpec spec_;
  std::unique_ptr<Index> index_;
};

}  // namespace
}  // namespace attnlab::pathfinder

ATTNLAB_PLUGIN_INFO(dataset, "pathfinder", "1.0",
                    "LRA Pathfinder: are the two markers joined by one dashed path? N*N pixel tokens, 2 classes; "
                    "official PNG files or generated in the same layout",
                    attnlab::pathfinder::kParams);

ATTNLAB_DATASET_FACTORY(attnlab::dataset_factory<attnlab::pathfinder::PathfinderDataset>)
