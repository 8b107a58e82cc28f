#pragma once
// Spellings that keep a training step's op count down. At the LRA model's sizes a step's time on a
// GPU is its ops' launches, whatever their size (`attnlab bench --ops` counts them), and some
// spellings cost several: at::matmul on [B, H, ·, ·] is a batched product with some ten views and
// copies around it; a C++ scalar operand (x * 0.5) becomes a tensor through four ops of its own
// (a 0-dim tensor of another type costs the same conversion); an out-of-place masked_fill is a copy
// and the fill.
#include <ATen/ATen.h>

namespace attnlab {

// a [..., r, s] × b [..., s, c], or × bᵀ for b [..., c, s] with `transpose_b`, the leading (batch)
// dimensions the same in both, as one batched product and one autograd node (at::matmul on four
// or five dimensions is the same product with some ten views and copies around it, each with its
// backward node). Under autocast, in autocast's type, as at::matmul would run.
at::Tensor batched_matmul(const at::Tensor& a, const at::Tensor& b, bool transpose_b = false);

// A constant of `like`'s type and device: `x * constant(0.5, x)` is one op where `x * 0.5` is five.
inline at::Tensor constant(double value, const at::Tensor& like) { return at::scalar_tensor(value, like.options()); }

// t in `type`, without an op when it is of that type already (at::Tensor::to records one even then).
inline at::Tensor as_type(const at::Tensor& t, at::ScalarType type) { return t.scalar_type() == type ? t : t.to(type); }

// key_valid [B, N] as bool without an op when it is bool already.
inline at::Tensor as_bool(const at::Tensor& key_valid) { return as_type(key_valid, at::kBool); }

}  // namespace attnlab
