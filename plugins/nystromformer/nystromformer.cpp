// Nyströmformer (Xiong et al., 2021; supplement eqs. 5 and 10): softmax attention approximated
// through m landmarks, the segment means Q̃, K̃ of Q and K:
//   softmax(Q Kᵀ/√p) V ≈ softmax(Q K̃ᵀ/√p) · A⁺ · softmax(Q̃ Kᵀ/√p) V,   A = softmax(Q̃ K̃ᵀ/√p),
// A⁺ by the iteration in attnlab/linalg, computed right to left in O(n · m · p), plus an optional
// depthwise convolution of V along the sequence (the authors' skip connection).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "attnlab/attention.hpp"
#include "attnlab/linalg.hpp"
#include "attnlab/precision.hpp"
#include "attnlab/step_ops.hpp"

namespace attnlab::nystromformer {

const ParamSpec kParams[] = {
    {"landmarks", ParamType::integer, "64", 1, 65536, nullptr,
     "landmarks m: segment means of Q and K (a sequence with fewer positions to cover uses each as its own)"},
    {"iterations", ParamType::integer, "6", 1, 100, nullptr, "iterations of the pseudo-inverse (pinv = iterative)"},
    {"init", ParamType::string, "per_head", 0, 0, "per_head|global|global_column_sum",
     "the iteration's initial value Z0 = A^T / s: per_head, s = |A|_1 |A|_inf of each (batch, head) matrix; global, the "
     "largest |A|_1 times the largest |A|_inf over the batch (the Nystromformer authors'); global_column_sum, the "
     "largest |A|_1 over the batch alone (the Skyformer authors'); both couple the sequences of a batch"},
    {"pinv", ParamType::string, "iterative", 0, 0, "iterative|exact", "pseudo-inverse of A: the iteration, or exact (SVD)"},
    {"segments", ParamType::string, "real_tokens", 0, 0, "real_tokens|padded",
     "what the landmarks' segments cover: the real tokens, or every position of the padded sequence with padding "
     "counted as zeros (the authors' LRA code: n/m positions a segment)"},
    {"conv_kernel", ParamType::integer, "33", 0, 1025, nullptr,
     "odd kernel of the depthwise convolution of V added to the output (the paper's 33; the authors' LRA configs "
     "use 35), 0 = none"},
};

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Per head h, out[i] = Σ_j w[h, j] V[i + j − k/2] (odd k, V zero outside the sequence), as one
// batched product: the sequence in blocks of s positions, a block's outputs the band matrix
// band[r, c] = w[c − r] [s, s + k − 1] times the block's window of V (its s positions and the k − 1
// around them). The band's other entries are zeros, so the sums are the convolution's. On the CPU
// LibTorch's depthwise conv1d took about twice as long in a training step at 64 positions and three
// times at 1,024 (plugin README). The windows are a copy of (s + k − 1) / s times V, not kept for
// the backward.
struct SequenceConvolution : public torch::autograd::Function<SequenceConvolution> {
  static std::int64_t block(std::int64_t k) { return std::max<std::int64_t>(k - 1, 32); }
  static std::int64_t blocks_over(std::int64_t n, std::int64_t s) { return (n + s - 1) / s; }

  // [H, s, s + k − 1]: a Hankel matrix of the zero-padded kernel (row q of the unfold holds
  // z[q, q + width)), its rows reversed
  static at::Tensor band_of(const at::Tensor& w, std::int64_t s) {
    const auto width = s + w.size(1) - 1;
    return at::constant_pad_nd(w, {s - 1, s - 1}).unfold(1, width, 1).flip(1);
  }
  // x [B, H, N, p] -> [H, width, B·blocks·p]: block b's window is x[b·s − k/2, b·s − k/2 + width)
  static at::Tensor windows_of(const at::Tensor& x, std::int64_t k, std::int64_t s) {
    const auto n = x.size(2), blocks = blocks_over(n, s), width = s + k - 1;
    const auto padded = at::constant_pad_nd(x, {0, 0, k / 2, blocks * s - n + k / 2});
    return padded.unfold(2, width, s).permute({1, 4, 0, 2, 3}).reshape({x.size(1), width, x.size(0) * blocks * x.size(3)});
  }
  // x [B, H, N, p] -> [H, s, B·blocks·p]: block b is x[b·s, b·s + s), zeros past N
  static at::Tensor blocks_of(const at::Tensor& x, std::int64_t s) {
    const auto batch = x.size(0), heads = x.size(1), n = x.size(2), p = x.size(3), blocks = blocks_over(n, s);
    return at::constant_pad_nd(x, {0, 0, 0, blocks * s - n}).reshape({batch, heads, blocks, s, p}).permute({1, 3, 0, 2, 4})
        .reshape({heads, s, batch * blocks * p});
  }
  static at::Tensor convolve(const at::Tensor& x, const at::Tensor& w) {
    const auto batch = x.size(0), heads = x.size(1), n = x.size(2), p = x.size(3), k = w.size(1), s = block(k);
    const auto blocks = blocks_over(n, s);
    return at::bmm(band_of(w, s), windows_of(x, k, s))
        .view({heads, s, batch, blocks, p})
        .permute({2, 0, 3, 1, 4})
        .reshape({batch, heads, blocks * s, p})
        .narrow(2, 0, n);
  }

  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& v, const at::Tensor& w) {
    ctx->save_for_backward({v, w});
    return convolve(v, w);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &v = saved[0], &w = saved[1], &g = grads[0];
    const auto k = w.size(1), s = block(k), width = s + k - 1;
    // dV: the convolution of G with the kernel reversed (an odd kernel keeps its centre)
    const auto grad_v = ctx->needs_input_grad(0) ? convolve(g, w.flip(1)) : at::Tensor();
    at::Tensor grad_w;
    if (ctx->needs_input_grad(1)) {
      // dband = G's blocks times the windows' transposes; dw[h, j] = Σ_r dband[h, r, r + j]
      const auto grad_band = at::bmm(blocks_of(g, s), windows_of(v, k, s).transpose(1, 2));  // [H, s, width]
      grad_w = grad_band.as_strided({w.size(0), k, s}, {s * width, 1, width + 1}).sum(2);
    }
    return {grad_v, grad_w};
  }
};

}  // namespace

class NystromformerAttention : public AttentionMethod {
 public:
  enum class Cover { real_tokens, padded };

  NystromformerAttention(const AttentionShape& shape, std::int64_t landmarks, Cover cover, linalg::PinvOptions pinv,
                         std::int64_t conv_kernel)
      : landmarks_(landmarks), cover_(cover), pinv_(pinv), conv_kernel_(conv_kernel) {
    if (conv_kernel_ > 0) {
      // one kernel per head, as nn.Conv2d(H, H, (k, 1), groups = H, bias = False), with its
      // default initialisation U(−1/√k, 1/√k)
      const double bound = 1.0 / std::sqrt(static_cast<double>(conv_kernel_));
      conv_weight_ = register_parameter("conv_weight", at::empty({shape.heads, 1, conv_kernel_, 1}).uniform_(-bound, bound));
    }
  }

  at::Tensor forward(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, const at::Tensor& key_valid) override {
    // In fp32 inside autocast: A's iterative pseudo-inverse needs more than bf16's 8 bits, and so
    // do the products with A⁺ (its entries can be large). O(n m) work: cheap.
    FullPrecision full;
    const auto q = full_precision(q_in), k = full_precision(k_in), v = full_precision(v_in);
    const auto batch = q.size(0), heads = q.size(1), n = q.size(2);
    const auto m = landmarks_;
    // q kᵀ/√p as (q/p^¼)(k/p^¼)ᵀ; padded rows zeroed, so nothing there reaches a real token.
    const auto [qs, ks, vs, valid] = linalg::scale_and_mask(q, k, v, key_valid);
    // the authors' segments cover the padded positions too, whose zeroed rows pull the means to 0
    const auto segments = segments_of(cover_ == Cover::padded ? at::ones_like(valid) : valid, q.scalar_type());
    const auto q_marks = segment_means(segments.average, qs);  // Q̃ [B, H, m, p]
    const auto k_marks = segment_means(segments.average, ks);  // K̃ [B, H, m, p]

    // masks as biases added to the scores (no gradient to keep or undo, unlike a masked_fill)
    const double excluded = masked_logit_bias(q.scalar_type());
    const auto unused_column = masked_bias(segments.used.view({batch, 1, 1, m}), q.options(), excluded);
    // F = softmax(Q K̃ᵀ/√p) over the used landmarks                           [B, H, N, m]
    const auto f = at::softmax(batched_matmul(qs, k_marks, /*transpose_b=*/true).add_(unused_column), -1);
    // A = softmax(Q̃ K̃ᵀ/√p) on the used block; an unused slot gets the row of I  [B, H, m, m]
    auto a = at::softmax(batched_matmul(q_marks, k_marks, /*transpose_b=*/true).add_(unused_column), -1);
    a = at::where(segments.used.view({batch, 1, m, 1}), a, at::eye(m, a.options()));
    // B = softmax(Q̃ Kᵀ/√p + mask) over the real keys                           [B, H, m, N]
    const auto padded_column = masked_bias(valid.view({batch, 1, 1, n}), q.options(), excluded);
    const auto b = at::softmax(batched_matmul(q_marks, ks, /*transpose_b=*/true).add_(padded_column), -1);

    auto out = batched_matmul(f, batched_matmul(linalg::pinv(a, pinv_), batched_matmul(b, vs)));  // F (A⁺ (B V))
    if (conv_kernel_ > 0) out = out + depthwise_conv(vs, heads);
    return out;
  }

 private:
  // Segments over the L positions `covered` of each sequence (its real tokens, or all N), in order:
  // m' = min(m, L) segments as equal as possible, the position of rank r (0-based) in segment
  // ⌊r m' / L⌋ (with all N covered and m dividing N, the authors' reshape into m rows of N/m). Landmark slots m' .. m-1
  // of a short sequence stay unused and are masked out. Their means as one batched product with
  // the averaging matrix S [B, m, N] (deterministic, unlike a scatter on the GPU): S[b, j, i] =
  // 1/|segment j| for the tokens i of segment j.
  struct Segments {
    at::Tensor average;  // S [B, m, N]
    at::Tensor used;     // [B, m] bool
  };
  Segments segments_of(const at::Tensor& covered, at::ScalarType type) const {
    const auto m = landmarks_, n = covered.size(1);
    const auto count = covered.cumsum(1);        // r + 1 at the covered positions [B, N] (int64)
    const auto len = count.narrow(1, n - 1, 1);  // L [B, 1]
    const auto used = len.clamp_max(m);          // m' [B, 1]
    const auto segment = (count * used).sub_(used).div_(len.clamp_min(1), "floor").masked_fill_(covered.logical_not(), m);
    const auto slots = at::arange(m, covered.options().dtype(at::kLong));
    auto average = segment.unsqueeze(1).eq(slots.view({1, m, 1})).to(type);
    average.div_(average.sum(-1, /*keepdim=*/true).clamp_min_(1.0));
    return {average, slots.view({1, m}).lt(used)};
  }

  // The authors' Conv2d(H, H, (k, 1), groups = H, padding = (k/2, 0)) on V (padding zeroed).
  at::Tensor depthwise_conv(const at::Tensor& vs, std::int64_t heads) const {
    return SequenceConvolution::apply(vs, as_type(conv_weight_, vs.scalar_type()).view({heads, conv_kernel_}));
  }

  // S [B, m, N] times x [B, H, N, p] (S the same for every head).
  static at::Tensor segment_means(const at::Tensor& average, const at::Tensor& x) {
    return batched_matmul(average.unsqueeze(1).expand({x.size(0), x.size(1), average.size(1), average.size(2)}), x);
  }

  std::int64_t landmarks_;
  Cover cover_;
  linalg::PinvOptions pinv_;
  std::int64_t conv_kernel_;
  at::Tensor conv_weight_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  linalg::PinvOptions pinv;
  pinv.method = linalg::parse_pinv_method(params.string("pinv"));
  pinv.iterations = static_cast<int>(params.integer("iterations"));
  pinv.scope = linalg::parse_norm_scope(params.string("init"));
  const auto conv_kernel = params.integer("conv_kernel");
  if (conv_kernel > 0 && conv_kernel % 2 == 0)
    throw ParamError("conv_kernel: " + std::to_string(conv_kernel) + " is even; the convolution needs an odd kernel (or 0)");
  using Cover = NystromformerAttention::Cover;
  const auto cover = params.choice<Cover>("segments", {{"real_tokens", Cover::real_tokens}, {"padded", Cover::padded}});
  return std::make_shared<NystromformerAttention>(shape, params.integer("landmarks"), cover, pinv, conv_kernel);
}

}  // namespace attnlab::nystromformer

ATTNLAB_PLUGIN_INFO(attention, "nystromformer", "1.0",
                    "Nystromformer: softmax attention through segment-mean landmarks and an iterative pseudo-inverse",
                    attnlab::nystromformer::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::nystromformer::create);
