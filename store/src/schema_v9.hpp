#pragma once
// Schema version 9: checkpoints carry checksums, and attempts ended from outside back off instead
// of failing their job. Frozen once shipped. Described column by column in store/README.md.

namespace attnlab::store {

inline constexpr const char* kSchemaV9 = R"sql(
-- the checksum (attnlab::Checksum, 16 hex digits) of the run's resume checkpoint and of its
-- best-validation weights file, as written; checked before either is read
ALTER TABLE runs ADD COLUMN resume_checksum TEXT;
ALTER TABLE runs ADD COLUMN checkpoint_checksum TEXT;
-- attempts in a row ended from outside (lost) without a checkpoint of their own, and the unix
-- time before which the job is not claimed again (the back-off after such an attempt)
ALTER TABLE jobs ADD COLUMN lost_in_a_row INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN retry_after REAL;
)sql";

}  // namespace attnlab::store
