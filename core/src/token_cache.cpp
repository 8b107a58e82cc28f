#include "attnlab/token_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include <ATen/ops/from_blob.h>

#include "attnlab/checksum.hpp"
#include "attnlab/data_util.hpp"

namespace attnlab {
namespace {

// Layout (little-endian, the only byte order LibTorch's CPU builds run on):
//   char[8] magic | u32 version | u32 dtype | i64 n | i64 inputs | i64 max_len | u64 key bytes |
//   u64 checksum | key
//   then tokens, lengths (int64), labels (int64), each starting at a multiple of 64 bytes.
// The checksum (array_checksum) covers every byte from the tokens to the end of the file.
// Version 1 files (no checksum) are rebuilt.
constexpr char kMagic[8] = {'A', 'T', 'T', 'N', 'T', 'O', 'K', '\0'};
constexpr std::uint32_t kVersion = 2;
constexpr std::uint64_t kAlign = 64;

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t dtype;
  std::int64_t n, inputs, max_len;
  std::uint64_t key_bytes;
  std::uint64_t checksum;
};

std::uint32_t dtype_code(c10::ScalarType t) {
  switch (t) {
    case at::kByte: return 1;
    case at::kShort: return 2;
    case at::kInt: return 3;
    case at::kLong: return 4;
    default: return 0;
  }
}
std::optional<c10::ScalarType> dtype_of(std::uint32_t code) {
  switch (code) {
    case 1: return at::kByte;
    case 2: return at::kShort;
    case 3: return at::kInt;
    case 4: return at::kLong;
    default: return std::nullopt;
  }
}

std::uint64_t aligned(std::uint64_t offset) { return (offset + kAlign - 1) / kAlign * kAlign; }

struct Offsets {
  std::uint64_t tokens, lengths, labels, end;
};
Offsets offsets_of(const Header& h, std::uint64_t element_size) {
  Offsets o{};
  o.tokens = aligned(sizeof(Header) + h.key_bytes);
  o.lengths = aligned(o.tokens + static_cast<std::uint64_t>(h.n * h.inputs * h.max_len) * element_size);
  o.labels = aligned(o.lengths + static_cast<std::uint64_t>(h.n * h.inputs) * 8);
  o.end = o.labels + static_cast<std::uint64_t>(h.n) * 8;
  return o;
}

std::string full_key(const TokenCacheKey& key) {
  return key.dataset + '\n' + to_string(key.split) + '\n' + key.params + '\n' + describe_sources(key.sources);
}

// A read-only file mapped copy-on-write: a stray in-place write to a tensor cannot reach the file.
struct Mapping {
  void* base = MAP_FAILED;
  std::size_t size = 0;
  ~Mapping() {
    if (base != MAP_FAILED) ::munmap(base, size);
  }
};

// The split in `file` if it is complete, was made from exactly `key` and its bytes match the
// stored checksum; nullopt otherwise (a checksum mismatch also prints one line on stderr).
std::optional<SplitData> map_split(const std::string& file, const std::string& key) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  Header h{};
  if (::fstat(fd, &st) != 0 || ::pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) return std::nullopt;
  const auto dtype = dtype_of(h.dtype);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion || !dtype || h.key_bytes != key.size() ||
      h.n < 0 || h.inputs < 1 || h.max_len < 1)
    return std::nullopt;
  std::string stored(key.size(), '\0');
  if (::pread(fd, stored.data(), stored.size(), sizeof h) != static_cast<ssize_t>(stored.size()) || stored != key)
    return std::nullopt;
  const Offsets o = offsets_of(h, c10::elementSize(*dtype));
  if (static_cast<std::uint64_t>(st.st_size) != o.end) return std::nullopt;  // truncated or foreign

  auto mapping = std::make_shared<Mapping>();
  mapping->size = o.end;
  mapping->base = ::mmap(nullptr, o.end, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (mapping->base == MAP_FAILED) return std::nullopt;
  auto* base = static_cast<char*>(mapping->base);
  Checksum sum;
  sum.add(base + o.tokens, o.end - o.tokens);
  if (sum.value() != h.checksum) {
    std::fprintf(stderr, "attnlab: token cache %s is corrupt (checksum mismatch); rebuilding it\n", file.c_str());
    return std::nullopt;
  }
  // Each tensor keeps the mapping alive; the last one to go unmaps it.
  auto view = [&](std::uint64_t offset, std::vector<std::int64_t> sizes, c10::ScalarType type) {
    return at::from_blob(base + offset, sizes, [mapping](void*) {}, at::TensorOptions().dtype(type));
  };
  SplitData data;
  data.tokens = view(o.tokens, {h.n, h.inputs, h.max_len}, *dtype);
  data.lengths = view(o.lengths, {h.n, h.inputs}, at::kLong);
  data.labels = view(o.labels, {h.n}, at::kLong);
  return data;
}

void write_split(const std::string& file, const std::string& key, const SplitData& data) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.dtype = dtype_code(data.tokens.scalar_type());
  h.n = data.tokens.size(0);
  h.inputs = data.tokens.size(1);
  h.max_len = data.tokens.size(2);
  h.key_bytes = key.size();
  const Offsets o = offsets_of(h, data.tokens.element_size());

  const std::string temp = file + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    Checksum sum;  // of everything from the tokens on, alignment gaps included
    auto put = [&](const void* bytes, std::uint64_t size, std::uint64_t at_offset) {
      const std::string zeros(at_offset - static_cast<std::uint64_t>(out.tellp()), '\0');
      out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
      out.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(size));
      if (at_offset > o.tokens) sum.add(zeros.data(), zeros.size());  // the gaps between arrays
      if (at_offset >= o.tokens) sum.add(static_cast<const char*>(bytes), size);
    };
    put(&h, sizeof h, 0);
    put(key.data(), key.size(), sizeof h);
    put(data.tokens.data_ptr(), data.tokens.nbytes(), o.tokens);
    put(data.lengths.data_ptr(), data.lengths.nbytes(), o.lengths);
    put(data.labels.data_ptr(), data.labels.nbytes(), o.labels);
    // the checksum, known once the arrays are written, goes into the header's place
    h.checksum = sum.value();
    out.seekp(0);
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    out.close();
    if (!out) {
      std::filesystem::remove(temp);
      throw std::runtime_error("cannot write " + temp);
    }
  }
  std::filesystem::rename(temp, file);
}

void check_built(const TokenCacheKey& key, const SplitData& d) {
  const std::string where = key.dataset + " " + to_string(key.split) + ": ";
  if (!d.tokens.defined() || d.tokens.dim() != 3 || !dtype_code(d.tokens.scalar_type()))
    throw DataError(where + "tokens must be a [N, inputs, max_len] uint8/int16/int32/int64 tensor");
  if (!d.lengths.defined() || d.lengths.scalar_type() != at::kLong || !d.labels.defined() ||
      d.labels.scalar_type() != at::kLong)
    throw DataError(where + "lengths and labels must be int64 tensors");
  if (d.lengths.sizes() != at::IntArrayRef{d.tokens.size(0), d.tokens.size(1)} || d.labels.dim() != 1 ||
      d.labels.size(0) != d.tokens.size(0))
    throw DataError(where + "tokens, lengths and labels disagree on their sizes");
}

}  // namespace

std::string token_cache_path(const std::string& cache_dir, const TokenCacheKey& key) {
  std::string name_key = key.dataset + '\n' + to_string(key.split) + '\n' + key.params;
  for (const auto& source : key.sources) name_key += '\n' + source;
  return (std::filesystem::path(cache_dir) / "tokens" /
          (key.dataset + "-" + to_string(key.split) + "-" + hex64(fnv1a64(name_key)) + ".tok"))
      .string();
}

SplitData cached_split(const std::string& cache_dir, const TokenCacheKey& key, const std::function<SplitData()>& build) {
  if (cache_dir.empty()) {
    SplitData built = build();
    built.origin = "built (no cache folder)";
    return built;
  }
  const std::string file = token_cache_path(cache_dir, key);
  const std::string stored_key = full_key(key);  // throws DataError for a missing source
  if (auto mapped = map_split(file, stored_key)) {
    mapped->origin = "cache hit " + file;
    return *std::move(mapped);
  }
  SplitData built = build();
  check_built(key, built);
  built.tokens = built.tokens.contiguous();
  built.lengths = built.lengths.contiguous();
  built.labels = built.labels.contiguous();
  try {
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    write_split(file, stored_key, built);
  } catch (const std::exception& e) {
    built.origin = std::string("built, not cached: ") + e.what();
    return built;
  }
  // Sources edited while we read them would make the stored key a lie: check it once more.
  if (full_key(key) != stored_key) {
    std::filesystem::remove(file);
    throw DataError(key.dataset + " " + to_string(key.split) + ": a source file changed while it was read; run again");
  }
  built.origin = "built, cached in " + file;
  return built;
}

}  // namespace attnlab
