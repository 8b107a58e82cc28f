#pragma once
// SHA-256 (Nettle) of files and strings, as lowercase hex: plugin file identity, job identity.
#include <string>

namespace attnlab {
std::string sha256_of_file(const std::string& path);  // "" if the file cannot be read
std::string sha256_of_text(const std::string& text);
}  // namespace attnlab
