// Skyformer (Chen et al., 2021, §4.2 and §4.4): a Nyström approximation of kernelized attention
// (eq. 3, C V with C = κ(Q/p^¼, K/p^¼), κ the Gaussian kernel), with landmarks L sampled from the
// valid rows of [Q; K] and a ridge γ on the landmark block:
//   C V ≈ κ(Q, L) · (D^-½ (D^-½ M D^-½)⁺ D^-½) · κ(L, K) · V,   M = κ(L, L) + γ I,  D = diag(M 1),
// computed right to left in O(n · m · p); the pseudo-inverse by the iteration in attnlab/linalg.
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "attnlab/attention.hpp"
#include "attnlab/linalg.hpp"
#include "attnlab/precision.hpp"
#include "attnlab/seed_stream.hpp"
#include "fused.hpp"

namespace attnlab::skyformer {

const ParamSpec kParams[] = {
    {"landmarks", ParamType::integer, "128", 1, 65536, nullptr,
     "landmark rows drawn (with replacement) from the valid rows of [Q; K] (sampling = all ignores it)"},
    {"gamma", ParamType::real, "0.1", 0, 1e6, nullptr, "ridge added to the landmark block: M = kappa(L, L) + gamma I"},
    {"iterations", ParamType::integer, "6", 1, 100, nullptr, "iterations of the pseudo-inverse (pinv = iterative)"},
    {"init", ParamType::string, "per_head", 0, 0, "per_head|global|global_column_sum",
     "the iteration's initial value Z0 = A^T / s: per_head, s = |A|_1 |A|_inf of each (batch, head) matrix; global, the "
     "largest |A|_1 times the largest |A|_inf over the batch (the Nystromformer authors'); global_column_sum, the "
     "largest |A|_1 over the batch alone (the Skyformer authors'); both couple the sequences of a batch"},
    {"sampling", ParamType::string, "qk_halves", 0, 0, "qk_halves|union|all",
     "qk_halves: half the landmarks from Q's valid rows, half from K's (authors); union: uniform over both; all: every "
     "valid row of [Q; K] once (deterministic, O(n^2): the exactness limit)"},
    {"pinv", ParamType::string, "iterative", 0, 0, "iterative|exact",
     "pseudo-inverse of the landmark block: the iteration, or exact (eigendecomposition)"},
    {"backward", ParamType::string, "fused", 0, 0, "fused|autograd",
     "fused: the attention one autograd node with its gradient written out (fewer ops a step; pinv = iterative); "
     "autograd: op by op, as autograd differentiates it (the reference the fused one is tested against)"},
};

enum class Sampling { qk_halves, union_of_rows, all };
enum class Backward { fused, autograd };

class SkyformerAttention : public SeedStreamAttention {
 public:
  SkyformerAttention(std::int64_t landmarks, double gamma, linalg::PinvOptions pinv, Sampling sampling, Backward backward)
      : SeedStreamAttention("landmark"), landmarks_(landmarks), gamma_(gamma), pinv_(pinv), sampling_(sampling),
        backward_(backward) {
    pinv_.hermitian = true;  // the normalised landmark block is symmetric
  }

  bool stochastic() const override { return sampling_ != Sampling::all; }

  at::Tensor forward(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in, const at::Tensor& key_valid) override {
    // In fp32 inside autocast: the kernel's squared distances, the ridge-regularised block and its
    // iterative inverse need more than bf16's 8 bits, and so do the products with M⁺ (bf16 there
    // measured 2.5% off fp32 in conformance's "reduced precision" check). O(n m) work: cheap.
    FullPrecision full;
    const auto q = full_precision(q_in), k = full_precision(k_in), v = full_precision(v_in);
    const auto valid = key_valid.scalar_type() == at::kBool ? key_valid : key_valid.to(at::kBool);
    const auto marks = landmarks(valid);
    if (backward_ == Backward::fused && pinv_.method == linalg::PinvMethod::iterative)
      return fused_attention(q, k, v, valid, marks, gamma_, pinv_.iterations, pinv_.scope);
    return composed(q, k, v, valid, marks);
  }

 private:
  // The same formula op by op, autograd differentiating it: the exact pseudo-inverse's path, and the
  // reference the fused one is tested against.
  at::Tensor composed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid,
                      const Landmarks& landmarks) const {
    const auto batch = q.size(0), heads = q.size(1), dim = q.size(3), m = landmarks.index.size(1);
    // p^-¼ with the real head dimension p (the authors' code hard-codes 32); padded rows zeroed.
    const auto [qs, ks, vs, valid] = linalg::scale_and_mask(q, k, v, key_valid);
    const auto rows = at::cat({qs, ks}, 2);  // [B, H, 2N, p]: the stacked [Q; K]
    const auto marks = rows.gather(2, landmarks.index.view({batch, 1, m, 1}).expand({batch, heads, m, dim}));
    const auto lv = landmarks.valid.unsqueeze(1);  // [B, 1, m]

    const auto c_ql = linalg::gaussian_kernel(qs, marks, {}, lv);                 // κ(Q, L) [B, H, N, m]
    const auto c_lk = linalg::gaussian_kernel(marks, ks, lv, valid.unsqueeze(1));  // κ(L, K) [B, H, m, N]
    // M = κ(L, L) + γ I on the real landmarks; a masked slot gets the row and column of I, which
    // keeps it out of the real block's (pseudo-)inverse.
    auto ridge = at::where(lv, at::scalar_tensor(gamma_, q.options()), at::scalar_tensor(1.0, q.options()));
    const auto block = linalg::gaussian_kernel(marks, marks, lv, lv) + at::diag_embed(ridge);  // [B, H, m, m]
    // D_M^-½ M D_M^-½ (row sums are ≥ 1: κ(x, x) = 1), its pseudo-inverse, and the scaling undone.
    const auto d = block.sum(-1).rsqrt().unsqueeze(-1);  // [B, H, m, 1]
    const auto z = linalg::pinv(block * d * d.transpose(-2, -1), pinv_);
    auto context = at::matmul(c_lk, vs);            // κ(L, K) V           [B, H, m, p]
    context = at::matmul(z, context * d) * d;       // M⁺ κ(L, K) V
    return at::matmul(c_ql, context);               // κ(Q, L) M⁺ κ(L, K) V
  }

  // This call's landmarks as rows of the stacked [Q; K] (2N rows). Sampled: uniformly and with
  // replacement among the valid rows; as in the authors' code, one vector u of uniforms is drawn
  // per call and shared by every sequence and head: sequence b takes row floor(u · L_b) of its L_b
  // valid ones, so a sequence gets the same landmarks whatever its padding or its place in the
  // batch. A sequence without a single real token has no landmark: its slots are masked out.
  // `all`: every row once, the padded ones masked out. Counts are kept in double (exact integers)
  // so that no step converts between types.
  Landmarks landmarks(const at::Tensor& valid) {
    const auto batch = valid.size(0), n = valid.size(1);
    const auto rows_valid = at::cat({valid, valid}, 1);  // [B, 2N]
    if (sampling_ == Sampling::all)
      return {at::arange(2 * n, valid.options().dtype(at::kLong)).expand({batch, 2 * n}), rows_valid};
    auto generator = draw_generator(valid.device());
    const auto u = at::rand({1, landmarks_}, generator, valid.options().dtype(at::kDouble));
    const auto count = rows_valid.cumsum(1, at::kDouble);  // valid rows up to each row [B, 2N]
    const auto len = count.narrow(1, n - 1, 1);           // L [B, 1]: Q's valid rows, and K's
    const auto one = at::scalar_tensor(1.0, count.options());
    at::Tensor rank;  // among the valid rows of [Q; K]: Q's are ranks 0 .. L-1, K's L .. 2L-1
    if (sampling_ == Sampling::qk_halves) {
      // the first ⌊m/2⌋ from Q, the others from K (as the authors)
      rank = at::minimum((u * len).floor_(), len - one);
      rank.narrow(1, landmarks_ / 2, landmarks_ - landmarks_ / 2).add_(len);
    } else {
      const auto both = len + len;
      rank = at::minimum((u * both).floor_(), both - one);
    }
    // the row of rank r is the first whose running count exceeds r
    return {at::searchsorted(count, rank, /*out_int32=*/false, /*right=*/true), valid.any(1, /*keepdim=*/true).expand({batch, landmarks_})};
  }

  std::int64_t landmarks_;
  double gamma_;
  linalg::PinvOptions pinv_;
  Sampling sampling_;
  Backward backward_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape&, const ParamValues& params) {
  linalg::PinvOptions pinv;
  pinv.method = linalg::parse_pinv_method(params.string("pinv"));
  pinv.iterations = static_cast<int>(params.integer("iterations"));
  pinv.scope = linalg::parse_norm_scope(params.string("init"));
  return std::make_shared<SkyformerAttention>(
      params.integer("landmarks"), params.real("gamma"), pinv,
      params.choice<Sampling>("sampling", {{"qk_halves", Sampling::qk_halves}, {"union", Sampling::union_of_rows}, {"all", Sampling::all}}),
      params.choice<Backward>("backward", {{"fused", Backward::fused}, {"autograd", Backward::autograd}}));
}

}  // namespace attnlab::skyformer

ATTNLAB_PLUGIN_INFO(attention, "skyformer", "1.0",
                    "Skyformer: Nystrom approximation of Gaussian-kernel attention with landmarks sampled from [Q; K]",
                    attnlab::skyformer::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::skyformer::create);
