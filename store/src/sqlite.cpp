#include "sqlite.hpp"

#include <cctype>
#include <chrono>
#include <cmath>
#include <limits>

namespace attnlab::store::sql {

void fail(sqlite3* db, const std::string& path, const std::string& what) {
  const int code = db ? sqlite3_extended_errcode(db) : SQLITE_ERROR;
  const char* msg = db ? sqlite3_errmsg(db) : "no database handle";
  throw SqliteError(path + ": " + what + ": " + msg, code);
}

void exec(sqlite3* db, const std::string& path, const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw SqliteError(path + ": " + msg, sqlite3_extended_errcode(db));
  }
}

std::string file_uri(const std::string& path, const std::string& query) {
  static const char* kHex = "0123456789ABCDEF";
  std::string uri = "file:";
  for (const unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      uri += static_cast<char>(c);
    } else {
      uri += '%';
      uri += kHex[c >> 4];
      uri += kHex[c & 15];
    }
  }
  return query.empty() ? uri : uri + "?" + query;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Statement::Statement(sqlite3* db, const std::string& path, const char* sql) : db_(db), path_(path) {
  if (sqlite3_prepare_v2(db_, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
    fail(db_, path_, "cannot prepare statement");
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::check_bind(int rc, int index) {
  if (rc != SQLITE_OK) fail(db_, path_, "cannot bind parameter " + std::to_string(index));
}

Statement& Statement::bind(int index, std::int64_t value) {
  check_bind(sqlite3_bind_int64(stmt_, index, value), index);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  check_bind(sqlite3_bind_double(stmt_, index, value), index);
  return *this;
}

Statement& Statement::bind(int index, const std::string& value) {
  check_bind(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
             index);
  return *this;
}

Statement& Statement::bind_null(int index) {
  check_bind(sqlite3_bind_null(stmt_, index), index);
  return *this;
}

Statement& Statement::bind_text_or_null(int index, const std::string& value) {
  return value.empty() ? bind_null(index) : bind(index, value);
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, path_, "cannot execute statement");
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::column_is_null(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t Statement::column_int64(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::column_double(int column) const {
  if (column_is_null(column)) return std::numeric_limits<double>::quiet_NaN();
  return sqlite3_column_double(stmt_, column);
}

std::string Statement::column_text(int column) const {
  const auto* text = sqlite3_column_text(stmt_, column);
  if (!text) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::string_view Statement::column_view(int column) const {
  const auto* text = sqlite3_column_text(stmt_, column);
  if (!text) return {};
  return {reinterpret_cast<const char*>(text), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column))};
}

Transaction::Transaction(sqlite3* db, const std::string& path) : db_(db), path_(path) {
  exec(db_, path_, "BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  // SQLite may already have rolled back on its own (e.g. SQLITE_FULL); only roll back if open.
  if (!done_ && !sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  exec(db_, path_, "COMMIT");
  done_ = true;
}

std::string json_array(const std::vector<std::int64_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

std::string json_array(const std::vector<std::string>& texts) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "[";
  for (std::size_t i = 0; i < texts.size(); ++i) {
    out += i ? ",\"" : "\"";
    for (const unsigned char c : texts[i]) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      } else {
        out += static_cast<char>(c);
      }
    }
    out += '"';
  }
  return out + "]";
}

std::vector<std::string> json_text_list(sqlite3* db, const std::string& path, const std::string& json) {
  std::vector<std::string> out;
  if (json.empty()) return out;
  Statement st(db, path, "SELECT value FROM json_each(?1) ORDER BY key");
  st.bind(1, json);
  while (st.step()) out.push_back(st.column_text(0));
  return out;
}

}  // namespace attnlab::store::sql

namespace attnlab::store {

DatabaseFault database_fault(const std::exception& e) {
  const auto* error = dynamic_cast<const sql::SqliteError*>(&e);
  if (!error) return DatabaseFault::none;
  switch (error->primary_code()) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return DatabaseFault::locked;
    case SQLITE_FULL: return DatabaseFault::full;
    case SQLITE_READONLY: return DatabaseFault::read_only;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return DatabaseFault::damaged;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL: return DatabaseFault::io;
    default: return DatabaseFault::none;
  }
}

}  // namespace attnlab::store
