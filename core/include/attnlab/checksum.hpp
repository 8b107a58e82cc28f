#pragma once
// The checksum of attnlab's own files (token caches, checkpoints): tensor-free, header-only.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace attnlab {

// A fast non-cryptographic checksum, to catch a file whose bytes changed (a disk error, a
// stray write), not an adversary. Four independent lanes keep the multiplier busy; each step
// (xor a word in, multiply by an odd constant, rotate) is a bijection of the lane, so a change
// confined to one 8-byte word always changes the result. Fed in pieces of any size, it gives what
// one call over the concatenation gives.
class Checksum {
 public:
  void add(const char* bytes, std::uint64_t size) {
    size_ += size;
    if (buffered_) {  // complete the pending block first
      const std::uint64_t take = std::min<std::uint64_t>(size, kBlock - buffered_);
      std::memcpy(buffer_ + buffered_, bytes, take);
      buffered_ += take, bytes += take, size -= take;
      if (buffered_ < kBlock) return;
      block(buffer_);
      buffered_ = 0;
    }
    for (; size >= kBlock; bytes += kBlock, size -= kBlock) block(bytes);
    std::memcpy(buffer_, bytes, size);
    buffered_ = size;
  }
  std::uint64_t value() const {
    std::uint64_t lane[4] = {lane_[0], lane_[1], lane_[2], lane_[3]};
    char tail[kBlock] = {};
    std::memcpy(tail, buffer_, buffered_);
    for (int k = 0; k < 4; ++k) lane[k] = step(lane[k], word(tail + 8 * k));
    std::uint64_t h = size_;
    for (const auto l : lane) h = step(h, l);
    h ^= h >> 30;  // splitmix64's finaliser
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 31);
  }

 private:
  static constexpr std::uint64_t kBlock = 32;
  static std::uint64_t word(const char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    return w;
  }
  static std::uint64_t step(std::uint64_t lane, std::uint64_t w) {
    lane = (lane ^ w) * 0x9E3779B97F4A7C15ull;
    return (lane << 29) | (lane >> 35);
  }
  void block(const char* p) {
    for (int k = 0; k < 4; ++k) lane_[k] = step(lane_[k], word(p + 8 * k));
  }
  std::uint64_t lane_[4] = {1, 2, 3, 4};
  char buffer_[kBlock] = {};
  std::uint64_t buffered_ = 0, size_ = 0;
};

// A checksum as the 16 hex digits files and the database record.
inline std::string checksum_text(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace attnlab
