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

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>

namespace attnlab::serve {

class StaticFiles;

// What is wrong with the database file for a reader, said the same at startup and on the page:
// missing, a folder, empty; nullopt when it is a file with bytes in it (SQLite says the rest).
std::optional<std::string> database_problem(const std::filesystem::path& db_path);

class Server {
 public:
  static constexpr int kWorkers = 64;
  static constexpr int kReadTimeoutSeconds = 2;

  // Throws std::runtime_error when `web_folder` has no index.html.
  Server(std::string db_path, const std::filesystem::path& web_folder);
  ~Server();

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
  // An endpoint's answer of `bytes` is given: memory goes back to the system when none is left in
  // progress (server.cpp, tune_malloc).
  void answered(std::size_t bytes);

  std::string db_path_;
  std::unique_ptr<StaticFiles> static_files_;  // the page's files, read once, gzipped once
  httplib::Server http_;
  int port_ = 0;
  int socket_ = -1;  // the last socket cpp-httplib made (the bound one, once bind succeeded)
  // the file as it was when its check last passed: device, inode, size ("" before the first)
  std::mutex checked_mutex_;
  std::string checked_;
  std::vector<std::string> allowed_hosts_;
  std::function<void(const std::string&)> on_answer_;
  // At most `turns` answers computed at once, the others waiting in the order they came: 50
  // answers at once on two cores each took 25 times its own time, and the longest (a sweep's
  // curves) took over a second each; in turn, each waits for those before it, then takes its own.
  // Reading requests and writing replies stay on the 64 workers (a slow client holds no turn).
  class Gate {
   public:
    class Turn {
     public:
      explicit Turn(Gate* gate) : gate_(gate) {}
      Turn(Turn&& other) noexcept : gate_(std::exchange(other.gate_, nullptr)) {}
      Turn(const Turn&) = delete;
      Turn& operator=(const Turn&) = delete;
      Turn& operator=(Turn&&) = delete;
      ~Turn() {
        if (gate_) gate_->leave();
      }

     private:
      Gate* gate_;
    };
    explicit Gate(int turns);
    Turn enter();  // waits for its turn

   private:
    void leave();
    const int turns_;
    std::mutex mutex_;
    std::condition_variable moved_;
    std::uint64_t next_ = 0, ended_ = 0;  // tickets given, turns ended: ticket t goes once t < ended_ + turns_
  };
  Gate gate_{static_cast<int>(std::max(2u, std::thread::hardware_concurrency()))};
  std::atomic<int> answering_{0};          // endpoint answers in progress
  std::atomic<std::size_t> built_{0};      // bytes of answers since memory last went back
};

}  // namespace attnlab::serve
