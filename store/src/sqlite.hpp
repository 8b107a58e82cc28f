#pragma once
// Private RAII wrappers around the SQLite C API, for store/ only.
// Every value goes in through bind(); SQL text holds only constants.
#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attnlab/store.hpp"

namespace attnlab::store::sql {

// A StoreError that remembers SQLite's result code (so callers can tell SQLITE_NOTADB apart).
class SqliteError : public StoreError {
 public:
  SqliteError(const std::string& message, int code) : StoreError(message), code_(code) {}
  int code() const { return code_; }              // extended result code
  int primary_code() const { return code_ & 0xff; }

 private:
  int code_;
};

// Throws SqliteError "PATH: WHAT: sqlite3_errmsg(db)".
[[noreturn]] void fail(sqlite3* db, const std::string& path, const std::string& what);

// Runs constant SQL (DDL, PRAGMAs without values); no parameters, no rows expected.
void exec(sqlite3* db, const std::string& path, const char* sql);

// `path` as an SQLite URI ("file:" and the path percent-encoded, then `query` if any), so that
// any file name opens as itself when URIs are enabled.
std::string file_uri(const std::string& path, const std::string& query = "");

// Unix seconds now, from this machine's clock (lease times).
double unix_now();

// A JSON array for json_each(?): the way one bound parameter carries a list.
std::string json_array(const std::vector<std::int64_t>& ids);
std::string json_array(const std::vector<std::string>& texts);
// The texts of a JSON array of strings (as json_array writes), read back through json_each.
std::vector<std::string> json_text_list(sqlite3* db, const std::string& path, const std::string& json);

class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, const char* sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, as in SQLite.
  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
  Statement& bind(int index, double value);  // NaN is stored as NULL by SQLite
  Statement& bind(int index, const std::string& value);
  Statement& bind(int index, const char* value) { return bind(index, std::string(value)); }
  Statement& bind(int index, std::nullptr_t) { return bind_null(index); }
  Statement& bind_null(int index);
  // Binds NULL for an empty string (for optional text columns).
  Statement& bind_text_or_null(int index, const std::string& value);

  // True while a row is available; false when done. Throws on error.
  bool step();
  // Steps once and expects completion (INSERT/UPDATE/DELETE).
  void run();
  // Clears bindings and rewinds, to execute again with new values.
  void reset();

  bool column_is_null(int column) const;
  std::int64_t column_int64(int column) const;
  double column_double(int column) const;       // NULL reads as NaN
  std::string column_text(int column) const;    // NULL reads as ""
  // The text in place, valid until the next step or reset (NULL reads as ""): no copy.
  std::string_view column_view(int column) const;

 private:
  void check_bind(int rc, int index);

  sqlite3* db_;
  std::string path_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit() was called.
class Transaction {
 public:
  Transaction(sqlite3* db, const std::string& path);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  sqlite3* db_;
  std::string path_;
  bool done_ = false;
};

}  // namespace attnlab::store::sql
