#include "experiment/cache_dir.hpp"

#include <cstdlib>

namespace attnlab {

std::string dataset_cache_dir(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("ATTNLAB_CACHE_DIR")) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME")) return std::string(xdg) + "/attnlab";
  if (const char* home = std::getenv("HOME")) return std::string(home) + "/.cache/attnlab";
  return ".attnlab-cache";
}

}  // namespace attnlab
