#pragma once
// `attnlab new attention|dataset NAME [--dir DIR]`: a plugin folder that builds as it is against the
// installed package (CMakeLists.txt, NAME.cpp, README.md; templates/ holds them, compiled in).
// `attnlab new attention NAME --python`: a TorchScript method's folder instead (NAME.py, export.py,
// experiment.toml, README.md; templates/attention_python/).
#include <string>
#include <vector>

namespace attnlab {

struct TemplateFile {
  const char* kind;  // the template folder: "attention", "attention_python" or "dataset"
  const char* name;  // file name; @NAME@ stands for the plugin's name, in names and in text
  const char* text;
};
const std::vector<TemplateFile>& plugin_template_files();  // generated: plugin_templates.cpp

// Writes the template of `kind` for plugin `name` into `dir` (made; it must not exist or be empty);
// `python`: the TorchScript template of an attention method (attention_python) instead of the C++ one.
// Returns the paths written. Throws std::runtime_error, one line, on a bad kind or name or folder,
// or on `python` with a dataset.
std::vector<std::string> write_plugin_template(const std::string& kind, const std::string& name, const std::string& dir,
                                               bool python = false);

}  // namespace attnlab
