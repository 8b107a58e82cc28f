// `attnlab serve`: the same command in attnlab-serve, beside this executable, which never loads
// LibTorch (serve/serve_main.cpp). The process keeps its id (exec), so whoever started it (a
// terminal, a test, a service manager) still holds the server.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"

namespace attnlab {

int cmd_serve_apart(const Args& args, const std::string& self_exe) {
  const std::string lean = (std::filesystem::path(self_exe).parent_path() / "attnlab-serve").string();
  std::vector<std::string> words{lean};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::cout.flush();
  execv(lean.c_str(), argv.data());
  std::cerr << "serve: " << lean << ": " << std::strerror(errno) << "; serving from attnlab itself, LibTorch loaded\n";
  return cmd_serve(args);
}

}  // namespace attnlab
