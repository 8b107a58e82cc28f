#pragma once
// What an attention plugin makes: a torch::nn::Module mapping q, k, v [B, H, N, Dh] and a key
// validity mask [B, N] (true = real token, false = padding) to [B, H, N, Dh].
#include <cstdint>
#include <memory>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

#include "attnlab/params.hpp"
#include "attnlab/plugin.hpp"

namespace attnlab {

class AttentionMethod;

struct AttentionShape {
  std::int64_t heads;
  std::int64_t head_dim;
  std::int64_t max_len;  // longest sequence the model will see (for methods with per-position weights)
  // Building a layer after the first: the first layer's module, whose weights a method may share
  // (register the same tensor), as some authors share one weight across layers. nullptr otherwise.
  const AttentionMethod* first_layer = nullptr;
};

class AttentionMethod : public torch::nn::Module {
 public:
  // Outputs on real tokens must not depend on what sits at padded positions; outputs at padded
  // query positions are unspecified (the model never reads them).
  virtual at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& key_valid) = 0;
  // Stochastic methods (random features or random landmarks) say so, and redraw their randomness
  // from `generator` when asked. The training loop draws once before the first step, then every
  // redraw_every() steps (0: never again), and before each evaluation pass when
  // fresh_draw_at_eval().
  virtual bool stochastic() const { return false; }
  virtual void redraw(at::Generator& /*generator*/) {}
  virtual std::int64_t redraw_every() const { return 0; }
  virtual bool fresh_draw_at_eval() const { return false; }
};

// Logits of the keys a softmax must leave out: finite, so that a row with nothing to attend to
// stays finite (a row of -inf is NaN). Written over a score (masked_fill): -60000 in half
// precision (its largest is 65504), -1e30 in float and double.
inline double masked_logit(at::ScalarType type) { return type == at::kHalf ? -60000.0 : -1e30; }
// Added to a score instead of written over it: -30000 in half precision, room for the score.
inline double masked_logit_bias(at::ScalarType type) { return type == at::kHalf ? -30000.0 : -1e30; }
// 0 where `ok`, `excluded` elsewhere: a small broadcastable bias added to the scores in place (one
// pass, and nothing for autograd to keep or undo).
inline at::Tensor masked_bias(const at::Tensor& ok, const at::TensorOptions& options, double excluded) {
  return at::zeros(ok.sizes(), options).masked_fill_(ok.logical_not(), excluded);
}

}  // namespace attnlab

#include <boost/dll/alias.hpp>
// In the plugin's .cpp: ATTNLAB_ATTENTION_FACTORY(my_namespace::create);
#define ATTNLAB_ATTENTION_FACTORY(fn) BOOST_DLL_ALIAS(fn, attnlab_create)
