#include "migrations.hpp"

#include "schema_v1.hpp"
#include "schema_v2.hpp"
#include "schema_v3.hpp"
#include "schema_v4.hpp"
#include "schema_v5.hpp"
#include "schema_v6.hpp"
#include "schema_v7.hpp"
#include "schema_v8.hpp"
#include "schema_v9.hpp"
#include "schema_v10.hpp"
#include "schema_v11.hpp"
#include "schema_v12.hpp"
#include "schema_v13.hpp"
#include "schema_v14.hpp"
#include "schema_v15.hpp"
#include "schema_v16.hpp"
#include "schema_v17.hpp"
#include "sqlite.hpp"

namespace attnlab::store {
namespace {

struct Migration {
  int version;      // user_version after this migration
  const char* sql;  // constant DDL, run as one script
};

// Append only. Never edit a migration that has shipped; add a new one instead.
constexpr Migration kMigrations[] = {
    {1, kSchemaV1},
    {2, kSchemaV2},
    {3, kSchemaV3},
    {4, kSchemaV4},
    {5, kSchemaV5},
    {6, kSchemaV6},
    {7, kSchemaV7},
    {8, kSchemaV8},
    {9, kSchemaV9},
    {10, kSchemaV10},
    {11, kSchemaV11},
    {12, kSchemaV12},
    {13, kSchemaV13},
    {14, kSchemaV14},
    {15, kSchemaV15},
    {16, kSchemaV16},
    {17, kSchemaV17},
};

static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == Database::kSchemaVersion,
              "one migration per schema version, numbered 1..kSchemaVersion");

[[noreturn]] void refuse_newer(const std::string& path, int version) {
  throw StoreError(path + ": database schema version " + std::to_string(version) +
                   " is newer than this attnlab knows (" + std::to_string(Database::kSchemaVersion) + ")");
}

bool has_user_tables(sqlite3* db, const std::string& path) {
  sql::Statement st(db, path, "SELECT 1 FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' LIMIT 1");
  return st.step();
}

// A migration that rebuilds a table (schemas 4 and 6) must run with foreign keys off: dropping the old
// table would otherwise be refused, or cascade. The pragma is a no-op inside a transaction, so
// it is switched around them, and back on however migrate() leaves.
class ForeignKeysOff {
 public:
  ForeignKeysOff(sqlite3* db, const std::string& path) : db_(db) { sql::exec(db, path, "PRAGMA foreign_keys = OFF"); }
  ~ForeignKeysOff() { sqlite3_exec(db_, "PRAGMA foreign_keys = ON", nullptr, nullptr, nullptr); }
  ForeignKeysOff(const ForeignKeysOff&) = delete;
  ForeignKeysOff& operator=(const ForeignKeysOff&) = delete;

 private:
  sqlite3* db_;
};

}  // namespace

int user_version(sqlite3* db, const std::string& path) {
  sql::Statement st(db, path, "PRAGMA user_version");
  if (!st.step()) throw StoreError(path + ": PRAGMA user_version returned nothing");
  return static_cast<int>(st.column_int64(0));
}

void require_current(sqlite3* db, const std::string& path) {
  const int seen = user_version(db, path);
  if (seen > Database::kSchemaVersion) refuse_newer(path, seen);
  if (seen == 0 && has_user_tables(db, path))  // someone else's SQLite file: migrating would refuse it too
    throw StoreError(path + ": not an attnlab database (it has tables but no attnlab schema version)");
  if (seen < Database::kSchemaVersion)
    throw StoreError(path + ": database schema version " + std::to_string(seen) + " is older than this attnlab needs (" +
                     std::to_string(Database::kSchemaVersion) + "): run `attnlab db migrate --db " + path + "` first");
}

int migrate(sqlite3* db, const std::string& path) {
  const int seen = user_version(db, path);
  if (seen > Database::kSchemaVersion) refuse_newer(path, seen);
  if (seen == Database::kSchemaVersion) return seen;  // up to date: no write lock taken

  ForeignKeysOff foreign_keys_off(db, path);
  for (const Migration& m : kMigrations) {
    if (m.version <= seen) continue;
    sql::Transaction tx(db, path);
    // Read again under the write lock: another process may have migrated in the meantime.
    const int now = user_version(db, path);
    if (now > Database::kSchemaVersion) refuse_newer(path, now);
    if (now >= m.version) continue;
    if (now == 0 && has_user_tables(db, path))
      throw StoreError(path + ": not an attnlab database (it has tables but no attnlab schema version)");
    sql::exec(db, path, m.sql);
    {
      sql::Statement check(db, path, "PRAGMA foreign_key_check");
      if (check.step())
        throw StoreError(path + ": migration to schema version " + std::to_string(m.version) +
                         " would break a reference in table " + check.column_text(0) + "; nothing was changed");
    }
    // PRAGMA takes no parameters; the version is a compile-time constant from kMigrations.
    const std::string set_version = "PRAGMA user_version = " + std::to_string(m.version);
    sql::exec(db, path, set_version.c_str());
    tx.commit();
  }
  return seen;
}

}  // namespace attnlab::store
