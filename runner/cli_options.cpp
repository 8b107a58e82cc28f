#include "cli_options.hpp"

#include <stdexcept>

namespace attnlab {

po::variables_map parse_command_line(const std::string& command, const std::vector<std::string>& args,
                                     const po::options_description& options,
                                     const po::positional_options_description& positional) {
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw std::runtime_error(command + ": " + e.what());
  }
  return vm;
}

}  // namespace attnlab
