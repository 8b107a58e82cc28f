#pragma once
// Plugin discovery and loading (Boost.DLL). The descriptor is read and checked before anything
// else in a plugin is touched; every refused file gets one line naming it and the reason, and
// the other plugins still load. Loaded libraries are never unloaded (see permanent_libraries in
// plugin_host.cpp): objects a plugin made may outlive any registry.
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "attnlab/params.hpp"
#include "attnlab/plugin.hpp"  // the factories' signatures; making a method or dataset needs attention.hpp or dataset.hpp

namespace attnlab {

// The descriptor of a TorchScript method, which the host writes itself (plugin_host.cpp).
struct ScriptDescriptor;

struct LoadedPlugin {
  std::string path;         // absolute and canonical
  std::string sha256;       // of the file, recorded with every run that uses it
  const PluginInfo* info;   // lives in the loaded library (a scripted method's, in `script`)
  AttentionFactory* make_attention = nullptr;  // kind == attention, compiled
  DatasetFactory* make_dataset = nullptr;      // kind == dataset
  // A TorchScript method (a .pt file; make_attention is null): its descriptor, shared by copies.
  // attention_maker (experiment/train_job.hpp) makes either kind of method.
  std::shared_ptr<const ScriptDescriptor> script;

  bool scripted() const { return script != nullptr; }

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
  bool load_file(const std::string& path) { return load_file(path, false); }

  // A TorchScript method named `name`, read from the .pt file at `path`: an attention "plugin"
  // whose file is the script (its SHA-256 recorded with every run, as a library's), with one
  // parameter, `script`, the file's absolute path. Registered the first time an experiment file
  // ([methods.NAME] script = ...), a stored job's configuration or a command line names it, hence
  // const: what find() found before is unchanged. The same name and file again returns the entry
  // already there. Throws std::runtime_error (one line) when the file cannot be read, or the name
  // is a compiled plugin's or another file's. What the file holds is checked where LibTorch is
  // (plugin_host/scripted_method.hpp).
  const LoadedPlugin& add_script(const std::string& name, const std::string& path) const;
  // A file named on a command line (`check`, `bench`, `approx`), which needs no name of its own:
  // registered under its stem ("mine" for mine.pt), or under its file name ("skyformer.pt") where
  // the stem is another method's.
  const LoadedPlugin& add_script_file(const std::string& path) const;

  const LoadedPlugin* find(PluginKind kind, const std::string& name) const;
  std::vector<std::string> names(PluginKind kind) const;
  const std::deque<LoadedPlugin>& plugins() const { return plugins_; }
  const std::vector<PluginLoadError>& errors() const { return errors_; }
  // Bundled plugins whose name a folder searched before them provides (a user's own build of a
  // bundled method): overridden, as documented, not refused. Each with the file that won.
  const std::vector<PluginLoadError>& overridden() const { return overridden_; }
  const std::vector<std::string>& searched() const { return searched_; }

 private:
  bool load_file(const std::string& path, bool bundled);

  // A deque: pointers from find() stay valid as more load. Mutable for add_script only.
  mutable std::deque<LoadedPlugin> plugins_;
  std::vector<PluginLoadError> errors_;
  std::vector<PluginLoadError> overridden_;
  std::vector<std::string> searched_;
};

// Every plugin on the search path (the --plugins folders, ATTNLAB_PLUGIN_PATH, then the bundled
// ones). Each file refused (not a plugin, another contract or LibTorch, a bad descriptor) is one
// warning line on stderr, so that no command hides why a plugin is missing; `attnlab plugins`,
// which lists them itself, passes report_refused = false.
PluginRegistry load_plugins(const std::vector<std::string>& plugin_folders, bool report_refused = true);

}  // namespace attnlab
