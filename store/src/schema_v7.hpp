#pragma once
// Schema version 7: the singular-value spectrum of a trained run's attention output (attnlab
// spectrum; Skyformer appendix B, Fig. 4). Frozen once shipped. Described column by column in
// store/README.md.
//
// One measurement is (run, layer, stage, batch): a summary row, and one row per singular-value
// index. Measuring the same again replaces both.

namespace attnlab::store {

inline constexpr const char* kSchemaV7 = R"sql(
CREATE TABLE spectrum_summaries (
  run_id           INTEGER NOT NULL REFERENCES runs(id),
  layer            INTEGER NOT NULL CHECK (layer >= 1),
  stage            TEXT NOT NULL CHECK (stage IN ('out', 'heads')),
  batch            INTEGER NOT NULL CHECK (batch >= 1),
  split            TEXT NOT NULL CHECK (split IN ('val', 'test')),
  matrices         INTEGER NOT NULL,
  width            INTEGER NOT NULL,
  rows_min         INTEGER NOT NULL,
  rows_max         INTEGER NOT NULL,
  k                INTEGER NOT NULL,
  rank90_mean      REAL,
  rank90_std       REAL,
  rank99_mean      REAL,
  rank99_std       REAL,
  stable_rank_mean REAL,
  device           TEXT,
  torch_version    TEXT,
  git_revision     TEXT,
  created_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  PRIMARY KEY (run_id, layer, stage, batch)
) WITHOUT ROWID;

CREATE TABLE spectrum_results (
  run_id          INTEGER NOT NULL,
  layer           INTEGER NOT NULL,
  stage           TEXT NOT NULL,
  batch           INTEGER NOT NULL,
  idx             INTEGER NOT NULL CHECK (idx >= 1),
  sigma_mean      REAL,
  sigma_std       REAL,
  normalised_mean REAL,
  normalised_std  REAL,
  energy_mean     REAL,
  PRIMARY KEY (run_id, layer, stage, batch, idx),
  FOREIGN KEY (run_id, layer, stage, batch) REFERENCES spectrum_summaries (run_id, layer, stage, batch)
) WITHOUT ROWID;
)sql";

}  // namespace attnlab::store
