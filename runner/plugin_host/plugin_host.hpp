#pragma once
// Plugin discovery and loading (Boost.DLL). The descriptor is read and checked before anything
// else in a plugin is touched; every refused file gets one line naming it and the reason, and
// the other plugins still load. Loaded libraries are never unloaded (see permanent_libraries in
// plugin_host.cpp): objects a plugin made may outlive any registry.
#include <deque>
#include <string>
#include <vector>

#include "attnlab/params.hpp"
#include "attnlab/plugin.hpp"  // the factories' signatures; making a method or dataset needs attention.hpp or dataset.hpp

namespace attnlab {

struct LoadedPlugin {
  std::string path;         // absolute and canonical
  std::string sha256;       // of the file, recorded with every run that uses it
  const PluginInfo* info;   // lives in the loaded library
  AttentionFactory* make_attention = nullptr;  // kind == attention
  DatasetFactory* make_dataset = nullptr;      // kind == dataset

  PluginKind kind() const { return info->kind; }
  std::string name() const { return info->name; }
  ParamValues defaults() const { return ParamValues::defaults(info->params, info->param_count); }
};

struct PluginLoadError {
  std::string path;
  std::string reason;
  std::string line() const { return path + ": " + reason; }
};

class PluginRegistry {
 public:
  // Folders to search, in order: the --plugins folders, then ATTNLAB_PLUGIN_PATH (':'-separated),
  // then the bundled plugins (bundled_dirs). A name found twice is taken from the first folder.
  static std::vector<std::string> search_path(const std::vector<std::string>& cli_dirs);
  // The plugins that came with this executable: <prefix>/lib/attnlab/{plugins,datasets} when it is
  // installed as <prefix>/bin/attnlab, else the build folder's plugins/ and datasets/.
  static std::vector<std::string> bundled_dirs();

  // Loads every `*.so` in the folders, in order (sorted by file name within a folder).
  void load_folders(const std::vector<std::string>& folders);
  // Loads one file; on refusal records a PluginLoadError and returns false.
  bool load_file(const std::string& path);

  const LoadedPlugin* find(PluginKind kind, const std::string& name) const;
  std::vector<std::string> names(PluginKind kind) const;
  const std::deque<LoadedPlugin>& plugins() const { return plugins_; }
  const std::vector<PluginLoadError>& errors() const { return errors_; }
  const std::vector<std::string>& searched() const { return searched_; }

 private:
  std::deque<LoadedPlugin> plugins_;  // a deque: pointers from find() stay valid as more load
  std::vector<PluginLoadError> errors_;
  std::vector<std::string> searched_;
};

// Every plugin on the search path (the --plugins folders, ATTNLAB_PLUGIN_PATH, then the bundled
// ones). Each file refused (not a plugin, another contract or LibTorch, a bad descriptor) is one
// warning line on stderr, so that no command hides why a plugin is missing; `attnlab plugins`,
// which lists them itself, passes report_refused = false.
PluginRegistry load_plugins(const std::vector<std::string>& plugin_folders, bool report_refused = true);

}  // namespace attnlab
