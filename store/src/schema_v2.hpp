#pragma once
// Schema version 2: the studies' tables (attnlab bench, attnlab approx). Frozen once shipped.
// Described column by column in store/README.md.

namespace attnlab::store {

inline constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE bench_results (
  id                  INTEGER PRIMARY KEY,
  created_at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  method              TEXT NOT NULL,
  dataset             TEXT NOT NULL,
  seq_len             INTEGER NOT NULL,
  batch_size          INTEGER NOT NULL,
  device              TEXT NOT NULL,
  device_name         TEXT,
  torch_version       TEXT,
  git_revision        TEXT,
  threads             INTEGER,
  steps_timed         INTEGER NOT NULL,
  step_seconds_median REAL,
  step_seconds_min    REAL,
  step_seconds_max    REAL,
  peak_memory_bytes   REAL,
  status              TEXT NOT NULL CHECK (status IN ('done', 'oom', 'failed')),
  error               TEXT,
  config_toml         TEXT NOT NULL
);
CREATE INDEX bench_by_method ON bench_results(method, seq_len);

CREATE TABLE approx_results (
  id             INTEGER PRIMARY KEY,
  created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  method         TEXT NOT NULL,
  reference      TEXT NOT NULL,
  source         TEXT NOT NULL,
  param          TEXT NOT NULL,
  features       INTEGER NOT NULL,
  seq_len        INTEGER NOT NULL,
  samples        INTEGER NOT NULL,
  abs_error_mean REAL,
  abs_error_std  REAL,
  rel_error_mean REAL,
  rel_error_std  REAL,
  device         TEXT,
  torch_version  TEXT,
  git_revision   TEXT
);
CREATE INDEX approx_by_method ON approx_results(method, seq_len, features);
)sql";

}  // namespace attnlab::store
