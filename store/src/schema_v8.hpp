#pragma once
// Schema version 8: the gradient statistics of a trained run at its accuracy checkpoints
// (attnlab gradients; the KL-Transformer's App. E.3, Table 14). Frozen once shipped. Described
// column by column in store/README.md. Measuring the same (run, mark, parameter) again replaces it.

namespace attnlab::store {

inline constexpr const char* kSchemaV8 = R"sql(
CREATE TABLE gradient_stats (
  run_id        INTEGER NOT NULL REFERENCES runs(id),
  mark          REAL NOT NULL CHECK (mark > 0 AND mark <= 1),
  parameter     TEXT NOT NULL,
  step          INTEGER NOT NULL,
  split         TEXT NOT NULL CHECK (split IN ('val', 'test')),
  examples      INTEGER NOT NULL CHECK (examples >= 1),
  repeats       INTEGER NOT NULL CHECK (repeats >= 2),
  neurons       INTEGER NOT NULL CHECK (neurons >= 1),
  abs_mean      REAL,
  std           REAL,
  device        TEXT,
  torch_version TEXT,
  git_revision  TEXT,
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  PRIMARY KEY (run_id, mark, parameter)
) WITHOUT ROWID;
)sql";

}  // namespace attnlab::store
