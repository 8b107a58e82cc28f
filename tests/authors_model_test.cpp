// attnlab's models are the papers' authors' models, weight for weight: the same weights (attnlab's,
// exported as safetensors under their names) and the same batch, in float64 without dropout,
// through attnlab and through a PyTorch model of the authors' architecture written from their
// description (tests/reference/: the Skyformer authors' LRA classifier, lra_authors_model.py, and the
// KL authors' ListOps classifier, kl_authors_model.py, each run by the Python torch of this build)
// give the same loss and every parameter the same gradient, then 20 steps of AdamW under their
// schedules (OneCycleLR with clip_grad_value_; the KL authors' LambdaLR with weight decay) the same
// losses, each to 1e-12 (measured: 4e-16 at most; the same LibTorch computes both sides). The LRA
// model with softmax and with Skyformer (its landmarks drawn by attnlab, their u handed to the
// PyTorch model, and the authors' initial value of the iteration); the KL model with softmax. The
// other way round, a file PyTorch's safetensors wrote from the LRA model's own initialisation
// starts attnlab's model at the loss the PyTorch model has.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "attnlab/seed_stream.hpp"
#include "attnlab/train/loss_scaler.hpp"
#include "attnlab/train/optimizer.hpp"
#include "attnlab/train/safetensors.hpp"
#include "attnlab/train/schedule.hpp"
#include "attnlab/train/trainer.hpp"
#include "attnlab/train/weights.hpp"
#include "test_support.hpp"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kBatch = 4, kLength = 64, kLandmarks = 16, kSteps = 20;
constexpr std::uint64_t kDrawSeed = 11;

// Which authors' model: the Skyformer authors' LRA classifier (their Nystromformer's is the same), or
// the KL authors' ListOps classifier.
enum class Authors { lra, kl };

// Their ListOps models over ListOps' vocabulary, at 64 positions, without dropout: Skyformer's (2
// layers, dim 64, FFN 128, 2 heads of 32, pre-norm, learned positions, "MEAN" pooling, mask ids != 0)
// or the KL authors' at the same sizes (their layer, no projection biases, their initialisation,
// CLS pooling, sinusoidal positions).
ModelConfig authors_model(Authors authors) {
  ModelConfig m;
  m.dropout = 0;
  if (authors == Authors::lra) {
    m.pooling = Pooling::mean_with_padding;
    m.zero_tokens_masked = true;
  } else {
    m.pooling = Pooling::cls;
    m.norm = Norm::normed_input;
    m.attention_bias = false;
    m.init = Init::kl_authors;
    m.positions = Positions::sinusoidal;
  }
  return m;
}

TaskInfo listops_task() {
  TaskInfo t;
  t.vocab_size = 16;
  t.num_classes = 10;
  t.max_len = kLength;
  t.inputs = 1;
  return t;
}

// Their training: Skyformer's AdamW under OneCycleLR with each gradient element clipped to 1; the KL
// authors' AdamW(0.9, 0.98, eps 1e-9, weight decay 0.1) under their LambdaLR (Table 6's ListOps rate
// 0.005, peak lr = rate / sqrt(warmup)), no clipping.
TrainConfig authors_training(Authors authors) {
  TrainConfig t;
  t.steps = kSteps;
  t.warmup = 4;
  t.clip_norm = 0;
  if (authors == Authors::lra) {
    t.lr = 1e-3;
    t.decay = Decay::onecycle;
    t.eps = 1e-6;
    t.beta2 = 0.999;
    t.weight_decay = 0;
    t.clip_value = 1.0;
  } else {
    t.lr = 0.005 / std::sqrt(4.0);
    t.decay = Decay::sqrt_from_zero;
    t.eps = 1e-9;
    t.beta2 = 0.98;
    t.weight_decay = 0.1;
  }
  return t;
}

AttentionMaker method(const std::string& name) {
  const auto* plugin = testing::built_plugins().find(PluginKind::attention, name);
  if (!plugin) throw std::runtime_error("plugin " + name + " is not built");
  auto params = plugin->defaults();
  if (name == "skyformer") {
    params.set("landmarks", kLandmarks);
    params.set("init", std::string("global_column_sum"));  // their iterative_inv's "original" start
  }
  return [plugin, params](const AttentionShape& shape) { return plugin->make_attention(shape, params); };
}

// attnlab's model in float64, seeded, each stochastic method's stream reseeded from kDrawSeed.
EncoderClassifier double_model(Authors authors, const std::string& name, std::uint64_t seed) {
  torch::manual_seed(seed);
  EncoderClassifier model(authors_model(authors), listops_task(), method(name));
  model->to(at::kDouble);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(kDrawSeed);
  for (const auto& m : model->attention_methods()) m->redraw(generator);
  return model;
}

// The u of each of Skyformer's training forwards, layer by layer ([steps, layers, m]), drawn as
// its SeedStream draws them: each layer's stream reseeded in turn from one kDrawSeed generator,
// then one rand(1, m) in double a forward.
at::Tensor skyformer_draws(std::int64_t layers) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(kDrawSeed);
  std::vector<std::unique_ptr<SeedStream>> streams;
  for (std::int64_t l = 0; l < layers; ++l) {
    streams.push_back(std::make_unique<SeedStream>());
    streams.back()->reseed(generator);
  }
  auto draws = at::empty({kSteps, layers, kLandmarks}, at::kDouble);
  for (std::int64_t s = 0; s < kSteps; ++s)
    for (std::int64_t l = 0; l < layers; ++l)
      draws[s][l].copy_(at::rand({1, kLandmarks}, streams[l]->next(c10::Device(c10::kCPU), true), at::kDouble)[0]);
  return draws;
}

// Four sequences of 64, 50, 33 and 17 tokens (1..15, padded with 0) and their labels.
struct AuthorsBatch {
  at::Tensor tokens, lengths, labels;
};
AuthorsBatch batch() {
  auto g = at::make_generator<at::CPUGeneratorImpl>(5);
  AuthorsBatch b;
  b.lengths = at::tensor({64, 50, 33, 17}, at::kLong);
  b.tokens = at::randint(1, 16, {kBatch, kLength}, g, at::kLong);
  b.tokens.masked_fill_(at::arange(kLength).unsqueeze(0) >= b.lengths.unsqueeze(1), 0);
  b.labels = at::randint(0, 10, {kBatch}, g, at::kLong);
  return b;
}

at::Tensor loss_of(EncoderClassifier& model, const AuthorsBatch& b) {
  const auto logits = model->forward(b.tokens.unsqueeze(1), b.lengths.unsqueeze(1));
  return at::cross_entropy_loss(logits, b.labels);
}

safetensors::Tensor file_tensor(const std::string& name, const at::Tensor& t) {
  const auto dtype = t.scalar_type() == at::kLong ? safetensors::DType::I64 : safetensors::DType::F64;
  return {name, dtype, t.sizes().vec(), static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.nbytes())};
}

std::string text(double x) {
  char s[40];
  std::snprintf(s, sizeof s, "%.17g", x);
  return s;
}

// What the PyTorch model made of attnlab's weights and the batch (the script's OUT file).
struct Reference {
  fs::path folder;
  std::unique_ptr<safetensors::File> out;
  const safetensors::Tensor* find(const std::string& name) const { return out->find(name); }
  at::Tensor tensor(const std::string& name) const {
    const auto* t = out->find(name);
    if (!t) throw std::runtime_error("the PyTorch model wrote no " + name);
    return at::from_blob(const_cast<char*>(t->data), t->shape, at::kDouble).clone();
  }
};

// The batch, the draws and the settings for the script: safetensors, the settings as its metadata.
void write_inputs(Authors authors, const fs::path& file, const AuthorsBatch& b) {
  const ModelConfig m = authors_model(authors);
  const TrainConfig t = authors_training(authors);
  safetensors::Metadata settings{{"layers", std::to_string(m.layers)}, {"dim", std::to_string(m.dim)},
                                 {"ffn_dim", std::to_string(m.ffn_dim)}, {"heads", std::to_string(m.heads)},
                                 {"head_dim", std::to_string(m.head_dim)}, {"vocab", "16"}, {"classes", "10"},
                                 {"max_len", std::to_string(kLength)}, {"warmup", std::to_string(t.warmup)},
                                 {"steps", std::to_string(t.steps)}, {"eps", text(t.eps)}};
  if (authors == Authors::kl) {
    settings.insert({{"rate", text(t.lr * std::sqrt(static_cast<double>(t.warmup)))}, {"weight_decay", text(t.weight_decay)}});
    safetensors::write(file.string(), {file_tensor("tokens", b.tokens), file_tensor("lengths", b.lengths), file_tensor("labels", b.labels)},
                       settings);
    return;
  }
  settings.insert({{"landmarks", std::to_string(kLandmarks)}, {"lr", text(t.lr)}, {"clip_value", text(t.clip_value)}});
  const auto mask = b.tokens.ne(0).to(at::kDouble);
  const auto draws = skyformer_draws(m.layers);
  safetensors::write(file.string(),
                     {file_tensor("tokens", b.tokens), file_tensor("mask", mask), file_tensor("labels", b.labels),
                      file_tensor("draws", draws)},
                     settings);
}

Reference run_reference(Authors authors, const std::string& name, EncoderClassifier& model, const AuthorsBatch& b) {
  Reference r;
  r.folder = fs::temp_directory_path() / ("attnlab-authors-" + name + "-" + std::to_string(getpid()));
  fs::create_directories(r.folder);
  save_weights(model, (r.folder / "attnlab.safetensors").string());
  write_inputs(authors, r.folder / "inputs.safetensors", b);
  const std::string files = (r.folder / "inputs.safetensors").string() + " " + (r.folder / "attnlab.safetensors").string() +
                            " " + (r.folder / "out.safetensors").string();
  const std::string script = authors == Authors::lra ? "lra_authors_model.py " + name + " " + files + " " +
                                                            (r.folder / "authors_init.safetensors").string()
                                                      : "kl_authors_model.py " + files;
  const std::string command = std::string(ATTNLAB_TORCH_PYTHON) + " " + ATTNLAB_SOURCE_DIR + "/tests/reference/" + script +
                              " > " + (r.folder / "log").string() + " 2>&1";
  if (std::system(command.c_str()) != 0) {
    std::ifstream log(r.folder / "log");
    throw std::runtime_error("`" + command + "` failed: " + std::string(std::istreambuf_iterator<char>(log), {}));
  }
  r.out = std::make_unique<safetensors::File>((r.folder / "out.safetensors").string());
  return r;
}

// The largest |a - b| over every element.
double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// Each gradient of `model` against the PyTorch model's of the same name; returns how many there were.
std::size_t expect_same_gradients(Authors authors, const std::string& name, EncoderClassifier& model, const Reference& theirs) {
  EncoderClassifier grads = double_model(authors, name, 3);  // the gradients as a model's weights, to name them
  {
    torch::NoGradGuard no_grad;
    const auto from = model->unique_parameters(), to = grads->unique_parameters();
    for (std::size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i].grad());
  }
  std::size_t compared = 0;
  for (const auto& w : named_weights(grads)) {
    if (w.name == "pos_embedding") continue;  // their sinusoid: a buffer, not a weight with a gradient
    const auto reference = theirs.tensor("grad." + w.name);
    EXPECT_LT(max_diff(w.tensor, reference), 1e-12) << w.name << " (largest gradient " << reference.abs().max().item<double>() << ")";
    ++compared;
  }
  return compared;
}

struct Case {
  Authors authors;
  const char* method;
  std::size_t weights;  // the tensors with a gradient in their state_dict
};

void PrintTo(const Case& c, std::ostream* out) { *out << (c.authors == Authors::lra ? "LRA model, " : "KL model, ") << c.method; }

class AuthorsModel : public ::testing::TestWithParam<Case> {};

TEST_P(AuthorsModel, SameWeightsGiveTheSameLossGradientsAndSteps) {
  const Case c = GetParam();
  const AuthorsBatch b = batch();
  EncoderClassifier model = double_model(c.authors, c.method, 3);
  const Reference theirs = run_reference(c.authors, c.method, model, b);

  TrainConfig train = authors_training(c.authors);
  FusedAdamW optimizer(model->unique_parameters(), adamw_options(train), cycles_beta1(train));
  LossScaler scaler(false);
  std::vector<double> losses;
  for (std::int64_t step = 0; step < kSteps; ++step) {
    schedule_step(optimizer, train, step);
    optimizer.zero_grad();
    const auto loss = loss_of(model, b);
    loss.backward();
    losses.push_back(loss.item<double>());
    if (step == 0) {  // the first step's loss and every gradient, under the authors' names
      EXPECT_NEAR(losses[0], theirs.tensor("loss")[0].item<double>(), 1e-12);
      EXPECT_EQ(expect_same_gradients(c.authors, c.method, model, theirs), c.weights);
    }
    apply_gradients(optimizer, train, scaler);
  }
  const auto reference = theirs.tensor("loss");
  for (std::int64_t s = 0; s < kSteps; ++s) EXPECT_NEAR(losses[s], reference[s].item<double>(), 1e-12) << "step " << s + 1;
  EXPECT_GT(losses.front() - losses.back(), 0.1) << "the steps moved the weights";

  // the other way round: PyTorch's own initialisation, saved by safetensors, starts attnlab's model
  if (theirs.find("init_loss")) {
    EncoderClassifier started = double_model(c.authors, c.method, 99);
    load_weights(started, (theirs.folder / "authors_init.safetensors").string());
    EXPECT_NEAR(loss_of(started, b).item<double>(), theirs.tensor("init_loss")[0].item<double>(), 1e-12);
  }
  fs::remove_all(theirs.folder);
}

// LRA: 2 embeddings, 16 a layer (2 norms, W_q, W_k, W_v, ff, 2 of mlpblock, each weight and bias),
// the final norm, the head's 2 layers. KL: the CLS vector, the embeddings, 12 a layer (4
// projections without bias, linear1, linear2, 2 norms), the final norm under both its names, the
// classifier's 2 layers.
INSTANTIATE_TEST_SUITE_P(Methods, AuthorsModel,
                         ::testing::Values(Case{Authors::lra, "softmax", 40}, Case{Authors::lra, "skyformer", 40},
                                           Case{Authors::kl, "softmax", 34}),
                         [](const auto& info) {
                           return std::string(info.param.authors == Authors::lra ? "skyformer_lra_" : "kl_") + info.param.method;
                         });

}  // namespace
}  // namespace attnlab
