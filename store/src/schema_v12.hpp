#pragma once
// Schema version 12: what a run's method file is worth a warning for, kept with the run (a
// TorchScript method whose parameters start from the file's values in every layer and seed; one
// saved by torch.jit.trace). Frozen once shipped. Described column by column in store/README.md.

namespace attnlab::store {

inline constexpr const char* kSchemaV12 = R"sql(
ALTER TABLE runs ADD COLUMN warnings TEXT;
)sql";

}  // namespace attnlab::store
