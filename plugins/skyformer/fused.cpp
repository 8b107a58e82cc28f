// Skyformer's attention as one autograd node (fused.hpp). Forward, with X = [Q; K] / p^¼ (padded rows
// zeroed) and L = X[index] the landmarks:
//   E = L Xᵀ − ½‖L‖² − ½‖X‖²,  κ(L, X) = exp(min(E, 0))  (rows of unreal landmarks 0)
//   M = κ(L, L) + ridge,  d = rowsum(M)^-½,  A = M ∘ d dᵀ,  Z = A⁺ (the iteration, linalg::PinvTape)
//   C = κ(L, K) V,  C₂ = (Z (C ∘ d)) ∘ d,  out = κ(L, Q)ᵀ C₂
// κ(L, L) is κ(L, X)'s columns at the landmarks' own rows, so one product serves all three kernels.
// Backward, for G = dL/d out: the same chain reversed, dE = dκ ∘ κ (where E was clamped, at a row and
// itself, E's gradient is 0 anyway), dL = dE X − rowsum(dE) ∘ L, dX = dEᵀ L − colsum(dE) ∘ X, and
// dL scattered back into dX at the landmarks' rows.
#include "fused.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "attnlab/precision.hpp"
#include "attnlab/step_ops.hpp"

namespace attnlab::skyformer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the forward keeps, in this order, followed by the pseudo-inverse's tape.
enum Kept : std::size_t { kRows, kMarks, kKernel, kValues, kD, kA, kZ, kContext, kWeighted, kY, kContext2, kKept };

struct FusedFunction : public torch::autograd::Function<FusedFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& valid, const at::Tensor& index, const at::Tensor& marks_valid, double gamma,
                            std::int64_t iterations, std::int64_t scope) {
    const auto b = q.size(0), h = q.size(1), n = q.size(2), p = q.size(3), m = index.size(1);
    const auto padded = valid.logical_not().view({b, 1, n, 1});
    auto rows = at::cat({q, k}, 2);
    rows.mul_(constant(std::pow(static_cast<double>(p), -0.25), rows)).masked_fill_(at::cat({padded, padded}, 2), 0.0);
    const auto values = at::where(padded, constant(0.0, v), v);
    const auto marks = rows.gather(2, index.view({b, 1, m, 1}).expand({b, h, m, p}));

    const auto sq = (rows * rows).sum(-1, /*keepdim=*/true);  // ‖X‖² [B, H, 2N, 1]
    auto kernel = batched_matmul(marks, rows, /*transpose_b=*/true);
    kernel.add_(sq.gather(2, index.view({b, 1, m, 1}).expand({b, h, m, 1})), -0.5).add_(sq.transpose(-2, -1), -0.5);
    const auto unreal = marks_valid.logical_not().view({b, 1, m, 1});
    kernel.masked_fill_(unreal, -std::numeric_limits<double>::infinity()).clamp_max_(0.0).exp_();

    // M: γ on the diagonal of the real landmarks, the row and column of I for the others
    auto block = kernel.gather(3, index.view({b, 1, 1, m}).expand({b, h, m, m})).masked_fill_(unreal.view({b, 1, 1, m}), 0.0);
    const auto ridge = at::where(marks_valid, constant(gamma, block), constant(1.0, block));  // [B, m]
    block.diagonal(0, -2, -1).add_(ridge.unsqueeze(1));
    const auto d = block.sum(-1, /*keepdim=*/true).rsqrt_();
    const auto a = block.mul_(d).mul_(d.transpose(-2, -1));  // M is not needed again: A in its place

    linalg::PinvTape tape;
    const auto z = tape.forward(a, static_cast<int>(iterations), static_cast<linalg::NormScope>(scope), /*keep=*/true);
    const auto context = batched_matmul(kernel.narrow(3, n, n), values);
    const auto weighted = context * d;
    const auto y = batched_matmul(z, weighted);
    const auto context2 = y * d;
    auto out = batched_matmul(kernel.narrow(3, 0, n).transpose(-2, -1), context2);

    std::vector<at::Tensor> kept = {rows, marks, kernel, values, d, a, z, context, weighted, y, context2};
    kept.insert(kept.end(), tape.tensors().begin(), tape.tensors().end());
    ctx->save_for_backward(kept);
    ctx->saved_data["valid"] = valid;
    ctx->saved_data["index"] = index;
    ctx->saved_data["marks_valid"] = marks_valid;
    ctx->saved_data["scope"] = scope;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    NoAutocast one_type;  // the kept tensors' type throughout, wherever the backward runs
    const auto kept = ctx->get_saved_variables();
    const auto &rows = kept[kRows], &marks = kept[kMarks], &kernel = kept[kKernel], &values = kept[kValues], &d = kept[kD];
    const auto &a = kept[kA], &z = kept[kZ], &context = kept[kContext], &weighted = kept[kWeighted], &y = kept[kY];
    const auto& context2 = kept[kContext2];
    const linalg::PinvTape tape(std::vector<at::Tensor>(kept.begin() + kKept, kept.end()),
                                static_cast<linalg::NormScope>(ctx->saved_data["scope"].toInt()));
    const auto valid = ctx->saved_data["valid"].toTensor(), index = ctx->saved_data["index"].toTensor();
    const auto marks_valid = ctx->saved_data["marks_valid"].toTensor();
    const auto b = rows.size(0), h = rows.size(1), n = values.size(2), p = rows.size(3), m = index.size(1);
    const auto& g = grads[0];

    // out = κ(L, Q)ᵀ C₂, C₂ = Y ∘ d, Y = Z W, W = C ∘ d, C = κ(L, K) V
    const auto grad_context2 = batched_matmul(kernel.narrow(3, 0, n), g);
    const auto grad_y = grad_context2 * d;
    auto grad_d = (grad_context2 * y).sum(-1, /*keepdim=*/true);
    const auto grad_z = batched_matmul(grad_y, weighted, /*transpose_b=*/true);
    const auto grad_weighted = batched_matmul(z.transpose(-2, -1), grad_y);
    const auto grad_context = grad_weighted * d;
    grad_d.add_((grad_weighted * context).sum(-1, /*keepdim=*/true));
    auto grad_values = batched_matmul(kernel.narrow(3, n, n).transpose(-2, -1), grad_context);

    // A = M ∘ d dᵀ, d = rowsum(M)^-½: dM = dA ∘ d dᵀ − ½ d³ ∘ dd, dd_i += (rowsum + colsum of dA ∘ A)_i / d_i
    auto grad_a = tape.backward(grad_z, /*symmetric=*/true);
    const auto grad_aa = grad_a * a;
    grad_d.add_((grad_aa.sum(-1, /*keepdim=*/true) + grad_aa.sum(-2).unsqueeze(-1)).div_(d));
    auto grad_block = grad_a.mul_(d).mul_(d.transpose(-2, -1)).add_(grad_d.mul_(d).mul_(d).mul_(d), -0.5);
    grad_block.masked_fill_(marks_valid.logical_not().view({b, 1, 1, m}), 0.0);  // those entries were constants

    // κ(L, X): its Q columns from the output, its K columns from C, its landmark columns from M
    auto grad_kernel = at::cat({batched_matmul(context2, g, /*transpose_b=*/true), batched_matmul(grad_context, values, /*transpose_b=*/true)}, 3);
    grad_kernel.scatter_add_(3, index.view({b, 1, 1, m}).expand({b, h, m, m}), grad_block);
    const auto grad_e = grad_kernel.mul_(kernel);
    const auto grad_marks = batched_matmul(grad_e, rows).sub_(grad_e.sum(-1, /*keepdim=*/true) * marks);
    auto grad_rows = batched_matmul(grad_e.transpose(-2, -1), marks).sub_(grad_e.sum(-2, /*keepdim=*/true).transpose(-2, -1) * rows);
    grad_rows.scatter_add_(2, index.view({b, 1, m, 1}).expand({b, h, m, p}), grad_marks);

    const auto padded = valid.logical_not().view({b, 1, n, 1});
    grad_rows.mul_(constant(std::pow(static_cast<double>(p), -0.25), grad_rows)).masked_fill_(at::cat({padded, padded}, 2), 0.0);
    return {grad_rows.narrow(2, 0, n), grad_rows.narrow(2, n, n), grad_values.masked_fill_(padded, 0.0),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& valid,
                           const Landmarks& landmarks, double gamma, int iterations, linalg::NormScope scope) {
  return FusedFunction::apply(q, k, v, valid, landmarks.index, landmarks.valid, gamma, static_cast<std::int64_t>(iterations),
                              static_cast<std::int64_t>(scope));
}

}  // namespace attnlab::skyformer
