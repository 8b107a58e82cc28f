// attnlab serve: the results database and the live queue in a browser (serve/server.hpp, the
// endpoints of serve/api.hpp, the page in the web folder). The database is opened read-only for
// each request, so workers may write to it (and it may even be missing) while the server runs.
#include <filesystem>
#include <iostream>

#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "serve/server.hpp"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

// The page's folder, found from the executable as the bundled plugins are: <prefix>/share/attnlab/web
// in an installed tree, <build>/web in the build folder.
fs::path web_folder() {
  std::error_code ec;
  const fs::path root = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path();
  if (fs::is_directory(root / "share/attnlab/web", ec)) return root / "share/attnlab/web";
  return root / "web";
}

}  // namespace

int cmd_serve(const Args& args) {
  po::options_description options(
      "attnlab serve [--db FILE] [--host 127.0.0.1] [--port 8080]: the database and the live queue in a\n"
      "browser, read-only; the JSON endpoints the page reads are in runner/serve/README.md");
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database (opened read-only)")
      ("host", po::value<std::string>()->default_value("127.0.0.1"), "address to listen on (another than localhost only when asked)")
      ("port", po::value<int>()->default_value(8080), "port (0: any free one, printed)")
      ("help,h", "this help");
  const auto vm = parse_command_line("serve", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  const std::string db_path = fs::absolute(vm["db"].as<std::string>()).string();
  const std::string host = vm["host"].as<std::string>();

  serve::Server server(db_path, web_folder());
  const int port = server.bind(host, vm["port"].as<int>());
  if (host != "127.0.0.1" && host != "localhost" && host != "::1")
    std::cout << "serve: listening on " << host << ": anyone who can reach this machine can read " << db_path << "\n";
  if (!fs::exists(db_path)) std::cout << "serve: " << db_path << " does not exist yet: the page says so until it does\n";
  std::cout << "serve: http://" << host << ":" << port << "/ (database " << db_path << ", read-only); Ctrl-C stops"
            << std::endl;
  server.listen();
  return 0;
}

}  // namespace attnlab
