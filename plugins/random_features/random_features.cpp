#include "random_features.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/init.h>

#include "attnlab/precision.hpp"
#include "attnlab/step_ops.hpp"

namespace attnlab::rf {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The linear attention as one autograd node, its backward written out: with W = φ_K ∘ mask,
// S = Wᵀ V, z = Σ_j W_j, n = φ_Q S, d = φ_Q z + ε and out = n / d, for G = dL/d out:
//   dn = G / d, dd = −rowsum(G ∘ out) / d, dφ_Q = dn Sᵀ + dd zᵀ, dS = φ_Qᵀ dn, dz = Σ_i dd_i φ_Q,i,
//   dW = V dSᵀ + dz, dφ_K = dW ∘ mask, dV = W dS.
struct LinearAttentionFunction : public torch::autograd::Function<LinearAttentionFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& phi_q, const at::Tensor& phi_k, const at::Tensor& v,
                            const at::Tensor& key_valid, double eps) {
    const auto mask = key_valid.to(phi_k.scalar_type()).view({key_valid.size(0), 1, key_valid.size(1), 1});
    const auto phi_k_real = phi_k * mask;
    const auto kv = batched_matmul(phi_k_real.transpose(-2, -1), v);             // [B, H, F, Dv]
    const auto k_sum = phi_k_real.sum(-2, /*keepdim=*/true);           // [B, H, 1, F]
    const auto denominator = (phi_q * k_sum).sum(-1, /*keepdim=*/true).add_(constant(eps, phi_q));
    auto out = batched_matmul(phi_q, kv).div_(denominator);
    ctx->save_for_backward({phi_q, phi_k_real, v, mask, kv, k_sum, denominator, out});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    NoAutocast one_type;
    const auto saved = ctx->get_saved_variables();
    const auto &phi_q = saved[0], &phi_k_real = saved[1], &v = saved[2], &mask = saved[3], &kv = saved[4];
    const auto &k_sum = saved[5], &denominator = saved[6], &out = saved[7];
    const auto grad_num = grads[0] / denominator;
    const auto grad_den = (grad_num * out).sum(-1, /*keepdim=*/true).neg_();
    const auto grad_q = batched_matmul(grad_num, kv, /*transpose_b=*/true).add_(grad_den * k_sum);
    const auto grad_kv = batched_matmul(phi_q.transpose(-2, -1), grad_num);
    const auto grad_k_sum = (phi_q * grad_den).sum(-2, /*keepdim=*/true);
    const auto grad_k = batched_matmul(v, grad_kv, /*transpose_b=*/true).add_(grad_k_sum).mul_(mask);
    return {grad_q, grad_k, batched_matmul(phi_k_real, grad_kv), at::Tensor(), at::Tensor()};
  }
};

// Positive random features with the stabilising offset (stable_prf_features) as one autograd node,
// for queries and for keys. e = u − ½ s; queries: offset_i = max_m e_im; keys: offset = max over the
// real rows' entries (0 for a sequence without one), padded rows' exponents 0. φ = exp(e − offset −
// ½ ln M). Backward as autograd's through the maximum: G = dφ ∘ φ, the offset's −ΣG to the entry
// max chose, de = G + that, du = de, ds = −½ rowsum(de).
at::Tensor log_scale(const at::Tensor& u) { return constant(-0.5 * std::log(static_cast<double>(u.size(-1))), u); }

variable_list prf_gradients(at::Tensor de) {
  auto grad_sq = de.sum(-1, /*keepdim=*/true).mul_(constant(-0.5, de));
  return {std::move(de), std::move(grad_sq), at::Tensor()};
}

struct PrfQueriesFunction : public torch::autograd::Function<PrfQueriesFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& u, const at::Tensor& x_sq) {
    auto e = u.sub(x_sq, 0.5);
    const auto [offset, column] = e.max(-1, /*keepdim=*/true);
    auto phi = e.sub_(offset).add_(log_scale(u)).exp_();
    ctx->save_for_backward({phi, column});
    return phi;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    NoAutocast one_type;
    const auto saved = ctx->get_saved_variables();
    auto g = grads[0] * saved[0];
    g.scatter_add_(-1, saved[1], g.sum(-1, /*keepdim=*/true).neg_());  // each row's maximum
    return prf_gradients(std::move(g));
  }
};

struct PrfKeysFunction : public torch::autograd::Function<PrfKeysFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& u, const at::Tensor& x_sq, const at::Tensor& key_valid) {
    auto e = u.sub(x_sq, 0.5);
    const auto real = key_valid.view({key_valid.size(0), 1, key_valid.size(1), 1});
    const auto [row_max, column] = at::where(real, e, constant(-std::numeric_limits<double>::infinity(), e)).max(-1, true);
    auto [offset, row] = row_max.max(-2, /*keepdim=*/true);  // [B, H, 1, 1]
    const auto finite = offset.isfinite();
    offset.masked_fill_(finite.logical_not(), 0.0);         // a sequence without a real key
    auto phi = at::where(real, e.sub_(offset), constant(0.0, e)).add_(log_scale(u)).exp_();
    ctx->save_for_backward({phi, column, real, row, finite});
    return phi;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    NoAutocast one_type;
    const auto saved = ctx->get_saved_variables();
    const auto &phi = saved[0], &column = saved[1], &real = saved[2], &row = saved[3], &finite = saved[4];
    auto g = (grads[0] * phi).masked_fill_(real.logical_not(), 0.0);
    // one maximum per (batch, head), at (row, column[row]): flat index row · M + column
    const auto grad_offset = g.sum({-2, -1}, /*keepdim=*/true).neg_().masked_fill_(finite.logical_not(), 0.0);
    const auto at = row.mul(constant(static_cast<double>(g.size(-1)), row)).add_(column.gather(-2, row));
    g.view({g.size(0), g.size(1), -1}).scatter_add_(-1, at.flatten(-2), grad_offset.flatten(-2));
    auto out = prf_gradients(std::move(g));
    out.push_back(at::Tensor());
    return out;
  }
};

}  // namespace

at::Tensor linear_attention(const at::Tensor& phi_q, const at::Tensor& phi_k, const at::Tensor& v,
                            const at::Tensor& key_valid, double eps) {
  return LinearAttentionFunction::apply(phi_q, phi_k, v, key_valid, eps);
}

at::Tensor rks_features(const at::Tensor& u) {
  return at::cat({at::cos(u), at::sin(u)}, -1).mul_(constant(1.0 / std::sqrt(static_cast<double>(u.size(-1))), u));
}

at::Tensor prf_features(const at::Tensor& u, const at::Tensor& x_sq_norm, const at::Tensor& offset) {
  const double log_scale = -0.5 * std::log(static_cast<double>(u.size(-1)));  // 1/√M inside the exponent
  return at::exp(u - 0.5 * x_sq_norm - offset + log_scale);
}

at::Tensor prf_offset(const at::Tensor& u, const at::Tensor& x_sq_norm, const at::Tensor& key_valid) {
  const auto e = u - 0.5 * x_sq_norm;
  if (!key_valid.defined()) return std::get<0>(e.max(-1, /*keepdim=*/true));
  const auto real = key_valid.unsqueeze(1).unsqueeze(-1);  // [B, 1, N, 1]
  const auto lowest = at::scalar_tensor(-std::numeric_limits<double>::infinity(), e.options());
  const auto row_max = std::get<0>(at::where(real, e, lowest).max(-1, /*keepdim=*/true));  // [B, H, N, 1]
  auto offset = std::get<0>(row_max.max(-2, /*keepdim=*/true));                             // [B, H, 1, 1]
  // a sequence without a real key: any finite value (its features are all masked out)
  return at::where(offset.isfinite(), offset, at::zeros_like(offset));
}

at::Tensor stable_prf_features(const at::Tensor& u, const at::Tensor& x_sq_norm, const at::Tensor& key_valid) {
  return key_valid.defined() ? PrfKeysFunction::apply(u, x_sq_norm, key_valid) : PrfQueriesFunction::apply(u, x_sq_norm);
}

double prf_norm_factor(const ParamValues& params) {
  return params.choice<double>("kernel", {{"softmax", 1.0}, {"gaussian", 2.0}});
}

at::Tensor scaled_rks_features(const at::Tensor& x, const at::Tensor& w) {
  return rks_features(at::matmul(x * constant(std::pow(static_cast<double>(x.size(-1)), -0.25), x), w));
}

at::Tensor scaled_prf_features(const at::Tensor& x_in, const at::Tensor& w, const at::Tensor& key_valid, double norm_factor) {
  auto x = x_in * constant(std::pow(static_cast<double>(x_in.size(-1)), -0.25), x_in);
  if (key_valid.defined()) x = zero_padded_keys(x, key_valid);
  const auto u = at::matmul(x, w);                                                   // [B, H, N, M]
  const auto sq = (x * x).sum(-1, /*keepdim=*/true).mul_(constant(norm_factor, x));  // [B, H, N, 1]
  return stable_prf_features(u, sq, key_valid);
}

at::Tensor zero_padded_keys(const at::Tensor& x, const at::Tensor& key_valid) {
  return at::where(key_valid.view({key_valid.size(0), 1, key_valid.size(1), 1}), x, constant(0.0, x));
}

namespace {

// log2(d) butterfly stages, each one reshape: pairs (a, b) at distance h become (a + b, a − b).
at::Tensor fwht_stages(const at::Tensor& x) {
  const std::int64_t d = x.size(-1);
  auto y = x.contiguous();
  for (std::int64_t h = 1; h < d; h *= 2) {
    auto pairs = y.reshape({-1, d / (2 * h), 2, h});
    const auto a = pairs.select(2, 0), b = pairs.select(2, 1);
    y = at::stack({a + b, a - b}, 2).reshape(y.sizes());
  }
  return y;
}

// Up to this size the transform is one product with the dense matrix: one op where the stages are
// some sixty (a step's time on a GPU is its ops' launches), for d² ≤ 65,536 multiply-adds a row.
constexpr std::int64_t kDenseUpTo = 256;

// The d × d Sylvester Hadamard matrix of `like`'s type and device, made once per (d, type, device)
// and kept for the process (never freed: a CUDA tensor must not outlive the driver at exit).
at::Tensor hadamard(std::int64_t d, const at::Tensor& like) {
  static std::mutex lock;
  static auto* made = new std::map<std::tuple<std::int64_t, int, std::string>, at::Tensor>();
  const std::tuple<std::int64_t, int, std::string> key{d, static_cast<int>(like.scalar_type()), like.device().str()};
  std::lock_guard<std::mutex> guard(lock);
  auto& h = (*made)[key];
  if (!h.defined()) {
    at::NoGradGuard no_grad;
    h = fwht_stages(at::eye(d, at::kDouble)).to(like.options().requires_grad(false));  // H = H I
  }
  return h;
}

at::Tensor transform(const at::Tensor& x) {
  const auto d = x.size(-1);
  return d <= kDenseUpTo ? at::matmul(x, hadamard(d, x)) : fwht_stages(x);  // H is symmetric: x H = (H x)ᵀ row by row
}

// H is symmetric, so the gradient of y = H x is H ∂y: the backward pass is one more transform,
// and autograd keeps none of the log2(d) stages' intermediates (at 4096 tokens they were most of
// a Fastfood layer's memory).
struct FwhtFunction : torch::autograd::Function<FwhtFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* /*ctx*/, const at::Tensor& x) {
    return transform(x);  // apply() runs it with grad mode off: nothing recorded
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* /*ctx*/,
                                                 torch::autograd::variable_list grad) {
    return {FwhtFunction::apply(grad[0])};  // differentiable again: the transform is linear
  }
};

}  // namespace

at::Tensor fwht(const at::Tensor& x) {
  const std::int64_t d = x.size(-1);
  if (d < 1 || (d & (d - 1)) != 0) throw std::invalid_argument("fwht: length " + std::to_string(d) + " is not a power of two");
  return FwhtFunction::apply(x);
}

FrequencyGenerator::FrequencyGenerator(std::int64_t noise_dim, std::int64_t hidden, std::int64_t layers,
                                       std::int64_t out_dim) {
  for (std::int64_t i = 0; i < layers; ++i) {
    auto fc = register_module("fc" + std::to_string(i), torch::nn::Linear(i == 0 ? noise_dim : hidden, hidden));
    torch::nn::init::xavier_uniform_(fc->weight);  // as the authors' generator layers
    fc_.push_back(fc);
    bn_.push_back(register_module("bn" + std::to_string(i), torch::nn::BatchNorm1d(hidden)));
  }
  out_ = register_module("out", torch::nn::Linear(hidden, out_dim));
  torch::nn::init::xavier_uniform_(out_->weight);
}

at::Tensor FrequencyGenerator::forward(at::Tensor h) {
  for (std::size_t i = 0; i < fc_.size(); ++i) h = at::leaky_relu(bn_[i]->forward(fc_[i]->forward(h)), 0.01);
  return at::tanh(out_->forward(h));
}

std::int64_t kl_feature_count(std::int64_t head_dim, std::int64_t max_len) {
  const double x = static_cast<double>(head_dim) * std::log(static_cast<double>(head_dim));
  const auto whole = static_cast<std::uint64_t>(x);
  if (whole < 2) return std::max<std::int64_t>(1, std::min<std::int64_t>(max_len, 2));
  const int top = 63 - __builtin_clzll(whole);          // 2^top <= whole < 2^(top + 1)
  const bool round_up = (whole >> (top - 1)) & 1;       // the bit below the leading one
  const std::int64_t m = std::int64_t{1} << (top + (round_up ? 1 : 0));
  return std::min(m, max_len);
}

std::int64_t resolve_feature_count(const ParamValues& params, const AttentionShape& shape, std::int64_t minimum) {
  const auto configured = params.integer("features");
  const auto m = configured > 0 ? configured : kl_feature_count(shape.head_dim, shape.max_len);
  return std::max(m, minimum);
}

RandomFeatureAttention::RandomFeatureAttention(const ParamValues& params)
    : redraw_every_(params.integer("redraw_every")),
      fresh_at_eval_(params.string("eval_draw") == "fresh"),
      eps_(params.real("eps")) {}

at::Tensor RandomFeatureAttention::forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           const at::Tensor& key_valid) {
  // In fp32 inside autocast: a feature's exponent or phase ωᵀx rounded to bf16 is off by ~0.4% of
  // its size (exp(ωᵀx) by as much, cos wholly at |ωᵀx| ~ 100), and RKS's normaliser Σⱼ k̂(q, kⱼ)
  // can cancel to near 0. Conformance's "reduced precision" check measured up to 3× fp32's output
  // (gmm_rks) without this.
  FullPrecision full;
  return linear_attention(features(full_precision(q), at::Tensor()), features(full_precision(k), key_valid),
                          full_precision(v), key_valid, eps_);
}

GenerativeAttention::GenerativeAttention(const AttentionShape& shape, const ParamValues& params)
    : RandomFeatureAttention(params),
      features_(resolve_feature_count(params, shape, 2)),
      noise_dim_(params.integer("noise_dim") > 0 ? params.integer("noise_dim") : shape.head_dim) {
  const auto hidden = params.integer("hidden") > 0 ? params.integer("hidden") : 4 * shape.head_dim;
  generator_ = register_module("generator",
                               std::make_shared<FrequencyGenerator>(noise_dim_, hidden, params.integer("layers"), shape.head_dim));
  noise_ = register_buffer("noise", at::zeros({features_, noise_dim_}, at::TensorOptions().dtype(at::kFloat)));
}

at::Tensor GenerativeAttention::forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& key_valid) {
  FullPrecision full;  // the frequencies too: they enter every feature's exponent or phase
  omega_ = as_type(generator_->forward(noise_), full_precision(q).scalar_type());  // [M, d]
  auto out = RandomFeatureAttention::forward(q, k, v, key_valid);
  omega_ = at::Tensor();
  return out;
}

void GenerativeAttention::draw(at::Generator& generator) {
  at::NoGradGuard no_grad;
  noise_.copy_(at::randn({features_, noise_dim_}, generator, at::TensorOptions().dtype(at::kFloat)));
}

MixtureAttention::MixtureAttention(const AttentionShape& shape, const ParamValues& params)
    : RandomFeatureAttention(params),
      heads_(shape.heads),
      dim_(shape.head_dim),
      components_(params.integer("components")),
      features_(resolve_feature_count(params, shape)) {
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  mu_ = register_parameter("mu", at::zeros({heads_, components_, dim_}, opts));
  noise_ = register_buffer("noise", at::zeros({heads_, components_, features_, dim_}, opts));
}

void MixtureAttention::draw(at::Generator& generator) {
  at::NoGradGuard no_grad;
  noise_.copy_(at::randn({heads_, components_, features_, dim_}, generator, at::TensorOptions().dtype(at::kFloat)));
}

at::Tensor MixtureAttention::as_columns(const at::Tensor& omega) const {
  return omega.reshape({heads_, components_ * features_, dim_}).transpose(-2, -1);
}

}  // namespace attnlab::rf
