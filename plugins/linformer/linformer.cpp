// Linformer (Wang et al., 2020, "Linformer: Self-Attention with Linear Complexity", eq. 7, with
// the key-value sharing of §4): the n keys and values projected to k rows by one matrix E per
// head, E_h [k, L] (L = max_len, its first n columns used),
//   K̄ = E_h (K ⊙ m),  V̄ = E_h (V ⊙ m),  out = softmax(Q K̄ᵀ/√p) V̄,
// with m the key mask (padded rows zeroed) and no mask over the k slots, as Skyformer's code runs
// it. O(n · k · p) time, O(n · k) memory; E is H·k·L parameters per layer, N(0, 0.02²), or one E
// for every layer (share_e: Nyströmformer's LRA code, whose Linformer keeps E in a class attribute).
#include <cstdint>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

#include "attnlab/attention.hpp"
#include "attnlab/linalg.hpp"

namespace attnlab::linformer {

const ParamSpec kParams[] = {
    {"k", ParamType::integer, "128", 1, 65536, nullptr, "projected length: the rows of E_h (LRA: 128 on every task)"},
    {"freeze_e", ParamType::boolean, "false", 0, 0, nullptr,
     "false: E is learned (the paper); true: E stays at its random initialisation, a buffer (Skyformer's runs)"},
    {"share_e", ParamType::boolean, "false", 0, 0, nullptr,
     "false: an E per layer (the paper, Skyformer's code); true: every layer uses the first layer's E (Nystromformer's code)"},
};

class LinformerAttention : public AttentionMethod {
 public:
  // `shared`: the first layer's E (the same tensor, so one weight that every layer's gradient
  // reaches); undefined: a new one, drawn from the global generator, which the host seeds before
  // building the model.
  LinformerAttention(const AttentionShape& shape, std::int64_t k, bool freeze_e, const at::Tensor& shared)
      : max_len_(shape.max_len) {
    auto e = shared.defined() ? shared : at::empty({shape.heads, k, shape.max_len}).normal_(0.0, 0.02);
    // frozen: a buffer, so that it still travels with the model (device moves, checkpoints)
    e_ = freeze_e ? register_buffer("E", e) : register_parameter("E", e);
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const auto batch = q.size(0), heads = q.size(1), n = q.size(2), dim = q.size(3);
    if (n > max_len_)
      throw std::invalid_argument("linformer: a sequence of " + std::to_string(n) + " positions, longer than max_len = " +
                                  std::to_string(max_len_) + " (the columns of the projection E)");
    // q kᵀ/√p as (q/p^¼)(k/p^¼)ᵀ; padded rows zeroed (K ⊙ m, V ⊙ m), so nothing there reaches a real token.
    const auto [qs, ks, vs, valid] = linalg::scale_and_mask(q, k, v, key_valid);
    const auto e = (n == max_len_ ? e_ : e_.slice(2, 0, n)).to(q.scalar_type());  // E_h[:, :n]  [H, k, n]
    // [K V] with the batch folded into the columns, [H, n, B·2p]: one product per head, E_h [K V]
    // (twice as fast on the CPU as matmul broadcasting E over the batch, backward included)
    const auto kv = at::cat({ks.permute({1, 2, 0, 3}), vs.permute({1, 2, 0, 3})}, -1).reshape({heads, n, batch * 2 * dim});
    const auto projected = at::bmm(e, kv).view({heads, e.size(1), batch, 2 * dim}).permute({2, 0, 1, 3});  // [K̄ V̄] [B, H, k, 2p]
    const auto k_bar = projected.narrow(-1, 0, dim), v_bar = projected.narrow(-1, dim, dim);
    const auto probs = at::softmax(at::matmul(qs, k_bar.transpose(-2, -1)), -1);  // [B, H, n, k]
    return at::matmul(probs, v_bar);
  }

  const at::Tensor& e() const { return e_; }

 private:
  std::int64_t max_len_;
  at::Tensor e_;  // E [H, k, L]
};

// The first layer's E, where this layer shares it (undefined otherwise).
at::Tensor first_layers_e(const AttentionShape& shape, const ParamValues& params) {
  if (!params.boolean("share_e") || shape.first_layer == nullptr) return {};
  const auto* first = dynamic_cast<const LinformerAttention*>(shape.first_layer);
  if (first == nullptr) throw std::invalid_argument("linformer: share_e, but the first layer's attention is not Linformer");
  return first->e();
}

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  return std::make_shared<LinformerAttention>(shape, params.integer("k"), params.boolean("freeze_e"),
                                              first_layers_e(shape, params));
}

}  // namespace attnlab::linformer

ATTNLAB_PLUGIN_INFO(attention, "linformer", "1.0",
                    "Linformer: keys and values projected to k rows by a per-head E [k, max_len] shared by K and V (and by the layers, with share_e)",
                    attnlab::linformer::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::linformer::create);
