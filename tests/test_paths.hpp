// Where this build's files are, for the tests. The paths are compiled into one small translation
// unit of each test program (test_paths.cpp, its values set in tests/CMakeLists.txt), not onto
// every test file's command line: a clone in another folder then compiles every other test file
// to the same object, which the compiler cache reads back (scripts/build.sh).
#pragma once

namespace attnlab::testing::paths {
extern const char* const source_dir;     // the checkout
extern const char* const binary;         // the attnlab executable of this build
extern const char* const torch_python;   // a Python command whose torch is this build's LibTorch
extern const char* const bad_plugins;    // the deliberately broken plugins (plugin_host_test)
extern const char* const defect_plugins; // one defect each, for the conformance checks
extern const char* const crash_plugins;  // crash_attention (queue_test)
extern const char* const study_plugins;  // approx_keysample (approx_test)
extern const char* const web_dir;        // attnlab serve's page
extern const char* const chromium;       // Debian's chromium, or "" where it is not installed
}  // namespace attnlab::testing::paths

#define ATTNLAB_SOURCE_DIR (::attnlab::testing::paths::source_dir)
#define ATTNLAB_BINARY (::attnlab::testing::paths::binary)
#define ATTNLAB_TORCH_PYTHON (::attnlab::testing::paths::torch_python)
#define ATTNLAB_BAD_PLUGIN_DIR (::attnlab::testing::paths::bad_plugins)
#define ATTNLAB_DEFECT_PLUGIN_DIR (::attnlab::testing::paths::defect_plugins)
#define ATTNLAB_CRASH_PLUGIN_DIR (::attnlab::testing::paths::crash_plugins)
#define ATTNLAB_STUDY_PLUGIN_DIR (::attnlab::testing::paths::study_plugins)
#define ATTNLAB_WEB_DIR (::attnlab::testing::paths::web_dir)
#define CHROMIUM (::attnlab::testing::paths::chromium)
