// The paths of test_paths.hpp, from the compile definitions tests/CMakeLists.txt gives this file
// alone (ATTNLAB_PATH_*).
#include "test_paths.hpp"

namespace attnlab::testing::paths {
const char* const source_dir = ATTNLAB_PATH_SOURCE_DIR;
const char* const binary = ATTNLAB_PATH_BINARY;
const char* const torch_python = ATTNLAB_PATH_TORCH_PYTHON;
const char* const bad_plugins = ATTNLAB_PATH_BAD_PLUGINS;
const char* const defect_plugins = ATTNLAB_PATH_DEFECT_PLUGINS;
const char* const crash_plugins = ATTNLAB_PATH_CRASH_PLUGINS;
const char* const study_plugins = ATTNLAB_PATH_STUDY_PLUGINS;
const char* const web_dir = ATTNLAB_PATH_WEB_DIR;
const char* const chromium = ATTNLAB_PATH_CHROMIUM;
}  // namespace attnlab::testing::paths
