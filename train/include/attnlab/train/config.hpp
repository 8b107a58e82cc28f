#pragma once
// The [model] and [train] sections of an experiment: the typed structs the model and the trainer
// read, and their schemas (checked like any plugin's parameters). Each setting is declared once:
// its member and default here, its name, range, choices and help in config.cpp's table, which
// derives the schema and the mapping from the member.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnlab/params.hpp"

namespace attnlab {

// The choices of the string settings, read once from the experiment file (the words are config.cpp's).
enum class Pooling { mean, mean_with_padding, cls, first };
enum class Norm { pre, post, normed_input };
enum class Positions { learned, sinusoidal };
enum class Init { standard, kl_authors };  // "default" | "kl_authors"
enum class PairHead { nli, concat };
// The precision of the attention sublayer under autocast ([model] attention_precision): as
// autocast types its ops; the method in fp32 on q, k, v cast to float; or the q, k, v projection in
// fp32 too.
enum class AttentionPrecision { autocast, fp32, fp32_qkv };
enum class Decay { constant, linear, sqrt, sqrt_from_zero, cosine, onecycle, onecycle_cosine };
enum class CudaGraphs { automatic, on, off };  // "auto" | "on" | "off"
enum class EvalSplit { val, test };  // the held-out splits a measurement may run over

// Each choice as the experiment file writes it: "mean_with_padding", "onecycle", "auto".
const char* word(Pooling value);
const char* word(Norm value);
const char* word(Positions value);
const char* word(Init value);
const char* word(PairHead value);
const char* word(AttentionPrecision value);
const char* word(Decay value);
const char* word(CudaGraphs value);
const char* word(EvalSplit value);

// Defaults follow Skyformer's LRA setting: 2 layers, dim 64, FFN 128, 2 heads of 32, dropout 0.1,
// mean pooling, pre-norm, learned positions.
struct ModelConfig {
  std::int64_t layers = 2;
  std::int64_t dim = 64;
  std::int64_t ffn_dim = 128;
  std::int64_t heads = 2;
  std::int64_t head_dim = 32;  // resolved: the file's 0 (its default) means dim / heads
  double dropout = 0.1;
  Pooling pooling = Pooling::mean;
  Norm norm = Norm::pre;
  Positions positions = Positions::learned;
  bool zero_tokens_masked = false;  // mask = "nonzero_tokens": a token id 0 is padding wherever it is
  AttentionPrecision attention_precision = AttentionPrecision::autocast;
  bool attention_bias = true;  // biases in the q, k, v and output projections
  Init init = Init::standard;
  PairHead pair_head = PairHead::nli;  // the head of two-input tasks
  std::string init_from;         // a safetensors file of initial weights (weights.hpp); "": the seed's
  std::string init_from_sha256;  // its bytes' SHA-256, recorded at enqueue (the runner checks it)
};

struct TrainConfig {
  std::int64_t steps = 1000;
  std::int64_t batch_size = 32;
  std::int64_t grad_accum = 1;  // micro-batches per optimiser step
  double lr = 1e-4;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  std::int64_t warmup = 100;
  Decay decay = Decay::linear;
  double clip_norm = 1.0;   // 0: no clipping of the gradients' norm
  double clip_value = 0.0;  // 0: no clipping of each gradient element to [-clip_value, clip_value]
  std::int64_t eval_every = 200;
  std::int64_t eval_batches = 0;  // 0: the whole validation split
  bool eval_stream = false;       // eval_draw = "stream": batches from one reshuffled pass after another
  bool test_drop_last = false;    // the test split's last short batch left out
  std::int64_t log_every = 20;
  std::int64_t instability_steps = 0;   // > 0: Skyformer's instability score over that many steps first
  std::int64_t variance_passes = 100;   // stochastic methods: passes for the variance metrics (0: off)
  EvalSplit variance_split = EvalSplit::test;
  double accuracy_checkpoints = 0;      // > 0: weights kept at each multiple of it first reached (val accuracy)
  double keep_best_after = 0;           // share of the steps before which a new best keeps no weights
  std::int64_t checkpoint_every = 1000;  // steps between resume checkpoints (0: none)
  std::string precision = "fp32";        // fp32 | bf16 | fp16 (core's parse_precision reads it once a run)
  bool tf32 = false;                     // TF32 tensor cores for fp32 matmuls (CUDA)
  CudaGraphs cuda_graphs = CudaGraphs::automatic;  // the step as a replayed CUDA graph (StepRunner)
  bool deterministic = false;  // deterministic algorithms only; an op without one is an error
};

// OneCycleLR (onecycle, onecycle_cosine): its warm-up is a share of the steps and it cycles beta1.
inline bool is_one_cycle(Decay decay) { return decay == Decay::onecycle || decay == Decay::onecycle_cosine; }

// The schemas, in the order `attnlab` documents and checks them.
const std::vector<ParamSpec>& model_params();
const std::vector<ParamSpec>& train_params();

// The structs from checked values (every setting present, as ParamValues::defaults and the
// experiment file make them); the rules between settings (head_dim 0, the warm-up a schedule
// needs, ...) throw ParamError naming the setting.
ModelConfig model_config_from(const ParamValues& values);
TrainConfig train_config_from(const ParamValues& values);

}  // namespace attnlab
