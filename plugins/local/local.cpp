// Local attention (block-local softmax attention; LRA's "Local Attention" baseline): the sequence,
// padded with invalid positions up to a multiple of the block b, is cut into non-overlapping
// contiguous blocks B_1, B_2, …, and each query attends to the real keys of its own block only:
//   out_i = Σ_{j ∈ B(i), j real} softmax_j(q_i·k_j / √p) v_j,
// computed as [B, H, N/b, b, b] score blocks: O(N b p) time, O(N b) memory, no N × N matrix.
// lra_compat reproduces what LRA's local_attention.py computes instead (strided groups, an extra
// block of zero keys counted as real, the mask of other tokens): see README.md.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <ATen/ATen.h>

#include "attnlab/attention.hpp"
#include "attnlab/linalg.hpp"

namespace attnlab::local {

const ParamSpec kParams[] = {
    {"block", ParamType::integer, "50", 1, 65536, nullptr,
     "b, tokens per block (LRA: 50 for listops, text and retrieval, 64 for image and pathfinder)"},
    {"lra_compat", ParamType::boolean, "false", 0, 0, nullptr,
     "compute what LRA's local_attention.py computes: strided (dilated) groups, its extra block of zero keys "
     "counted as real, the mask of other tokens (not padding-invariant)"},
};

// LRA's additive bias on masked scores (−1e10, which fp16 cannot hold).
double lra_bias(at::ScalarType type) { return type == at::kHalf ? -60000.0 : -1e10; }

// x [B, H, N, p] (or [B, N] for a mask) extended along the sequence axis to `total` positions
// with `fill` (zeros / false, or true for LRA's extra block).
at::Tensor extend(const at::Tensor& x, std::int64_t dim, std::int64_t total, bool fill = false) {
  const auto n = x.size(dim);
  if (total == n) return x;
  auto shape = x.sizes().vec();
  shape[dim] = total - n;
  return at::cat({x, fill ? at::ones(shape, x.options()) : at::zeros(shape, x.options())}, dim);
}

class LocalAttention : public AttentionMethod {
 public:
  LocalAttention(std::int64_t block, bool lra_compat) : block_(block), lra_compat_(lra_compat) {}

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    return lra_compat_ ? lra_forward(q, k, v, key_valid.to(at::kBool)) : local_forward(q, k, v, key_valid);
  }

 private:
  at::Tensor local_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) {
    const auto batch = q.size(0), heads = q.size(1), n = q.size(2), dim = q.size(3);
    // A block of b ≥ N is one block of N: the same attention without the padding up to b.
    const auto b = std::min(block_, n), blocks = (n + b - 1) / b, total = blocks * b;
    // q kᵀ/√p as (q/p^¼)(k/p^¼)ᵀ; padded rows zeroed, so nothing there reaches a real token.
    const auto [qs, ks, vs, valid] = linalg::scale_and_mask(q, k, v, key_valid);
    auto to_blocks = [&](const at::Tensor& x) { return extend(x, 2, total).view({batch, heads, blocks, b, dim}); };
    const auto excluded = extend(valid, 1, total).logical_not().view({batch, 1, blocks, 1, b});
    auto scores = at::matmul(to_blocks(qs), to_blocks(ks).transpose(-2, -1));  // [B, H, N/b, b, b]
    scores.masked_fill_(excluded, masked_logit(q.scalar_type()));
    const auto out = at::matmul(at::softmax(scores, -1), to_blocks(vs)).view({batch, heads, total, dim});
    return total == n ? out : out.slice(2, 0, n);
  }

  // LRA's LocalAttention (local_attention.py:226-413) on given q, k, v:
  //  - the sequence gets e = b − (N mod b) more positions (a whole block when b divides N, lines
  //    228-234), zero vectors (LRA pads the layer-normed inputs with 0 and projects them without
  //    bias), and its padding mask is padded with −1e9, which a boolean mask holds as true: they
  //    are real keys (line 237);
  //  - the reshape to [bs, b, L/b, …] (lines 318-323) makes group g the positions i·(L/b) + g,
  //    i = 0 … b−1: strided (dilated) groups, within which attention runs;
  //  - the mask is reshaped contiguously (line 342), so group g's pair (i, j) is masked by the
  //    validity of positions g·b + i and g·b + j: other tokens' (make_padding_mask, lines 347-355);
  //  - masked scores get −1e10 added (lines 379-381): a fully masked row (its mask position is
  //    padding) is uniform over the group in float32, the plain softmax of its scores in double.
  // Nothing is zeroed: what sits at padded positions enters as LRA's pad tokens do.
  at::Tensor lra_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) {
    const auto batch = q.size(0), heads = q.size(1), n = q.size(2), dim = q.size(3);
    const auto b = block_, total = n + (b - n % b), groups = total / b;
    auto strided = [&](const at::Tensor& x) {  // [B, H, L/b, b, p]: group g, slot i = position i·(L/b) + g
      return extend(x, 2, total).view({batch, heads, b, groups, dim}).transpose(2, 3);
    };
    const auto mask = extend(key_valid, 1, total, /*fill=*/true).view({batch, groups, b});  // contiguous blocks
    const auto allowed = at::logical_and(mask.unsqueeze(-1), mask.unsqueeze(-2)).unsqueeze(1);  // [B, 1, L/b, b, b]
    const auto bias = at::where(allowed, at::scalar_tensor(0.0, q.options()),
                                at::scalar_tensor(lra_bias(q.scalar_type()), q.options()));
    const auto scores = at::matmul(strided(q / std::sqrt(static_cast<double>(dim))), strided(k).transpose(-2, -1)) + bias;
    const auto out = at::matmul(at::softmax(scores, -1), strided(v));  // [B, H, L/b, b, p]
    return out.transpose(2, 3).reshape({batch, heads, total, dim}).slice(2, 0, n);
  }

  std::int64_t block_;
  bool lra_compat_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape&, const ParamValues& params) {
  return std::make_shared<LocalAttention>(params.integer("block"), params.boolean("lra_compat"));
}

}  // namespace attnlab::local

ATTNLAB_PLUGIN_INFO(attention, "local", "1.0",
                    "Local attention: softmax attention within non-overlapping contiguous blocks of b tokens",
                    attnlab::local::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::local::create);
