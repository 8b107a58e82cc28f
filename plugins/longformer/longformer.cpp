// Longformer (Beltagy et al., 2020, §3.1), as the Long Range Arena ran it: sliding-window softmax
// attention, no dilation,
//   out_i = Σ_{j ∈ A(i)} softmax_j(q_i k_jᵀ/√p) v_j,   A(i) = { j real : i − left < j ≤ i + right },
// right = ⌊w/2⌋, left = w − right (the query itself included), w the window; optionally the first
// token global (it sees every key, every query sees it). A banded kernel: queries in chunks of
// ⌈w/2⌉, each meeting the span of chunk + w − 1 keys around it, never an N × N matrix.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "attnlab/attention.hpp"
#include "attnlab/linalg.hpp"

namespace attnlab::longformer {

const ParamSpec kParams[] = {
    {"window", ParamType::integer, "512", 1, 1000000, nullptr,
     "w: query i sees keys i - w + floor(w/2) < j <= i + floor(w/2), itself included (LRA: 512)"},
    {"global_cls", ParamType::boolean, "false", 0, 0, nullptr,
     "the first token is global: it sees every key and every query sees it (with the same q, k, v; the paper has "
     "separate global projections; LRA used no global token)"},
};

// Scores held at once, about, at most: the queries are processed in groups. On the CPU small
// temporaries (8 MB in float) run faster; on a GPU few kernel launches do.
std::int64_t scores_per_group(const at::Device& device) { return std::int64_t{1} << (device.is_cpu() ? 21 : 26); }

// [Σ e v | Σ e] → Σ e v / Σ e
at::Tensor normalised(const at::Tensor& sums) {
  const auto dim = sums.size(-1) - 1;
  return sums.narrow(-1, 0, dim) / sums.narrow(-1, dim, 1);
}

class LongformerAttention : public AttentionMethod {
 public:
  LongformerAttention(std::int64_t window, bool global_cls) : window_(window), global_cls_(global_cls) {}

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const auto batch = q.size(0), heads = q.size(1), n = q.size(2), dim = q.size(3);
    const auto [qs, ks, vs, valid] = linalg::scale_and_mask(q, k, v, key_valid);  // padded rows zeroed
    // Sides clipped to the sequence (a wider side excludes nothing more): w' = left' + right'.
    const auto right = std::min(window_ / 2, n - 1), left = std::min(window_ - window_ / 2, n);
    const auto w = left + right;
    const auto chunk = std::min((w + 1) / 2, n), chunks = (n + chunk - 1) / chunk, span = chunk + w - 1;
    const auto index_opts = valid.options().dtype(at::kLong);
    const double excluded = masked_logit_bias(q.scalar_type());

    // Keys padded with left' − 1 zero rows before and enough after: chunk c's span (positions
    // c·chunk − left' + 1 .. c·chunk + chunk − 1 + right') starts at padded row c·chunk.
    const auto before = left - 1, after = chunks * chunk + w - 1 - before - n;
    // V with a column of ones: the products with the exponentials give the softmax's sums too.
    const auto vs1 = at::cat({vs, at::ones({batch, heads, n, 1}, vs.options())}, -1);
    const auto kp = at::constant_pad_nd(ks, {0, 0, before, after}), vp = at::constant_pad_nd(vs1, {0, 0, before, after});
    auto spans = [&](const at::Tensor& padded) { return padded.unfold(2, span, chunk); };  // [B, H, nc, p, S], views
    const auto span_valid = at::cat({at::zeros({batch, before}, valid.options()), valid,
                                     at::zeros({batch, after}, valid.options())}, 1)
                                .unfold(1, span, chunk)
                                .reshape({batch, 1, chunks, 1, span});
    const auto qc = at::constant_pad_nd(qs, {0, 0, 0, chunks * chunk - n}).view({batch, heads, chunks, chunk, dim});
    // Query a of a chunk and key s of its span: j − i = s − (left' − 1) − a, in the window iff
    // 0 ≤ s − a ≤ w' − 1, the same band for every chunk; and the key real. Two small biases.
    const auto offset = at::arange(span, index_opts).view({1, span}) - at::arange(chunk, index_opts).view({chunk, 1});
    const auto band_bias = masked_bias(offset.ge(0).logical_and(offset.le(w - 1)), q.options(), excluded / 2);  // [C, S]
    const auto valid_bias = masked_bias(span_valid, q.options(), excluded / 2);  // [B, 1, nc, 1, S]

    // global_cls: key 0 as one more column for every query whose window does not already hold it
    // (i ≥ left'), in the same softmax. [B, H, nc, C]
    at::Tensor g_all, v0;
    if (global_cls_) {
      const auto k0 = ks.select(2, 0).view({batch, heads, 1, 1, dim});
      const auto position = at::arange(chunks * chunk, index_opts).view({1, 1, chunks, chunk});
      const auto g_ok = position.ge(left).logical_and(valid.select(1, 0).view({batch, 1, 1, 1}));
      g_all = (qc * k0).sum(-1).masked_fill(g_ok.logical_not(), excluded);
      v0 = vs1.select(2, 0).view({batch, heads, 1, 1, dim + 1});
    }

    // The chunks in groups of about scores_per_group scores at most (same work); the inputs split
    // along the chunks, so that their gradients are gathered once.
    const auto groups = std::min(chunks, 1 + batch * heads * chunks * chunk * span / scores_per_group(q.device()));
    std::vector<std::int64_t> sizes;
    for (std::int64_t group = 0; group < groups; ++group)
      sizes.push_back((group + 1) * chunks / groups - group * chunks / groups);
    const auto q_parts = qc.split_with_sizes(sizes, 2), bias_parts = valid_bias.split_with_sizes(sizes, 2);
    const auto k_parts = spans(kp).split_with_sizes(sizes, 2), v_parts = spans(vp).split_with_sizes(sizes, 2);
    const auto g_parts = global_cls_ ? g_all.split_with_sizes(sizes, 2) : std::vector<at::Tensor>{};
    std::vector<at::Tensor> outs;  // [B, H, chunks of the group, C, p + 1] each
    for (std::int64_t group = 0; group < groups; ++group) {
      auto band = at::matmul(q_parts[group], k_parts[group]);  // [B, H, ·, C, S]
      band.add_(band_bias);
      band.add_(bias_parts[group]);
      const auto v_span = v_parts[group].transpose(-2, -1);  // [B, H, ·, S, p + 1]
      // softmax with the exponentials in place; the row maximum is a constant shift (no gradient)
      if (!global_cls_) {
        const auto e = band.sub_(band.amax(-1, /*keepdim=*/true).detach()).exp_();
        outs.push_back(at::matmul(e, v_span));
      } else {
        const auto& g = g_parts[group];
        const auto m = at::maximum(band.amax(-1), g).detach();
        const auto e = band.sub_(m.unsqueeze(-1)).exp_(), e0 = (g - m).exp().unsqueeze(-1);
        outs.push_back(at::matmul(e, v_span) + e0 * v0);
      }
    }
    auto out = at::cat(outs, 2);
    out = normalised(out.view({batch, heads, chunks * chunk, dim + 1}).narrow(2, 0, n));
    if (!global_cls_) return out;
    // Token 0's own row: every real key.
    const auto row = at::matmul(qs.narrow(2, 0, 1), ks.transpose(-2, -1))
                         .masked_fill(valid.logical_not().view({batch, 1, 1, n}), excluded);  // [B, H, 1, N]
    const auto first = at::matmul(at::softmax(row, -1), vs);
    return at::cat({first, out.narrow(2, 1, n - 1)}, 2);
  }

 private:
  std::int64_t window_;
  bool global_cls_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape&, const ParamValues& params) {
  const auto window = params.integer("window");
  if (window < 1) throw ParamError("window: " + std::to_string(window) + " is below 1");
  return std::make_shared<LongformerAttention>(window, params.boolean("global_cls"));
}

}  // namespace attnlab::longformer

ATTNLAB_PLUGIN_INFO(attention, "longformer", "1.0",
                    "Longformer sliding-window attention as LRA ran it (window w, no global tokens unless global_cls)",
                    attnlab::longformer::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::longformer::create);
