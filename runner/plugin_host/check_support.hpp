#pragma once
// What the conformance checks (attention_checks.cpp, dataset_checks.cpp) and `attnlab check`
// (cmd_check.cpp) share. No LibTorch: it lives in the host library.
#include <string>

#include "attnlab/plugin.hpp"

namespace attnlab {

// A measured figure as the checks print it: three significant digits.
std::string figure(double x);

// Every default parses and lies within its bounds and choices; throws naming the first that does not.
void check_defaults(const PluginInfo& info);

// A scratch folder (under the system's temporary folder) for a check's caches and databases,
// removed with everything in it.
class ScratchFolder {
 public:
  ScratchFolder();
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  std::string path(const std::string& name) const;

 private:
  std::string path_;
};

}  // namespace attnlab
