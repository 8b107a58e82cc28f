#include "serve/server.hpp"

#include <stdexcept>

#include "attnlab/store.hpp"
#include "serve/api.hpp"

namespace attnlab::serve {

Server::Server(std::string db_path, const std::filesystem::path& web_folder) : db_path_(std::move(db_path)) {
  if (!std::filesystem::is_regular_file(web_folder / "index.html"))
    throw std::runtime_error("serve: no page in " + web_folder.string() + " (a broken install?)");
  for (const auto& endpoint : endpoints()) {
    const auto answer = endpoint.answer;
    const std::string path = endpoint.path;
    http_.Get(path, [this, answer, path](const httplib::Request& request, httplib::Response& response) {
      Reply reply;
      try {
        // a handle per request, read-only: a missing, locked or newer file is a 503 with the
        // reason, and nothing the server does can write
        store::Database db(db_path_, store::Database::Open::read_only);
        reply = answer(db, Params(request.params.begin(), request.params.end()));
      } catch (const std::exception& e) {
        reply = error_reply(503, e.what());
      }
      response.status = reply.status;
      response.set_header("Cache-Control", "no-store");
      response.set_content(reply.body, "application/json; charset=utf-8");
      if (on_answer_) on_answer_(path);
    });
  }
  // static files from the web folder only: cpp-httplib refuses a path that climbs out of it ("..")
  if (!http_.set_mount_point("/", web_folder.string()))
    throw std::runtime_error("serve: cannot serve " + web_folder.string());
}

int Server::bind(const std::string& host, int port) {
  const int bound = port == 0 ? http_.bind_to_any_port(host) : (http_.bind_to_port(host, port) ? port : -1);
  if (bound < 0) throw std::runtime_error("serve: cannot listen on " + host + ":" + std::to_string(port));
  return bound;
}

void Server::listen() { http_.listen_after_bind(); }

void Server::stop() { http_.stop(); }

}  // namespace attnlab::serve
