#include "serve/static_files.hpp"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>

namespace attnlab::serve {
namespace fs = std::filesystem;

std::string gzipped(const std::string& text, int level) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16 /* a gzip header */, 8, Z_DEFAULT_STRATEGY) != Z_OK) return "";
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const bool done = deflate(&z, Z_FINISH) == Z_STREAM_END;
  out.resize(z.total_out);
  deflateEnd(&z);
  return done ? out : "";
}

bool accepts_gzip(const httplib::Request& request) {
  std::istringstream codings(request.get_header_value("Accept-Encoding"));
  for (std::string coding; std::getline(codings, coding, ',');) {
    coding.erase(std::remove_if(coding.begin(), coding.end(), [](unsigned char c) { return std::isspace(c); }), coding.end());
    std::transform(coding.begin(), coding.end(), coding.begin(), [](unsigned char c) { return std::tolower(c); });
    const auto semicolon = coding.find(';');
    if (coding.substr(0, semicolon) != "gzip") continue;
    if (semicolon == std::string::npos) return true;
    const auto q = coding.find("q=", semicolon);
    return q == std::string::npos || std::atof(coding.c_str() + q + 2) > 0;  // "q=0", "q=0.0": refused
  }
  return false;
}

namespace {

// The types cpp-httplib's own file serving gave (the page declares its charset itself).
const char* type_of(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".html" || ext == ".htm") return "text/html";
  if (ext == ".js" || ext == ".mjs") return "text/javascript";
  if (ext == ".css") return "text/css";
  if (ext == ".json" || ext == ".map") return "application/json";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  if (ext == ".ico") return "image/x-icon";
  if (ext == ".txt") return "text/plain";
  return "application/octet-stream";
}

bool compressible(const std::string& type) { return type.rfind("text/", 0) == 0 || type == "application/json" || type == "image/svg+xml"; }

// "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110's IMF-fixdate), whatever the locale.
std::string http_date(std::int64_t seconds) {
  static const char* days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[40];
  std::snprintf(text, sizeof text, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon],
                tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return text;
}

// Seconds since the epoch of an IMF-fixdate; -1 if it is not one.
std::int64_t parse_http_date(const std::string& text) {
  static const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char day[4], month[4];
  std::tm tm{};
  if (std::sscanf(text.c_str(), "%3s, %d %3s %d %d:%d:%d GMT", day, &tm.tm_mday, month, &tm.tm_year, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec) != 7)
    return -1;
  const auto m = std::find_if(std::begin(months), std::end(months), [&](const char* name) { return month == std::string(name); });
  if (m == std::end(months)) return -1;
  tm.tm_mon = static_cast<int>(m - std::begin(months));
  tm.tm_year -= 1900;
  return static_cast<std::int64_t>(timegm(&tm));
}

// A strong validator of the bytes: FNV-1a, 64 bits, in hex.
std::string digest(const std::string& bytes) {
  std::uint64_t hash = 1469598103934665603ull;
  for (const unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
  char text[24];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

// Whether an If-None-Match header names one of `tags` (or is "*"); weak tags compare as strong ones,
// as RFC 9110 says If-None-Match compares.
bool names_tag(const std::string& header, const std::string& tag, const std::string& other_tag) {
  std::istringstream list(header);
  for (std::string word; std::getline(list, word, ',');) {
    word.erase(std::remove_if(word.begin(), word.end(), [](unsigned char c) { return std::isspace(c); }), word.end());
    if (word.rfind("W/", 0) == 0) word.erase(0, 2);
    if (word == "*" || word == tag || (!other_tag.empty() && word == other_tag)) return true;
  }
  return false;
}

std::shared_ptr<const StaticFiles::File> read_file(const fs::path& path, const std::string& key, std::int64_t modified) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  auto file = std::make_shared<StaticFiles::File>();
  file->key = key;
  file->type = type_of(path);
  auto plain = std::make_shared<std::string>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) return nullptr;
  const std::string hash = digest(*plain);
  file->etag = "\"" + hash + "\"";
  if (compressible(file->type) && plain->size() > 1024) {
    // zlib's best level, once: Chart.js's 200 KB to 68 KB in about 15 ms
    if (auto zipped = gzipped(*plain, Z_BEST_COMPRESSION); !zipped.empty() && zipped.size() < plain->size()) {
      file->gzipped = std::make_shared<const std::string>(std::move(zipped));
      file->gzipped_etag = "\"" + hash + "-gzip\"";
    }
  }
  file->plain = std::move(plain);
  file->modified = modified;
  file->last_modified = http_date(modified);
  return file;
}

}  // namespace

StaticFiles::StaticFiles(fs::path folder) : folder_(std::move(folder)) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder_, ec))
    if (entry.is_regular_file(ec)) current(entry.path().filename().string());
}

std::shared_ptr<const StaticFiles::File> StaticFiles::current(const std::string& name) {
  if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos) return nullptr;
  const fs::path path = folder_ / name;
  struct stat st {};
  std::lock_guard<std::mutex> lock(mutex_);
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    files_.erase(name);
    return nullptr;
  }
  const std::string key = std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
                          std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  auto it = files_.find(name);
  if (it == files_.end() || it->second->key != key) {
    auto fresh = read_file(path, key, st.st_mtim.tv_sec);
    if (!fresh) {
      files_.erase(name);
      return nullptr;
    }
    it = files_.insert_or_assign(name, std::move(fresh)).first;
  }
  return it->second;
}

bool StaticFiles::answer(const std::string& name, const httplib::Request& request, httplib::Response& response) {
  const auto file = current(name.empty() ? "index.html" : name);
  if (!file) return false;
  const bool gzip = file->gzipped && accepts_gzip(request);
  const auto& body = gzip ? file->gzipped : file->plain;
  response.set_header("Cache-Control", "no-cache");  // kept, and asked again with its validator
  response.set_header("ETag", gzip ? file->gzipped_etag : file->etag);
  response.set_header("Last-Modified", file->last_modified);
  if (file->gzipped) response.set_header("Vary", "Accept-Encoding");
  // If-None-Match decides when given; else If-Modified-Since (RFC 9110, 13.2.2)
  const bool unchanged =
      request.has_header("If-None-Match")
          ? names_tag(request.get_header_value("If-None-Match"), file->etag, file->gzipped_etag)
          : request.has_header("If-Modified-Since") &&
                [&] {
                  const auto since = parse_http_date(request.get_header_value("If-Modified-Since"));
                  return since >= 0 && file->modified <= since;
                }();
  if (unchanged) {
    response.status = 304;
    return true;
  }
  // (the status left to cpp-httplib: 200, or 206 for a Range)
  if (gzip) response.set_header("Content-Encoding", "gzip");
  if (body->empty()) {
    response.set_content("", file->type);
    return true;
  }
  // a content provider, not set_content: cpp-httplib compresses a body of a text type again (with
  // brotli at its slowest quality for a browser), never what a provider gives
  response.set_content_provider(
      body->size(), file->type,
      [body](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
        return sink.write(body->data() + offset, std::min(length, body->size() - offset));
      });
  return true;
}

}  // namespace attnlab::serve
