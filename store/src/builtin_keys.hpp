#pragma once
// The keys of the --where language and --group-by that are columns of `job_outcomes AS o`
// (filter.cpp defines them; select.cpp reads group values through the same map).
#include <string>

namespace attnlab::store {

// "o.method", "o.seed", ... for a builtin key; nullptr for a config key.
const char* builtin_column(const std::string& key);

}  // namespace attnlab::store
