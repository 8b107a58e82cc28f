#pragma once
// The LRA encoder classifier built around an attention plugin: token embedding + positions,
// L blocks (attention -> residual -> norm -> FFN -> residual -> norm, pre- or post-norm), mean or
// CLS pooling, MLP head. Pair tasks (TaskInfo::inputs == 2) encode both inputs with the same
// encoder and classify [u, v, u*v, u-v] (LRA's two-tower matching model).
#include <functional>
#include <memory>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "attnlab/attention.hpp"
#include "attnlab/config.hpp"
#include "attnlab/dataset.hpp"

namespace attnlab {

using AttentionMaker = std::function<std::shared_ptr<AttentionMethod>(const AttentionShape&)>;

class EncoderBlockImpl : public torch::nn::Module {
 public:
  EncoderBlockImpl(const ModelConfig& config, std::shared_ptr<AttentionMethod> attention);
  // x: [B, N, dim]; key_valid: [B, N] bool.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& key_valid);
  const std::shared_ptr<AttentionMethod>& attention() const { return attention_; }

 private:
  at::Tensor attend(const at::Tensor& x, const at::Tensor& key_valid);
  at::Tensor feed_forward(const at::Tensor& x);

  std::int64_t heads_, head_dim_;
  bool pre_norm_;
  torch::nn::Linear qkv_{nullptr}, out_{nullptr}, ffn_in_{nullptr}, ffn_out_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
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
  std::vector<std::shared_ptr<AttentionMethod>> attention_methods() const;
  std::int64_t parameter_count() const;

 private:
  ModelConfig config_;
  TaskInfo task_;
  torch::nn::Embedding tokens_{nullptr};
  torch::nn::Embedding learned_positions_{nullptr};
  at::Tensor sinusoid_;     // [L', dim] buffer when positions = sinusoidal
  at::Tensor cls_;          // [dim] parameter when pooling = cls
  torch::nn::Dropout dropout_{nullptr};
  std::vector<EncoderBlock> blocks_;
  torch::nn::LayerNorm final_norm_{nullptr};  // pre-norm stacks end with a norm
  torch::nn::Linear head_in_{nullptr}, head_out_{nullptr};
};
TORCH_MODULE(EncoderClassifier);

}  // namespace attnlab
