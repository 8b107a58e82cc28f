#include "cli/cli_options.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <typeinfo>


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
  if (vm.count("threads") && vm["threads"].value().type() == typeid(int) && vm["threads"].as<int>() < 0)
    throw std::runtime_error(command + ": --threads must be 0 (ATTNLAB_THREADS or every core) or more, not " +
                             std::to_string(vm["threads"].as<int>()));
  // (not for the internal processes attnlab starts: their folders were checked by their parent)
  const bool internal = command == "exec-job" || command == "worker-device" || command == "bench-one";
  if (!internal)
    for (const auto& folder : plugin_folders(vm)) {
      std::error_code ec;
      if (!std::filesystem::is_directory(folder, ec))
        throw std::runtime_error(command + ": --plugins " + folder + ": no such folder");
    }
  return vm;
}

void add_plugins_option(po::options_description& options) {
  options.add_options()("plugins", po::value<std::vector<std::string>>()->composing(),
                        "plugin folder searched before ATTNLAB_PLUGIN_PATH and the bundled plugins (repeatable)");
}

void add_device_option(po::options_description& options) {
  options.add_options()("device", po::value<std::string>()->default_value("cpu"), "cpu, cuda or cuda:N");
}

void add_threads_option(po::options_description& options) {
  options.add_options()("threads", po::value<int>()->default_value(0),
                        "intra-op threads (0: ATTNLAB_THREADS or every core)");
}

void add_cache_dir_option(po::options_description& options) {
  options.add_options()("cache-dir", po::value<std::string>()->default_value(""),
                        "where datasets keep generated files and token caches");
}

void add_study_options(po::options_description& options) {
  add_device_option(options);
  add_threads_option(options);
  add_cache_dir_option(options);
  add_plugins_option(options);
}

std::vector<std::string> option_values(const po::variables_map& vm, const std::string& name) {
  if (!vm.count(name) || vm[name].value().type() != typeid(std::vector<std::string>)) return {};
  return vm[name].as<std::vector<std::string>>();
}

std::vector<std::string> plugin_folders(const po::variables_map& vm) { return option_values(vm, "plugins"); }

std::vector<std::string> split_list(const std::vector<std::string>& values, const std::string& option) {
  std::vector<std::string> words;
  for (const auto& value : values) {
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = value.find(',', start);
      std::string word = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const auto first = word.find_first_not_of(" \t"), last = word.find_last_not_of(" \t");
      word = first == std::string::npos ? "" : word.substr(first, last - first + 1);
      if (word.empty()) throw std::invalid_argument(option + " '" + value + "': an empty name");
      if (std::find(words.begin(), words.end(), word) == words.end()) words.push_back(word);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return words;
}

std::vector<std::string> split_list(const std::string& value, const std::string& option) {
  return split_list(std::vector<std::string>{value}, option);
}

std::vector<std::int64_t> split_positive_integers(const std::string& value, const std::string& option) {
  const std::string problem = option + " '" + value + "': expected positive integers separated by commas";
  std::vector<std::int64_t> numbers;
  try {
    for (const auto& word : split_list(value, option)) {
      std::size_t used = 0;
      const long long n = std::stoll(word, &used);
      if (used != word.size() || n < 1) throw std::invalid_argument(problem);
      numbers.push_back(n);
    }
  } catch (const std::logic_error&) {  // stoll's invalid_argument / out_of_range, an empty word
    throw std::invalid_argument(problem);
  }
  return numbers;
}

const std::string& existing_database(const std::string& path) {
  if (access(path.c_str(), F_OK) != 0) throw std::runtime_error(path + ": no such database");
  return path;
}

}  // namespace attnlab
