#pragma once
// A small, strict reader of NumPy .npy files (format versions 1.0, 2.0 and 3.0): little-endian
// float32 ('<f4') or float64 ('<f8') arrays in C order. Anything else is refused with one
// NpyError whose message starts with the file's path and says what was expected.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace attnlab {

struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The parsed header of a .npy file.
struct NpyHeader {
  int major = 0, minor = 0;
  std::string descr;                 // '<f4' or '<f8'
  std::vector<std::int64_t> shape;   // () for a scalar
  std::size_t data_offset = 0;       // bytes before the data
};

// Parses the header dictionary text ("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
// `path` only names the file in errors. Throws NpyError.
NpyHeader parse_npy_header_dict(const std::string& text, const std::string& path);

// Reads the whole file into a CPU tensor of its dtype (float or double) and shape. Throws NpyError.
at::Tensor read_npy(const std::string& path, NpyHeader* header = nullptr);

// "(2, 3, 4)", as NumPy writes shapes.
std::string shape_text(const std::vector<std::int64_t>& shape);

}  // namespace attnlab
