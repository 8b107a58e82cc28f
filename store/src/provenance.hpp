#pragma once
// A Provenance's five columns, in one order in every table that has them: written and read here
// only.
#include "attnlab/store.hpp"
#include "sqlite.hpp"

namespace attnlab::store {

inline constexpr const char* kProvenanceColumns = "device, device_name, torch_version, git_revision, threads";

// Binds the five from parameter `first` on (empty text as NULL).
inline void bind_provenance(sql::Statement& st, int first, const Provenance& p) {
  st.bind_text_or_null(first, p.device)
      .bind_text_or_null(first + 1, p.device_name)
      .bind_text_or_null(first + 2, p.torch_version)
      .bind_text_or_null(first + 3, p.git_revision)
      .bind(first + 4, p.threads);
}

// Reads the five from column `first` on (NULL as empty text, or 0 threads).
inline void read_provenance(sql::Statement& st, int first, Provenance& p) {
  p.device = st.column_text(first);
  p.device_name = st.column_text(first + 1);
  p.torch_version = st.column_text(first + 2);
  p.git_revision = st.column_text(first + 3);
  p.threads = st.column_int64(first + 4);
}

}  // namespace attnlab::store
