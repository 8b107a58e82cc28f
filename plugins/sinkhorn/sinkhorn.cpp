// Sparse Sinkhorn attention (Tay et al., 2020) as LRA's configuration intends it (sort_activation =
// softmax: no Sinkhorn iterations, no Gumbel noise). The sequence, padded with invalid positions up
// to a multiple of b, is cut into contiguous blocks K_1 … K_nb (V and Q alike); with s_k = Σ of
// block k's real key rows and a sort net W [p, nb_max] (per layer, shared by the heads),
//   P = softmax_l(S W)          (rows k and columns l restricted to the sequence's real blocks)
//   K̃_l = Σ_k P[k,l] K_k,  Ṽ_l = Σ_k P[k,l] V_k    (slot j of K̃_l real iff slot j of some block is)
//   out_{B_l} = softmax(Q_l K_lᵀ/√p + mask) V_l + softmax(Q_l K̃_lᵀ/√p + mask) Ṽ_l,
// two normalisations, summed. O(N·2b·p + nb²·b·p) time, O(N·2b + nb²) memory, no N × N matrix.
// lra_compat reproduces what LRA's sinkhorn_attention.py computes instead: see README.md.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

#include "attnlab/attention.hpp"
#include "attnlab/linalg.hpp"
#include "attnlab/step_ops.hpp"

namespace attnlab::sinkhorn {

const ParamSpec kParams[] = {
    {"block", ParamType::integer, "50", 1, 65536, nullptr,
     "b, tokens per block (LRA: 50 for listops, text and retrieval, 64 for image and pathfinder)"},
    {"lra_compat", ParamType::boolean, "false", 0, 0, nullptr,
     "compute what LRA's sinkhorn_attention.py computes: strided groups, the mask of other tokens, and an einsum "
     "that sums the sort away (the sort net gets no gradient; not padding-invariant)"},
};

// LRA's additive bias on masked scores (−1e10, which fp16 cannot hold).
double lra_bias(at::ScalarType type) { return type == at::kHalf ? -60000.0 : -1e10; }

// x extended along `dim` to `total` positions with zeros (false for a mask).
at::Tensor extend(const at::Tensor& x, std::int64_t dim, std::int64_t total) {
  const auto n = x.size(dim);
  if (total == n) return x;
  auto shape = x.sizes().vec();
  shape[dim] = total - n;
  return at::cat({x, at::zeros(shape, x.options())}, dim);
}

// softmax(q kᵀ + bias) v over blocks [B, H, G, b, p]; `bias` (0, or masked_logit_bias where a key is
// left out) broadcastable to the scores.
at::Tensor block_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias) {
  return batched_matmul(at::softmax(batched_matmul(q, k, /*transpose_b=*/true).add_(bias), -1), v);
}

// The same with LRA's additive −1e10 where `allowed` is false.
at::Tensor lra_block_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed) {
  const auto bias = at::where(allowed, at::scalar_tensor(0.0, q.options()),
                              at::scalar_tensor(lra_bias(q.scalar_type()), q.options()));
  return at::matmul(at::softmax(at::matmul(q, k.transpose(-2, -1)) + bias, -1), v);
}

class SinkhornAttention : public AttentionMethod {
 public:
  SinkhornAttention(const AttentionShape& shape, std::int64_t block, bool lra_compat)
      : block_(block), max_blocks_((shape.max_len + block - 1) / block), lra_compat_(lra_compat) {
    // The sort net maps a block summary (p numbers) to its logits over the nb_max slots. Glorot
    // uniform, LRA's kernel_init for it (xavier_uniform, sinkhorn_transformer.py:72), no bias (LRA:
    // bias=False).
    const double bound = std::sqrt(6.0 / static_cast<double>(shape.head_dim + max_blocks_));
    sort_weight_ = register_parameter("sort_weight", at::empty({shape.head_dim, max_blocks_}).uniform_(-bound, bound));
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const auto valid = as_bool(key_valid);
    return lra_compat_ ? lra_forward(q, k, v, valid) : sorted_forward(q, k, v, valid);
  }

 private:
  at::Tensor sorted_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) {
    const auto batch = q.size(0), heads = q.size(1), n = q.size(2), dim = q.size(3);
    // A block of b ≥ N is one block of N: the same attention without the padding up to b.
    const auto b = std::min(block_, n), blocks = (n + b - 1) / b, total = blocks * b;
    if (blocks > max_blocks_)
      throw std::invalid_argument("sinkhorn: " + std::to_string(n) + " tokens make " + std::to_string(blocks) +
                                  " blocks, more than the " + std::to_string(max_blocks_) +
                                  " the sort net was built for (max_len too small)");
    // Padded rows zeroed, so that nothing there (even inf or nan) reaches a real token.
    const auto rows = linalg::mask_rows(q, k, v, key_valid, 1.0 / std::sqrt(static_cast<double>(dim)), 1.0);
    auto to_blocks = [&](const at::Tensor& x) { return extend(x, 2, total).view({batch, heads, blocks, b, dim}); };
    const auto qb = to_blocks(rows.q), kb = to_blocks(rows.k), vb = to_blocks(rows.v);
    const auto mask = extend(key_valid, 1, total).view({batch, blocks, b});  // [B, nb, b]
    const double excluded = masked_logit_bias(q.scalar_type());
    // Only the sequence's real blocks (those with a real token) enter the sort: a sequence's
    // output then depends neither on the padded length nor on its batch neighbours.
    const auto real_block = mask.any(-1);  // [B, nb]
    const auto real_slot = mask.any(1);    // [B, b]: slot j real in some block

    // P = softmax over the slots l of S W, S the blocks' sums of real key rows  [B, H, nb, nb]
    const auto summaries = kb.sum(3);  // [B, H, nb, p]
    const auto weight = as_type(sort_weight_, q.scalar_type());
    auto logits = at::matmul(summaries, blocks == max_blocks_ ? weight : weight.slice(1, 0, blocks));
    logits.add_(masked_bias(real_block.view({batch, 1, 1, blocks}), q.options(), excluded));
    const auto sort = at::where(real_block.view({batch, 1, blocks, 1}), at::softmax(logits, -1), constant(0.0, logits));
    // K̃_l = Σ_k P[k,l] K_k: one [nb, nb] × [nb, b·p] product per (sequence, head)
    const auto sort_t = sort.transpose(-2, -1).contiguous();
    auto sorted = [&](const at::Tensor& x) {
      return batched_matmul(sort_t, x.reshape({batch, heads, blocks, b * dim})).view(x.sizes());
    };
    const auto sorted_valid = at::logical_and(real_block.unsqueeze(-1), real_slot.unsqueeze(1));  // [B, nb, b]

    const auto out = block_attention(qb, kb, vb, masked_bias(mask.view({batch, 1, blocks, 1, b}), q.options(), excluded)) +
                     block_attention(qb, sorted(kb), sorted(vb),
                                     masked_bias(sorted_valid.view({batch, 1, blocks, 1, b}), q.options(), excluded));
    const auto flat = out.view({batch, heads, total, dim});
    return total == n ? flat : flat.slice(2, 0, n);
  }

  // LRA's SinkhornAttention (sinkhorn_attention.py:265-508) on given q, k, v:
  //  - the reshape to [bs, b, N/b, …] (lines 343-348) makes group g the positions i·(N/b) + g:
  //    strided groups, not contiguous blocks (LRA needs b | N; a remainder is padded here with
  //    invalid zero positions);
  //  - summaries are sums over all b slots of a group, padding included (line 355); the sort net
  //    takes the first min(25, N/b) of its 25 columns (line 366), softmax over them (line 380);
  //  - the einsum 'bskhd,bnhl->bsnhd' (lines 382-383) sums k and l separately: every group's
  //    sorted key j is Σ_k K[j·(N/b) + k] (the sum of contiguous chunk j) times Σ_l P[n,l] = 1,
  //    so the sort is a no-op and its net's gradient is zero;
  //  - the local mask is the contiguous blocks' mask on the strided groups (lines 403-417), the
  //    sorted one (einsum, line 418) allows (s, j) iff some contiguous block has both s and j real;
  //  - masked scores get −1e10 added (lines 447-461).
  // Nothing is zeroed: what sits at padded positions enters as LRA's pad tokens do.
  at::Tensor lra_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) {
    const auto batch = q.size(0), heads = q.size(1), n = q.size(2), dim = q.size(3);
    const auto b = block_, groups = (n + b - 1) / b, total = groups * b;
    auto strided = [&](const at::Tensor& x) {  // [B, H, N/b, b, p]: group g, slot i = position i·(N/b) + g
      return extend(x, 2, total).view({batch, heads, b, groups, dim}).transpose(2, 3);
    };
    const auto qg = strided(q / std::sqrt(static_cast<double>(dim))), kg = strided(k), vg = strided(v);
    const auto columns = std::min(groups, max_blocks_);
    const auto sort = at::softmax(at::matmul(kg.sum(3), sort_weight_.to(q.scalar_type()).slice(1, 0, columns)), -1);
    const auto mass = sort.sum(-1, /*keepdim=*/true).unsqueeze(-1);  // Σ_l P[n, l] [B, H, N/b, 1, 1]
    auto chunk_sums = [&](const at::Tensor& x) {                      // [B, H, 1, b, p]
      return extend(x, 2, total).view({batch, heads, b, groups, dim}).sum(3).unsqueeze(2);
    };
    const auto mask = extend(key_valid, 1, total).view({batch, groups, b});  // contiguous blocks
    const auto local_allowed = at::logical_and(mask.unsqueeze(-1), mask.unsqueeze(-2));  // [B, N/b, b, b]
    const auto sorted_allowed = local_allowed.any(1, /*keepdim=*/true);                   // [B, 1, b, b]
    const auto out = lra_block_attention(qg, kg, vg, local_allowed.unsqueeze(1)) +
                     lra_block_attention(qg, chunk_sums(k) * mass, chunk_sums(v) * mass, sorted_allowed.unsqueeze(1));
    return out.transpose(2, 3).reshape({batch, heads, total, dim}).slice(2, 0, n);
  }

  std::int64_t block_;
  std::int64_t max_blocks_;  // nb_max = ⌈max_len / b⌉: the sort net's width, so that every N ≤ max_len fits
  bool lra_compat_;
  at::Tensor sort_weight_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<SinkhornAttention>(shape, params.integer("block"), params.boolean("lra_compat"));
}

}  // namespace attnlab::sinkhorn

ATTNLAB_PLUGIN_INFO(attention, "sinkhorn", "1.0",
                    "Sparse Sinkhorn attention: local block attention plus attention to softmax-sorted blocks",
                    attnlab::sinkhorn::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::sinkhorn::create);
