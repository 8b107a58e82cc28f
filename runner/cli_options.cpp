#include "cli_options.hpp"

#include <filesystem>
#include <typeinfo>

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
  // Options several commands share, checked once here for all of them.
  if (vm.count("threads") && vm["threads"].value().type() == typeid(int) && vm["threads"].as<int>() < 0)
    throw std::runtime_error(command + ": --threads must be 0 (ATTNLAB_THREADS or every core) or more, not " +
                             std::to_string(vm["threads"].as<int>()));
  // (not for the internal processes a worker starts: their folders were checked by the worker)
  const bool internal = command == "exec-job" || command == "worker-device";
  if (!internal && vm.count("plugins") && vm["plugins"].value().type() == typeid(std::vector<std::string>))
    for (const auto& folder : vm["plugins"].as<std::vector<std::string>>()) {
      std::error_code ec;
      if (!std::filesystem::is_directory(folder, ec))
        throw std::runtime_error(command + ": --plugins " + folder + ": no such folder");
    }
  return vm;
}

}  // namespace attnlab
