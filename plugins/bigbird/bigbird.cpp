// BigBird block-sparse attention (Zaheer et al., 2020, §2 and appendix D, "ITC"): the sequence is
// cut into blocks of b tokens; query block i of a sequence with nb blocks attends
//   every valid key                                  if i = 0 or i = nb − 1 (global blocks),
//   the key blocks {0, i−1, i, i+1, nb−1} ∪ R_i      otherwise (globals, window, r random blocks),
// each block once, with one softmax over the chosen keys:  out_i = softmax(Q_i K_Sᵀ/√p) V_S.
// R_i: the r blocks of highest random priority among {1 .. nb−2} \ {i−1, i, i+1}, i.e. r distinct
// blocks drawn uniformly without replacement, per head and layer, fixed for the run. Computed
// block by block (keys gathered per query block): O(N (5+r) b p) time, O(N (5+r) b) memory.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "attnlab/attention.hpp"
#include "attnlab/linalg.hpp"

namespace attnlab::bigbird {

const ParamSpec kParams[] = {
    {"block", ParamType::integer, "64", 1, 65536, nullptr, "block size b in tokens (LRA: 64)"},
    {"random_blocks", ParamType::integer, "3", 0, 1024, nullptr,
     "r, random key blocks per non-global query block and head (LRA: 3); fewer when fewer are allowed"},
};

// Logits per chunk of (sequence, head) pairs, in elements. On the CPU a few MiB: glibc serves larger
// blocks by fresh mmaps whose pages fault in at every use (a step several times slower at 4K tokens
// here), while smaller ones are reused; on a GPU the caching allocator has no such cost.
constexpr std::int64_t kCpuLogits = std::int64_t{1} << 21, kCudaLogits = std::int64_t{1} << 28;

class BigBirdAttention : public AttentionMethod {
 public:
  BigBirdAttention(const AttentionShape& shape, std::int64_t block, std::int64_t random_blocks)
      : block_(block), random_(random_blocks), max_blocks_((shape.max_len + block - 1) / block) {
    // A fixed draw until the first redraw (the trainer redraws from the run's seed before step 1).
    auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
    priority_ = register_buffer("random_priority", draw_priority(shape.heads, generator));
  }

  // Random at all only where some query block has more than r candidate blocks: the most a block
  // can have is nb_max − 4 (block 1 of the longest sequence).
  bool stochastic() const override { return random_ > 0 && max_blocks_ > random_ + 4; }

  // The priorities are drawn once per run (redraw_every() = 0): a buffer, saved with checkpoints.
  void redraw(at::Generator& generator) override {
    at::NoGradGuard no_grad;
    priority_.copy_(draw_priority(priority_.size(0), generator));
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const auto batch = q.size(0), heads = q.size(1), n = q.size(2), dim = q.size(3), b = block_;
    const auto nb = (n + b - 1) / b, padded = nb * b;
    if (nb > max_blocks_)
      throw std::invalid_argument("bigbird: " + std::to_string(n) + " tokens make " + std::to_string(nb) +
                                  " blocks, more than the " + std::to_string(max_blocks_) + " of max_len");
    // q kᵀ/√p as (q/p^¼)(k/p^¼)ᵀ; padded rows zeroed, so nothing there reaches a real token.
    auto [qs, ks, vs, valid] = linalg::scale_and_mask(q, k, v, key_valid);
    if (padded != n) {  // the last block filled up with masked positions
      qs = at::constant_pad_nd(qs, {0, 0, 0, padded - n});
      ks = at::constant_pad_nd(ks, {0, 0, 0, padded - n});
      vs = at::constant_pad_nd(vs, {0, 0, 0, padded - n});
      valid = at::constant_pad_nd(valid, {0, padded - n}, 0);
    }
    const auto longs = valid.options().dtype(at::kLong);
    const double excluded = masked_logit_bias(q.scalar_type());

    // Sequence s has nb_s = ⌈(last real position + 1) / b⌉ blocks (⌈L_s / b⌉ for suffix padding);
    // `last` [B, 1] is its final block, which is global.
    const auto extent = (valid.to(at::kLong) * at::arange(1, padded + 1, longs)).amax(1, /*keepdim=*/true);
    const auto last = at::div(extent + b - 1, b, "floor").clamp_min(1) - 1;  // [B, 1]
    const auto row = at::arange(nb, longs).unsqueeze(0);                    // query block i [1, nb]
    const auto inner_last = last.unsqueeze(-1) - 1;  // [B, 1, 1]: the last block before the final one
    const auto inner = [&](const at::Tensor& j) { return j.ge(1).logical_and(j.le(inner_last)); };  // j [1, nb, ·]

    // Key blocks of the non-global query blocks: slots 0, i−1, i, i+1, nb_s−1, each kept only where
    // it is a block of the sequence not already listed (i−1 = 0 and i+1 = nb_s−1 are the globals').
    const auto window = row.unsqueeze(2) + at::arange(-1, 2, longs);  // i−1, i, i+1 [1, nb, 3]
    auto slot = at::cat({at::zeros({batch, nb, 1}, longs), window.expand({batch, nb, 3}), last.view({batch, 1, 1}).expand({batch, nb, 1})}, 2);
    auto slot_ok = at::cat({at::ones({batch, nb, 1}, valid.options()), inner(window),
                            last.ge(1).view({batch, 1, 1}).expand({batch, nb, 1})}, 2);  // [B, nb, 5]
    slot = slot.unsqueeze(1).expand({batch, heads, nb, 5});
    slot_ok = slot_ok.unsqueeze(1).expand({batch, heads, nb, 5});
    const auto kr = std::min(random_, nb);
    if (kr > 0) {
      // R_i: the kr candidates of highest priority; a slot whose pick is no candidate (fewer than
      // r of them) is masked.
      const auto j = at::arange(nb, longs).view({1, 1, nb});  // key block, against query block i
      const auto candidate =
          j.ge(1).logical_and(j.le(inner_last)).logical_and((j - row.unsqueeze(2)).abs().gt(1));
      const auto own = nb == max_blocks_ ? priority_ : priority_.slice(1, 0, nb).slice(2, 0, nb);
      const auto priority = (own.device() == q.device() ? own : own.to(q.device())).unsqueeze(0);  // [1, H, nb, nb]
      const auto scored = at::where(candidate.unsqueeze(1), priority, at::full_like(priority, -1));  // [B, H, nb, nb]
      const auto top = at::topk(scored, kr, -1);
      slot = at::cat({slot, std::get<1>(top)}, 3);
      slot_ok = at::cat({slot_ok, std::get<0>(top).ge(0)}, 3);
    }
    const auto slots = slot.size(3);  // S = 5 + min(r, nb)
    // i − 1 and i + 1 past the ends are masked slots: any block will do.
    slot = slot.clamp(0, nb - 1).reshape({batch * heads, nb, slots});
    slot_ok = slot_ok.reshape({batch * heads, nb, slots});

    // The (sequence, head) pairs go by chunks whose logits stay within a budget.
    const auto pairs = batch * heads;
    const auto pair_valid = valid.unsqueeze(1).expand({batch, heads, padded}).reshape({pairs, padded});
    const auto pair_last = last.expand({batch, heads}).reshape({pairs});
    const auto per_pair = nb * b * slots * b + 2 * b * padded;
    const auto chunk = std::max<std::int64_t>(1, (q.is_cuda() ? kCudaLogits : kCpuLogits) / per_pair);
    const auto q_pairs = qs.reshape({pairs, padded, dim}), k_pairs = ks.reshape({pairs, padded, dim});
    const auto v_pairs = vs.reshape({pairs, padded, dim});
    if (chunk >= pairs)  // one chunk: no split, no slices (nor their backward)
      return unpadded(attend(q_pairs, k_pairs, v_pairs, pair_valid, slot, slot_ok, pair_last, excluded), batch, heads, n);
    const auto q_parts = q_pairs.split(chunk), k_parts = k_pairs.split(chunk), v_parts = v_pairs.split(chunk);
    std::vector<at::Tensor> parts;
    for (std::size_t c = 0; c < q_parts.size(); ++c) {
      const auto p0 = static_cast<std::int64_t>(c) * chunk, p1 = p0 + q_parts[c].size(0);
      parts.push_back(attend(q_parts[c], k_parts[c], v_parts[c], pair_valid.slice(0, p0, p1), slot.slice(0, p0, p1),
                             slot_ok.slice(0, p0, p1), pair_last.slice(0, p0, p1), excluded));
    }
    return unpadded(at::cat(parts, 0), batch, heads, n);
  }

 private:
  // [B·H, N', p] as [B, H, n, p]
  static at::Tensor unpadded(const at::Tensor& out, std::int64_t batch, std::int64_t heads, std::int64_t n) {
    const auto full = out.view({batch, heads, out.size(1), out.size(2)});
    return out.size(1) == n ? full : full.slice(2, 0, n);
  }

  // m (sequence, head) pairs: q, k, v [m, N', p] (N' = nb·b), valid [m, N'], the slots' key blocks
  // and validity [m, nb, S], the last block [m]. Returns [m, N', p].
  at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& valid,
                    const at::Tensor& slot, const at::Tensor& slot_ok, const at::Tensor& last, double excluded) const {
    const auto m = q.size(0), padded = q.size(1), dim = q.size(2), nb = slot.size(1), slots = slot.size(2), b = block_;
    const auto longs = slot.options();
    // Each query block's slots gathered: keys and values [S·b, p], their validity; logits [b, S·b].
    const auto flat = (at::arange(m, longs).view({m, 1, 1}) * nb + slot).reshape({-1});
    const auto k_slots = k.reshape({m * nb, b * dim}).index_select(0, flat).view({m * nb, slots * b, dim});
    const auto v_slots = v.reshape({m * nb, b * dim}).index_select(0, flat).view({m * nb, slots * b, dim});
    const auto key_ok = valid.reshape({m * nb, b}).index_select(0, flat).view({m, nb, slots, b})
                            .logical_and(slot_ok.unsqueeze(3)).view({m * nb, 1, slots * b});
    // masks as biases added to the logits (nothing for autograd to keep or undo)
    const auto key_bias = masked_bias(key_ok, q.options(), excluded);
    auto logits = at::bmm(q.reshape({m * nb, b, dim}), k_slots.transpose(1, 2)).add_(key_bias);
    const auto sparse = at::bmm(at::softmax(logits, -1), v_slots).view({m, nb, b, dim});

    // Global query blocks 0 and nb_s − 1: every valid key, [2b, N'] logits (no N × N product).
    const auto last_rows = (last.unsqueeze(1) * b + at::arange(b, longs)).unsqueeze(2).expand({m, b, dim});
    const auto q_global = at::cat({q.slice(1, 0, b), q.gather(1, last_rows)}, 1);  // [m, 2b, p]
    auto global_logits = at::bmm(q_global, k.transpose(1, 2)).add_(masked_bias(valid.unsqueeze(1), q.options(), excluded));
    const auto global = at::bmm(at::softmax(global_logits, -1), v).view({m, 2, b, dim});

    // block 0 takes the first global block's rows, block nb_s − 1 the second's, the others their own
    const auto row = at::arange(nb, longs).unsqueeze(0);
    const auto last_block = row.eq(last.unsqueeze(1));                                             // [m, nb]
    const auto which = last_block.to(at::kLong).view({m, nb, 1, 1}).expand({m, nb, b, dim});      // 0 first, 1 last
    const auto global_block = row.eq(0).logical_or(last_block).view({m, nb, 1, 1});
    return at::where(global_block, global.gather(1, which), sparse).view({m, padded, dim});
  }

  // priority[h, i, j]: the rank of an independent uniform among the row's nb_max (a uniformly
  // random permutation). Integers, so that converting the model's dtype leaves them exact.
  at::Tensor draw_priority(std::int64_t heads, at::Generator& generator) const {
    const auto u = at::rand({heads, max_blocks_, max_blocks_}, generator, at::TensorOptions().dtype(at::kDouble));
    return u.argsort(/*dim=*/2, /*descending=*/false).argsort(/*dim=*/2, /*descending=*/false);
  }

  std::int64_t block_, random_, max_blocks_;
  at::Tensor priority_;  // [H, nb_max, nb_max] long
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<BigBirdAttention>(shape, params.integer("block"), params.integer("random_blocks"));
}

}  // namespace attnlab::bigbird

ATTNLAB_PLUGIN_INFO(attention, "bigbird", "1.0",
                    "BigBird block-sparse attention: global first/last blocks, a 3-block window and r random blocks",
                    attnlab::bigbird::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::bigbird::create);
