// attnlab serve: the results database and the live queue in a browser. cpp-httplib answers; the
// JSON endpoints are serve/api.hpp's; the page and Chart.js are static files from attnlab's own
// web folder. The database is opened read-only for each request, so workers may write to it (and
// it may even be missing) while the server runs.
#include <filesystem>
#include <iostream>

#include <httplib.h>

#include "build_info.hpp"
#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "serve/api.hpp"

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

void send(httplib::Response& response, const serve::Reply& reply) {
  response.status = reply.status;
  response.set_header("Cache-Control", "no-store");
  response.set_content(reply.body, "application/json; charset=utf-8");
}

serve::Params params_of(const httplib::Request& request) {
  return serve::Params(request.params.begin(), request.params.end());
}

}  // namespace

int cmd_serve(const Args& args) {
  po::options_description options(
      "attnlab serve [--db FILE] [--host 127.0.0.1] [--port 8080]: the database and the live queue in a\n"
      "browser, read-only; the JSON endpoints (/api/queue, /api/results) are in runner/serve/README.md");
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database (opened read-only)")
      ("host", po::value<std::string>()->default_value("127.0.0.1"), "address to listen on (another than localhost only when asked)")
      ("port", po::value<int>()->default_value(8080), "port (0: any free one, printed)")
      ("help,h", "this help");
  const auto vm = parse_command_line("serve", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  const std::string db_path = fs::absolute(vm["db"].as<std::string>()).string();
  const std::string host = vm["host"].as<std::string>();
  const fs::path web = web_folder();
  if (!fs::is_regular_file(web / "index.html")) throw std::runtime_error("serve: no page in " + web.string() + " (a broken install?)");

  httplib::Server server;
  // each request opens the database read-only in its own handle: a missing or newer file is a
  // message on the page, never a crash, and nothing the server does can write
  auto with_db = [db_path](auto&& answer) {
    return [db_path, answer](const httplib::Request& request, httplib::Response& response) {
      try {
        store::Database db(db_path, store::Database::Open::read_only);
        send(response, answer(db, request));
      } catch (const std::exception& e) {
        send(response, serve::error_reply(503, e.what()));
      }
    };
  };
  server.Get("/api/queue", with_db([](store::Database& db, const httplib::Request&) { return serve::queue_json(db); }));
  server.Get("/api/results",
             with_db([](store::Database& db, const httplib::Request& r) { return serve::results_json(db, params_of(r)); }));
  // static files from the web folder only; cpp-httplib refuses paths that climb out of it ("..")
  if (!server.set_mount_point("/", web.string())) throw std::runtime_error("serve: cannot serve " + web.string());

  const int port = vm["port"].as<int>();
  const int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) throw std::runtime_error("serve: cannot listen on " + host + ":" + std::to_string(port));
  if (host != "127.0.0.1" && host != "localhost" && host != "::1")
    std::cout << "serve: listening on " << host << ": anyone who can reach this machine can read " << db_path << "\n";
  std::cout << "serve: http://" << host << ":" << bound << "/ (database " << db_path << ", read-only); Ctrl-C stops"
            << std::endl;
  server.listen_after_bind();
  return 0;
}

}  // namespace attnlab
