#pragma once
// Forward-only schema migrations, tracked with PRAGMA user_version. See store/README.md.
#include <sqlite3.h>

#include <string>

namespace attnlab::store {

// Brings the database at `path` up to Database::kSchemaVersion, one transaction per migration.
// Returns the version the file had before. Throws StoreError for a schema newer than this build,
// or for a non-empty database that was never an attnlab database.
int migrate(sqlite3* db, const std::string& path);

// For connections that must not migrate (workers, job processes): throws StoreError unless the
// file is at exactly Database::kSchemaVersion, telling the user how to migrate it.
void require_current(sqlite3* db, const std::string& path);

// PRAGMA user_version.
int user_version(sqlite3* db, const std::string& path);

}  // namespace attnlab::store
