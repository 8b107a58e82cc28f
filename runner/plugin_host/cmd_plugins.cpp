// attnlab plugins: every plugin found, with its parameters, where it was searched for, and every
// file refused with the reason.
#include <iostream>

#include "attnlab/params.hpp"
#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {

int cmd_plugins(const Args& args) {
  po::options_description options("attnlab plugins [--plugins DIR]...");
  add_plugins_option(options);
  options.add_options()("help,h", "this help");
  const auto vm = parse_command_line("plugins", args, options);
  if (vm.count("help")) return std::cout << options, 0;

  const auto registry = load_plugins(plugin_folders(vm), /*report_refused=*/false);
  for (auto kind : {PluginKind::attention, PluginKind::dataset}) {
    std::cout << (kind == PluginKind::attention ? "Attention methods" : "Datasets") << ":\n";
    for (const auto& p : registry.plugins()) {
      if (p.kind() != kind) continue;
      std::cout << "  " << p.name() << " " << p.info->version << "  " << p.info->description << "\n"
                << "    " << p.path << "\n";
      for (std::size_t i = 0; i < p.info->param_count; ++i) {
        const auto& s = p.info->params[i];
        std::cout << "    - " << s.name << " (" << to_string(s.type) << ", default " << s.default_value;
        if (s.choices) std::cout << ", one of " << s.choices;
        else if (s.type == ParamType::integer || s.type == ParamType::real)
          std::cout << ", range [" << format_number(s.min_value) << ", " << format_number(s.max_value) << "]";
        std::cout << "): " << s.doc << "\n";
      }
    }
  }
  std::cout << "Searched: ";
  for (std::size_t i = 0; i < registry.searched().size(); ++i) std::cout << (i ? ", " : "") << registry.searched()[i];
  std::cout << "\n";
  if (!registry.overridden().empty()) {
    std::cout << "Overridden (bundled, provided by an earlier folder):\n";
    for (const auto& e : registry.overridden()) std::cout << "  " << e.line() << "\n";
  }
  if (!registry.errors().empty()) {
    std::cout << "Refused:\n";
    for (const auto& e : registry.errors()) std::cout << "  " << e.line() << "\n";
  }
  return 0;
}

}  // namespace attnlab
