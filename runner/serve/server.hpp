// The HTTP side of `attnlab serve`: cpp-httplib answering GET on the JSON endpoints (api.hpp),
// each request with its own read-only handle on the database, and the page's static files from
// one folder. A class of its own so that the tests run it in their process.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include <httplib.h>

namespace attnlab::serve {

class Server {
 public:
  // Throws std::runtime_error when `web_folder` has no index.html.
  Server(std::string db_path, const std::filesystem::path& web_folder);

  // Binds host:port (port 0: any free one); returns the port, or throws std::runtime_error.
  int bind(const std::string& host, int port);
  void listen();  // answers until stop(), from another thread or a signal handler's thread
  void stop();

  // Called after each endpoint's answer is sent, with its path (tests wait on the page's polls).
  void on_answer(std::function<void(const std::string& path)> hook) { on_answer_ = std::move(hook); }

 private:
  std::string db_path_;
  httplib::Server http_;
  std::function<void(const std::string&)> on_answer_;
};

}  // namespace attnlab::serve
