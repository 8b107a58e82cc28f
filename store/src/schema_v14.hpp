#pragma once
// Schema version 14: the phase a running attempt is in after its training steps (its variance
// passes), written by its job process as it goes and removed when the attempt ends, so that the
// queue's ETA counts it. Frozen once shipped. Described column by column in store/README.md.

namespace attnlab::store {

inline constexpr const char* kSchemaV14 = R"sql(
CREATE TABLE run_phases (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
  phase TEXT NOT NULL,
  done INTEGER NOT NULL,
  total INTEGER NOT NULL,
  seconds REAL NOT NULL
);
)sql";

}  // namespace attnlab::store
