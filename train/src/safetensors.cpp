#include "attnlab/train/safetensors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

namespace attnlab::safetensors {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors files are little-endian, as this host must be");

// The library refuses a header over 100 MB; so does this reader.
constexpr std::uint64_t kMaxHeader = 100'000'000;

struct DTypeName {
  DType dtype;
  const char* name;
  std::size_t size;
};
constexpr DTypeName kDTypes[] = {{DType::F64, "F64", 8}, {DType::F32, "F32", 4}, {DType::F16, "F16", 2},
                                 {DType::BF16, "BF16", 2}, {DType::I64, "I64", 8}, {DType::I32, "I32", 4},
                                 {DType::I16, "I16", 2}, {DType::I8, "I8", 1},   {DType::U8, "U8", 1},
                                 {DType::BOOL, "BOOL", 1}};

const DTypeName& entry_of(DType dtype) {
  for (const auto& d : kDTypes)
    if (d.dtype == dtype) return d;
  throw std::logic_error("safetensors: a dtype without a name");
}

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (const auto size : shape) n *= size;
  return n;
}

void put_u64(std::string& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::uint64_t get_u64(const std::string& bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

// Writes every byte to PATH.partial.PID, then renames it over `path`.
void write_whole(const std::string& path, const std::string& header, const std::vector<Tensor>& tensors) {
  const std::string partial = path + ".partial." + std::to_string(::getpid());
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  auto fail = [&](int error) {
    if (fd >= 0) ::close(fd);
    ::unlink(partial.c_str());
    throw FormatError(path + ": cannot write (" + std::strerror(error) + ")");
  };
  if (fd < 0) fail(errno);
  auto put = [&](const char* bytes, std::size_t size) {
    for (std::size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, bytes + done, size - done);
      if (n < 0 && errno != EINTR) fail(errno);
      if (n > 0) done += static_cast<std::size_t>(n);
    }
  };
  put(header.data(), header.size());
  for (const auto& t : tensors) put(t.data, t.bytes);
  if (::fsync(fd) != 0) fail(errno);
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(partial.c_str());
    throw FormatError(path + ": cannot write (" + std::strerror(error) + ")");
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(partial.c_str());
    throw FormatError(path + ": cannot write (" + std::strerror(error) + ")");
  }
}

}  // namespace

const char* dtype_name(DType dtype) { return entry_of(dtype).name; }
std::size_t dtype_size(DType dtype) { return entry_of(dtype).size; }
std::int64_t Tensor::numel() const { return elements(shape); }

void write(const std::string& path, const std::vector<Tensor>& tensors, const Metadata& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (!names.insert(t.name).second) throw FormatError(path + ": the name " + t.name + " twice");
    if (t.name == "__metadata__") throw FormatError(path + ": __metadata__ is not a tensor's name");
    const std::uint64_t expected = static_cast<std::uint64_t>(t.numel()) * dtype_size(t.dtype);
    if (t.bytes != expected)
      throw FormatError(path + ": " + t.name + " has " + std::to_string(t.bytes) + " bytes, its shape needs " +
                        std::to_string(expected));
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string head;
  put_u64(head, json.size());
  write_whole(path, head + json, tensors);
}

File::File(const std::string& path) : path_(path) {
  auto fail = [&](const std::string& what) { throw FormatError(path + ": " + what); };
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(std::string("cannot read (") + std::strerror(errno) + ")");
  bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad()) fail("cannot read (a read failed)");
  if (bytes_.size() < 8) fail("not a safetensors file (" + std::to_string(bytes_.size()) + " bytes, no header length)");
  const std::uint64_t header_size = get_u64(bytes_);
  if (header_size > kMaxHeader || header_size > bytes_.size() - 8)
    fail("not a safetensors file (a header of " + std::to_string(header_size) + " bytes in a file of " +
         std::to_string(bytes_.size()) + ")");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes_.begin() + 8, bytes_.begin() + 8 + static_cast<std::ptrdiff_t>(header_size));
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("not a safetensors file (its header is not JSON: ") + e.what() + ")");
  }
  if (!header.is_object()) fail("not a safetensors file (its header is not a JSON object)");
  const char* data = bytes_.data() + 8 + header_size;
  const std::uint64_t data_size = bytes_.size() - 8 - header_size;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail("__metadata__ " + key + " is not a string");
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& what) { fail("tensor " + name + ": " + what); };
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      bad("needs dtype, shape and data_offsets");
    Tensor t;
    t.name = name;
    const auto& dtype = entry["dtype"];
    const auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                    [&](const DTypeName& d) { return dtype.is_string() && dtype.get<std::string>() == d.name; });
    if (known == std::end(kDTypes)) bad("dtype " + dtype.dump() + " is not one attnlab reads (F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
    t.dtype = known->dtype;
    if (!entry["shape"].is_array()) bad("shape is not an array");
    for (const auto& size : entry["shape"]) {
      if (!size.is_number_unsigned()) bad("shape " + entry["shape"].dump() + " is not of sizes >= 0");
      t.shape.push_back(size.get<std::int64_t>());
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      bad("data_offsets is not [begin, end]");
    const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
    if (begin > end || end > data_size)
      bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] outside the " +
          std::to_string(data_size) + " bytes of data");
    t.bytes = end - begin;
    if (t.bytes != static_cast<std::uint64_t>(t.numel()) * known->size)
      bad(std::to_string(t.bytes) + " bytes for a shape of " + std::to_string(t.numel()) + " " + known->name + " values");
    t.data = data + begin;
    spans.push_back({begin, end});
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(), [](const Tensor& a, const Tensor& b) { return a.data < b.data; });
  std::sort(spans.begin(), spans.end());
  std::uint64_t covered = 0;
  for (const auto& [begin, end] : spans) {
    if (begin != covered) fail(begin < covered ? "two tensors' data overlap" : "a gap in the data at byte " + std::to_string(covered));
    covered = end;
  }
  if (covered != data_size) fail(std::to_string(data_size - covered) + " bytes of data after the last tensor");
}

const Tensor* File::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace attnlab::safetensors
