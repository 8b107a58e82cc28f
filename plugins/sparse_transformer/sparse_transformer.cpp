// Sparse Transformer (Child et al., 2019, §4.2, the "fixed" pattern), as the Long Range Arena ran
// it: the two fixed heads' patterns OR-ed into one for every head,
//   out_i = Σ_{j ∈ A(i)} softmax_j(q_i k_jᵀ/√p) v_j,
//   A(i) = { j real : (j ≤ i if causal) ∧ (⌊i/ℓ⌋ = ⌊j/ℓ⌋ ∨ j mod ℓ = 0 ∨ j mod ℓ ≥ ℓ − c) },
// ℓ the stride, c the summary width. Only the pattern's keys are visited: each query block of ℓ
// meets its own block's keys, and the summary columns ((c + 1) per block, gathered once, shared by
// every query), with one softmax over both parts.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "attnlab/attention.hpp"
#include "attnlab/linalg.hpp"
#include "attnlab/step_ops.hpp"

namespace attnlab::sparse_transformer {

const ParamSpec kParams[] = {
    {"stride", ParamType::integer, "50", 1, 1000000, nullptr,
     "block length l: a query sees the keys of its own block of l and the summary columns of the others (LRA: 50)"},
    {"summary", ParamType::integer, "10", 0, 1000000, nullptr,
     "c: the last c positions of every block (and its first) are summary columns every query sees (LRA: 10; "
     "c >= l - 1 makes every key a summary key)"},
    {"causal", ParamType::boolean, "true", 0, 0, nullptr,
     "keys after the query are excluded (LRA's pattern is causal, in the encoder too)"},
};

// Scores held at once, about, at most: the queries are processed in groups. On the CPU small
// temporaries (8 MB in float) run faster; on a GPU few kernel launches do.
std::int64_t scores_per_group(const at::Device& device) { return std::int64_t{1} << (device.is_cpu() ? 21 : 26); }

class SparseTransformerAttention : public AttentionMethod {
 public:
  SparseTransformerAttention(std::int64_t stride, std::int64_t summary, bool causal)
      : stride_(stride), summary_(summary), causal_(causal) {}

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const auto batch = q.size(0), heads = q.size(1), n = q.size(2), dim = q.size(3);
    const auto [qs, ks, vs, valid] = linalg::scale_and_mask(q, k, v, key_valid);  // padded rows zeroed
    // A sequence no longer than ℓ is one block (its summary columns all lie in it).
    const auto len = std::min(stride_, n), blocks = (n + len - 1) / len, padded = blocks * len;
    const auto index_opts = valid.options().dtype(at::kLong);
    const double excluded = masked_logit_bias(q.scalar_type());
    // [B, H, N, p] → [B, H, nb, ℓ, p], zero rows appended
    auto blocked = [&](const at::Tensor& t, std::int64_t width) {
      return at::constant_pad_nd(t, {0, 0, 0, padded - n}).view({batch, heads, blocks, len, width});
    };
    // V with a column of ones: the products with the exponentials give the softmax's sums too.
    const auto vs1 = at::cat({vs, at::ones({batch, heads, n, 1}, vs.options())}, -1);
    const auto qb = blocked(qs, dim), kb = blocked(ks, dim), vb = blocked(vs1, dim + 1);
    const auto valid_b = at::cat({valid, at::zeros({batch, padded - n}, valid.options())}, 1).view({batch, blocks, len});

    // Summary offsets within a block: {0} ∪ [max(ℓ − c, 1), ℓ), s of them (none with one block).
    const auto first_tail = std::max<std::int64_t>(len - summary_, 1);
    const auto at_offsets = at::cat({at::zeros({1}, index_opts), at::arange(first_tail, len, index_opts)});
    const auto s = 1 + (len - first_tail), cols = blocks * s;
    const auto offset = at::arange(len, index_opts);
    const auto is_summary = offset.eq(0).logical_or(offset.ge(first_tail))
                                .logical_and(at::scalar_tensor(blocks > 1, valid.options()));

    // Own block: real keys (not after the query), except the summary columns, which every query
    // meets in the summary part, so that no key counts twice. [B, 1, nb, ℓ, ℓ]
    auto local_ok = valid_b.logical_and(is_summary.logical_not()).view({batch, 1, blocks, 1, len});
    if (causal_) local_ok = local_ok.logical_and(at::ones({len, len}, valid.options()).tril());
    const auto local_bias = masked_bias(local_ok, q.options(), excluded);

    // Summary columns of every block, gathered once, [B, H, M, p] with M = nb·s, met by every
    // query: real ones (and, causal, not after the query: two small biases added in place).
    const auto sk = kb.index_select(3, at_offsets).reshape({batch, heads, cols, dim});
    const auto sv = vb.index_select(3, at_offsets).reshape({batch, heads, cols, dim + 1});
    const auto summary_bias = masked_bias(valid_b.index_select(2, at_offsets).reshape({batch, 1, 1, cols}), q.options(),
                                        excluded / 2);
    const auto summary_position = (at::arange(blocks, index_opts).view({blocks, 1}) * len + at_offsets).view({1, cols});

    // The queries in groups of consecutive blocks, of about scores_per_group summary scores at
    // most; causal, each group meets only the summary columns up to its last block (G groups do
    // (G + 1)/2G of the summary work), so on the CPU at least 4 groups where that work is large
    // enough to matter (else one: a group is some thirty ops).
    const auto scores = batch * heads * padded * cols;
    const auto by_size = 1 + scores / scores_per_group(q.device());
    const bool split_work = causal_ && q.is_cpu() && scores > (std::int64_t{1} << 18);
    const auto groups = std::min(blocks, std::max<std::int64_t>(split_work ? 4 : 1, by_size));
    // (The blocked inputs split along the blocks, so that their gradients are gathered once.)
    std::vector<std::int64_t> sizes;
    for (std::int64_t g = 0; g < groups; ++g) sizes.push_back((g + 1) * blocks / groups - g * blocks / groups);
    auto parts = [&](const at::Tensor& t) { return groups == 1 ? std::vector<at::Tensor>{t} : t.split_with_sizes(sizes, 2); };
    const auto q_parts = parts(qb), k_parts = parts(kb), v_parts = parts(vb), bias_parts = parts(local_bias);
    const Summary summary{sk, sv, summary_bias, summary_position, s, cols, excluded};
    std::vector<at::Tensor> outs;
    for (std::int64_t g = 0; g < groups; ++g)
      outs.push_back(group_output(q_parts[g], k_parts[g], v_parts[g], bias_parts[g], g * blocks / groups, blocks, summary));
    const auto all = groups == 1 ? outs.front() : at::cat(outs, 2);
    return normalised(padded == n ? all : all.narrow(2, 0, n));
  }

 private:
  // The summary columns every query group meets: keys and values [B, H, M, p(+1)], their bias for
  // padding [B, 1, 1, M], their positions [1, M]; s of them a block, M in all.
  struct Summary {
    at::Tensor keys, values, bias, position;
    std::int64_t per_block, cols;
    double excluded;
  };

  // One group of nbg consecutive query blocks from block b0 (qg, kg, vg, bias: its blocked parts,
  // [B, H, nbg, ℓ, ·]): [Σ e v | Σ e] of its queries, [B, H, nbg·ℓ, p + 1].
  at::Tensor group_output(const at::Tensor& qg, const at::Tensor& kg, const at::Tensor& vg, const at::Tensor& bias,
                          std::int64_t b0, std::int64_t blocks, const Summary& summary) const {
    const auto batch = qg.size(0), heads = qg.size(1), nbg = qg.size(2), len = qg.size(3), dim = qg.size(4);
    const auto rows = nbg * len;
    auto local = batched_matmul(qg, kg, /*transpose_b=*/true);  // [B, H, nbg, ℓ, ℓ]
    local.add_(bias);
    if (blocks == 1) {
      const auto e = local.sub_(local.amax(-1, /*keepdim=*/true).detach()).exp_();
      return batched_matmul(e, vg).view({batch, heads, rows, dim + 1});
    }
    const auto cols = summary.cols, used = causal_ ? (b0 + nbg) * summary.per_block : cols;
    auto summ = batched_matmul(qg.reshape({batch, heads, rows, dim}), used == cols ? summary.keys : summary.keys.narrow(2, 0, used),
                               /*transpose_b=*/true);
    summ.add_(used == cols ? summary.bias : summary.bias.narrow(-1, 0, used));  // [B, H, rows, used]
    if (causal_) {
      const auto query_position = at::arange(b0 * len, b0 * len + rows, summary.position.options()).view({rows, 1});
      summ.add_(masked_bias(summary.position.narrow(1, 0, used).le(query_position), qg.options(), summary.excluded / 2));
    }
    // One softmax over [own block | summary columns], without concatenating them: a shared row
    // maximum (a constant shift, so no gradient through it), the exponentials in place.
    const auto m = at::maximum(local.amax(-1).view({batch, heads, rows}), summ.amax(-1)).detach().unsqueeze(-1);
    const auto e_local = local.sub_(m.view({batch, heads, nbg, len, 1})).exp_();
    const auto e_summ = summ.sub_(m).exp_();
    return batched_matmul(e_local, vg).view({batch, heads, rows, dim + 1}) +
           batched_matmul(e_summ, used == cols ? summary.values : summary.values.narrow(2, 0, used));
  }

  // [Σ e v | Σ e] → Σ e v / Σ e
  static at::Tensor normalised(const at::Tensor& sums) {
    const auto dim = sums.size(-1) - 1;
    return sums.narrow(-1, 0, dim) / sums.narrow(-1, dim, 1);
  }

  std::int64_t stride_, summary_;
  bool causal_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape&, const ParamValues& params) {
  const auto stride = params.integer("stride"), summary = params.integer("summary");
  if (stride < 1) throw ParamError("stride: " + std::to_string(stride) + " is below 1");
  if (summary < 0) throw ParamError("summary: " + std::to_string(summary) + " is negative");
  return std::make_shared<SparseTransformerAttention>(stride, summary, params.boolean("causal"));
}

}  // namespace attnlab::sparse_transformer

ATTNLAB_PLUGIN_INFO(attention, "sparse_transformer", "1.0",
                    "Sparse Transformer, fixed pattern as LRA ran it: own block of l, c+1 summary columns a block, causal",
                    attnlab::sparse_transformer::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::sparse_transformer::create);
