#include "results/cli_common.hpp"

#include <unistd.h>

#include <stdexcept>

namespace attnlab::results {

std::vector<std::string> split_list(const std::vector<std::string>& values, const std::string& option) {
  std::vector<std::string> words;
  for (const auto& v : values) {
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = v.find(',', start);
      std::string w = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const auto first = w.find_first_not_of(" \t"), last = w.find_last_not_of(" \t");
      w = first == std::string::npos ? "" : w.substr(first, last - first + 1);
      if (w.empty()) throw std::invalid_argument(option + ": an empty name in '" + v + "'");
      words.push_back(w);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return words;
}

const std::string& existing_database(const std::string& path) {
  if (access(path.c_str(), F_OK) != 0) throw std::runtime_error(path + ": no such database");
  return path;
}

}  // namespace attnlab::results
