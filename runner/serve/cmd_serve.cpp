// attnlab serve: the results database and the live queue in a browser (serve/server.hpp, the
// endpoints of serve/api.hpp, the page in the web folder). The database is opened read-only for
// each request, so workers may write to it (and it may even be missing) while the server runs.
#include <filesystem>
#include <iostream>

#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "attnlab/store.hpp"
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

// What a reader would meet in the database, said once at startup (the page says it too): a folder
// can never become one (an error); a missing, empty or unreadable file may, once a run writes it.
void say_database_state(const std::string& db_path) {
  if (fs::is_directory(db_path)) throw std::runtime_error("serve: --db " + db_path + " is a folder, not a database");
  if (const auto problem = serve::database_problem(db_path)) {
    std::cout << "serve: " << *problem << "; the page says so until it is one\n";
    return;
  }
  try {
    store::ResultsReader db(db_path);
  } catch (const std::exception& e) {
    std::cout << "serve: " << e.what() << "; the page says so until it can be read\n";
  }
}

}  // namespace

int cmd_serve(const Args& args) {
  po::options_description options(
      "attnlab serve [--db FILE] [--host 127.0.0.1] [--port 8080] [--allow-host NAME]...: the database and the\n"
      "live queue in a browser, read-only; the JSON endpoints the page reads are in runner/serve/README.md");
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database (opened read-only)")
      ("host", po::value<std::string>()->default_value("127.0.0.1"), "address to listen on (another than localhost only when asked)")
      ("port", po::value<int>()->default_value(8080), "port, 0 to 65535 (0: any free one, printed)")
      ("allow-host", po::value<std::vector<std::string>>()->composing(),
       "a name the page may be reached by besides the address (a Host header; repeatable): a tunnel's or proxy's name")
      ("help,h", "this help");
  const auto vm = parse_command_line("serve", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  const std::string db_path = fs::absolute(vm["db"].as<std::string>()).string();
  const std::string host = vm["host"].as<std::string>();
  const auto extra_hosts = vm.count("allow-host") ? vm["allow-host"].as<std::vector<std::string>>() : std::vector<std::string>{};

  serve::Server server(db_path, web_folder());
  say_database_state(db_path);
  const int port = server.bind(host, vm["port"].as<int>(), extra_hosts);
  if (host != "127.0.0.1" && host != "localhost" && host != "::1")
    std::cout << "serve: listening on " << host << ": anyone who can reach this machine can read " << db_path << "\n";
  std::cout << "serve: http://" << (host.find(':') != std::string::npos ? "[" + host + "]" : host) << ":" << port
            << "/ (database " << db_path << ", read-only); Ctrl-C stops" << std::endl;
  server.listen();
  return 0;
}

}  // namespace attnlab
