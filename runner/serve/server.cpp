#include "serve/server.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "attnlab/store.hpp"
#include "serve/api.hpp"
#include "serve/static_files.hpp"

namespace attnlab::serve {
namespace fs = std::filesystem;
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// Every occurrence of `from` in `text` replaced.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); !from.empty() && at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// `path` as a JSON string's text holds it (a '"' or '\\' escaped): how an error body names it.
std::string as_in_json(const std::string& path) {
  const std::string quoted = nlohmann::json(path).dump();
  return quoted.substr(1, quoted.size() - 2);
}

// The inode of the socket listening on `port` (IPv4 or IPv6), from /proc/net/tcp{,6}: "" if none.
std::string listening_inode(int port) {
  char hex_port[8];
  std::snprintf(hex_port, sizeof hex_port, ":%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state == "0A" && local.size() > 5 && local.compare(local.size() - 5, 5, hex_port) == 0) return inode;
    }
  }
  return "";
}

// "pid N (its command line)" of the process holding the socket `inode`, if this user may see it.
std::string socket_owner(const std::string& inode) {
  const std::string target = "socket:[" + inode + "]";
  std::error_code ec;
  for (const auto& process : fs::directory_iterator("/proc", ec)) {
    const std::string pid = process.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    for (const auto& fd : fs::directory_iterator(process.path() / "fd", ec)) {
      if (fs::read_symlink(fd.path(), ec).string() != target) continue;
      std::ifstream cmdline(process.path() / "cmdline");
      std::string command((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
      std::replace(command.begin(), command.end(), '\0', ' ');
      while (!command.empty() && command.back() == ' ') command.pop_back();
      return "pid " + pid + " (" + command + ")";
    }
  }
  return "";
}

std::string port_holder(int port) {
  const std::string inode = listening_inode(port);
  if (inode.empty()) return "";
  const std::string owner = socket_owner(inode);
  return owner.empty() ? "a process this user cannot see" : owner;
}

// A JSON reply, gzipped at zlib's fastest level where the client accepts it (a week's curves, 15 MB
// of JSON, go in a fraction of a second). cpp-httplib would compress JSON itself, but with brotli
// at its slowest quality wherever a browser accepts it (a minute for those 15 MB), so its type is
// one it leaves alone ("; charset=utf-8") and this does it.
void json_reply(httplib::Response& response, Reply reply, bool gzip = false) {
  response.status = reply.status;
  response.set_header("Cache-Control", "no-store");
  response.set_header("Vary", "Accept-Encoding");
  if (gzip && reply.body.size() > 1024) {
    if (std::string body = gzipped(reply.body, Z_BEST_SPEED); !body.empty()) {
      response.set_header("Content-Encoding", "gzip");
      response.set_content(std::move(body), "application/json; charset=utf-8");
      return;
    }
  }
  response.set_content(std::move(reply.body), "application/json; charset=utf-8");
}

// glibc's malloc for a process whose 64 threads each build a large answer now and then (a week's
// curves: 16 MB of text): by default each thread may get an arena of its own (up to 8 per core),
// each keeping what its largest answer needed, and a freed buffer of up to 32 MB raises the size
// from which buffers are mapped on their own, so the next ones come from the arenas and stay
// there (317 MB resident after the burst of issue 58 on a server idle at 11.5 MB). Four arenas,
// and every buffer of 512 KiB or more mapped on its own and given back when freed; what the
// arenas hold free is given back when the server falls idle (Server::answered). Nothing to do
// under another malloc (attnlab serving itself, linked with tcmalloc).
void tune_malloc() {
#ifdef __GLIBC__
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_ARENA_MAX, 4);
    mallopt(M_MMAP_THRESHOLD, 512 * 1024);
  });
#endif
}

// 405, naming the methods answered.
void refuse_method(const httplib::Request& request, httplib::Response& response) {
  response.set_header("Allow", "GET, HEAD");
  // (a method cpp-httplib does not know reaches here before it read the path)
  const std::string what = request.path.empty() ? request.method : request.method + " " + request.path;
  json_reply(response, error_reply(405, what + ": only GET (and HEAD) are answered"));
}

bool loopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

// What tells one version of the file from another for its check: device, inode and size ("" when
// it cannot be read: then every open checks).
std::string file_key(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size);
}

}  // namespace

std::optional<std::string> database_problem(const fs::path& db_path) {
  const std::string name = db_path.filename().string();
  std::error_code ec;
  if (fs::is_directory(db_path, ec)) return name + " is a folder, not a database";
  if (!fs::exists(db_path, ec))
    return "no such database: " + name + " (yet: attnlab run or attnlab queue add --db " + name + " makes it)";
  if (fs::file_size(db_path, ec) == 0 && !ec)
    return name + " is empty: not an attnlab database (yet: attnlab run or attnlab queue add --db " + name + " fills it)";
  return std::nullopt;
}

Server::Server(std::string db_path, const fs::path& web_folder) : db_path_(std::move(db_path)) {
  tune_malloc();
  if (!fs::is_regular_file(web_folder / "index.html"))
    throw std::runtime_error("serve: no page in " + web_folder.string() + " (a broken install?)");
  // SO_REUSEADDR only: cpp-httplib's default SO_REUSEPORT lets a second server listen on a busy port
  http_.set_socket_options([this](socket_t socket) {
    int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    socket_ = socket;
  });
  // An answer goes as its head and then its body: with Nagle's algorithm the body waited for the
  // head's acknowledgement, which a client delays by up to 40 ms (a poll, a page's request: every
  // third or so took 50 ms instead of 5 on this machine)
  http_.set_tcp_nodelay(true);
  http_.new_task_queue = [] { return new httplib::ThreadPool(kWorkers); };
  http_.set_read_timeout(kReadTimeoutSeconds, 0);
  http_.set_keep_alive_timeout(kReadTimeoutSeconds);
  // On every answer: the page runs only its own scripts (no inline script, nothing from elsewhere;
  // inline styles are the page's), no other site may frame it, and nothing is read as another type.
  http_.set_default_headers({{"Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                                         "img-src 'self' data: blob:; frame-ancestors 'none'; base-uri 'none'; "
                                                         "form-action 'self'"},
                             {"X-Content-Type-Options", "nosniff"},
                             {"X-Frame-Options", "DENY"},
                             {"Referrer-Policy", "no-referrer"}});
  add_endpoints();
  // the page's files, by name from the web folder only (static_files.hpp): a path with a slash
  // below the root is no file, and nothing climbs out of the folder
  static_files_ = std::make_unique<StaticFiles>(web_folder);
  http_.Get(R"(/([^/]*))", [this](const httplib::Request& request, httplib::Response& response) {
    if (!static_files_->answer(request.matches[1].str(), request, response)) response.status = 404;  // JSON: the error handler
  });
  add_refusals();
}

Server::~Server() = default;

Server::Gate::Gate(int turns) : turns_(std::max(1, turns)) {}

Server::Gate::Turn Server::Gate::enter() {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t ticket = next_++;
  moved_.wait(lock, [&] { return ticket < ended_ + static_cast<std::uint64_t>(turns_); });
  return Turn(this);
}

void Server::Gate::leave() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++ended_;
  }
  moved_.notify_all();
}

void Server::add_endpoints() {
  for (const auto& endpoint : endpoints()) {
    const auto answer = endpoint.answer;
    const std::string path = endpoint.path;
    http_.Get(path, [this, answer, path](const httplib::Request& request, httplib::Response& response) {
      ++answering_;
      struct Done {  // however the answer ends
        Server& server;
        std::size_t bytes = 0;
        ~Done() { server.answered(bytes); }
      } done{*this};
      Reply reply;
      const auto turn = gate_.enter();  // a turn among the answers computed at once, first come first served
      if (const auto problem = database_problem(db_path_)) {
        reply = error_reply(503, *problem);
      } else {
        try {
          // a handle per request, read-only: a locked, newer or damaged file is a 503 with the
          // reason, and nothing the server does can write
          const std::string key = file_key(db_path_);
          const bool known = checked(key);
          store::ResultsReader db(db_path_, known ? store::ResultsReader::Check::none : store::ResultsReader::Check::at_open);
          if (!known) passed_check(key);
          reply = answer(db, query_params(request.target));
        } catch (const std::exception& e) {
          reply = error_reply(503, e.what());
        }
      }
      // the page needs the file's name, a browser (or whoever reads it) not where it lives
      if (reply.status != 200)  // JSON: the path as its string escapes it ('"', '\\')
        reply.body = replace_all(reply.body, as_in_json(db_path_), as_in_json(fs::path(db_path_).filename().string()));
      done.bytes = reply.body.size();
      json_reply(response, std::move(reply), accepts_gzip(request));  // gzipped in the turn too: it is work
      if (on_answer_) on_answer_(path);
    });
  }
  http_.Get(R"(/api/.*)", [](const httplib::Request& request, httplib::Response& response) {
    std::string known;
    for (const auto& endpoint : endpoints()) known += (known.empty() ? "" : ", ") + std::string(endpoint.path);
    json_reply(response, error_reply(404, "no endpoint " + request.path + " (known: " + known + ")"));
  });
}

void Server::add_refusals() {
  // before any route or file: a path with control bytes (a %00 would cut the file name short and
  // serve index.html under another type), a Host this server was not asked to be, and a method
  // but GET and HEAD
  http_.set_pre_routing_handler([this](const httplib::Request& request, httplib::Response& response) {
    const bool control = std::any_of(request.path.begin(), request.path.end(),
                                     [](unsigned char c) { return c < 0x20 || c == 0x7f; });
    if (control) {
      json_reply(response, error_reply(400, "a path with control characters"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!host_allowed(request.get_header_value("Host"))) {
      json_reply(response, error_reply(421, "this server answers as " + allowed_hosts_.front() + ":" +
                                                std::to_string(port_) + ", not as '" + request.get_header_value("Host") +
                                                "' (attnlab serve --allow-host NAME adds a name)"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (request.method != "GET" && request.method != "HEAD") {
      refuse_method(request, response);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // a file that is not there, a method that is not GET or HEAD (one cpp-httplib does not route,
  // TRACE and CONNECT, or does not know: a 400 from its parser), a request line too long: JSON
  // like every other refusal
  http_.set_error_handler([](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    if (response.status == 404) {
      json_reply(response, error_reply(404, "nothing at " + request.path));
    } else if (response.status == 400 && !request.method.empty() && request.method != "GET" && request.method != "HEAD") {
      refuse_method(request, response);
    } else if (response.status == 414) {
      json_reply(response, error_reply(414, "a request line longer than cpp-httplib reads (8,192 bytes)"));
    } else if (response.status >= 400) {
      json_reply(response, error_reply(response.status, "not a request this server can read"));
    }
  });
}

void Server::answered(std::size_t bytes) {
  // what the answers built is freed by now (but the reply itself, mapped on its own when large):
  // when the last answer in progress ends, after answers of a megabyte or more since the last time,
  // the arenas' free pages go back (a few milliseconds; a tab polling every 2 s comes here about
  // every 10 s)
  built_ += bytes;
  if (--answering_ > 0 || built_ < (std::size_t{1} << 20)) return;
  built_ = 0;
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

bool Server::checked(const std::string& key) {
  std::lock_guard<std::mutex> lock(checked_mutex_);
  return !key.empty() && key == checked_;
}

void Server::passed_check(const std::string& key) {
  std::lock_guard<std::mutex> lock(checked_mutex_);
  checked_ = key;
}

bool Server::host_allowed(const std::string& host_header) const {
  std::string host = lower(host_header);
  if (host.empty()) return false;
  // "name:port", "[::1]:port", or a bare name (port 80 only)
  std::string port = "80";
  if (const auto colon = host.rfind(':'); colon != std::string::npos && host.find(']', colon) == std::string::npos) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return port == std::to_string(port_) && std::find(allowed_hosts_.begin(), allowed_hosts_.end(), host) != allowed_hosts_.end();
}

int Server::bind(const std::string& host, int port, const std::vector<std::string>& extra_hosts) {
  if (port < 0 || port > 65535)
    throw std::runtime_error("serve: --port " + std::to_string(port) + " is not a port (0 to 65535; 0: any free one)");
  const int bound = port == 0 ? http_.bind_to_any_port(host) : (http_.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    const std::string holder = port == 0 ? "" : port_holder(port);
    throw std::runtime_error("serve: cannot listen on " + host + ":" + std::to_string(port) +
                             (holder.empty() ? "" : ": the port is in use by " + holder));
  }
  // cpp-httplib (Debian's, compiled) listens with a backlog of 5, and the kernel drops a burst of
  // connections past it (300 at once lost dozens): listen again, which on Linux only raises it
  // (to net.core.somaxconn at most)
  if (::listen(socket_, SOMAXCONN) != 0)
    throw std::runtime_error("serve: cannot listen on " + host + ":" + std::to_string(bound) + ": " + std::strerror(errno));
  port_ = bound;
  allowed_hosts_ = {lower(host)};
  const bool any = host == "0.0.0.0" || host == "::";
  if (loopback(host) || any)
    for (const char* name : {"127.0.0.1", "localhost", "::1"})
      if (lower(host) != name) allowed_hosts_.push_back(name);
  if (char name[256]; any && gethostname(name, sizeof name) == 0) allowed_hosts_.push_back(lower(name));
  for (const auto& extra : extra_hosts) allowed_hosts_.push_back(lower(extra));
  return bound;
}

void Server::listen() { http_.listen_after_bind(); }

void Server::stop() { http_.stop(); }

}  // namespace attnlab::serve
