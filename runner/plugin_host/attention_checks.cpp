// The attention checks of the conformance suite (conformance.hpp): each builds the method from its
// defaults and holds its outputs and gradients to what attention must satisfy.
#include "plugin_host/conformance.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "attnlab/attention.hpp"
#include "attnlab/precision.hpp"
#include "attnlab/torch_compat.hpp"
#include "plugin_host/check_support.hpp"
#include "plugin_host/scripted_method.hpp"
#include "plugin_host/attention_maker.hpp"

namespace attnlab {
namespace {

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

std::string sizes_text(const at::Tensor& t) {
  std::string s = "[";
  for (auto d : t.sizes()) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
  return s + "]";
}

struct Inputs {
  at::Tensor q, k, v, valid;
};

// B = 2 sequences of n positions; the second has `real` real tokens, the rest padding. Drawn on
// the CPU from `seed` (the same numbers whatever the device), then moved.
Inputs make_inputs(std::int64_t n, std::int64_t real, std::int64_t heads, std::int64_t dim, at::ScalarType dtype,
                   std::uint64_t seed, const c10::Device& device) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto opts = at::TensorOptions().dtype(dtype);
  Inputs in;
  in.q = (at::randn({2, heads, n, dim}, g, opts) * 0.5).to(device);
  in.k = (at::randn({2, heads, n, dim}, g, opts) * 0.5).to(device);
  in.v = at::randn({2, heads, n, dim}, g, opts).to(device);
  auto valid = at::ones({2, n}, at::kBool);
  valid[1].slice(0, real, n).fill_(false);
  in.valid = valid.to(device);
  return in;
}

// Relative error allowed under autocast against fp32 (the "reduced precision" check): bf16 keeps 8
// significant bits (unit roundoff 2⁻⁸ ≈ 0.004); a few roundings in a row stay well within it.
constexpr double kReducedPrecisionTolerance = 0.02;

// The seed the default generators are set to before each forward of the checks after the first:
// draws a method makes in forward itself are then the same in every call.
constexpr std::uint64_t kHeldDrawSeed = 17;

class AttentionChecks {
 public:
  AttentionChecks(const LoadedPlugin& plugin, const c10::Device& device, const CheckShape& shape)
      : plugin_(plugin), device_(device), shape_(shape) {}

  CheckResult run(const std::string& check) {
    result_ = {check, true, "", ""};
    if (check == "draws in forward") draws_in_forward();
    else if (check == "parameters") parameters();
    else if (check == "shape and dtype") shape_and_dtype();
    else if (check == "padding invariance") padding_invariance();
    else if (check == "gradients") gradients();
    else if (check == "seeded determinism") seeded_determinism();
    else if (check == "large inputs") large_inputs();
    else if (check == "batch independence") batch_independence();
    else if (check == "reduced precision") reduced_precision();
    else throw std::invalid_argument("no conformance check named '" + check + "'");
    return result_;
  }

 private:
  void fail(const std::string& what) {
    if (result_.passed) result_.failure = what;  // the first failure says where
    result_.passed = false;
  }

  // The check's own heads, head size and length, or the ones `check` was given (CheckShape): every
  // check runs at a given length, since what a method does can change with it (the share of queries
  // it selects, a block plan, a draw's size; at its own 24 tokens Informer selects every query).
  std::int64_t heads(std::int64_t own) const { return shape_.heads > 0 ? shape_.heads : own; }
  std::int64_t dim(std::int64_t own) const { return shape_.head_dim > 0 ? shape_.head_dim : own; }
  std::int64_t length(std::int64_t own) const { return shape_.length > 0 ? shape_.length : own; }
  // `own_real` real tokens of `own`, in proportion at another length
  static std::int64_t real_of(std::int64_t n, std::int64_t own_real, std::int64_t own) {
    return std::clamp<std::int64_t>(n * own_real / own, 1, n);
  }
  // The method is built for the given length (its E, segments or block plan sized for it).
  AttentionShape built(std::int64_t heads, std::int64_t dim, std::int64_t n) const {
    return {heads, dim, shape_.length > 0 ? shape_.length : n};
  }

  std::shared_ptr<AttentionMethod> make(const AttentionShape& shape, const ParamValues& params) const {
    at::manual_seed(0);  // methods with weights of their own (Nyströmformer's conv) start alike
    auto m = attention_maker(plugin_, params)(shape);
    m->to(device_);
    m->eval();  // no dropout: the checks compare exact outputs
    return m;
  }
  std::shared_ptr<AttentionMethod> make(const AttentionShape& shape) const { return make(shape, plugin_.defaults()); }

  // Forward with the method's randomness drawn from a generator seeded with `seed`, so that two
  // calls with the same seed see the same landmarks or features, and with anything it draws in
  // forward itself held fixed (the default generators re-seeded).
  static at::Tensor forward(AttentionMethod& m, const Inputs& in, std::uint64_t seed = 5) {
    at::manual_seed(kHeldDrawSeed);
    return forward_as_it_draws(m, in, seed);
  }
  static at::Tensor forward_as_it_draws(AttentionMethod& m, const Inputs& in, std::uint64_t seed) {
    auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
    if (m.stochastic()) m.redraw(g);
    return m.forward(in.q, in.k, in.v, in.valid);
  }

  // Whether the method draws in forward itself: two forwards, the default generators seeded apart.
  static bool draws_itself(AttentionMethod& m, const Inputs& in) {
    const auto held = forward(m, in);
    at::manual_seed(kHeldDrawSeed + 1);
    return !at::equal(held, forward_as_it_draws(m, in, 5));
  }

  // Two forwards on one input and one redraw seed, the default generators left as they go: a
  // method that draws in forward itself gives two outputs (and every other check would misread it).
  void draws_in_forward() {
    const std::int64_t n = length(24), real = real_of(n, 17, 24);
    const auto in = make_inputs(n, real, heads(2), dim(8), at::kDouble, 1, device_);
    auto m = make(built(heads(2), dim(8), n));
    c10::InferenceMode guard;
    auto real_rows = [&](const at::Tensor& t) { return at::cat({t[0], t[1].slice(1, 0, real)}, 1); };
    const auto a = real_rows(forward_as_it_draws(*m, in, 5)), b = real_rows(forward_as_it_draws(*m, in, 5));
    if (!at::equal(a, b))
      fail(plugin_.path + ": forward draws random numbers itself (two calls differ by " + figure(max_diff(a, b)) +
           "): move the draws into redraw() (plugins/README.md); the checks below hold the draw fixed");
    result_.figure = at::equal(a, b) ? "two calls on one input and seed agree" : "";
  }

  // Every default parses and lies within its bounds and choices; the method builds from them.
  void parameters() {
    try {
      check_defaults(*plugin_.info);
    } catch (const std::exception& e) {
      fail(e.what());
    }
    make(built(heads(2), dim(8), length(24)));
    result_.figure = std::to_string(plugin_.info->param_count) + " parameter(s), defaults within their bounds";
  }

  void shape_and_dtype() {
    const std::int64_t n = length(24), real = real_of(n, 17, 24);
    for (auto dtype : {at::kFloat, at::kDouble}) {
      const auto in = make_inputs(n, real, heads(2), dim(8), dtype, 1, device_);
      auto m = make(built(heads(2), dim(8), n));
      c10::InferenceMode guard;
      const auto out = forward(*m, in);
      const std::string type = dtype == at::kFloat ? "float" : "double";
      if (out.sizes() != in.q.sizes()) fail(type + ": output " + sizes_text(out) + " for q " + sizes_text(in.q));
      else if (out.scalar_type() != dtype) fail(type + " in, " + c10::toString(out.scalar_type()) + " out");
      else if (!out[0].isfinite().all().item<bool>() || !out[1].slice(1, 0, real).isfinite().all().item<bool>())
        fail(type + ": a real token's output is not finite");
    }
    result_.figure = "[2, " + std::to_string(heads(2)) + ", " + std::to_string(n) + ", " + std::to_string(dim(8)) +
                     "] in float and double";
  }

  void padding_invariance() {
    const std::int64_t n = length(24), real = real_of(n, 13, 24);
    const auto in = make_inputs(n, real, heads(2), dim(8), at::kDouble, 2, device_);
    auto m = make(built(heads(2), dim(8), n));
    c10::InferenceMode guard;
    const auto base = forward(*m, in)[1].slice(1, 0, real);
    // whatever sits at padded positions (queries, keys and values) must not matter
    Inputs garbage{in.q.clone(), in.k.clone(), in.v.clone(), in.valid};
    for (auto* t : {&garbage.q, &garbage.k, &garbage.v}) (*t)[1].slice(1, real, n).normal_().mul_(50);
    const auto with_garbage = forward(*m, garbage)[1].slice(1, 0, real);
    // and a padded sequence gives what it gives alone (the same model: max_len is the task's); a
    // method that takes one length only sees it alone with its padding
    const std::int64_t kept = shape_.fixed_length ? n : real;
    Inputs alone{in.q[1].slice(1, 0, kept).unsqueeze(0), in.k[1].slice(1, 0, kept).unsqueeze(0),
                 in.v[1].slice(1, 0, kept).unsqueeze(0), in.valid[1].slice(0, 0, kept).unsqueeze(0)};
    const auto by_itself = forward(*make(built(heads(2), dim(8), n)), alone)[0].slice(1, 0, real);
    const double garbage_change = max_diff(with_garbage, base), alone_change = max_diff(by_itself, base);
    // 1e-7 relative, 1e-8 absolute: the BLAS may not sum in one order from one call to the next
    // (MKL picks its threads by the machine's load: Sparse Transformer's outputs moved by 1.77e-9
    // in 7 of 300 runs three at a time on 2 cores), while garbage that leaks in moves them by
    // far more (it is 50 times the inputs' size)
    if (!at::allclose(with_garbage, base, 1e-7, 1e-8))
      fail("garbage at the padded positions changed real tokens' outputs by up to " + figure(garbage_change));
    // a method of one length sees the sequence alone with its padding too: what differs then is its
    // batch, not its padding
    if (!at::allclose(by_itself, base, 1e-7, 1e-9))
      fail(shape_.fixed_length
               ? "the sequence differs alone in its batch (its padding the same) by up to " + figure(alone_change) +
                     ": the method couples the sequences of a batch (a max, a mean or a norm over the batch?), "
                     "not its padding; batch independence measures it"
           : draws_itself(*m, in)
               ? "the padded sequence differs from the same sequence alone by up to " + figure(alone_change) +
                     ": the method draws in forward, and a draw whose size follows the length is another draw "
                     "at another length (a draw, not padding): draw it in redraw() for the model's max_len and "
                     "take the first n"
               : "the padded sequence differs from the same sequence alone by up to " + figure(alone_change));
    result_.figure = "max change " + figure(garbage_change) + " (garbage at padding), " + figure(alone_change) +
                     " (sequence alone)";
  }

  // d loss / d q, k, v against central differences, in double (every third coordinate; at a
  // larger shape, about 200 of them per tensor, 24 past 64 tokens).
  void gradients() {
    const std::int64_t n = length(6), d = dim(4), h = heads(1), real = real_of(n, 4, 6);
    const auto in = make_inputs(n, real, h, d, at::kDouble, 3, device_);
    auto m = make(built(h, d, n));
    auto g = at::make_generator<at::CPUGeneratorImpl>(7);
    auto weights = at::randn({2, h, n, d}, g, at::kDouble);
    weights[1].slice(1, real, n).zero_();  // padded query rows are unspecified: leave them out of the loss
    weights = weights.to(device_);
    auto loss_of = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      return (forward(*m, {q, k, v, in.valid}) * weights).sum();
    };
    auto q = in.q.clone().requires_grad_(true), k = in.k.clone().requires_grad_(true), v = in.v.clone().requires_grad_(true);
    loss_of(q, k, v).backward();
    const double eps = 1e-6;
    double worst = 0;
    const std::pair<const char*, at::Tensor> analytic[] = {{"q", q.grad()}, {"k", k.grad()}, {"v", v.grad()}};
    c10::InferenceMode guard;
    for (int which = 0; which < 3; ++which) {
      const auto& [name, grad] = analytic[which];
      if (!grad.defined() || grad.abs().sum().item<double>() == 0) {
        fail(std::string("no gradient reaches ") + name + " (a detached path?)");
        continue;
      }
      const at::Tensor& point = which == 0 ? in.q : which == 1 ? in.k : in.v;
      // about 200 coordinates a tensor, 24 past 64 tokens (each is two forwards at the full length)
      const std::int64_t coordinates = n > 64 ? 24 : 200;
      const std::int64_t stride = std::max<std::int64_t>(3, point.numel() / coordinates);
      for (std::int64_t i = 0; i < point.numel(); i += stride) {
        at::Tensor moved[2] = {point.clone(), point.clone()};
        moved[0].view(-1)[i] += eps;
        moved[1].view(-1)[i] -= eps;
        double loss[2];
        for (int s = 0; s < 2; ++s)
          loss[s] = (which == 0   ? loss_of(moved[s], in.k, in.v)
                     : which == 1 ? loss_of(in.q, moved[s], in.v)
                                  : loss_of(in.q, in.k, moved[s]))
                        .item<double>();
        const double numeric = (loss[0] - loss[1]) / (2 * eps), got = grad.view(-1)[i].item<double>();
        const double error = std::abs(got - numeric) / std::max(1.0, std::abs(numeric));
        worst = std::max(worst, error);
        if (error > 1e-5)
          fail(std::string("d loss / d ") + name + "[" + std::to_string(i) + "]: " + figure(got) +
               " by backward, " + figure(numeric) + " by finite differences");
      }
    }
    result_.figure = "max relative error " + figure(worst) + " (q, k, v in double)";
  }

  void seeded_determinism() {
    const std::int64_t n = length(40);
    const auto in = make_inputs(n, n, heads(2), dim(8), at::kDouble, 4, device_);
    ParamValues params = plugin_.defaults();
    // fewer landmarks/features than tokens, so that the draw matters
    for (const char* name : {"landmarks", "features"})
      if (params.has(name)) params.set(name, std::int64_t{8});
    auto m = make(built(heads(2), dim(8), n), params);
    c10::InferenceMode guard;
    const auto a = forward(*m, in, 11), b = forward(*m, in, 11);
    if (!at::equal(a, b)) fail("the same seed gave outputs " + figure(max_diff(a, b)) + " apart");
    if (!m->stochastic()) {
      result_.figure = "same seed, same output (not stochastic)";
      return;
    }
    const double change = max_diff(a, forward(*m, in, 12));
    if (at::allclose(a, forward(*m, in, 12))) fail("stochastic, but a new seed drew nothing new (redraw ignores its generator?)");
    result_.figure = "same seed, same output; a new seed changes it by up to " + figure(change);
  }

  // Large scores are where exponentials overflow: q and k entries of magnitude ~30 in float.
  void large_inputs() {
    const std::int64_t n = length(24), real = real_of(n, 17, 24);
    auto in = make_inputs(n, real, heads(2), dim(8), at::kFloat, 6, device_);
    in.q = (in.q * 60).requires_grad_(true);  // make_inputs draws N(0, 0.5²): entries ~30
    in.k = (in.k * 60).requires_grad_(true);
    in.v = in.v.clone().requires_grad_(true);
    auto m = make(built(heads(2), dim(8), n));
    const auto out = forward(*m, in);
    const auto real_out = at::cat({out[0], out[1].slice(1, 0, real)}, 1);
    if (!real_out.isfinite().all().item<bool>()) fail("outputs not finite at |q|, |k| ~ 30 (float)");
    (out[0].sum() + out[1].slice(1, 0, real).sum()).backward();
    for (const auto& [name, t] : {std::pair<const char*, at::Tensor>{"q", in.q}, {"k", in.k}, {"v", in.v}})
      if (t.grad().defined() && !t.grad().isfinite().all().item<bool>())  // none at all: "gradients" says so
        fail(std::string("the gradient for ") + name + " is not finite at |q|, |k| ~ 30 (float)");
    result_.figure = "finite outputs and gradients, max |q|, |k| " + figure(std::max(in.q.abs().max().item<double>(),
                                                                                    in.k.abs().max().item<double>()));
  }

  // A sequence's output must not depend on the other sequences of its batch.
  void batch_independence() {
    const std::int64_t n = length(24);
    const auto in = make_inputs(n, n, heads(2), dim(8), at::kDouble, 8, device_);
    const auto other = make_inputs(n, n, heads(2), dim(8), at::kDouble, 9, device_);
    Inputs swapped{in.q.clone(), in.k.clone(), in.v.clone(), in.valid};
    swapped.q[1].copy_(other.q[1]);
    swapped.k[1].copy_(other.k[1]);
    swapped.v[1].copy_(other.v[1]);
    auto m = make(built(heads(2), dim(8), n));
    c10::InferenceMode guard;
    const auto a = forward(*m, in)[0], b = forward(*m, swapped)[0];
    const double change = max_diff(a, b);
    if (!at::allclose(a, b, 1e-9, 1e-10))
      fail("changing the other sequence of the batch changed this one's output by up to " + figure(change));
    result_.figure = "max change " + figure(change) + " when the other sequence changes";
  }

  // Under autocast (bf16; fp16 too where the build can: CUDA, or LibTorch 2's CPU), fed the bf16/fp16
  // q, k, v a model's projections hand it there, the method must stay close to its fp32 output on
  // the same rounded inputs and draw: relative error ‖out − out₃₂‖ / ‖out₃₂‖ over real tokens within
  // kReducedPrecisionTolerance, outputs finite, gradients finite (for fp16, at a loss scale a run's
  // loss scaling reaches). What reduced precision ruins (an iterative pseudo-inverse, a squared
  // distance by expansion, a large exponential) belongs in a FullPrecision scope.
  void reduced_precision() {
    const std::int64_t n = length(64), real = real_of(n, 45, 64), d = dim(16), h = heads(2);
    auto g = at::make_generator<at::CPUGeneratorImpl>(13);
    auto weights = at::randn({2, h, n, d}, g, at::kFloat);
    weights[1].slice(1, real, n).zero_();  // padded query rows are unspecified
    weights = weights.to(device_);
    auto m = make(built(h, d, n));
    std::vector<Precision> precisions = {Precision::bf16};
    if (autocast_supported(device_, Precision::fp16)) precisions.push_back(Precision::fp16);  // not 1.13's CPU
    for (const Precision precision : precisions) {
      const auto type = reduced_type(precision);
      const auto drawn = make_inputs(n, real, h, d, at::kFloat, 10, device_);
      // q, k entries of standard deviation 2 (scores q·kᵀ/√d of standard deviation 4), v of 1
      const Inputs in{(drawn.q * 4).to(type), (drawn.k * 4).to(type), drawn.v.to(type), drawn.valid};
      const auto reference = forward(*m, {in.q.to(at::kFloat), in.k.to(at::kFloat), in.v.to(at::kFloat), in.valid});
      Inputs low{in.q.clone().requires_grad_(true), in.k.clone().requires_grad_(true), in.v.clone().requires_grad_(true), in.valid};
      at::Tensor out;
      {
        AutocastScope autocast(device_, precision);
        out = forward(*m, low);
      }
      const std::string name = to_string(precision);
      auto real_rows = [&](const at::Tensor& t) { return at::cat({t[0], t[1].slice(1, 0, real)}, 1).to(at::kFloat); };
      const auto got = real_rows(out.detach()), want = real_rows(reference.detach());
      if (!got.isfinite().all().item<bool>()) {
        fail(name + ": a real token's output is not finite");
        continue;
      }
      const double error = ((got - want).norm() / want.norm()).item<double>();
      // what addresses it without touching the method: its attention in fp32 under autocast, the
      // rest of the model in reduced precision (how Skyformer's, Nystromformer's, Performer's and
      // Informer's authors ran them)
      if (!(error <= kReducedPrecisionTolerance))
        fail(name + ": relative error " + figure(error) + " against fp32, above " + figure(kReducedPrecisionTolerance) +
             "; to train it in " + name + " anyway, keep its attention in fp32: [model] attention_precision = \"fp32\"");
      std::string not_finite;
      const int halvings = finite_gradient_halvings(out, weights, low, precision == Precision::fp16 ? 24 : 0, not_finite);
      if (halvings < 0) fail(name + ": the gradient for " + not_finite + " is not finite");
      result_.figure += (result_.figure.empty() ? "" : ", ") + name + " relative error " + figure(error);
      if (halvings > 0) result_.figure += " (gradients finite at loss scale 2^-" + std::to_string(halvings) + ")";
    }
    result_.figure += " (tolerance " + figure(kReducedPrecisionTolerance) + ")";
  }

  // Backward of s · Σ out ∘ weights for s = 1, then s = 2⁻¹, ..., 2^-max_halvings: how many
  // halvings the gradients of q, k and v need to be finite, or -1 naming in `not_finite` one that
  // never is. fp16 gets 24: its range is small, and a run's dynamic loss scaling halves its scale
  // likewise until the gradients fit, below 1 where it must (RKS features, whose normaliser can
  // come near 0, have gradients past 65504 at scale 1). A NaN made inside the method stays NaN.
  static int finite_gradient_halvings(const at::Tensor& out, const at::Tensor& weights, const Inputs& in, int max_halvings,
                                      std::string& not_finite) {
    const auto loss = (out.to(at::kFloat) * weights).sum();
    const std::pair<const char*, at::Tensor> inputs[] = {{"q", in.q}, {"k", in.k}, {"v", in.v}};
    for (int halvings = 0; halvings <= max_halvings; ++halvings) {
      for (const auto& [name, t] : inputs) t.mutable_grad() = at::Tensor();
      (loss * std::ldexp(1.0, -halvings)).backward({}, /*retain_graph=*/halvings < max_halvings);
      not_finite.clear();
      for (const auto& [name, t] : inputs)
        if (not_finite.empty() && t.grad().defined() && !t.grad().isfinite().all().item<bool>()) not_finite = name;
      if (not_finite.empty()) return halvings;
    }
    return -1;
  }

  const LoadedPlugin& plugin_;
  c10::Device device_;
  CheckShape shape_;
  CheckResult result_;
};

}  // namespace

const std::vector<std::string>& attention_check_names() {
  static const std::vector<std::string> names = {"draws in forward",   "parameters",         "shape and dtype",
                                                 "padding invariance", "gradients",          "seeded determinism",
                                                 "large inputs",       "batch independence", "reduced precision"};
  return names;
}

CheckResult check_attention(const LoadedPlugin& plugin, const std::string& check, const c10::Device& device,
                            const CheckShape& shape) {
  try {
    return AttentionChecks(plugin, device, shape).run(check);
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    return {check, false, "", "threw: " + error_line(e)};
  }
}

}  // namespace attnlab
