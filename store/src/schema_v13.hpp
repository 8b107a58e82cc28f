#pragma once
// Schema version 13: the weights files a run kept at its accuracy marks, with their checksums, so
// that a resumed run carries its predecessor's marks over and `attnlab gradients` refuses a file
// whose bytes changed. Frozen once shipped. Described column by column in store/README.md.

namespace attnlab::store {

inline constexpr const char* kSchemaV13 = R"sql(
CREATE TABLE accuracy_marks (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  mark REAL NOT NULL,
  step INTEGER NOT NULL,
  path TEXT NOT NULL,
  checksum TEXT NOT NULL,
  PRIMARY KEY (run_id, mark)
);
)sql";

}  // namespace attnlab::store
