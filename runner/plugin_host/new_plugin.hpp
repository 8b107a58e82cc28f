#pragma once
// `attnlab new attention|dataset NAME [--dir DIR]`: a plugin folder that builds as it is against the
// installed package (CMakeLists.txt, NAME.cpp, README.md; templates/ holds them, compiled in).
#include <string>
#include <vector>

namespace attnlab {

struct TemplateFile {
  const char* kind;  // "attention" or "dataset"
  const char* name;  // file name; @NAME@ stands for the plugin's name, in names and in text
  const char* text;
};
const std::vector<TemplateFile>& plugin_template_files();  // generated: plugin_templates.cpp

// Writes the template of `kind` for plugin `name` into `dir` (made; it must not exist or be empty).
// Returns the paths written. Throws std::runtime_error, one line, on a bad kind or name or folder.
std::vector<std::string> write_plugin_template(const std::string& kind, const std::string& name, const std::string& dir);

}  // namespace attnlab
