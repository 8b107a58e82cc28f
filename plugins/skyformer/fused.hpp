#pragma once
// Skyformer's attention with its gradient written out: one autograd node for what is otherwise
// some 1,700 recorded ops a layer at the LRA model's sizes (a step's time on a GPU is its ops'
// launches). The same formula as skyformer.cpp's composed path, which autograd differentiates and
// the tests hold this to (outputs and gradients, in double).
#include <cstdint>

#include <ATen/core/Tensor.h>

#include "attnlab/linalg.hpp"

namespace attnlab::skyformer {

// The landmarks of one forward call: rows of the stacked [Q; K] (2N rows), and which are real.
struct Landmarks {
  at::Tensor index;  // [B, m] int64 into the 2N rows, shared by the heads
  at::Tensor valid;  // [B, m] bool
};

// κ(Q, L) · D^-½ (D^-½ M D^-½)⁺ D^-½ · κ(L, K) · V,  M = κ(L, L) + ridge, with q, k, v [B, H, N, p] in
// float or double (padded rows zeroed here, q and k scaled by p^-¼), `valid` [B, N] bool, the pseudo-
// inverse by `iterations` of the iteration from `scope`'s initial value.
at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& valid,
                           const Landmarks& landmarks, double gamma, int iterations, linalg::NormScope scope);

}  // namespace attnlab::skyformer
