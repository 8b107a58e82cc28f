#pragma once
// Where datasets keep their generated files and token caches.
#include <string>

namespace attnlab {

// `given` (a --cache-dir or a job's setting) when not empty, else $ATTNLAB_CACHE_DIR, else
// $XDG_CACHE_HOME/attnlab, else ~/.cache/attnlab, else ./.attnlab-cache.
std::string dataset_cache_dir(const std::string& given = "");

}  // namespace attnlab
