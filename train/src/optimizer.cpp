#include "attnlab/train/optimizer.hpp"

#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_set>

#include <ATen/ATen.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/utils.h>

#include "attnlab/torch_compat.hpp"

namespace attnlab {

// The flat buffers: parameter i is params[offsets[i], offsets[i] + numel), and so are its gradient
// and moments. One step count for all, on the device only (a replayed CUDA graph counts there; a
// checkpoint reads it back).
struct FusedAdamW::Flat {
  at::Tensor params, grads, exp_avg, exp_avg_sq;  // [total]
  at::Tensor count, lr;                           // [] float
  at::Tensor beta1;                               // [] of the parameters' type, where beta1 varies
  std::vector<std::int64_t> offsets;

  at::Tensor slice(const at::Tensor& flat, const at::Tensor& parameter, std::size_t i) const {
    return flat.narrow(0, offsets[i], parameter.numel()).view(parameter.sizes());
  }
  bool holds(const at::Tensor& flat, const at::Tensor& t, std::size_t i) const {
    return t.defined() && t.data_ptr() == static_cast<char*>(flat.data_ptr()) + offsets[i] * flat.element_size();
  }
};

namespace {

// A parameter's key in torch::optim's state map: its TensorImpl's address, which 1.13 keeps as text.
template <typename State>
typename State::key_type state_key(const State&, const at::Tensor& parameter) {
  if constexpr (std::is_same_v<typename State::key_type, std::string>) {
    std::ostringstream text;  // as 1.13's c10::guts::to_string writes it
    text << parameter.unsafeGetTensorImpl();
    return text.str();
  } else {
    return parameter.unsafeGetTensorImpl();
  }
}

// One flat buffer holds parameters of one floating dtype on one device, with the fused update.
bool one_buffer(const std::vector<at::Tensor>& parameters) {
  if (!compat::fused_adamw_available() || parameters.empty()) return false;
  const auto& first = parameters.front();
  if (!at::isFloatingType(first.scalar_type())) return false;
  for (const auto& p : parameters)
    if (p.scalar_type() != first.scalar_type() || p.device() != first.device()) return false;
  return true;
}

}  // namespace

FusedAdamW::FusedAdamW(const std::vector<at::Tensor>& parameters, const torch::optim::AdamWOptions& options,
                       bool varying_beta1)
    : options_(options) {
  if (options.amsgrad()) throw std::invalid_argument("FusedAdamW: amsgrad is not supported");
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& p : parameters) {
    if (!p.requires_grad()) continue;
    // torch.optim warns of this; here it would be two updates a step of one weight
    if (!seen.insert(p.unsafeGetTensorImpl()).second)
      throw std::invalid_argument("FusedAdamW: a parameter is listed twice (a weight shared by layers: pass it once)");
    parameters_.push_back(p);
  }
  if (!one_buffer(parameters_)) {
    per_tensor_ = std::make_unique<torch::optim::AdamW>(parameters_, options_);
    return;
  }
  flat_ = std::make_unique<Flat>();
  std::int64_t total = 0;
  for (const auto& p : parameters_) {
    flat_->offsets.push_back(total);
    total += p.numel();
  }
  const auto on = parameters_.front().options().requires_grad(false);
  flat_->params = at::empty({total}, on);
  flat_->grads = at::zeros({total}, on);
  flat_->exp_avg = at::zeros({total}, on);
  flat_->exp_avg_sq = at::zeros({total}, on);
  flat_->count = at::zeros({}, on.dtype(at::kFloat));
  // the rate at least as exact as the parameters (a float rate moved float64 runs off PyTorch's by 1e-9 in 20 steps)
  flat_->lr = at::full({}, options.lr(), on.dtype(on.dtype() == at::kDouble ? at::kDouble : at::kFloat));
  if (varying_beta1) flat_->beta1 = at::full({}, std::get<0>(options.betas()), on);
  keep_in_place();
}

FusedAdamW::~FusedAdamW() = default;

// Each parameter a view of its slice, its gradient a view of its own: a parameter found elsewhere
// (its storage replaced, by Module::load say) is copied into its slice and made its view again.
void FusedAdamW::keep_in_place() {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    auto& p = parameters_[i];
    if (!flat_->holds(flat_->params, p, i)) {
      auto slice = flat_->slice(flat_->params, p, i);
      slice.copy_(p);
      p.set_data(slice);
    }
    if (!flat_->holds(flat_->grads, p.grad(), i)) p.mutable_grad() = flat_->slice(flat_->grads, p, i);
  }
}

void FusedAdamW::set_lr(double lr) {
  options_.lr(lr);
  if (flat_) flat_->lr.fill_(lr);
  else
    for (auto& group : per_tensor_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

double FusedAdamW::lr() const { return options_.lr(); }

void FusedAdamW::set_beta1(double beta1) {
  options_.betas(std::make_tuple(beta1, std::get<1>(options_.betas())));
  if (flat_) {
    if (!flat_->beta1.defined()) throw std::logic_error("FusedAdamW::set_beta1 on an optimiser made without varying_beta1");
    flat_->beta1.fill_(beta1);
  } else {
    for (auto& group : per_tensor_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).betas(options_.betas());
  }
}

void FusedAdamW::zero_grad() {
  if (flat_) {
    keep_in_place();
    flat_->grads.zero_();
    return;
  }
  for (auto& p : parameters_) p.mutable_grad().reset();
}

std::vector<at::Tensor> FusedAdamW::gradients() const {
  if (flat_) return {flat_->grads};
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters_)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

void FusedAdamW::clip_grad_norm(double max_norm) { compat::clip_grad_norm(gradients(), max_norm); }

void FusedAdamW::clip_grad_value(double limit) {
  for (auto& g : gradients()) g.clamp_(-limit, limit);
}

void FusedAdamW::step() {
  if (!flat_) {
    per_tensor_->step();
    return;
  }
  if (flat_->beta1.defined()) return step_reading_beta1();
  const auto& f = *flat_;
  compat::fused_adamw({f.params}, {f.grads}, {f.exp_avg}, {f.exp_avg_sq}, {f.count}, f.lr, std::get<0>(options_.betas()),
                      std::get<1>(options_.betas()), options_.weight_decay(), options_.eps());
}

// AdamW (Alg. 2) over the flat buffers with the learning rate, beta1 and the step count read on
// the device, in torch.optim.AdamW's order of operations (its capturable single-tensor update).
void FusedAdamW::step_reading_beta1() {
  torch::NoGradGuard no_grad;
  auto& f = *flat_;
  const double beta2 = std::get<1>(options_.betas()), eps = options_.eps(), decay = options_.weight_decay();
  const auto lr = f.lr.to(f.params.scalar_type());
  f.count.add_(1);
  if (decay != 0) f.params.mul_(1 - lr * decay);
  f.exp_avg.lerp_(f.grads, 1 - f.beta1);
  f.exp_avg_sq.mul_(beta2).addcmul_(f.grads, f.grads, 1 - beta2);
  const auto step = f.count.to(f.params.scalar_type());
  const auto bias_correction1 = 1 - at::pow(f.beta1, step), bias_correction2 = 1 - at::pow(beta2, step);
  const auto step_size_neg = -(lr / bias_correction1);
  const auto denom = (f.exp_avg_sq.sqrt() / (bias_correction2.sqrt() * step_size_neg)).add_(eps / step_size_neg);
  f.params.addcdiv_(f.exp_avg, denom);
}

// torch::optim::AdamW writes the archive: a temporary one over the same parameters (the archive
// names them by position), its state made from the slices.
void FusedAdamW::save(torch::serialize::OutputArchive& archive) const {
  if (!flat_) return per_tensor_->save(archive);
  torch::optim::AdamW writer(parameters_, options_);
  const auto steps = static_cast<std::int64_t>(flat_->count.item<double>());
  if (steps > 0)
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      auto state = std::make_unique<torch::optim::AdamWParamState>();
      state->step(steps);
      state->exp_avg(flat_->slice(flat_->exp_avg, parameters_[i], i).clone());
      state->exp_avg_sq(flat_->slice(flat_->exp_avg_sq, parameters_[i], i).clone());
      writer.state()[state_key(writer.state(), parameters_[i])] = std::move(state);
    }
  writer.save(archive);
}

void FusedAdamW::load(torch::serialize::InputArchive& archive) {
  if (!flat_) {
    per_tensor_->load(archive);
    options_ = static_cast<torch::optim::AdamWOptions&>(per_tensor_->param_groups().front().options());
    // LibTorch 1.13's load restores the moments but not the group's options (2.x's does both):
    // the learning rate read back from the archive's first group, as 2.x would have it
    torch::serialize::InputArchive groups, first, options;
    c10::IValue lr;
    if (archive.try_read("param_groups", groups) && groups.try_read("param_groups/0", first) &&
        first.try_read("options", options) && options.try_read("lr", lr))
      set_lr(lr.toDouble());
    return;
  }
  torch::optim::AdamW reader(parameters_, options_);
  reader.load(archive);
  options_ = static_cast<torch::optim::AdamWOptions&>(reader.param_groups().front().options());
  std::int64_t steps = -1;
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const auto found = reader.state().find(state_key(reader.state(), parameters_[i]));
    const auto* state = found == reader.state().end() ? nullptr : static_cast<torch::optim::AdamWParamState*>(found->second.get());
    const std::int64_t taken = state ? state->step() : 0;
    if (steps >= 0 && taken != steps)
      throw std::invalid_argument("optimizer state: parameter " + std::to_string(i) + " took " + std::to_string(taken) +
                                  " steps where the others took " + std::to_string(steps) +
                                  "; the fused AdamW keeps one count for all");
    steps = taken;
    auto exp_avg = flat_->slice(flat_->exp_avg, parameters_[i], i), exp_avg_sq = flat_->slice(flat_->exp_avg_sq, parameters_[i], i);
    if (state) {
      exp_avg.copy_(state->exp_avg());
      exp_avg_sq.copy_(state->exp_avg_sq());
    } else {
      exp_avg.zero_();
      exp_avg_sq.zero_();
    }
  }
  flat_->count.fill_(static_cast<double>(std::max<std::int64_t>(steps, 0)));
  flat_->lr.fill_(options_.lr());
  keep_in_place();
}

}  // namespace attnlab
