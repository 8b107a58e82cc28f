#pragma once
// What several suites share: the plugins of this build, a scratch folder per test, running the
// attnlab binary, and reading one value back from a database.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "attnlab/dataset.hpp"
#include "attnlab/train/config.hpp"
#include "plugin_host/plugin_host.hpp"
#include "test_paths.hpp"

namespace attnlab::testing {

// Every plugin this build made, loaded once per test binary as the CLI loads them.
inline const PluginRegistry& built_plugins() {
  static const PluginRegistry registry = [] {
    PluginRegistry r;
    r.load_folders(PluginRegistry::search_path({}));
    return r;
  }();
  return registry;
}

// A toy task the model learns in a few dozen steps: the label is the first token (classes 0..3),
// tokens 1..8, lengths from len/2 to len.
inline SplitData first_token_split(std::int64_t n, std::int64_t len, std::uint64_t seed) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  SplitData d;
  d.tokens = at::randint(1, 9, {n, 1, len}, g, at::kShort);
  d.lengths = at::randint(len / 2, len + 1, {n, 1}, g, at::kLong);
  d.labels = (d.tokens.select(1, 0).select(1, 0).to(at::kLong) - 1) % 4;
  return d;
}

// FILE of tests/scripted/methods.py's methods, scripted by the Python torch that matches this
// build (tests/CMakeLists.txt) into a folder of this test binary's own at the first call; removed
// when the binary ends.
inline std::string scripted_method(const std::string& name) {
  struct Folder {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("attnlab-scripted-" + std::to_string(getpid()));
    Folder() {
      const std::string log = path.string() + ".log";
      const std::string command = std::string(ATTNLAB_TORCH_PYTHON) + " " + ATTNLAB_SOURCE_DIR + "/tests/scripted/methods.py " +
                                  path.string() + " > " + log + " 2>&1";
      if (std::system(command.c_str()) != 0)
        throw std::runtime_error("`" + command + "` failed (" + log + "): these tests need the Python torch of this "
                                 "build's LibTorch (python3-torch for 1.13, the 2.11 wheel for 2.11)");
      std::filesystem::remove(log);
    }
    ~Folder() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Folder folder;
  return (folder.path / (name + ".pt")).string();
}

// A one-layer model small enough for training tests (dim 16, 2 heads of 8).
inline ModelConfig tiny_model(std::int64_t ffn_dim = 32) {
  ModelConfig m;
  m.layers = 1;
  m.dim = 16;
  m.ffn_dim = ffn_dim;
  m.heads = 2;
  m.head_dim = 8;
  return m;
}

// XORs `count` bytes in the middle of a file with 0x5a: what a disk error or a stray write does.
inline void flip_middle(const std::string& file, std::size_t count) {
  std::fstream bytes(file, std::ios::in | std::ios::out | std::ios::binary);
  const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(file) / 2);
  std::string block(count, '\0');
  bytes.seekg(middle);
  bytes.read(block.data(), static_cast<std::streamsize>(count));
  for (auto& c : block) c = static_cast<char>(c ^ 0x5a);
  bytes.seekp(middle);
  bytes.write(block.data(), static_cast<std::streamsize>(count));
}

// One value from a database ("NULL", "(none)" without a row, "(error)" if the SQL fails).
inline std::string query_one(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_busy_timeout(db, 10000);
  sqlite3_stmt* stmt = nullptr;
  std::string out = "(error)";
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_ROW) {
      const auto* text = sqlite3_column_text(stmt, 0);
      out = text ? reinterpret_cast<const char*>(text) : "NULL";
    } else if (rc == SQLITE_DONE) {
      out = "(none)";
    }
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

// A fixture with a fresh scratch folder per test and the attnlab binary at hand.
class CliTest : public ::testing::Test {
 protected:
  std::filesystem::path dir;

  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("attnlab-" + std::to_string(getpid()) + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  std::string path(const std::string& name) const { return (dir / name).string(); }

  // Runs `attnlab ARGS`; returns its exit status, with stdout and stderr in `output`.
  int attnlab(const std::string& args, std::string& output) const {
    const std::string log = path("out.log");
    const int status = std::system((std::string(ATTNLAB_BINARY) + " " + args + " > " + log + " 2>&1").c_str());
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    output = text.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

}  // namespace attnlab::testing
