#pragma once
// Durations and sizes as people read them, in progress lines and tables.
#include <string>

namespace attnlab {

std::string format_duration(double seconds);  // "1h02m", "3m07s", "12.3s"; "?" when not finite or negative
std::string format_bytes(double bytes);       // "812.4 MiB"; "-" when not finite

}  // namespace attnlab
