#include "attnlab/linalg.hpp"

#include <cmath>

#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "attnlab/precision.hpp"
#include "attnlab/step_ops.hpp"

namespace attnlab::linalg {

// All three run in fp32 inside autocast (attnlab/precision.hpp): the iteration cubes its residual,
// so bf16's 8 bits would be its floor, and κ's squared distance by expansion cancels catastrophically.

namespace {

// Z_0 = Aᵀ / s, s = ‖A‖₁ ‖A‖∞ ([b, 1, 1] per matrix, [] over the whole batch), or max ‖A‖₁ ([], global_column_sum).
struct InitialValue {
  at::Tensor col, row;   // Σ_i |A_ij| and Σ_j |A_ij|: [b, m]
  at::Tensor n1, ni;     // ‖A‖₁ and ‖A‖∞ of each matrix: [b]
  at::Tensor scale;
};

InitialValue initial_value(const at::Tensor& a3, NormScope scope) {
  InitialValue init;
  const auto abs = a3.abs();
  init.col = abs.sum(1);
  init.row = abs.sum(2);
  init.n1 = init.col.amax(-1);
  init.ni = init.row.amax(-1);
  init.scale = scope == NormScope::global     ? init.n1.amax() * init.ni.amax()
               : scope == NormScope::global_column_sum ? init.n1.amax()
                                              : (init.n1 * init.ni).view({-1, 1, 1});
  return init;
}

// amax's gradient as autograd gives it: shared equally by the entries that reach the maximum.
at::Tensor amax_grad(const at::Tensor& grad, const at::Tensor& values, const at::Tensor& maximum) {
  const auto at_max = values.eq(maximum.unsqueeze(-1)).to(values.scalar_type());
  return at_max.mul_((grad / at_max.sum(-1)).unsqueeze(-1));
}

// dL/dA through Z_0 = Aᵀ / s (s's dependence on A included, as autograd differentiates it).
at::Tensor initial_value_backward(const at::Tensor& a3, const at::Tensor& z0, const InitialValue& init, NormScope scope,
                                  const at::Tensor& grad_z0) {
  auto grad_a = grad_z0.transpose(1, 2) / init.scale;
  auto grad_scale = (grad_z0 * z0).sum({1, 2}).div_(init.scale.view({-1})).neg_();  // [b]: −⟨G, Z_0⟩ / s
  at::Tensor grad_n1, grad_ni;
  if (scope == NormScope::global_column_sum) {  // s = max ‖A‖₁ alone: ‖A‖∞ takes no part
    const auto total = grad_scale.sum().unsqueeze(0);
    grad_n1 = amax_grad(total, init.n1.unsqueeze(0), init.n1.amax().unsqueeze(0)).squeeze(0);
    return grad_a.add_(amax_grad(grad_n1, init.col, init.n1).unsqueeze(1) * a3.sign());
  }
  if (scope == NormScope::global) {
    const auto s1 = init.n1.amax(), si = init.ni.amax(), total = grad_scale.sum();
    grad_n1 = amax_grad((total * si).unsqueeze(0), init.n1.unsqueeze(0), s1.unsqueeze(0)).squeeze(0);
    grad_ni = amax_grad((total * s1).unsqueeze(0), init.ni.unsqueeze(0), si.unsqueeze(0)).squeeze(0);
  } else {
    grad_n1 = grad_scale * init.ni;
    grad_ni = grad_scale * init.n1;
  }
  // |A|'s gradient: column j's share of ‖A‖₁ plus row i's of ‖A‖∞, times sign(A)
  auto grad_abs = amax_grad(grad_n1, init.col, init.n1).unsqueeze(1) + amax_grad(grad_ni, init.row, init.ni).unsqueeze(2);
  return grad_a.add_(grad_abs.mul_(a3.sign()));
}

}  // namespace

// Razavi et al. (2014), as eq. 10 of the Nyströmformer supplement:
//   Z_{j+1} = ¼ Z_j (13 I − A Z_j (15 I − A Z_j (7 I − A Z_j)))
// with the ¼ folded into the outer bracket: P = A Z_j, U = 7I − P, V = 15I − P U,
// T = 13/4 I − ¼ P V, Z_{j+1} = Z_j T.
at::Tensor PinvTape::forward(const at::Tensor& a_in, int iterations, NormScope scope, bool keep) {
  TORCH_CHECK(a_in.dim() >= 2 && a_in.size(-1) == a_in.size(-2), "iterative_pinv: expected [..., m, m], got ", a_in.sizes());
  TORCH_CHECK(iterations >= 0, "iterative_pinv: iterations must be >= 0");
  FullPrecision full;
  const auto a = full_precision(a_in);
  const auto m = a.size(-1);
  if (a.numel() == 0) return a.transpose(-2, -1).clone();
  const auto a3 = a.dim() == 3 ? a : a.reshape({-1, m, m});
  const auto init = initial_value(a3, scope);
  auto z = a3.transpose(1, 2) / init.scale;
  scope_ = scope;
  tensors_.clear();
  if (keep) tensors_ = {a3, z, init.col, init.row, init.n1, init.ni, init.scale};
  // c I as tensors of A's type (a scalar operand costs an op of its own to become one), the two
  // that baddbmm adds to a product already of the batch's shape
  const auto eye = at::eye(m, a.options());
  auto times_eye = [&](double c) { return eye * at::scalar_tensor(c, a.options()); };
  const auto batch = a3.sizes();
  const auto eye_7 = times_eye(7.0), eye_15 = times_eye(15.0).expand(batch), eye_13_4 = times_eye(13.0 / 4.0).expand(batch);
  for (int j = 0; j < iterations; ++j) {
    auto p = at::bmm(a3, z);
    auto u = at::sub(eye_7, p);
    auto v = at::baddbmm(eye_15, p, u, 1.0, -1.0);
    auto t = at::baddbmm(eye_13_4, p, v, 1.0, -0.25);
    auto next = at::bmm(z, t);
    if (keep) tensors_.insert(tensors_.end(), {z, p, u, v, t});
    z = std::move(next);
  }
  return z.view(a.sizes());
}

// Reverse through the steps (G = dL/dZ_{j+1}): dT = Z_jᵀ G, then through T's Horner form
// dP = −¼ dT Vᵀ − dV Uᵀ + Pᵀ dV with dV = −¼ Pᵀ dT; dA += dP Z_jᵀ; dZ_j = G Tᵀ + Aᵀ dP. Eight
// products a step, as autograd's; one node instead of its sixty ops.
at::Tensor PinvTape::backward(const at::Tensor& grad_z, bool symmetric) const {
  TORCH_CHECK(tensors_.size() >= kInitTensors, "PinvTape::backward: the forward kept nothing");
  NoAutocast one_type;  // the tape's type throughout, wherever the backward runs
  auto t_of = [&](const at::Tensor& x) { return symmetric ? x : x.transpose(1, 2); };
  const auto& a3 = tensors_[0];
  auto g = grad_z.dim() == 3 ? grad_z : grad_z.reshape(a3.sizes());
  at::Tensor grad_a;  // Σ_j dP_j Z_jᵀ, begun by the last step's product
  const auto a_t = t_of(a3);
  const auto quarter = at::scalar_tensor(-0.25, a3.options());
  for (auto i = tensors_.size(); i > kInitTensors; i -= kStepTensors) {
    const auto &z = tensors_[i - 5], &p = tensors_[i - 4], &u = tensors_[i - 3], &v = tensors_[i - 2], &t = tensors_[i - 1];
    const auto p_t = t_of(p), z_t = t_of(z);
    const auto grad_t = at::bmm(z_t, g).mul_(quarter);  // −¼ dT: a power of two, so exactly as −¼ applied later
    const auto grad_v = at::bmm(p_t, grad_t);
    auto grad_p = at::bmm(grad_t, t_of(v));
    grad_p.baddbmm_(grad_v, t_of(u), 1.0, -1.0).baddbmm_(p_t, grad_v);
    grad_a = grad_a.defined() ? grad_a.baddbmm_(grad_p, z_t) : at::bmm(grad_p, z_t);
    g = at::bmm(g, t_of(t)).baddbmm_(a_t, grad_p);
  }
  const InitialValue init{tensors_[2], tensors_[3], tensors_[4], tensors_[5], tensors_[6]};
  const auto grad_z0 = initial_value_backward(a3, tensors_[1], init, scope_, g);
  return (grad_a.defined() ? grad_a.add_(grad_z0) : grad_z0).view(grad_z.sizes());
}

namespace {

struct PinvFunction : public torch::autograd::Function<PinvFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& a, std::int64_t iterations,
                            std::int64_t scope) {
    PinvTape tape;
    auto z = tape.forward(a, static_cast<int>(iterations), static_cast<NormScope>(scope), /*keep=*/true);
    ctx->save_for_backward(tape.tensors());
    ctx->saved_data["scope"] = scope;
    return z;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const PinvTape tape(ctx->get_saved_variables(), static_cast<NormScope>(ctx->saved_data["scope"].toInt()));
    return {tape.backward(grads[0]), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor iterative_pinv(const at::Tensor& a, int iterations, NormScope scope) {
  if (!a.requires_grad() || !at::GradMode::is_enabled()) return PinvTape().forward(a, iterations, scope, /*keep=*/false);
  return PinvFunction::apply(a, iterations, static_cast<std::int64_t>(scope));
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
  if (text == "global_column_sum") return NormScope::global_column_sum;
  throw std::invalid_argument("init: expected per_head, global or global_column_sum, got '" + text + "'");
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

namespace {

// q and k scaled, the three with their padded rows zeroed, as one autograd node: written as three
// products and three masked copies, the same is some ninety recorded ops a layer, forward and back.
struct ScaleAndMaskFunction : public torch::autograd::Function<ScaleAndMaskFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                                                const at::Tensor& k, const at::Tensor& v, const at::Tensor& padded,
                                                double q_scale, double k_scale) {
    ctx->saved_data["padded"] = padded;
    ctx->saved_data["q_scale"] = q_scale;
    ctx->saved_data["k_scale"] = k_scale;
    return {scaled(q, q_scale, padded), scaled(k, k_scale, padded), at::where(padded, constant(0.0, v), v)};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto padded = ctx->saved_data["padded"].toTensor();
    const auto& gv = grads[2];
    return {scaled(grads[0], ctx->saved_data["q_scale"].toDouble(), padded),
            scaled(grads[1], ctx->saved_data["k_scale"].toDouble(), padded),
            gv.defined() ? at::where(padded, constant(0.0, gv), gv) : at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
  // x · scale, padded rows 0 (whatever sat there, inf and nan included)
  static at::Tensor scaled(const at::Tensor& x, double scale, const at::Tensor& padded) {
    if (!x.defined()) return {};
    return (scale == 1.0 ? x.clone() : x * constant(scale, x)).masked_fill_(padded, 0.0);
  }
};

}  // namespace

ScaledRows scale_and_mask(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) {
  const double scale = std::pow(static_cast<double>(q.size(-1)), -0.25);  // p: the real head dimension
  return mask_rows(q, k, v, key_valid, scale, scale);
}

ScaledRows mask_rows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid,
                     double q_scale, double k_scale) {
  const auto valid = as_bool(key_valid);
  const auto padded = valid.logical_not().view({q.size(0), 1, q.size(2), 1});
  const auto rows = ScaleAndMaskFunction::apply(q, k, v, padded, q_scale, k_scale);
  return {rows[0], rows[1], rows[2], valid};
}

}  // namespace attnlab::linalg
