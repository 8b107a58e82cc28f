#include "plugin_host/check_support.hpp"

#include <stdlib.h>  // mkdtemp

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "attnlab/params.hpp"

namespace attnlab {

std::string figure(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

void check_defaults(const PluginInfo& info) {
  for (std::size_t i = 0; i < info.param_count; ++i) {
    const ParamSpec& spec = info.params[i];
    try {
      check_param(spec, parse_param(spec, spec.default_value));
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("default of ") + spec.name + ": " + e.what());
    }
  }
}

ScratchFolder::ScratchFolder() {
  std::string pattern = (std::filesystem::temp_directory_path() / "attnlab-check-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("check: cannot make a scratch folder in " + pattern);
  path_ = pattern;
}

ScratchFolder::~ScratchFolder() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ScratchFolder::path(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }

}  // namespace attnlab
