// y = x Wᵀ + b on rows x [R, in] (model.hpp, linear_rows): torch::nn::Linear's product with its
// backward written as one node. LibTorch's is two (addmm's and the transpose's), 26 recorded ops a
// layer; this one's is 14: at the LRA model's sizes every op is a launch, whatever its size.
#include "attnlab/train/model.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "attnlab/precision.hpp"

namespace attnlab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor as_type(const at::Tensor& t, c10::ScalarType type) { return t.scalar_type() == type ? t : t.to(type); }

// Under autocast, as autocast runs addmm: x, W and b in its type, the gradients computed there
// (autograd hands each back in its input's type). The backward may run where autocast is off (CUDA
// runs it on a thread of its own), so nothing is left to autocast (precision.hpp, NoAutocast).
struct LinearFunction : public torch::autograd::Function<LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
    const auto type = autocast_matmul_type(x);
    NoAutocast one_type;
    const auto xt = as_type(x, type), wt = as_type(weight, type);
    ctx->save_for_backward({xt, wt});
    return at::addmm(as_type(bias, type), xt, wt.transpose(0, 1));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight = saved[1];
    const auto g = as_type(grads[0], x.scalar_type());
    return {ctx->needs_input_grad(0) ? g.mm(weight) : at::Tensor(), ctx->needs_input_grad(1) ? g.transpose(0, 1).mm(x) : at::Tensor(),
            ctx->needs_input_grad(2) ? g.sum(0) : at::Tensor()};
  }
};

}  // namespace

at::Tensor linear_rows(const at::Tensor& x, const torch::nn::Linear& layer) {
  // a layer without bias (attention_bias = false) as torch::nn::Linear computes it: a custom
  // Function takes no undefined input
  if (!layer->bias.defined()) return at::linear(x, layer->weight);
  return LinearFunction::apply(x, layer->weight, layer->bias);
}

}  // namespace attnlab
