// The page's files (index.html, app.js, Chart.js) as `attnlab serve` answers them: each read once
// and kept in memory with its gzip (zlib's best level, made once per version of the file), sent
// gzipped to a client whose Accept-Encoding names gzip and as it is otherwise, with a validator
// (ETag, Last-Modified) and `Cache-Control: no-cache`: a browser keeps the file and asks again with
// If-None-Match, which is answered 304 with no body. cpp-httplib's own file serving read the file
// on every request and compressed it again each time, with brotli at its slowest quality for a
// browser (Chart.js, 200 KB: 0.4 s a request on an idle machine, 1.2 s on a loaded one).
//
// A file is looked up by its name in the page's folder, never by a path: a name with a slash, or
// one starting with a dot, is no file. A file changed on disk (its inode, size or modification
// time) is read again at its next request, so a page edited while the server runs is served new.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <httplib.h>

namespace attnlab::serve {

// `text` gzipped at zlib's `level` (1 fastest, 9 smallest); "" if zlib fails.
std::string gzipped(const std::string& text, int level);
// Whether the request's Accept-Encoding names gzip at a weight above 0 ("gzip", "gzip;q=0.5"; not
// "gzip;q=0").
bool accepts_gzip(const httplib::Request& request);

class StaticFiles {
 public:
  // Reads every file of `folder` now (one level: the page's folder is flat).
  explicit StaticFiles(std::filesystem::path folder);

  // Answers a GET or HEAD of the file `name` ("" is index.html): 200 with the file (gzipped where
  // the client accepts it), or 304 when the request's validator names this version. False, the
  // response untouched, when the folder has no such file.
  bool answer(const std::string& name, const httplib::Request& request, httplib::Response& response);

  // One version of a file as served.
  struct File {
    std::string key;            // inode, size and modification time when it was read
    std::string type;           // Content-Type
    std::shared_ptr<const std::string> plain, gzipped;  // gzipped: null when it would not be smaller
    std::string etag, gzipped_etag;                      // strong validators, one per representation
    std::string last_modified;  // an HTTP date
    std::int64_t modified = 0;  // seconds since the epoch
  };

 private:
  // The file as it is on disk now (read again if it changed since), or null if there is none.
  std::shared_ptr<const File> current(const std::string& name);

  std::filesystem::path folder_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const File>> files_;
};

}  // namespace attnlab::serve
