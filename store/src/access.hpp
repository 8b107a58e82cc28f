#pragma once
// A Database's connection and clock, for the store's own free functions (query.hpp,
// store/studies.hpp) and for tests (which also run SQL of their own and give the queue their
// clock). Not installed: nothing outside store/ and tests/ reaches past the API.
#include <functional>
#include <utility>

#include "attnlab/store.hpp"

namespace attnlab::store {

struct DatabaseAccess {
  static sqlite3* handle(ResultsReader& db) { return db.db_; }
  static void set_clock(ResultsReader& db, std::function<double()> now) { db.clock_ = std::move(now); }
};

inline sqlite3* sqlite_handle(ResultsReader& db) { return DatabaseAccess::handle(db); }
// The unix time the queue reads from now on (lease expiries, back-offs).
inline void set_clock(ResultsReader& db, std::function<double()> now) { DatabaseAccess::set_clock(db, std::move(now)); }

// For tests: ends every expired lease as Queue::claim_next_job does first; returns how many.
std::int64_t expire_leases(Database& db);

}  // namespace attnlab::store
