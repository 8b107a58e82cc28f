// Reformer's LSH attention (Kitaev et al., 2020, §2), as HuggingFace's LSHSelfAttention computes it
// (the code Skyformer's baseline runs). Shared query/key x (here x = (q + k)/√2, see README), each
// key normalised, k̂_j = x_j · rsqrt(mean(x_j²) + 1e-6) / √d. For each of n_h hash rounds r, with a
// random rotation R_r ~ N(0, 1) [d, n_b/2] drawn per forward,
//   h_r(x) = argmax([x R_r ; −x R_r])        (padded tokens: an extra bucket n_b, sorted last),
// the positions are sorted by (h_r, position) and cut into chunks of c; a query sees the keys of its
// chunk and of the previous one, P_r(i), with logits s_ij = x_i·k̂_j, −1e9 at padded keys and −1e5 at
// j = i (itself only when nothing else is there). Per round
//   o_r(i) = Σ_{j∈P_r(i)} e^{s_ij − ℓ_r(i)} v_j,   ℓ_r(i) = log Σ_{j∈P_r(i)} e^{s_ij},
// and the rounds are combined by their log-normalisers: o(i) = Σ_r e^{ℓ_r(i) − logsumexp_r ℓ_r(i)} o_r(i).
// N ≤ c: full attention with the same logits and masks (no hashing). Cost O(B H n_h N (log N + 2c d)),
// memory O(B H n_h N 2c): no N × N matrix.
//
// Each window's softmax has its backward written by hand (as softmax's in attnlab/torch_compat): with
// P the weights, dP = dO Vᵀ and δ_i = dO_i·o_i, dS = P ∘ (dP − δ + dℓ), zero at the masked logits
// (constants); then dQ = dS K, dK = dSᵀ Q, dV = Pᵀ dO. Only P is kept, not the several c × 2c
// tensors autograd's masked_fill / logsumexp / softmax chain holds.
#include <cmath>
#include <cstdint>
#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "attnlab/attention.hpp"
#include "attnlab/precision.hpp"
#include "attnlab/seed_stream.hpp"

namespace attnlab::reformer {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Softmax attention of queries q [..., m, d] over their window k, v [..., w, d] with logits q kᵀ, the
// logits at `padded` (broadcastable to [..., m, w]) set to pad_logit and those at `self` to
// self_logit. Returns the outputs [..., m, d] and the log-normalisers ℓ [..., m].
struct WindowAttention : public torch::autograd::Function<WindowAttention> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& padded, const at::Tensor& self, double pad_logit, double self_logit) {
    NoAutocast one_type;  // P and ℓ in the inputs' type, as the backward's matmuls need (precision.hpp)
    auto p = at::matmul(q, k.transpose(-2, -1));
    p.masked_fill_(padded, pad_logit).masked_fill_(self, self_logit);
    const auto top = std::get<0>(p.max(-1, /*keepdim=*/true));
    p.sub_(top).exp_();
    const auto total = p.sum(-1, /*keepdim=*/true);
    p.div_(total);
    const auto lse = (top + total.log()).squeeze(-1);
    auto out = at::matmul(p, v);
    ctx->save_for_backward({q, k, v, p, out, at::logical_or(padded, self)});
    return {out, lse};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &p = saved[3], &out = saved[4], &masked = saved[5];
    const auto grad_out = grads[0].defined() ? grads[0] : at::zeros_like(out);
    auto grad_s = at::matmul(grad_out, v.transpose(-2, -1));              // dP
    auto shift = (grad_out * out).sum(-1, /*keepdim=*/true);              // δ
    if (grads[1].defined()) shift = shift - grads[1].unsqueeze(-1);       // − dℓ
    grad_s.sub_(shift).mul_(p).masked_fill_(masked, 0.0);                 // dS
    auto grad_q = at::matmul(grad_s, k);
    auto grad_k = at::matmul(grad_s.transpose(-2, -1), q);
    auto grad_v = at::matmul(p.transpose(-2, -1), grad_out);
    return {grad_q, grad_k, grad_v, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

const ParamSpec kParams[] = {
    {"chunk", ParamType::integer, "64", 1, 65536, nullptr,
     "c, positions per chunk of the sorted order; each chunk attends to itself and the previous one (N <= c: full "
     "attention)"},
    {"hashes", ParamType::integer, "2", 1, 64, nullptr, "n_h, hash rounds, combined by their log-normalisers"},
    {"buckets", ParamType::integer, "0", 0, 65536, nullptr,
     "n_b, buckets per round: 0 = 2^floor(log2(2 floor(max_len / chunk))) (HuggingFace's rule), 1 = no hashing "
     "(chunks of the positions in order), else even"},
    {"qk", ParamType::string, "sum", 0, 0, "sum|q",
     "the shared query/key x: sum = (q + k)/sqrt(2), one projection (W_q + W_k)/sqrt(2); q = q alone, k unused (the "
     "reference's wiring; no gradient reaches k)"},
};

class ReformerAttention : public SeedStreamAttention {
 public:
  ReformerAttention(std::int64_t chunk, std::int64_t hashes, std::int64_t buckets, bool q_only, std::int64_t max_len)
      : SeedStreamAttention("rotation"), chunk_(chunk), hashes_(hashes), buckets_(buckets), q_only_(q_only), max_len_(max_len) {}

  // The rotations matter only when a sequence can be longer than a chunk and there is more than one bucket.
  bool stochastic() const override { return max_len_ > chunk_ && buckets_ > 1; }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const auto n = q.size(2), dim = q.size(3);
    const auto valid = key_valid.to(at::kBool);
    const auto padded = valid.logical_not().view({q.size(0), 1, n, 1});
    // padded rows zeroed first: whatever sits there (inf, nan) never reaches a real token
    const auto x = (q_only_ ? q : (q + k) * (1 / std::sqrt(2.0))).masked_fill(padded, 0.0);
    const auto vs = v.masked_fill(padded, 0.0);
    // in x's type: CUDA's autocast gives pow and rsqrt fp32 results (WindowAttention wants one type)
    const auto keys =
        (x * (x.pow(2).mean(-1, /*keepdim=*/true) + 1e-6).rsqrt() / std::sqrt(static_cast<double>(dim))).to(x.scalar_type());
    // the reference's mask values (HuggingFace's smaller ones in half precision); a real query always
    // has itself at −1e5, so its row stays finite and padded keys get exactly 0
    const bool half = q.scalar_type() == at::kHalf;
    const double pad_logit = half ? -1e4 : -1e9, self_logit = half ? -1e3 : -1e5;
    if (n <= chunk_) {
      // [B, H, N, N] logits: N ≤ c
      return WindowAttention::apply(x, keys, vs, padded.view({q.size(0), 1, 1, n}), at::eye(n, valid.options()),
                                    pad_logit, self_logit)[0];
    }
    return chunked(x, keys, vs, valid, pad_logit, self_logit);
  }

 private:
  // Bucket of every (round, position), [B, H, n_h, N]: padded tokens in bucket n_b.
  at::Tensor hash(const at::Tensor& x, const at::Tensor& valid) {
    const auto batch = x.size(0), heads = x.size(1), n = x.size(2), dim = x.size(3);
    at::Tensor buckets;
    if (buckets_ == 1) {
      buckets = at::zeros({batch, heads, hashes_, n}, valid.options().dtype(at::kLong));
    } else {
      const auto type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
      auto generator = draw_generator(x.device());
      const auto half = buckets_ / 2;  // R [H, d, n_h, n_b/2], the columns of each round together
      const auto rotations = at::randn({heads, dim, hashes_ * half}, generator, x.options().dtype(type));
      const auto rotated = at::matmul(x.detach().to(type), rotations)  // [B, H, N, n_h n_b/2]
                               .view({batch, heads, n, hashes_, half})
                               .permute({0, 1, 3, 2, 4});
      // argmax([xR ; −xR]) without the concatenation: the largest of xR, or n_b/2 + the smallest
      const auto [top, top_at] = rotated.max(-1);
      const auto [bottom, bottom_at] = rotated.min(-1);
      buckets = at::where(top.ge(bottom.neg()), top_at, bottom_at + half);  // [B, H, n_h, N]
    }
    return buckets.masked_fill(valid.logical_not().view({batch, 1, 1, n}), buckets_);
  }

  at::Tensor chunked(const at::Tensor& x, const at::Tensor& keys, const at::Tensor& v, const at::Tensor& valid,
                     double pad_logit, double self_logit) {
    const auto batch = x.size(0), heads = x.size(1), n = x.size(2), dim = x.size(3);
    const auto c = chunk_, chunks = (n + c - 1) / c, slots = chunks * c;  // each round padded to a multiple of c
    const auto long_options = valid.options().dtype(at::kLong);
    const auto positions = at::arange(n, long_options);
    // stable sort by (bucket, position): the keys bucket·N + position are distinct
    const auto order = std::get<1>((hash(x, valid) * n + positions).sort(-1));  // [B, H, n_h, N]
    const auto extra = at::full({batch, heads, hashes_, slots - n}, -1, long_options);
    const auto slot_position = at::cat({order, extra}, -1);  // −1: an empty slot after the last position
    const auto slot_valid = at::cat({valid.view({batch, 1, 1, n}).expand({batch, heads, hashes_, n}).gather(-1, order),
                                     at::zeros_like(extra, valid.options())}, -1);
    // a chunk's window: the previous chunk of the same round (none for the first: empty slots), then itself
    auto window = [&](const at::Tensor& t, double fill) {  // [B, H, n_h, chunks, c] → [.., chunks, 2c]
      const auto previous = at::cat({at::full_like(t.narrow(3, 0, 1), fill), t.narrow(3, 0, chunks - 1)}, 3);
      return at::cat({previous, t}, 4);
    };
    const auto query_position = slot_position.view({batch, heads, hashes_, chunks, c});
    const auto key_position = window(query_position, -1);
    const auto key_valid = window(slot_valid.view({batch, heads, hashes_, chunks, c}), 0);
    // rows gathered by position (an empty slot reads row 0, masked): x in chunks, k̂ and v in windows
    auto rows = [&](const at::Tensor& t, const at::Tensor& position, std::int64_t width) {
      const auto count = position.numel() / (batch * heads);
      const auto index = position.clamp_min(0).reshape({batch, heads, count, 1}).expand({-1, -1, -1, dim});
      return t.gather(2, index).view({batch, heads, hashes_, chunks, width, dim});
    };
    // o_r [B, H, n_h, chunks, c, d] and ℓ_r [B, H, n_h, chunks, c], through [.., c, 2c] logits
    const auto attended = WindowAttention::apply(rows(x, query_position, c), rows(keys, key_position, 2 * c),
                                                 rows(v, key_position, 2 * c),
                                                 key_valid.logical_not().unsqueeze(-2),
                                                 query_position.unsqueeze(-1) == key_position.unsqueeze(-2), pad_logit,
                                                 self_logit);
    auto out = attended[0];
    const auto& lse = attended[1];

    // back to positions: slot of position i in round r
    const auto undo = at::empty_like(order).scatter_(-1, order, positions.expand_as(order));
    out = out.view({batch, heads, hashes_, slots, dim}).narrow(3, 0, n).gather(3, undo.unsqueeze(-1).expand({-1, -1, -1, -1, dim}));
    const auto weight = at::softmax(lse.view({batch, heads, hashes_, slots}).narrow(3, 0, n).gather(3, undo), 2);
    return (out * weight.unsqueeze(-1)).sum(2);
  }

  std::int64_t chunk_, hashes_, buckets_;
  bool q_only_;
  std::int64_t max_len_;
};

// HuggingFace's rule with L = max_len (Skyformer pads every batch to it): 2^floor(log2(2 floor(L / c))), at least 2.
std::int64_t default_buckets(std::int64_t max_len, std::int64_t chunk) {
  std::int64_t target = 2 * (max_len / chunk), buckets = 2;
  while (buckets * 2 <= target) buckets *= 2;
  return buckets;
}

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  const auto chunk = params.integer("chunk");
  auto buckets = params.integer("buckets");
  if (buckets > 1 && buckets % 2 != 0)
    throw ParamError("buckets: expected 0, 1 or an even number (argmax over [xR; -xR]), got " + std::to_string(buckets));
  if (buckets == 0) buckets = default_buckets(shape.max_len, chunk);
  return std::make_shared<ReformerAttention>(chunk, params.integer("hashes"), buckets, params.string("qk") == "q",
                                             shape.max_len);
}

}  // namespace attnlab::reformer

ATTNLAB_PLUGIN_INFO(attention, "reformer", "1.0",
                    "Reformer: LSH attention, shared QK hashed by random rotations, sorted chunks (HuggingFace's form)",
                    attnlab::reformer::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::reformer::create);
