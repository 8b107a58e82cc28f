#include "plugin_host/new_plugin.hpp"
#include "cli/commands.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "cli/cli_options.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {
namespace fs = std::filesystem;
namespace {

// A plugin name is also a C++ namespace, a CMake target and a TOML key: keep to what all accept.
bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// With --python the name is also a Python module that export.py imports (`import NAME`), beside
// torch: a keyword would not parse, and `torch` or `export` would shadow what it imports.
bool python_name(const std::string& name) {
  static const char* const reserved[] = {"and",      "as",       "assert", "async", "await",  "break",  "class",
                                         "continue", "def",      "del",    "elif",  "else",   "except", "finally",
                                         "for",      "from",     "global", "if",    "import", "in",     "is",
                                         "lambda",   "nonlocal", "not",    "or",    "pass",   "raise",  "return",
                                         "try",      "while",    "with",   "yield", "torch",  "export"};
  for (const char* word : reserved)
    if (name == word) return false;
  return true;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// Where the CMake package of the attnlab running this is: <prefix>/lib*/cmake/attnlab.
std::string install_prefix() {
  std::error_code ec;
  const auto bundled = PluginRegistry::bundled_dirs();
  if (bundled.empty()) return "";
  // <prefix>/<libdir>/attnlab/plugins: the package sits in <prefix>/<libdir>/cmake/attnlab
  const fs::path libdir = fs::path(bundled.front()).parent_path().parent_path();
  if (!fs::exists(libdir / "cmake" / "attnlab" / "attnlabConfig.cmake", ec)) return "";
  return fs::weakly_canonical(libdir.parent_path(), ec).string();
}

}  // namespace

std::vector<std::string> write_plugin_template(const std::string& kind, const std::string& name, const std::string& dir,
                                               bool python) {
  if (kind != "attention" && kind != "dataset")
    throw std::runtime_error("new: '" + kind + "' is not a kind of plugin: attention or dataset");
  if (python && kind != "attention")
    throw std::runtime_error("new: --python is for attention methods; a dataset plugin is C++");
  if (!valid_name(name))
    throw std::runtime_error("new: '" + name + "' is not a plugin name: a lower-case letter, then lower-case letters, "
                             "digits or '_' (64 at most)");
  if (python && !python_name(name))
    throw std::runtime_error("new: '" + name + "' cannot name a Python method: it is a Python keyword, or a module "
                             "export.py imports (torch, export)");
  const std::string folder = python ? "attention_python" : kind;  // the template's folder under templates/
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    throw std::runtime_error("new: " + dir + " exists and is not an empty folder; nothing written");
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("new: cannot make the folder " + dir + ": " + ec.message());
  std::vector<std::string> written;
  for (const auto& file : plugin_template_files()) {
    if (folder != file.kind) continue;
    const std::string path = (fs::path(dir) / replace_all(file.name, "@NAME@", name)).string();
    std::ofstream out(path, std::ios::binary);
    out << replace_all(file.text, "@NAME@", name);
    if (!out.flush()) throw std::runtime_error("new: cannot write " + path);
    written.push_back(path);
  }
  return written;
}

int cmd_new(const std::vector<std::string>& args) {
  po::options_description options("attnlab new attention|dataset NAME [--dir DIR] | new attention NAME --python");
  options.add_options()("help,h", "this help")("kind", po::value<std::string>(), "attention or dataset")(
      "name", po::value<std::string>(), "the plugin's name")(
      "dir", po::value<std::string>(), "the folder to write (default: ./NAME); made, or empty")(
      "python", "an attention method as a TorchScript module (NAME.py, export.py, experiment.toml) instead of C++");
  po::positional_options_description positional;
  positional.add("kind", 1).add("name", 1);
  const auto vm = parse_command_line("new", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("kind") || !vm.count("name"))
    throw std::runtime_error("new: usage: attnlab new attention|dataset NAME [--dir DIR], or attnlab new attention "
                             "NAME --python [--dir DIR]");
  const std::string kind = vm["kind"].as<std::string>(), name = vm["name"].as<std::string>();
  const std::string dir = vm.count("dir") ? vm["dir"].as<std::string>() : name;
  const bool python = vm.count("python") > 0;
  const auto written = write_plugin_template(kind, name, dir, python);
  std::cout << "wrote " << (python ? "TorchScript attention method " : kind + " plugin ") << name << ":";
  for (const auto& path : written) std::cout << " " << path;
  if (python) {
    const std::string pt = (fs::path(dir) / (name + ".pt")).string();
    std::cout << "\nscript it (with the Python torch matching attnlab's LibTorch), check it, run it beside softmax:\n"
              << "  python3 " << (fs::path(dir) / "export.py").string() << "\n  attnlab check " << pt
              << "\n  attnlab run " << (fs::path(dir) / "experiment.toml").string() << "\n";
    return 0;
  }
  const std::string prefix = install_prefix();
  std::cout << "\nbuild it and check it:\n  cmake -S " << dir << " -B " << dir << "/build"
            << (prefix.empty() ? " -DCMAKE_PREFIX_PATH=<attnlab's install prefix>" : " -DCMAKE_PREFIX_PATH=" + prefix)
            << " && cmake --build " << dir << "/build\n  attnlab check " << dir << "/build/"
            << (kind == "attention" ? "attn_" : "data_") << name << ".so\n";
  return 0;
}

}  // namespace attnlab
