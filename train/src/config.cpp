#include "attnlab/train/config.hpp"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string_view>

namespace attnlab {
namespace {

constexpr double kBig = static_cast<double>(std::numeric_limits<std::int32_t>::max());

// The words of each choice, as the experiment file writes them.
template <class Value>
struct Word {
  const char* text;
  Value value;
};
constexpr Word<Pooling> kPooling[] = {
    {"mean", Pooling::mean}, {"mean_with_padding", Pooling::mean_with_padding}, {"cls", Pooling::cls}, {"first", Pooling::first}};
constexpr Word<Norm> kNorm[] = {{"pre", Norm::pre}, {"post", Norm::post}, {"normed_input", Norm::normed_input}};
constexpr Word<Positions> kPositions[] = {{"learned", Positions::learned}, {"sinusoidal", Positions::sinusoidal}};
constexpr Word<Init> kInit[] = {{"default", Init::standard}, {"kl_authors", Init::kl_authors}};
constexpr Word<PairHead> kPairHead[] = {{"nli", PairHead::nli}, {"concat", PairHead::concat}};
constexpr Word<AttentionPrecision> kAttentionPrecision[] = {
    {"autocast", AttentionPrecision::autocast}, {"fp32", AttentionPrecision::fp32}, {"fp32_qkv", AttentionPrecision::fp32_qkv}};
constexpr Word<Decay> kDecay[] = {{"constant", Decay::constant}, {"linear", Decay::linear},
                                  {"sqrt", Decay::sqrt},         {"sqrt_from_zero", Decay::sqrt_from_zero},
                                  {"cosine", Decay::cosine},     {"onecycle", Decay::onecycle},
                                  {"onecycle_cosine", Decay::onecycle_cosine}};
constexpr Word<CudaGraphs> kCudaGraphs[] = {{"auto", CudaGraphs::automatic}, {"on", CudaGraphs::on}, {"off", CudaGraphs::off}};
constexpr Word<EvalSplit> kEvalSplit[] = {{"val", EvalSplit::val}, {"test", EvalSplit::test}};
constexpr Word<bool> kMask[] = {{"lengths", false}, {"nonzero_tokens", true}};   // zero_tokens_masked
constexpr Word<bool> kEvalDraw[] = {{"first", false}, {"stream", true}};         // eval_stream
constexpr Word<std::string_view> kPrecision[] = {{"fp32", "fp32"}, {"bf16", "bf16"}, {"fp16", "fp16"}};

template <class Value, std::size_t N>
const char* text_of(const Word<Value> (&words)[N], Value value) {
  for (const auto& w : words)
    if (w.value == value) return w.text;
  std::abort();  // every enumerator has its word
}

// A double as the shortest text that reads back as the same double.
std::string round_trip_text(double x) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, x);
    if (std::strtod(text, nullptr) == x) break;
  }
  return text;
}

// One setting: its schema row, its default written from the struct's own, and how it fills the
// struct's member from checked values.
template <class Config>
struct Setting {
  ParamSpec spec;
  std::string default_text, choices_text;  // what spec's default_value and choices point to
  std::function<void(Config&, const ParamValues&)> read;
};

template <class Config>
Setting<Config> integer(const char* name, std::int64_t Config::*member, double min, double max, const char* doc) {
  return {{name, ParamType::integer, nullptr, min, max, nullptr, doc}, std::to_string(Config{}.*member), "",
          [name, member](Config& c, const ParamValues& v) { c.*member = v.integer(name); }};
}

template <class Config>
Setting<Config> real(const char* name, double Config::*member, double min, double max, const char* doc) {
  return {{name, ParamType::real, nullptr, min, max, nullptr, doc}, round_trip_text(Config{}.*member), "",
          [name, member](Config& c, const ParamValues& v) { c.*member = v.real(name); }};
}

template <class Config>
Setting<Config> flag(const char* name, bool Config::*member, const char* doc) {
  return {{name, ParamType::boolean, nullptr, 0, 0, nullptr, doc}, Config{}.*member ? "true" : "false", "",
          [name, member](Config& c, const ParamValues& v) { c.*member = v.boolean(name); }};
}

// A string setting of any text (a path).
template <class Config>
Setting<Config> text(const char* name, std::string Config::*member, const char* doc) {
  return {{name, ParamType::string, nullptr, 0, 0, nullptr, doc}, Config{}.*member, "",
          [name, member](Config& c, const ParamValues& v) { c.*member = v.string(name); }};
}

// A string setting of fixed words, held as the member's type (an enum, a bool, or the text).
template <class Config, class Member, class Value, std::size_t N>
Setting<Config> choice(const char* name, Member Config::*member, const Word<Value> (&words)[N], const char* doc) {
  std::string choices;
  for (const auto& w : words) choices += (choices.empty() ? "" : "|") + std::string(w.text);
  const Config defaults{};
  return {{name, ParamType::string, nullptr, 0, 0, nullptr, doc}, text_of(words, Value(defaults.*member)), choices,
          [name, member, &words](Config& c, const ParamValues& v) {
            const std::string& text = v.string(name);
            for (const auto& w : words)
              if (text == w.text) c.*member = Member(w.value);
          }};
}

// The file's default where it is not the struct's: a setting the struct holds resolved.
template <class Config>
Setting<Config> file_default(const char* text, Setting<Config> setting) {
  setting.default_text = text;
  return setting;
}

// The settings of one section in their documented order, and the ParamSpec rows made from them
// (pointing into the settings' texts: a Section stays where it was made).
template <class Config>
class Section {
 public:
  Section(std::initializer_list<Setting<Config>> settings) : settings_(settings) {
    for (auto& s : settings_) {
      s.spec.default_value = s.default_text.c_str();
      s.spec.choices = s.choices_text.empty() ? nullptr : s.choices_text.c_str();
      specs_.push_back(s.spec);
    }
  }
  Section(const Section&) = delete;
  Section& operator=(const Section&) = delete;
  const std::vector<ParamSpec>& specs() const { return specs_; }
  Config read(const ParamValues& values) const {
    Config c;
    for (const auto& s : settings_) s.read(c, values);
    return c;
  }

 private:
  std::vector<Setting<Config>> settings_;
  std::vector<ParamSpec> specs_;
};

using M = ModelConfig;
const Section<M>& model_section() {
  static const Section<M> section{
      integer("layers", &M::layers, 1, 64, "encoder blocks"),
      integer("dim", &M::dim, 1, 65536, "model (embedding) width"),
      integer("ffn_dim", &M::ffn_dim, 1, 262144, "hidden width of the feed-forward block and of the classifier head"),
      integer("heads", &M::heads, 1, 256, "attention heads"),
      file_default("0", integer("head_dim", &M::head_dim, 0, 4096, "width of one head; 0 means dim / heads")),
      real("dropout", &M::dropout, 0, 0.99, "dropout after embeddings, attention output and FFN"),
      choice("pooling", &M::pooling, kPooling,
             "sequence pooling before the classifier head: mean of the real tokens; mean over every position of the "
             "padded sequence with padding zeroed (Skyformer's and Nystromformer's LRA code: (x * mask).mean(dim=1)); a "
             "prepended CLS token; or the first token"),
      choice("norm", &M::norm, kNorm,
             "layer norm before (pre) or after (post) each residual branch; normed_input: each layer normalises its "
             "input, the residual included, s = LN(x) + Attn(LN(x)), then x' = s + FFN(LN(s)) (the KL authors' code: "
             "fast_transformers' layer with axial_ordering); pre and normed_input end the stack with a norm"),
      choice("positions", &M::positions, kPositions, "positional encoding"),
      choice("mask", &M::zero_tokens_masked, kMask,
             "the positions attention and pooling see: those before each input's length; or, of those, only the ones "
             "whose token id is not 0 (the LRA authors' code, mask = ids != 0: a black pixel of Image or Pathfinder is "
             "padding too)"),
      choice("attention_precision", &M::attention_precision, kAttentionPrecision,
             "the attention method's precision under [train] precision = bf16 | fp16: as autocast types its ops; fp32 "
             "on q, k, v cast to float with autocast off inside it (the LRA authors' code: fp16 autocast, attention in "
             "fp32); fp32_qkv: the q, k, v projection in fp32 too (their Reformer, HuggingFace's module, projects "
             "inside)"),
      flag("attention_bias", &M::attention_bias, "biases in the q, k, v and output projections (the KL authors' code: none)"),
      choice("init", &M::init, kInit,
             "default: token, position and CLS embeddings N(0, 0.02), linear layers as torch.nn.Linear's; kl_authors: "
             "the KL authors' code: token embeddings N(0, 1), CLS zeros, attention and feed-forward weights "
             "Xavier-uniform (q, k and v each its own matrix), feed-forward biases N(0, 1e-6), the classifier's biases "
             "zero"),
      choice("pair_head", &M::pair_head, kPairHead,
             "the classifier of two-input tasks (Retrieval) on the encodings u, v: nli: [u, v, u*v, u-v] -> ffn_dim -> "
             "classes (LRA's); concat: [u, v] -> ffn_dim -> ffn_dim/2 -> classes, ReLU between (the KL authors' "
             "DualClassificationHead)"),
      text("init_from", &M::init_from,
           "a safetensors file of weights to start from instead of the seed's (relative to the experiment file; "
           "named as the authors' PyTorch modules name them, train/include/attnlab/train/weights.hpp; `attnlab export` "
           "writes one); \"\": the seed's"),
      text("init_from_sha256", &M::init_from_sha256,
           "the SHA-256 of init_from's file: recorded when the job is queued (or, written here, checked then); a job "
           "whose file changed since is refused when it starts"),
  };
  return section;
}

using T = TrainConfig;
const Section<T>& train_section() {
  static const Section<T> section{
      integer("steps", &T::steps, 1, kBig, "optimiser steps"),
      integer("batch_size", &T::batch_size, 1, 1 << 20, "examples per micro-batch"),
      integer("grad_accum", &T::grad_accum, 1, 1024, "micro-batches accumulated per optimiser step"),
      real("lr", &T::lr, 0, 10, "peak learning rate (AdamW)"),
      real("weight_decay", &T::weight_decay, 0, 10, "AdamW decoupled weight decay"),
      real("beta1", &T::beta1, 0, 0.999999, "AdamW beta1"),
      real("beta2", &T::beta2, 0, 0.999999, "AdamW beta2"),
      real("eps", &T::eps, 0, 1, "AdamW epsilon"),
      integer("warmup", &T::warmup, 0, kBig,
              "steps of linear warm-up from 0 to lr (onecycle: from lr / 25, OneCycleLR's pct_start = warmup / steps)"),
      choice("decay", &T::decay, kDecay,
             "learning-rate decay after warm-up; sqrt: lr * sqrt(warmup / step) after it; sqrt_from_zero: lr * min(1, s / "
             "warmup) * sqrt(warmup / max(s, warmup)) at step s counted from 0 as torch's LambdaLR counts it, so the "
             "first step's rate is 0 (the KL authors' schedule, lr their rate / sqrt(warmup)); onecycle: PyTorch's "
             "OneCycleLR with its defaults (lr / 25 up to lr, then down to lr / 25 / 1e4, linear; onecycle_cosine: its "
             "cosine anneal), AdamW's beta1 cycled 0.95 -> 0.85 -> 0.95 as its cycle_momentum does (beta1 unused)"),
      real("clip_norm", &T::clip_norm, 0, 1e9, "gradient-norm clipping (clip_grad_norm_); 0 turns it off"),
      real("clip_value", &T::clip_value, 0, 1e9,
           "each gradient element clipped to [-clip_value, clip_value] (clip_grad_value_), before clip_norm; 0 turns it off"),
      integer("eval_every", &T::eval_every, 1, kBig, "steps between validations (and checkpoint choices)"),
      integer("eval_batches", &T::eval_batches, 0, kBig, "validation batches per evaluation; 0 = the whole split"),
      choice("eval_draw", &T::eval_stream, kEvalDraw,
             "which eval_batches batches an evaluation runs: the split's first ones, in order, every time; or the next "
             "ones of one stream through the split, reshuffled at each pass and going on from one evaluation to the "
             "next (the LRA authors' endless validation loader)"),
      flag("test_drop_last", &T::test_drop_last,
           "leave the test split's last short batch out of the test accuracy, as the LRA authors' test loader (drop_last)"),
      integer("log_every", &T::log_every, 1, kBig, "steps between training-curve points"),
      integer("instability_steps", &T::instability_steps, 0, 10000,
              "measure Skyformer's instability score (App. F) over this many steps before training, against softmax "
              "attention from the same weights (20 in the paper); 0 = off"),
      integer("variance_passes", &T::variance_passes, 0, 100000,
              "for a stochastic attention method: inference passes at the best checkpoint, each with a fresh draw, for "
              "the KL-Transformer's RSD, PI, VA and AGV (§4.1; 100 in the paper); 0 = off"),
      choice("variance_split", &T::variance_split, kEvalSplit, "the split those passes run over"),
      real("accuracy_checkpoints", &T::accuracy_checkpoints, 0, 1,
           "keep the weights when validation accuracy first reaches each multiple of this (0.2: 20, 40, 60, 80 and "
           "100%), for attnlab gradients (the KL-Transformer's Table 14); 0 = none"),
      real("keep_best_after", &T::keep_best_after, 0, 0.999,
           "a new best validation accuracy keeps its weights (the ones tested) only after this share of the steps; the "
           "best is tracked from the first validation, so an earlier one holds later ones off until beaten, and a run "
           "that keeps none tests its final weights (Skyformer's code: 0.2); 0: every new best"),
      integer("checkpoint_every", &T::checkpoint_every, 0, kBig,
              "training steps between resume checkpoints (model, optimiser, RNG states, data position); 0 = never"),
      choice("precision", &T::precision, kPrecision,
             "forward passes in fp32, or under autocast in bf16 or fp16 (fp32 weights and optimiser state; fp16 with "
             "dynamic loss scaling, skipped steps counted)"),
      flag("tf32", &T::tf32, "let CUDA fp32 matmuls and convolutions use TF32 tensor cores"),
      choice("cuda_graphs", &T::cuda_graphs, kCudaGraphs,
             "on a GPU, each training step one replay of a captured CUDA graph (the host's launches out of the step): "
             "auto where the run allows it (not fp16, one batch a step), else eager, saying why; on: refuse a run that "
             "cannot; off"),
      flag("deterministic", &T::deterministic,
           "deterministic algorithms only (an op without one fails the job, naming the op): the same job twice gives "
           "the same numbers on a GPU too"),
  };
  return section;
}

// The rules between settings, each a ParamError naming the setting at fault.
void resolve(ModelConfig& c) {
  if (c.head_dim != 0) return;
  if (c.dim % c.heads != 0) throw ParamError("head_dim: 0 needs dim divisible by heads");
  c.head_dim = c.dim / c.heads;
}

void check(const TrainConfig& c) {
  if (is_one_cycle(c.decay) && c.warmup > c.steps)
    throw ParamError("warmup: " + std::to_string(c.warmup) + " is more than steps (" + std::to_string(c.steps) +
                     "); OneCycleLR's warm-up is a share of the steps");
  if (c.decay == Decay::sqrt_from_zero && c.warmup == 0)
    throw ParamError("warmup: sqrt_from_zero divides by the warm-up (min(1, s / warmup)); use at least 1");
  if (is_one_cycle(c.decay) && c.warmup == 1)
    throw ParamError("warmup: a one-step OneCycleLR warm-up divides by zero in PyTorch's formula; use 0 or at least 2");
  if (c.eval_stream && c.eval_batches == 0)
    throw ParamError("eval_draw: \"stream\" draws eval_batches batches an evaluation; set eval_batches (0 is the whole split)");
  if (c.variance_passes == 1) throw ParamError("variance_passes: one pass has no variance; 0 turns the passes off, else at least 2");
}

}  // namespace

const char* word(Pooling value) { return text_of(kPooling, value); }
const char* word(Norm value) { return text_of(kNorm, value); }
const char* word(Positions value) { return text_of(kPositions, value); }
const char* word(Init value) { return text_of(kInit, value); }
const char* word(PairHead value) { return text_of(kPairHead, value); }
const char* word(AttentionPrecision value) { return text_of(kAttentionPrecision, value); }
const char* word(Decay value) { return text_of(kDecay, value); }
const char* word(CudaGraphs value) { return text_of(kCudaGraphs, value); }
const char* word(EvalSplit value) { return text_of(kEvalSplit, value); }

const std::vector<ParamSpec>& model_params() { return model_section().specs(); }
const std::vector<ParamSpec>& train_params() { return train_section().specs(); }

ModelConfig model_config_from(const ParamValues& values) {
  auto c = model_section().read(values);
  resolve(c);
  return c;
}

TrainConfig train_config_from(const ParamValues& values) {
  auto c = train_section().read(values);
  check(c);
  return c;
}

}  // namespace attnlab
