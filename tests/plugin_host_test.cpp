// The plugin host: real plugins load from the build's folders; each broken plugin is refused in
// one line naming the file and the reason, and never stops the others from loading.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "attnlab/attention.hpp"
#include "plugin_host/plugin_host.hpp"
#include "test_paths.hpp"

namespace attnlab {
namespace {
namespace fs = std::filesystem;

std::string reason_for(const PluginRegistry& registry, const std::string& file) {
  for (const auto& e : registry.errors())
    if (fs::path(e.path).filename() == file) return e.reason;
  return "";
}

TEST(PluginHost, BuiltInPluginsLoadWithTheirDescriptors) {
  PluginRegistry registry;
  registry.load_folders(PluginRegistry::search_path({}));
  EXPECT_TRUE(registry.errors().empty()) << registry.errors().front().line();
  const auto* softmax = registry.find(PluginKind::attention, "softmax");
  const auto* listops = registry.find(PluginKind::dataset, "listops");
  ASSERT_NE(softmax, nullptr);
  ASSERT_NE(listops, nullptr);
  EXPECT_EQ(softmax->info->contract_version, kContractVersion);
  EXPECT_NE(softmax->make_attention, nullptr);
  EXPECT_NE(listops->make_dataset, nullptr);
  EXPECT_EQ(softmax->sha256.size(), 64u);
  EXPECT_GT(listops->info->param_count, 3u);
}

TEST(PluginHost, EachBrokenPluginIsRefusedInOneLineAndTheRestLoad) {
  const fs::path dir = fs::temp_directory_path() / ("attnlab-bad-" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(ATTNLAB_BAD_PLUGIN_DIR)) fs::copy_file(entry.path(), dir / entry.path().filename(), fs::copy_options::overwrite_existing);
  std::ofstream(dir / "not_a_library.so") << "this is a text file, not ELF\n";
  std::ofstream(dir / "README.txt") << "ignored: not a .so\n";

  PluginRegistry registry;
  // the real folders first, so that the impostor "softmax" comes second and is refused
  auto folders = PluginRegistry::search_path({});
  folders.push_back(dir.string());
  registry.load_folders(folders);

  EXPECT_NE(registry.find(PluginKind::attention, "softmax"), nullptr);
  EXPECT_EQ(registry.find(PluginKind::attention, "softmax")->info->version, std::string("1.0"));
  EXPECT_NE(registry.find(PluginKind::dataset, "listops"), nullptr);
  EXPECT_EQ(registry.errors().size(), 6u);
  for (const auto& e : registry.errors()) {
    EXPECT_EQ(e.line().find('\n'), std::string::npos) << e.line();
    EXPECT_EQ(e.line().rfind(e.path, 0), 0u);
  }
  EXPECT_NE(reason_for(registry, "not_a_library.so").find("not a loadable shared library"), std::string::npos);
  EXPECT_NE(reason_for(registry, "no_descriptor.so").find("exports no attnlab_plugin_info"), std::string::npos);
  EXPECT_NE(reason_for(registry, "bad_contract.so").find("contract version 999"), std::string::npos);
  EXPECT_NE(reason_for(registry, "bad_torch.so").find("built against LibTorch 0.1"), std::string::npos);
  EXPECT_NE(reason_for(registry, "no_factory.so").find("factory attnlab_create is missing"), std::string::npos);
  EXPECT_NE(reason_for(registry, "duplicate_softmax.so").find("the name 'softmax' is taken by the attention plugin already loaded from"), std::string::npos);
  fs::remove_all(dir);
}

TEST(PluginHost, SearchPathOrderIsCliThenEnvironmentThenBuild) {
  setenv("ATTNLAB_PLUGIN_PATH", "/env/a:/env/b", 1);
  const auto path = PluginRegistry::search_path({"/cli"});
  unsetenv("ATTNLAB_PLUGIN_PATH");
  ASSERT_EQ(path.size(), 5u);
  EXPECT_EQ(path[0], "/cli");
  EXPECT_EQ(path[1], "/env/a");
  EXPECT_EQ(path[2], "/env/b");
}

TEST(PluginHost, ObjectsOutliveTheRegistryThatLoadedThem) {
  std::shared_ptr<AttentionMethod> attention;
  {
    PluginRegistry registry;
    registry.load_folders(PluginRegistry::search_path({}));
    const auto* softmax = registry.find(PluginKind::attention, "softmax");
    attention = softmax->make_attention({1, 4, 8}, softmax->defaults());
  }
  // the library stays loaded: the module's vtable still works
  EXPECT_FALSE(attention->stochastic());
  EXPECT_EQ(attention->name().empty(), false);
}

}  // namespace
}  // namespace attnlab
