// The HTTP side of `attnlab serve`: cpp-httplib answering GET on the JSON endpoints (api.hpp),
// each request with its own read-only handle on the database, and the page's static files from
// one folder. A class of its own so that the tests run it in their process. The file is checked
// (PRAGMA quick_check, up to 64 MiB) once, and again when it is replaced or changes size: never
// per request (a third of a second each on a 59 MB file, polled every 2 s by every open tab).
//
// What no client can make it do: listen beside another server on the same port (no SO_REUSEPORT),
// answer a Host it was not asked to be (a page elsewhere that rebinds its DNS name to 127.0.0.1
// cannot read the results), serve a path with control bytes, take a method but GET and HEAD (405),
// or hand the database's absolute path to a browser. A slow client holds one of kWorkers threads
// for at most kReadTimeoutSeconds between two of its bytes, never the whole server.
#pragma once

#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>

namespace attnlab::serve {

// What is wrong with the database file for a reader, said the same at startup and on the page:
// missing, a folder, empty; nullopt when it is a file with bytes in it (SQLite says the rest).
std::optional<std::string> database_problem(const std::filesystem::path& db_path);

class Server {
 public:
  static constexpr int kWorkers = 64;
  static constexpr int kReadTimeoutSeconds = 2;

  // Throws std::runtime_error when `web_folder` has no index.html.
  Server(std::string db_path, const std::filesystem::path& web_folder);

  // Binds host:port (port 0: any free one); returns the port. Throws std::runtime_error, one
  // line: a port outside 0..65535, or one in use (naming the process that holds it when this user
  // may see it). The Host headers answered from then on: the address bound, localhost's names when
  // that is a loopback address (or any), this machine's name when it is any, and `extra_hosts`.
  int bind(const std::string& host, int port, const std::vector<std::string>& extra_hosts = {});
  void listen();  // answers until stop(), from another thread or a signal handler's thread
  void stop();

  // The host names a request's Host header may give (without the port), in the order checked.
  const std::vector<std::string>& allowed_hosts() const { return allowed_hosts_; }

  // Called after each endpoint's answer is sent, with its path (tests wait on the page's polls).
  void on_answer(std::function<void(const std::string& path)> hook) { on_answer_ = std::move(hook); }

 private:
  void add_endpoints();
  void add_refusals();
  bool host_allowed(const std::string& host_header) const;
  // Whether the file as it is now (`key`: device, inode, size) passed its check already; and the
  // record that it did.
  bool checked(const std::string& key);
  void passed_check(const std::string& key);

  std::string db_path_;
  httplib::Server http_;
  int port_ = 0;
  int socket_ = -1;  // the last socket cpp-httplib made (the bound one, once bind succeeded)
  // the file as it was when its check last passed: device, inode, size ("" before the first)
  std::mutex checked_mutex_;
  std::string checked_;
  std::vector<std::string> allowed_hosts_;
  std::function<void(const std::string&)> on_answer_;
};

}  // namespace attnlab::serve
