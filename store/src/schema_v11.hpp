#pragma once
// Schema version 11: what a bench step costs the host, beside what it costs in all: the host's
// time a step (until the step is issued, before waiting for the device) and the ops one step runs
// (`attnlab bench --ops`); how a run's training steps ran (a replayed CUDA graph, or eager and why).
// Frozen once shipped. Described column by column in store/README.md.

namespace attnlab::store {

inline constexpr const char* kSchemaV11 = R"sql(
ALTER TABLE bench_results ADD COLUMN host_seconds_median REAL;
ALTER TABLE bench_results ADD COLUMN ops_per_step INTEGER;
ALTER TABLE bench_results ADD COLUMN step_mode TEXT;
ALTER TABLE bench_results ADD COLUMN concurrent INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN step_mode TEXT;
)sql";

}  // namespace attnlab::store
