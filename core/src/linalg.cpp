#include "attnlab/linalg.hpp"

#include <cmath>

#include <stdexcept>

#include <ATen/ATen.h>

#include "attnlab/precision.hpp"

namespace attnlab::linalg {

// All three run in fp32 inside autocast (attnlab/precision.hpp): the iteration cubes its residual,
// so bf16's 8 bits would be its floor, and κ's squared distance by expansion cancels catastrophically.

at::Tensor iterative_pinv(const at::Tensor& a_in, int iterations, NormScope scope) {
  FullPrecision full;
  const auto a = full_precision(a_in);
  TORCH_CHECK(a.dim() >= 2 && a.size(-1) == a.size(-2), "iterative_pinv: expected [..., m, m], got ", a.sizes());
  TORCH_CHECK(iterations >= 0, "iterative_pinv: iterations must be >= 0");
  const auto m = a.size(-1);
  if (a.numel() == 0) return a.transpose(-2, -1).clone();
  const auto a3 = a.reshape({-1, m, m});

  // Z_0 = Aᵀ / (‖A‖₁ ‖A‖∞): as ‖A‖₂² ≤ ‖A‖₁ ‖A‖∞, the non-zero eigenvalues of A Z_0 = A Aᵀ / (‖A‖₁ ‖A‖∞)
  // lie in (0, 1], where the iteration converges to A⁺.
  const auto abs = a3.abs();
  auto norm_1 = abs.sum(1).amax(-1);    // [b] largest column sum
  auto norm_inf = abs.sum(2).amax(-1);  // [b] largest row sum
  at::Tensor scale = scope == NormScope::global ? norm_1.amax() * norm_inf.amax()  // one for the whole batch
                                                : (norm_1 * norm_inf).view({-1, 1, 1});
  auto z = a3.transpose(1, 2) / scale;

  // Razavi et al. (2014), as eq. 10 of the Nyströmformer supplement:
  //   Z_{j+1} = ¼ Z_j (13 I − A Z_j (15 I − A Z_j (7 I − A Z_j)))
  // with the ¼ folded into the outer bracket: Z_{j+1} = Z_j (13/4 I − ¼ A Z_j (15 I − A Z_j (7 I − A Z_j))).
  const auto eye = at::eye(m, a.options());
  const auto eye_7 = eye * 7.0, eye_15 = eye * 15.0, eye_13_4 = eye * (13.0 / 4.0);
  for (int j = 0; j < iterations; ++j) {
    const auto az = at::bmm(a3, z);
    auto t = at::sub(eye_7, az);                  // 7I − AZ
    t = at::baddbmm(eye_15, az, t, 1.0, -1.0);    // 15I − AZ (7I − AZ)
    t = at::baddbmm(eye_13_4, az, t, 1.0, -0.25); // 13/4 I − ¼ AZ (15I − AZ (7I − AZ))
    z = at::bmm(z, t);
  }
  return z.reshape(a.sizes());
}

at::Tensor exact_pinv(const at::Tensor& a, bool hermitian, double rcond) {
  TORCH_CHECK(a.dim() >= 2 && a.size(-1) == a.size(-2), "exact_pinv: expected [..., m, m], got ", a.sizes());
  FullPrecision full;
  return at::linalg_pinv(full_precision(a), rcond, hermitian);
}

at::Tensor pinv(const at::Tensor& a, const PinvOptions& options) {
  return options.method == PinvMethod::exact ? exact_pinv(a, options.hermitian)
                                             : iterative_pinv(a, options.iterations, options.scope);
}

NormScope parse_norm_scope(const std::string& text) {
  if (text == "per_head") return NormScope::per_matrix;
  if (text == "global") return NormScope::global;
  throw std::invalid_argument("init: expected per_head or global, got '" + text + "'");
}

PinvMethod parse_pinv_method(const std::string& text) {
  if (text == "iterative") return PinvMethod::iterative;
  if (text == "exact") return PinvMethod::exact;
  throw std::invalid_argument("pinv: expected iterative or exact, got '" + text + "'");
}

at::Tensor gaussian_kernel(const at::Tensor& x_in, const at::Tensor& y_in, const at::Tensor& x_valid,
                           const at::Tensor& y_valid) {
  FullPrecision full;
  const auto x = full_precision(x_in), y = full_precision(y_in);
  // −‖x − y‖²/2 = xᵀy − ‖x‖²/2 − ‖y‖²/2 as one product of rows extended by two columns,
  // [x, −‖x‖²/2, 1] · [y, 1, −‖y‖²/2], which saves two passes over the [n, m] result (and their
  // reductions in the backward pass). An invalid row's −‖·‖²/2 becomes a large negative number,
  // so its entries are exp(−huge) = 0 (finite, so that no 0 · inf reaches a gradient). The result
  // is clamped at 0 (rounding can push it above), so κ ≤ 1.
  const double excluded = x.scalar_type() == at::kHalf ? -3e4 : -1e30;
  auto neg_half_x = x.square().sum(-1, /*keepdim=*/true).mul(-0.5);  // [..., n, 1]
  auto neg_half_y = y.square().sum(-1, /*keepdim=*/true).mul(-0.5);  // [..., m, 1]
  if (x_valid.defined()) neg_half_x = neg_half_x.masked_fill(x_valid.logical_not().unsqueeze(-1), excluded);
  if (y_valid.defined()) neg_half_y = neg_half_y.masked_fill(y_valid.logical_not().unsqueeze(-1), excluded);
  const auto x_ext = at::cat({x, neg_half_x, at::ones_like(neg_half_x)}, -1);
  const auto y_ext = at::cat({y, at::ones_like(neg_half_y), neg_half_y}, -1);
  return at::matmul(x_ext, y_ext.transpose(-2, -1)).clamp_max(0.0).exp_();
}

ScaledRows scale_and_mask(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) {
  const double scale = std::pow(static_cast<double>(q.size(-1)), -0.25);  // p: the real head dimension
  const auto valid = key_valid.to(at::kBool);
  const auto padded = valid.logical_not().view({q.size(0), 1, q.size(2), 1});
  return {(q * scale).masked_fill(padded, 0.0), (k * scale).masked_fill(padded, 0.0), v.masked_fill(padded, 0.0), valid};
}

}  // namespace attnlab::linalg
