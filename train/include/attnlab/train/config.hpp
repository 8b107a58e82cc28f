#pragma once
// The [model] and [train] sections of an experiment: their schemas (checked like any plugin's
// parameters) and the typed structs the model and the trainer read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "attnlab/params.hpp"

namespace attnlab {

// The precision of the attention sublayer under autocast ([model] attention_precision): as
// autocast types its ops; the method in fp32 on q, k, v cast to float; or the q, k, v projection in
// fp32 too.
enum class AttentionPrecision { autocast, fp32, fp32_qkv };

// Defaults follow Skyformer's LRA setting: 2 layers, dim 64, FFN 128, 2 heads of 32, dropout 0.1,
// mean pooling, pre-norm, learned positions.
struct ModelConfig {
  std::int64_t layers = 2;
  std::int64_t dim = 64;
  std::int64_t ffn_dim = 128;
  std::int64_t heads = 2;
  std::int64_t head_dim = 32;  // resolved: TOML 0 (the default) means dim / heads
  double dropout = 0.1;
  std::string pooling = "mean";      // mean | mean_with_padding | cls | first
  std::string norm = "pre";          // pre | post | normed_input
  std::string positions = "learned"; // learned | sinusoidal
  AttentionPrecision attention_precision = AttentionPrecision::autocast;
  bool zero_tokens_masked = false;   // mask = "nonzero_tokens": a token id 0 is padding wherever it is
  bool attention_bias = true;        // biases in the q, k, v and output projections
  std::string init = "default";      // default | kl_authors
  std::string pair_head = "nli";     // nli | concat: the head of two-input tasks
};

struct TrainConfig {
  std::int64_t steps = 1000;
  std::int64_t batch_size = 32;
  std::int64_t grad_accum = 1;   // micro-batches per optimiser step
  double lr = 1e-4;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  std::int64_t warmup = 100;
  std::string decay = "linear";  // constant | linear | sqrt | cosine | onecycle | onecycle_cosine
  double clip_norm = 1.0;        // 0: no clipping of the gradients' norm
  double clip_value = 0.0;       // 0: no clipping of each gradient element to [-clip_value, clip_value]
  std::int64_t eval_every = 200;
  std::int64_t eval_batches = 0; // 0: the whole validation split
  bool eval_stream = false;      // eval_draw = "stream": batches from one reshuffled pass after another
  bool test_drop_last = false;   // the test split's last short batch left out
  std::int64_t log_every = 20;
  std::int64_t instability_steps = 0;  // > 0: Skyformer's instability score over that many steps first
  std::int64_t variance_passes = 100;  // stochastic methods: passes for the variance metrics (0: off)
  std::string variance_split = "test"; // val | test
  std::int64_t checkpoint_every = 1000;  // steps between resume checkpoints (0: none)
  double accuracy_checkpoints = 0;       // > 0: weights kept at each multiple of it first reached (val accuracy)
  double keep_best_after = 0;            // share of the steps before which a new best keeps no weights
  std::string precision = "fp32";  // fp32 | bf16 | fp16: autocast of the forward passes, fp32 weights
  bool tf32 = false;               // TF32 tensor cores for fp32 matmuls (CUDA)
  bool deterministic = false;      // deterministic algorithms only; an op without one is an error
  std::string cuda_graphs = "auto";  // auto | on | off: the step as a replayed CUDA graph (StepRunner)
};

extern const ParamSpec kModelParams[];
extern const std::size_t kModelParamCount;
extern const ParamSpec kTrainParams[];
extern const std::size_t kTrainParamCount;

ModelConfig model_config_from(const ParamValues& values);
TrainConfig train_config_from(const ParamValues& values);

}  // namespace attnlab
