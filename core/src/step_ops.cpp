#include "attnlab/step_ops.hpp"

#include <torch/csrc/autograd/custom_function.h>

#include "attnlab/precision.hpp"

namespace attnlab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The product on [batch, ·, ·]: forward one bmm, backward two, views and casts inside the node.
struct BatchedMatmulFunction : public torch::autograd::Function<BatchedMatmulFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b, bool transpose_b) {
    const auto type = autocast_matmul_type(a);
    NoAutocast one_type;
    const auto a3 = as_type(a, type).flatten(0, -3), b3 = as_type(b, type).flatten(0, -3);
    ctx->save_for_backward({a3, b3});
    ctx->saved_data["transpose_b"] = transpose_b;
    auto sizes = a.sizes().vec();
    sizes.back() = transpose_b ? b.size(-2) : b.size(-1);
    // not a view: the caller may write into it in place (a view of a node's output may not be)
    return at::_unsafe_view(at::bmm(a3, transpose_b ? b3.transpose(1, 2) : b3), sizes);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    NoAutocast one_type;
    const auto saved = ctx->get_saved_variables();
    const auto &a3 = saved[0], &b3 = saved[1];
    const bool transpose_b = ctx->saved_data["transpose_b"].toBool();
    const auto leading = grads[0].sizes().slice(0, grads[0].dim() - 2);
    auto full = [&](const at::Tensor& t) {  // [batch, x, y] back to [..., x, y]
      auto sizes = leading.vec();
      sizes.insert(sizes.end(), {t.size(1), t.size(2)});
      return t.view(sizes);
    };
    const auto g = as_type(grads[0], a3.scalar_type()).reshape({a3.size(0), grads[0].size(-2), grads[0].size(-1)});
    at::Tensor grad_a, grad_b;
    if (ctx->needs_input_grad(0)) grad_a = full(at::bmm(g, transpose_b ? b3 : b3.transpose(1, 2)));
    if (ctx->needs_input_grad(1)) grad_b = full(transpose_b ? at::bmm(g.transpose(1, 2), a3) : at::bmm(a3.transpose(1, 2), g));
    return {grad_a, grad_b, at::Tensor()};
  }
};

}  // namespace

at::Tensor batched_matmul(const at::Tensor& a, const at::Tensor& b, bool transpose_b) {
  return BatchedMatmulFunction::apply(a, b, transpose_b);
}

}  // namespace attnlab
