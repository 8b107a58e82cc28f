#pragma once
// The safetensors format (huggingface/safetensors), tensor-free: an 8-byte little-endian header
// length N, N bytes of JSON ({"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [begin,
// end]}, ..., "__metadata__": {"key": "text"}}), then the tensors' bytes, row-major and
// little-endian, offsets counted from the end of the header. What PyTorch's
// `safetensors.torch.save_file` writes and `load_file` reads; weights.hpp maps a model onto it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnlab::safetensors {

// A file that is not one, or one attnlab cannot read: one line, "PATH: what is wrong".
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };
const char* dtype_name(DType dtype);  // "F32", as the header spells it
std::size_t dtype_size(DType dtype);  // bytes per element

// One tensor: its bytes, shape and element type. Reading, `data` points into the File it came from.
struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  const char* data = nullptr;
  std::size_t bytes = 0;
  std::int64_t numel() const;
};

using Metadata = std::map<std::string, std::string>;

// Writes `tensors` (each `bytes` = numel × dtype size; names unique) and `metadata` to `path`,
// whole or not at all (a temporary file renamed over it). The header is padded with spaces to a
// multiple of 8 bytes, as the library pads it, so that every tensor is aligned. Throws
// FormatError ("PATH: cannot write (strerror)", a duplicate name, a size that does not match).
void write(const std::string& path, const std::vector<Tensor>& tensors, const Metadata& metadata = {});

// A whole file read and checked: the header's length within the file, its JSON an object whose
// entries each have a known dtype, a shape of sizes ≥ 0 and offsets that hold exactly that many
// bytes, the entries together covering the data without overlap or gap (the format's rules).
// Any failure is a FormatError naming the file and the first problem.
class File {
 public:
  explicit File(const std::string& path);
  const std::string& path() const { return path_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }  // in the order of their data
  const Tensor* find(const std::string& name) const;                // nullptr when absent
  const Metadata& metadata() const { return metadata_; }

 private:
  std::string path_;
  std::string bytes_;
  std::vector<Tensor> tensors_;
  Metadata metadata_;
};

}  // namespace attnlab::safetensors
