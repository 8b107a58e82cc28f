#include "attnlab/train/model.hpp"

#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include "attnlab/precision.hpp"

namespace attnlab {
namespace nn = torch::nn;

EncoderBlockImpl::EncoderBlockImpl(const ModelConfig& c, std::shared_ptr<AttentionMethod> attention)
    : heads_(c.heads),
      head_dim_(c.head_dim),
      pre_norm_(c.norm != Norm::post),
      normed_input_(c.norm == Norm::normed_input),
      attention_precision_(c.attention_precision),
      dropout_p_(c.dropout),
      attention_(std::move(attention)) {
  const std::int64_t width = c.heads * c.head_dim;
  qkv_ = register_module("qkv", nn::Linear(nn::LinearOptions(c.dim, 3 * width).bias(c.attention_bias)));
  out_ = register_module("out", nn::Linear(nn::LinearOptions(width, c.dim).bias(c.attention_bias)));
  ffn_in_ = register_module("ffn_in", nn::Linear(c.dim, c.ffn_dim));
  ffn_out_ = register_module("ffn_out", nn::Linear(c.ffn_dim, c.dim));
  norm1_ = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({c.dim})));
  norm2_ = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({c.dim})));
  register_module("attention", attention_);
  if (c.init == Init::kl_authors) init_as_kl_authors();
}

// fast_transformers' layers as the KL authors build them (weight_init = 'xavier_uniform' for the
// attention and the feed-forward, bias_init = 'normal' for the feed-forward only): q, k and v are
// three Linear layers there, so each third of qkv gets Xavier's bound for [H·Dh, dim].
void EncoderBlockImpl::init_as_kl_authors() {
  torch::NoGradGuard no_grad;
  for (auto part : qkv_->weight.chunk(3, 0)) nn::init::xavier_uniform_(part);
  for (auto* layer : {&out_, &ffn_in_, &ffn_out_}) nn::init::xavier_uniform_((*layer)->weight);
  for (auto* layer : {&ffn_in_, &ffn_out_}) (*layer)->bias.normal_(0.0, 1e-6);
}

namespace {
// [B·N, 3·H·Dh] -> q, k, v [B, H, N, Dh]: one permuted view, unbound (its backward writes the three
// gradients into one tensor instead of zero-filling a full-size tensor per part).
std::array<at::Tensor, 3> split_heads(const at::Tensor& qkv, std::int64_t b, std::int64_t heads, std::int64_t head_dim) {
  auto parts = qkv.view({b, -1, 3, heads, head_dim}).permute({2, 0, 3, 1, 4}).unbind(0);
  return {parts[0], parts[1], parts[2]};
}
// [B, H, N, Dh] -> [B·N, H·Dh]
at::Tensor merge_heads(const at::Tensor& heads) {
  return heads.transpose(1, 2).reshape({-1, heads.size(1) * heads.size(3)});
}
}  // namespace

std::array<at::Tensor, 3> EncoderBlockImpl::project_qkv(const at::Tensor& x, std::int64_t batch) {
  return split_heads(qkv_rows(pre_norm_ ? norm1_->forward(x) : x), batch, heads_, head_dim_);
}

std::array<at::Tensor, 2> EncoderBlockImpl::attention_outputs(const at::Tensor& x, const at::Tensor& key_valid) {
  // attend() as forward() calls it (project_qkv applies the pre-norm), without the dropout
  const auto heads = heads_of(project_qkv(x, key_valid.size(0)), key_valid);
  return {heads, linear_rows(merge_heads(heads), out_).view({key_valid.size(0), key_valid.size(1), -1})};
}

at::Tensor EncoderBlockImpl::attend(const at::Tensor& x, const at::Tensor& key_valid) {
  const auto heads = heads_of(split_heads(qkv_rows(x), key_valid.size(0), heads_, head_dim_), key_valid);
  return inverted_dropout(linear_rows(merge_heads(heads), out_), dropout_p_, is_training());
}

at::Tensor EncoderBlockImpl::qkv_rows(const at::Tensor& x) {
  if (attention_precision_ != AttentionPrecision::fp32_qkv) return linear_rows(x, qkv_);
  NoAutocast fp32;  // their Reformer: HuggingFace's module projects X.float() itself
  return linear_rows(full_precision(x), qkv_);
}

at::Tensor EncoderBlockImpl::heads_of(const std::array<at::Tensor, 3>& qkv, const at::Tensor& key_valid) {
  if (attention_precision_ == AttentionPrecision::autocast) return attention_->forward(qkv[0], qkv[1], qkv[2], key_valid);
  // The LRA authors' Attention module: Q, K, V cast to float and autocast off around the method.
  NoAutocast fp32;
  return attention_->forward(full_precision(qkv[0]), full_precision(qkv[1]), full_precision(qkv[2]), key_valid);
}

at::Tensor EncoderBlockImpl::feed_forward(const at::Tensor& x) {
  auto h = inverted_dropout(at::gelu(linear_rows(x, ffn_in_)), dropout_p_, is_training());
  return inverted_dropout(linear_rows(h, ffn_out_), dropout_p_, is_training());
}

at::Tensor EncoderBlockImpl::forward(const at::Tensor& x, const at::Tensor& key_valid) {
  if (normed_input_) {  // the KL authors' layer: the residual starts from the normalised input
    auto h = norm1_->forward(x);
    auto s = h + attend(h, key_valid);
    return s + feed_forward(norm2_->forward(s));
  }
  if (pre_norm_) {
    auto h = x + attend(norm1_->forward(x), key_valid);
    return h + feed_forward(norm2_->forward(h));
  }
  auto h = norm1_->forward(x + attend(x, key_valid));
  return norm2_->forward(h + feed_forward(h));
}

EncoderClassifierImpl::EncoderClassifierImpl(const ModelConfig& c, const TaskInfo& task, const AttentionMaker& make_attention)
    : config_(c), task_(task) {
  const bool cls = c.pooling == Pooling::cls;
  const std::int64_t positions = task.max_len + (cls ? 1 : 0);
  if (task.many_hot > 0) {
    // A many-hot token embeds as the sum of its features' rows: a bias-free linear map of the
    // F-bit vector, looked up through the 2^F possible vectors.
    if (task.many_hot > 16 || task.vocab_size != (std::int64_t{1} << task.many_hot))
      throw std::invalid_argument("a task with many_hot = " + std::to_string(task.many_hot) +
                                  " features needs vocab_size = 2^many_hot, not " + std::to_string(task.vocab_size));
    auto bits = at::empty({task.vocab_size, task.many_hot}, at::kFloat);
    for (std::int64_t t = 0; t < task.vocab_size; ++t)
      for (std::int64_t f = 0; f < task.many_hot; ++f) bits[t][f] = static_cast<float>((t >> f) & 1);
    feature_bits_ = register_buffer("feature_bits", bits);
    feature_embeddings_ = register_parameter("features", at::randn({task.many_hot, c.dim}) * 0.02);
  } else {
    tokens_ = register_module("tokens", nn::Embedding(task.vocab_size, c.dim));
    nn::init::normal_(tokens_->weight, 0.0, 0.02);
  }
  if (c.positions == Positions::learned) {
    learned_positions_ = register_module("positions", nn::Embedding(positions, c.dim));
    nn::init::normal_(learned_positions_->weight, 0.0, 0.02);
  } else {
    // Vaswani et al. (2017) §3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)
    auto pos = at::arange(positions, at::kFloat).unsqueeze(1);
    auto freq = at::exp(at::arange(0, c.dim, 2, at::kFloat) * (-std::log(10000.0) / c.dim));
    auto table = at::zeros({positions, c.dim});
    table.slice(1, 0, c.dim, 2).copy_(at::sin(pos * freq));
    table.slice(1, 1, c.dim, 2).copy_(at::cos(pos * freq).slice(1, 0, c.dim / 2));
    sinusoid_ = register_buffer("sinusoid", table);
  }
  if (cls) cls_ = register_parameter("cls", at::randn({c.dim}) * 0.02);
  AttentionShape shape{c.heads, c.head_dim, positions};
  for (std::int64_t i = 0; i < c.layers; ++i) {
    blocks_.push_back(register_module("block" + std::to_string(i), EncoderBlock(c, make_attention(shape))));
    shape.first_layer = blocks_.front()->attention().get();
  }
  if (c.norm != Norm::post) final_norm_ = register_module("final_norm", nn::LayerNorm(nn::LayerNormOptions({c.dim})));
  make_head(c, task);
  if (c.init == Init::kl_authors) init_as_kl_authors();
}

// The classifier on the pooled features: one hidden layer of ffn_dim; for two inputs u, v, on
// [u, v, u*v, u-v] (LRA's), or on [u, v] with a second hidden layer of ffn_dim / 2 (pair_head = concat).
void EncoderClassifierImpl::make_head(const ModelConfig& c, const TaskInfo& task) {
  const bool concat = task.inputs == 2 && c.pair_head == PairHead::concat;
  const std::int64_t features = task.inputs == 2 ? c.dim * (concat ? 2 : 4) : c.dim;
  head_in_ = register_module("head_in", nn::Linear(features, c.ffn_dim));
  if (concat) head_mid_ = register_module("head_mid", nn::Linear(c.ffn_dim, c.ffn_dim / 2));
  head_out_ = register_module("head_out", nn::Linear(concat ? c.ffn_dim / 2 : c.ffn_dim, task.num_classes));
}

// The KL authors' embeddings and head: tokens N(0, 1) (nn.init.normal_), CLS zeros, the
// classifier's biases zero (bias_init = 'zeros'; its weights as torch.nn.Linear's).
void EncoderClassifierImpl::init_as_kl_authors() {
  torch::NoGradGuard no_grad;
  if (tokens_) tokens_->weight.normal_(0.0, 1.0);
  if (cls_.defined()) cls_.zero_();
  for (auto* layer : {&head_in_, &head_mid_, &head_out_})
    if (*layer) (*layer)->bias.zero_();
}

at::Tensor pool_sequence(const at::Tensor& x, const at::Tensor& valid, Pooling pooling) {
  // cls: the prepended token; first: the sequence's own first position (KL-Transformer App. E.2)
  if (pooling == Pooling::cls || pooling == Pooling::first) return x.select(1, 0);
  auto weights = valid.to(x.scalar_type()).unsqueeze(2);
  if (pooling == Pooling::mean_with_padding) return (x * weights).mean(1);
  return (x * weights).sum(1) / weights.sum(1).clamp_min(1.0);  // mean over real tokens only
}

std::pair<at::Tensor, at::Tensor> EncoderClassifierImpl::embed(const at::Tensor& tokens, const at::Tensor& lengths) {
  const auto b = tokens.size(0), n = tokens.size(1);
  auto x = tokens_ ? tokens_->forward(tokens) : at::embedding(feature_bits_.matmul(feature_embeddings_), tokens);
  auto valid = at::arange(n, lengths.options()).unsqueeze(0) < lengths.unsqueeze(1);  // [B, N]
  if (config_.zero_tokens_masked) valid.logical_and_(tokens.ne(0));                    // the authors' ids != 0
  if (cls_.defined()) {
    x = at::cat({cls_.expand({b, 1, config_.dim}), x}, 1);
    valid = at::cat({at::ones({b, 1}, valid.options()), valid}, 1);
  }
  const auto& table = learned_positions_ ? learned_positions_->weight : sinusoid_;
  const auto len = x.size(1);
  x = x + (len == table.size(0) ? table : table.slice(0, 0, len));  // a full-length batch needs no slice (nor its backward)
  return {inverted_dropout(x, config_.dropout, is_training()), valid};
}

// The blocks run on the rows of all the sequences at once, [B·N', dim]: each linear layer is one
// matrix product (on [B, N', dim] LibTorch's C++ linear is a batched matmul and an add).
at::Tensor EncoderClassifierImpl::rows_before(const at::Tensor& x, const at::Tensor& valid, std::int64_t layer) {
  auto rows = x.view({-1, config_.dim});
  for (std::int64_t i = 0; i < layer; ++i) rows = blocks_.at(i)->forward(rows, valid);
  return rows;
}

EncoderClassifierImpl::LayerInputs EncoderClassifierImpl::layer_inputs(const at::Tensor& tokens, const at::Tensor& lengths,
                                                                      std::int64_t layer) {
  auto [x, valid] = embed(tokens, lengths);
  auto qkv = blocks_.at(layer)->project_qkv(rows_before(x, valid, layer), x.size(0));
  return {qkv[0], qkv[1], qkv[2], valid};
}

EncoderClassifierImpl::LayerOutputs EncoderClassifierImpl::layer_outputs(const at::Tensor& tokens, const at::Tensor& lengths,
                                                                        std::int64_t layer) {
  auto [x, valid] = embed(tokens, lengths);
  auto outputs = blocks_.at(layer)->attention_outputs(rows_before(x, valid, layer), valid);
  return {outputs[0], outputs[1], valid};
}

at::Tensor EncoderClassifierImpl::encode(const at::Tensor& tokens, const at::Tensor& lengths) {
  auto [x, valid] = embed(tokens, lengths);
  auto rows = rows_before(x, valid, layers());
  if (final_norm_) rows = final_norm_->forward(rows);
  return pool_sequence(rows.view(x.sizes()), valid, config_.pooling);
}

at::Tensor EncoderClassifierImpl::forward(const at::Tensor& tokens, const at::Tensor& lengths) {
  at::Tensor features;
  if (task_.inputs == 2) {
    // One encoder pass over both towers stacked on the batch axis, then split.
    const auto b = tokens.size(0);
    auto both = encode(tokens.transpose(0, 1).reshape({2 * b, tokens.size(2)}), lengths.transpose(0, 1).reshape({2 * b}));
    auto u = both.slice(0, 0, b), v = both.slice(0, b, 2 * b);
    features = head_mid_ ? at::cat({u, v}, 1) : at::cat({u, v, u * v, u - v}, 1);
  } else {
    features = encode(tokens.select(1, 0), lengths.select(1, 0));
  }
  auto hidden = at::relu(linear_rows(features, head_in_));
  if (head_mid_) hidden = at::relu(linear_rows(hidden, head_mid_));
  return linear_rows(hidden, head_out_);
}

std::vector<std::shared_ptr<AttentionMethod>> EncoderClassifierImpl::attention_methods() const {
  std::vector<std::shared_ptr<AttentionMethod>> methods;
  for (const auto& block : blocks_) methods.push_back(block->attention());
  return methods;
}

std::vector<at::Tensor> EncoderClassifierImpl::unique_parameters() const {
  std::vector<at::Tensor> unique;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (const auto& p : parameters())
    if (seen.insert(p.unsafeGetTensorImpl()).second) unique.push_back(p);
  return unique;
}

std::int64_t EncoderClassifierImpl::parameter_count() const {
  std::int64_t count = 0;
  for (const auto& p : unique_parameters()) count += p.numel();
  return count;
}

}  // namespace attnlab
