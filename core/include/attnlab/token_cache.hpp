#pragma once
// Tokenised splits cached as one binary file each and memory-mapped on reuse, so that the second
// load of a large split costs a header check and an mmap instead of a parse.
//
// File: <cache_dir>/tokens/<dataset>-<split>-<16 hex digits>.tok; the hex digits hash the dataset,
// split, parameters and source *paths*, so a changed source file (new size or modification time)
// rewrites the same file instead of piling up stale copies. The file's header stores the whole key
// (parameters and "<path> <size> <mtime>" of every source); a mismatch, a truncated file or a
// foreign format rebuilds it. The header also stores a checksum of the arrays, checked on every
// map (one pass over the file: 0.12-0.15 s for the 385 MB LRA ListOps train split in the page
// cache): bytes changed in place are rebuilt, with one line on stderr. Writes go to a temporary
// name and are renamed into place.
#include <functional>
#include <string>
#include <vector>

#include "attnlab/dataset.hpp"

namespace attnlab {

struct TokenCacheKey {
  std::string dataset;               // plugin name (part of the file name)
  Split split = Split::train;
  std::string params;                // canonical text of every parameter that changes the tokens,
                                     // including the tokeniser's own version string
  std::vector<std::string> sources;  // files the split is read from (may be empty for generated data)
};

// The split: mapped from the cache file when its stored key matches, otherwise `build()` is called,
// its result written to the cache and mapped back. With an empty cache_dir, `build()` is returned
// as it is. SplitData::origin says which happened ("cache hit <file>", "built, cached in <file>").
// `build` must return contiguous CPU tensors: tokens uint8/int16/int32/int64 [N, inputs, L],
// lengths int64 [N, inputs], labels int64 [N].
SplitData cached_split(const std::string& cache_dir, const TokenCacheKey& key, const std::function<SplitData()>& build);

// The cache file's path for a key (whether or not it exists).
std::string token_cache_path(const std::string& cache_dir, const TokenCacheKey& key);

}  // namespace attnlab
