#include "plugin_host/plugin_host.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include <boost/dll/shared_library.hpp>

#include "build_info.hpp"
#include "plugin_host/hashing.hpp"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

// Every library ever loaded, kept for the life of the process and deliberately never destroyed:
// unloading a library whose vtables are still referenced by live modules is undefined behaviour
// (the LLVM pass-plugin rule: plugins are loaded permanently).
std::vector<boost::dll::shared_library>& permanent_libraries() {
  static auto* libraries = new std::vector<boost::dll::shared_library>();
  return *libraries;
}

std::string version_text(std::uint32_t major, std::uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace

std::vector<std::string> PluginRegistry::search_path(const std::vector<std::string>& cli_dirs) {
  std::vector<std::string> dirs = cli_dirs;
  if (const char* env = std::getenv("ATTNLAB_PLUGIN_PATH")) {
    std::string all = env;
    std::size_t start = 0;
    while (start <= all.size()) {
      std::size_t colon = all.find(':', start);
      if (colon == std::string::npos) colon = all.size();
      if (colon > start) dirs.push_back(all.substr(start, colon - start));
      start = colon + 1;
    }
  }
  for (auto& dir : bundled_dirs()) dirs.push_back(std::move(dir));
  return dirs;
}

std::vector<std::string> PluginRegistry::bundled_dirs() {
  // Found from the executable, never from a path compiled in: an installed tree can move, and an
  // installed attnlab must not pick up the build folder it was made in.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const fs::path root = exe.parent_path().parent_path();
  if (fs::is_directory(root / build_info::kInstalledPluginDir, ec))
    return {(root / build_info::kInstalledPluginDir).string(), (root / build_info::kInstalledDatasetDir).string()};
  return {(root / build_info::kBuildPluginDir).string(), (root / build_info::kBuildDatasetDir).string()};
}

void PluginRegistry::load_folders(const std::vector<std::string>& folders) {
  std::set<std::string> seen, bundled;
  for (const auto& folder : bundled_dirs()) {
    std::error_code ec;
    bundled.insert(fs::weakly_canonical(folder, ec).string());
  }
  for (const auto& folder : folders) {
    std::error_code ec;
    const auto canonical = fs::weakly_canonical(folder, ec).string();
    if (!seen.insert(canonical).second) continue;
    searched_.push_back(folder);
    if (!fs::is_directory(folder, ec)) continue;  // a folder on the path that does not exist is not an error
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(folder, ec))
      if (entry.path().extension() == ".so" && !entry.is_directory()) files.push_back(entry.path().string());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) load_file(file, bundled.count(canonical) > 0);
  }
}

bool PluginRegistry::load_file(const std::string& path, bool bundled) {
  auto refuse = [&](const std::string& reason) {
    errors_.push_back({path, reason});
    return false;
  };
  boost::dll::shared_library library;
  try {
    library.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    std::string why = e.what();
    return refuse("not a loadable shared library (" + why.substr(0, why.find('\n')) + ")");
  }
  if (!library.has(ATTNLAB_PLUGIN_INFO_SYMBOL))
    return refuse("not an attnlab plugin: it exports no " ATTNLAB_PLUGIN_INFO_SYMBOL " descriptor");
  const auto* info = &library.get<const PluginInfo>(ATTNLAB_PLUGIN_INFO_SYMBOL);
  // The contract version is the one field whose place every version agrees on: check it first.
  if (info->contract_version != kContractVersion)
    return refuse("built for plugin contract version " + std::to_string(info->contract_version) +
                  ", but this attnlab speaks version " + std::to_string(kContractVersion) + ": rebuild the plugin");
  if (info->torch_major != build_info::kTorchMajor || info->torch_minor != build_info::kTorchMinor)
    return refuse("built against LibTorch " + version_text(info->torch_major, info->torch_minor) +
                  ", but this attnlab uses LibTorch " + version_text(build_info::kTorchMajor, build_info::kTorchMinor) +
                  ": rebuild the plugin");
  if (info->kind != PluginKind::attention && info->kind != PluginKind::dataset)
    return refuse("unknown plugin kind " + std::to_string(static_cast<unsigned>(info->kind)));
  if (!info->name || !*info->name) return refuse("the descriptor has no name");
  if (const auto* other = find(info->kind, info->name); other && bundled) {
    overridden_.push_back({path, std::string("overridden by ") + other->path});
    return false;
  }
  if (const auto* other = find(info->kind, info->name))
    return refuse(std::string("the name '") + info->name + "' is taken by the " + to_string(info->kind) +
                  " plugin already loaded from " + other->path + "; this one is ignored");
  if (!library.has(ATTNLAB_FACTORY_SYMBOL))
    return refuse("the descriptor is there but the factory " ATTNLAB_FACTORY_SYMBOL " is missing");
  try {
    // The defaults must parse under the plugin's own schema.
    ParamValues::defaults(info->params, info->param_count);
  } catch (const std::exception& e) {
    return refuse(std::string("bad parameter schema: ") + e.what());
  }

  // Recorded with every run (run_plugins) and every queued job (its folder): absolute and
  // canonical, so that it names the same file from any working directory.
  std::error_code ec;
  fs::path canonical = fs::canonical(path, ec);
  if (ec) canonical = fs::absolute(path);
  LoadedPlugin plugin{canonical.string(), sha256_of_file(path), info, nullptr, nullptr, nullptr};
  if (info->kind == PluginKind::attention)
    plugin.make_attention = &library.get_alias<AttentionFactory>(ATTNLAB_FACTORY_SYMBOL);
  else
    plugin.make_dataset = &library.get_alias<DatasetFactory>(ATTNLAB_FACTORY_SYMBOL);
  permanent_libraries().push_back(std::move(library));
  plugins_.push_back(std::move(plugin));
  return true;
}

struct ScriptDescriptor {
  std::string name, path, description;
  ParamSpec param;
  PluginInfo info;
};

const LoadedPlugin& PluginRegistry::add_script(const std::string& name, const std::string& path) const {
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  if (ec || !fs::is_regular_file(canonical, ec)) throw std::runtime_error(path + ": no such file");
  if (const auto* other = find(PluginKind::attention, name)) {
    if (other->scripted() && other->path == canonical.string()) return *other;
    throw std::runtime_error("the name '" + name + "' is taken by " +
                             (other->scripted() ? "the scripted method " : "the attention plugin ") + other->path +
                             "; a scripted method needs a name of its own: rename its table, e.g. [methods." + name +
                             "_script]");
  }
  std::string sha256 = sha256_of_file(canonical.string());
  if (sha256.empty()) throw std::runtime_error(path + ": cannot read it");
  auto script = std::make_shared<ScriptDescriptor>();
  script->name = name;
  script->path = canonical.string();
  script->description = "TorchScript method " + script->path;
  script->param = {"script", ParamType::string, script->path.c_str(), 0, 0, nullptr,
                   "the TorchScript file (.pt) of the method, absolute"};
  script->info = {kContractVersion, build_info::kTorchMajor, build_info::kTorchMinor, PluginKind::attention,
                  script->name.c_str(), "torchscript", script->description.c_str(), &script->param, 1};
  LoadedPlugin plugin{script->path, std::move(sha256), &script->info, nullptr, nullptr, script};
  plugins_.push_back(std::move(plugin));
  return plugins_.back();
}

const LoadedPlugin& PluginRegistry::add_script_file(const std::string& path) const {
  const fs::path file(path);
  const std::string stem = file.stem().string();
  const auto* other = find(PluginKind::attention, stem);
  std::error_code ec;
  const bool taken = other && !(other->scripted() && fs::equivalent(other->path, file, ec));
  return add_script(taken ? file.filename().string() : stem, path);
}

const LoadedPlugin* PluginRegistry::find(PluginKind kind, const std::string& name) const {
  for (const auto& p : plugins_)
    if (p.kind() == kind && p.name() == name) return &p;
  return nullptr;
}

std::vector<std::string> PluginRegistry::names(PluginKind kind) const {
  std::vector<std::string> out;
  for (const auto& p : plugins_)
    if (p.kind() == kind) out.push_back(p.name());
  return out;
}

PluginRegistry load_plugins(const std::vector<std::string>& plugin_folders, bool report_refused) {
  PluginRegistry registry;
  registry.load_folders(PluginRegistry::search_path(plugin_folders));
  if (report_refused)
    for (const auto& e : registry.errors()) std::cerr << "attnlab: warning: plugin " << e.line() << "\n";
  return registry;
}

}  // namespace attnlab
