#pragma once
// Schema version 16: the weights a run ended its training steps with (`run-R.pt.last`, beside its
// best file) and their checksum, so that `attnlab export RUN --weights last` can write them and
// refuse a file whose bytes changed. Frozen once shipped. Described column by column in
// store/README.md.

namespace attnlab::store {

inline constexpr const char* kSchemaV16 = R"sql(
ALTER TABLE runs ADD COLUMN last_checkpoint TEXT;
ALTER TABLE runs ADD COLUMN last_checksum TEXT;
)sql";

}  // namespace attnlab::store
