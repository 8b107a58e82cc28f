#pragma once
// The LRA encoder classifier built around an attention plugin: token embedding + positions,
// L blocks (attention -> residual -> norm -> FFN -> residual -> norm, pre- or post-norm), mean,
// CLS or first-token pooling, MLP head. Pair tasks (TaskInfo::inputs == 2) encode both inputs with the same
// encoder and classify [u, v, u*v, u-v] (LRA's two-tower matching model).
#include <array>
#include <functional>
#include <memory>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "attnlab/attention.hpp"
#include "attnlab/train/config.hpp"
#include "attnlab/dataset.hpp"

namespace attnlab {

// Inverted dropout (keep with probability 1 - p, scale kept values by 1 / (1 - p)); identity when
// not training. On the CPU a counter-based mask, one generator draw per call (src/dropout.cpp).
at::Tensor inverted_dropout(const at::Tensor& x, double p, bool training);

// One vector per sequence of x [B, N, dim] as [model] pooling says, `valid` [B, N] its real
// positions: "mean" averages the real ones; "mean_with_padding" is (x ⊙ valid).mean(dim=1), the
// mean over all N positions with padding zeroed (Skyformer's and Nystromformer's LRA "MEAN", so
// scaled by length / N); "first" and "cls" take position 0.
at::Tensor pool_sequence(const at::Tensor& x, const at::Tensor& valid, Pooling pooling);

// layer(x) for rows x [R, in]: the same numbers as torch::nn::Linear (autocast included), its
// backward one node of three products (src/linear.cpp).
at::Tensor linear_rows(const at::Tensor& x, const torch::nn::Linear& layer);

using AttentionMaker = std::function<std::shared_ptr<AttentionMethod>(const AttentionShape&)>;

class EncoderBlockImpl : public torch::nn::Module {
 public:
  EncoderBlockImpl(const ModelConfig& config, std::shared_ptr<AttentionMethod> attention);
  // x: [B·N, dim], the rows of B sequences of N; key_valid: [B, N] bool.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& key_valid);
  const std::shared_ptr<AttentionMethod>& attention() const { return attention_; }
  // The q, k, v [B, H, N, Dh] this block hands its attention for input rows x [B·N, dim] (after
  // the pre-norm).
  std::array<at::Tensor, 3> project_qkv(const at::Tensor& x, std::int64_t batch);
  // What this block's attention sublayer makes of input rows x, for studies (attnlab spectrum): the
  // heads' outputs [B, H, N, Dh], and their concatenation through the output projection
  // [B, N, dim] (before dropout and the residual). Not used by forward().
  std::array<at::Tensor, 2> attention_outputs(const at::Tensor& x, const at::Tensor& key_valid);

 private:
  at::Tensor attend(const at::Tensor& x, const at::Tensor& key_valid);
  at::Tensor qkv_rows(const at::Tensor& x);
  at::Tensor heads_of(const std::array<at::Tensor, 3>& qkv, const at::Tensor& key_valid);
  at::Tensor feed_forward(const at::Tensor& x);
  void init_as_kl_authors();

  std::int64_t heads_, head_dim_;
  bool pre_norm_;      // pre or normed_input: the attention sees norm1(x)
  bool normed_input_;  // the residual starts from norm1(x) too
  AttentionPrecision attention_precision_;
  double dropout_p_;
  torch::nn::Linear qkv_{nullptr}, out_{nullptr}, ffn_in_{nullptr}, ffn_out_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  std::shared_ptr<AttentionMethod> attention_;
};
TORCH_MODULE(EncoderBlock);

class EncoderClassifierImpl : public torch::nn::Module {
 public:
  EncoderClassifierImpl(const ModelConfig& config, const TaskInfo& task, const AttentionMaker& make_attention);
  // tokens: [B, inputs, L] int64; lengths: [B, inputs] int64. Returns logits [B, classes].
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& lengths);
  // One input: tokens [B, L], lengths [B] -> pooled embedding [B, dim] (f in the instability score).
  at::Tensor encode(const at::Tensor& tokens, const at::Tensor& lengths);
  std::int64_t layers() const { return static_cast<std::int64_t>(blocks_.size()); }
  const ModelConfig& config() const { return config_; }
  const TaskInfo& task() const { return task_; }
  std::vector<std::shared_ptr<AttentionMethod>> attention_methods() const;
  // What layer `layer`'s attention sees for one input (tokens [B, L], lengths [B]): q, k, v
  // [B, H, N, Dh] and key_valid [B, N]. For studies of attention itself (attnlab approx).
  struct LayerInputs {
    at::Tensor q, k, v, key_valid;
  };
  LayerInputs layer_inputs(const at::Tensor& tokens, const at::Tensor& lengths, std::int64_t layer);
  // What layer `layer`'s attention sublayer outputs for one input (tokens [B, L], lengths [B]):
  // heads [B, H, N, Dh] (each head's attention output), projected [B, N, dim] (the heads
  // concatenated through the block's output projection, before dropout and the residual), and
  // key_valid [B, N]. For studies of the attention output (attnlab spectrum); call it in eval mode.
  struct LayerOutputs {
    at::Tensor heads, projected, key_valid;
  };
  LayerOutputs layer_outputs(const at::Tensor& tokens, const at::Tensor& lengths, std::int64_t layer);
  // Each parameter once, in order of first appearance: a weight that several layers share (a
  // method's, through AttentionShape::first_layer) is listed by every layer's parameters() but is
  // one tensor, optimised, counted and kept once (as PyTorch's Module.parameters()).
  std::vector<at::Tensor> unique_parameters() const;
  std::int64_t parameter_count() const;
  // The first layer's input for one input (tokens [B, L], lengths [B]): token + position
  // embeddings (and the CLS token), dropout; returns x [B, N', dim] and valid [B, N'].
  std::pair<at::Tensor, at::Tensor> embed(const at::Tensor& tokens, const at::Tensor& lengths);

 private:
  // x [B, N', dim] through the first `layer` blocks, as rows [B·N', dim].
  at::Tensor rows_before(const at::Tensor& x, const at::Tensor& valid, std::int64_t layer);
  void make_head(const ModelConfig& config, const TaskInfo& task);
  void init_as_kl_authors();

  ModelConfig config_;
  TaskInfo task_;
  torch::nn::Embedding tokens_{nullptr};  // ordinary ids
  at::Tensor feature_embeddings_;          // many-hot tokens: one [dim] row per feature
  at::Tensor feature_bits_;                // many-hot tokens: [2^F, F], row t = the bits of token t
  torch::nn::Embedding learned_positions_{nullptr};
  at::Tensor sinusoid_;     // [L', dim] buffer when positions = sinusoidal
  at::Tensor cls_;          // [dim] parameter when pooling = cls
  std::vector<EncoderBlock> blocks_;
  torch::nn::LayerNorm final_norm_{nullptr};  // pre-norm stacks end with a norm
  torch::nn::Linear head_in_{nullptr}, head_out_{nullptr};
  torch::nn::Linear head_mid_{nullptr};  // pair_head = concat's second hidden layer
};
TORCH_MODULE(EncoderClassifier);

}  // namespace attnlab
