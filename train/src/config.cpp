#include "attnlab/train/config.hpp"

#include <limits>

namespace attnlab {
namespace {
constexpr double kBig = static_cast<double>(std::numeric_limits<std::int32_t>::max());
}

const ParamSpec kModelParams[] = {
    {"layers", ParamType::integer, "2", 1, 64, nullptr, "encoder blocks"},
    {"dim", ParamType::integer, "64", 1, 65536, nullptr, "model (embedding) width"},
    {"ffn_dim", ParamType::integer, "128", 1, 262144, nullptr, "hidden width of the feed-forward block and of the classifier head"},
    {"heads", ParamType::integer, "2", 1, 256, nullptr, "attention heads"},
    {"head_dim", ParamType::integer, "0", 0, 4096, nullptr, "width of one head; 0 means dim / heads"},
    {"dropout", ParamType::real, "0.1", 0, 0.99, nullptr, "dropout after embeddings, attention output and FFN"},
    {"pooling", ParamType::string, "mean", 0, 0, "mean|mean_with_padding|cls|first",
     "sequence pooling before the classifier head: mean of the real tokens; mean over every position of the padded "
     "sequence with padding zeroed (Skyformer's and Nystromformer's LRA code: (x * mask).mean(dim=1)); a prepended CLS "
     "token; or the first token"},
    {"norm", ParamType::string, "pre", 0, 0, "pre|post|normed_input",
     "layer norm before (pre) or after (post) each residual branch; normed_input: each layer normalises its input, "
     "the residual included, s = LN(x) + Attn(LN(x)), then x' = s + FFN(LN(s)) (the KL authors' code: "
     "fast_transformers' layer with axial_ordering); pre and normed_input end the stack with a norm"},
    {"positions", ParamType::string, "learned", 0, 0, "learned|sinusoidal", "positional encoding"},
    {"mask", ParamType::string, "lengths", 0, 0, "lengths|nonzero_tokens",
     "the positions attention and pooling see: those before each input's length; or, of those, only the ones whose "
     "token id is not 0 (the LRA authors' code, mask = ids != 0: a black pixel of Image or Pathfinder is padding too)"},
    {"attention_precision", ParamType::string, "autocast", 0, 0, "autocast|fp32|fp32_qkv",
     "the attention method's precision under [train] precision = bf16 | fp16: as autocast types its ops; fp32 on "
     "q, k, v cast to float with autocast off inside it (the LRA authors' code: fp16 autocast, attention in fp32); "
     "fp32_qkv: the q, k, v projection in fp32 too (their Reformer, HuggingFace's module, projects inside)"},
    {"attention_bias", ParamType::boolean, "true", 0, 0, nullptr,
     "biases in the q, k, v and output projections (the KL authors' code: none)"},
    {"init", ParamType::string, "default", 0, 0, "default|kl_authors",
     "default: token, position and CLS embeddings N(0, 0.02), linear layers as torch.nn.Linear's; kl_authors: the KL "
     "authors' code: token embeddings N(0, 1), CLS zeros, attention and feed-forward weights Xavier-uniform (q, k and v "
     "each its own matrix), feed-forward biases N(0, 1e-6), the classifier's biases zero"},
    {"pair_head", ParamType::string, "nli", 0, 0, "nli|concat",
     "the classifier of two-input tasks (Retrieval) on the encodings u, v: nli: [u, v, u*v, u-v] -> ffn_dim -> classes "
     "(LRA's); concat: [u, v] -> ffn_dim -> ffn_dim/2 -> classes, ReLU between (the KL authors' DualClassificationHead)"},
};
const std::size_t kModelParamCount = sizeof(kModelParams) / sizeof(kModelParams[0]);

const ParamSpec kTrainParams[] = {
    {"steps", ParamType::integer, "1000", 1, kBig, nullptr, "optimiser steps"},
    {"batch_size", ParamType::integer, "32", 1, 1 << 20, nullptr, "examples per micro-batch"},
    {"grad_accum", ParamType::integer, "1", 1, 1024, nullptr, "micro-batches accumulated per optimiser step"},
    {"lr", ParamType::real, "0.0001", 0, 10, nullptr, "peak learning rate (AdamW)"},
    {"weight_decay", ParamType::real, "0.0", 0, 10, nullptr, "AdamW decoupled weight decay"},
    {"beta1", ParamType::real, "0.9", 0, 0.999999, nullptr, "AdamW beta1"},
    {"beta2", ParamType::real, "0.999", 0, 0.999999, nullptr, "AdamW beta2"},
    {"eps", ParamType::real, "1e-08", 0, 1, nullptr, "AdamW epsilon"},
    {"warmup", ParamType::integer, "100", 0, kBig, nullptr,
     "steps of linear warm-up from 0 to lr (onecycle: from lr / 25, OneCycleLR's pct_start = warmup / steps)"},
    {"decay", ParamType::string, "linear", 0, 0, "constant|linear|sqrt|sqrt_from_zero|cosine|onecycle|onecycle_cosine",
     "learning-rate decay after warm-up; sqrt: lr * sqrt(warmup / step) after it; sqrt_from_zero: lr * min(1, s / warmup) * "
     "sqrt(warmup / max(s, warmup)) at step s counted from 0 as torch's LambdaLR counts it, so the first step's rate is 0 "
     "(the KL authors' schedule, lr their rate / sqrt(warmup)); onecycle: PyTorch's OneCycleLR with its defaults (lr / 25 up to lr, then down "
     "to lr / 25 / 1e4, linear; onecycle_cosine: its cosine anneal), AdamW's beta1 cycled 0.95 -> 0.85 -> 0.95 as its "
     "cycle_momentum does (beta1 unused)"},
    {"clip_norm", ParamType::real, "1.0", 0, 1e9, nullptr, "gradient-norm clipping (clip_grad_norm_); 0 turns it off"},
    {"clip_value", ParamType::real, "0.0", 0, 1e9, nullptr,
     "each gradient element clipped to [-clip_value, clip_value] (clip_grad_value_), before clip_norm; 0 turns it off"},
    {"eval_every", ParamType::integer, "200", 1, kBig, nullptr, "steps between validations (and checkpoint choices)"},
    {"eval_batches", ParamType::integer, "0", 0, kBig, nullptr, "validation batches per evaluation; 0 = the whole split"},
    {"eval_draw", ParamType::string, "first", 0, 0, "first|stream",
     "which eval_batches batches an evaluation runs: the split's first ones, in order, every time; or the next ones of "
     "one stream through the split, reshuffled at each pass and going on from one evaluation to the next (the LRA "
     "authors' endless validation loader)"},
    {"test_drop_last", ParamType::boolean, "false", 0, 0, nullptr,
     "leave the test split's last short batch out of the test accuracy, as the LRA authors' test loader (drop_last)"},
    {"log_every", ParamType::integer, "20", 1, kBig, nullptr, "steps between training-curve points"},
    {"instability_steps", ParamType::integer, "0", 0, 10000, nullptr,
     "measure Skyformer's instability score (App. F) over this many steps before training, against softmax "
     "attention from the same weights (20 in the paper); 0 = off"},
    {"variance_passes", ParamType::integer, "100", 0, 100000, nullptr,
     "for a stochastic attention method: inference passes at the best checkpoint, each with a fresh draw, for "
     "the KL-Transformer's RSD, PI, VA and AGV (§4.1; 100 in the paper); 0 = off"},
    {"variance_split", ParamType::string, "test", 0, 0, "val|test", "the split those passes run over"},
    {"accuracy_checkpoints", ParamType::real, "0", 0, 1, nullptr,
     "keep the weights when validation accuracy first reaches each multiple of this (0.2: 20, 40, 60, 80 and 100%), "
     "for attnlab gradients (the KL-Transformer's Table 14); 0 = none"},
    {"keep_best_after", ParamType::real, "0.0", 0, 0.999, nullptr,
     "a new best validation accuracy keeps its weights (the ones tested) only after this share of the steps; the best "
     "is tracked from the first validation, so an earlier one holds later ones off until beaten, and a run that keeps "
     "none tests its final weights (Skyformer's code: 0.2); 0: every new best"},
    {"checkpoint_every", ParamType::integer, "1000", 0, kBig, nullptr,
     "training steps between resume checkpoints (model, optimiser, RNG states, data position); 0 = never"},
    {"precision", ParamType::string, "fp32", 0, 0, "fp32|bf16|fp16",
     "forward passes in fp32, or under autocast in bf16 or fp16 (fp32 weights and optimiser state; fp16 with "
     "dynamic loss scaling, skipped steps counted)"},
    {"tf32", ParamType::boolean, "false", 0, 0, nullptr, "let CUDA fp32 matmuls and convolutions use TF32 tensor cores"},
    {"cuda_graphs", ParamType::string, "auto", 0, 0, "auto|on|off",
     "on a GPU, each training step one replay of a captured CUDA graph (the host's launches out of the step): auto "
     "where the run allows it (not fp16, one batch a step), else eager, saying why; on: refuse a run that cannot; off"},
    {"deterministic", ParamType::boolean, "false", 0, 0, nullptr,
     "deterministic algorithms only (an op without one fails the job, naming the op): the same job twice gives "
     "the same numbers on a GPU too"},
};
const std::size_t kTrainParamCount = sizeof(kTrainParams) / sizeof(kTrainParams[0]);

ModelConfig model_config_from(const ParamValues& v) {
  ModelConfig c;
  c.layers = v.integer("layers");
  c.dim = v.integer("dim");
  c.ffn_dim = v.integer("ffn_dim");
  c.heads = v.integer("heads");
  c.head_dim = v.integer("head_dim");
  if (c.head_dim == 0) {
    if (c.dim % c.heads != 0) throw ParamError("head_dim: 0 needs dim divisible by heads");
    c.head_dim = c.dim / c.heads;
  }
  c.dropout = v.real("dropout");
  c.pooling = v.string("pooling");
  c.attention_precision = v.choice<AttentionPrecision>(
      "attention_precision",
      {{"autocast", AttentionPrecision::autocast}, {"fp32", AttentionPrecision::fp32}, {"fp32_qkv", AttentionPrecision::fp32_qkv}});
  c.zero_tokens_masked = v.string("mask") == "nonzero_tokens";
  c.norm = v.string("norm");
  c.attention_bias = v.boolean("attention_bias");
  c.init = v.string("init");
  c.pair_head = v.string("pair_head");
  c.positions = v.string("positions");
  return c;
}

TrainConfig train_config_from(const ParamValues& v) {
  TrainConfig c;
  c.steps = v.integer("steps");
  c.batch_size = v.integer("batch_size");
  c.grad_accum = v.integer("grad_accum");
  c.lr = v.real("lr");
  c.weight_decay = v.real("weight_decay");
  c.beta1 = v.real("beta1");
  c.beta2 = v.real("beta2");
  c.eps = v.real("eps");
  c.warmup = v.integer("warmup");
  c.decay = v.string("decay");
  if (c.decay.rfind("onecycle", 0) == 0 && c.warmup > c.steps)
    throw ParamError("warmup: " + std::to_string(c.warmup) + " is more than steps (" + std::to_string(c.steps) +
                     "); OneCycleLR's warm-up is a share of the steps");
  if (c.decay == "sqrt_from_zero" && c.warmup == 0)
    throw ParamError("warmup: sqrt_from_zero divides by the warm-up (min(1, s / warmup)); use at least 1");
  if (c.decay.rfind("onecycle", 0) == 0 && c.warmup == 1)
    throw ParamError("warmup: a one-step OneCycleLR warm-up divides by zero in PyTorch's formula; use 0 or at least 2");
  c.clip_norm = v.real("clip_norm");
  c.clip_value = v.real("clip_value");
  c.eval_every = v.integer("eval_every");
  c.eval_batches = v.integer("eval_batches");
  c.eval_stream = v.string("eval_draw") == "stream";
  if (c.eval_stream && c.eval_batches == 0)
    throw ParamError("eval_draw: \"stream\" draws eval_batches batches an evaluation; set eval_batches (0 is the whole split)");
  c.test_drop_last = v.boolean("test_drop_last");
  c.log_every = v.integer("log_every");
  c.instability_steps = v.integer("instability_steps");
  c.variance_passes = v.integer("variance_passes");
  if (c.variance_passes == 1) throw ParamError("variance_passes: one pass has no variance; 0 turns the passes off, else at least 2");
  c.variance_split = v.string("variance_split");
  c.checkpoint_every = v.integer("checkpoint_every");
  c.accuracy_checkpoints = v.real("accuracy_checkpoints");
  c.keep_best_after = v.real("keep_best_after");
  c.precision = v.string("precision");
  c.tf32 = v.boolean("tf32");
  c.deterministic = v.boolean("deterministic");
  c.cuda_graphs = v.string("cuda_graphs");
  return c;
}

}  // namespace attnlab
