#pragma once
// Schema version 10: the study tables that lacked them get the rest of a Provenance (the
// device's name and the threads), as runs and bench_results have. Frozen once shipped. Described
// column by column in store/README.md.

namespace attnlab::store {

inline constexpr const char* kSchemaV10 = R"sql(
ALTER TABLE approx_results ADD COLUMN device_name TEXT;
ALTER TABLE approx_results ADD COLUMN threads INTEGER;
ALTER TABLE spectrum_summaries ADD COLUMN device_name TEXT;
ALTER TABLE spectrum_summaries ADD COLUMN threads INTEGER;
ALTER TABLE gradient_stats ADD COLUMN device_name TEXT;
ALTER TABLE gradient_stats ADD COLUMN threads INTEGER;
)sql";

}  // namespace attnlab::store
