#include "attnlab/train/weights.hpp"

#include <cctype>
#include <cstring>
#include <optional>
#include <unordered_set>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

namespace attnlab {
namespace {

// A prefix of attnlab's names and the authors' for it.
struct Rename {
  const char* ours;
  const char* theirs;
};

// The authors' names of one naming: inside block i (after its prefix), and at the top.
struct Naming {
  const char* block;                 // "model.transformer_" + i + "."
  const char* block_end;
  const char* qkv[3];                // q, k, v's thirds of attnlab's one projection
  std::vector<Rename> block_parts;   // the rest of a block
  std::vector<Rename> top;           // embeddings, final norm
  const char* single_head[2];        // head_in, head_out of a one-input task
  const char* pair_head[3];          // head_in, head_mid, head_out of a two-input task
  const char* attention;             // a method's own parameters, after the block's prefix
  bool positions_batched;            // positions and CLS as [1, L, dim] and [1, 1, dim] (their modules' shapes)
  const char* final_norm_alias;      // the final norm's second name in their state_dict, if any
};

const Naming& naming_of(WeightNaming naming) {
  static const Naming lra{
      "model.transformer_",
      ".",
      {"mha.W_q.", "mha.W_k.", "mha.W_v."},
      {{"norm1.", "norm1."}, {"out.", "mha.ff."}, {"norm2.", "norm2."}, {"ffn_in.", "mlpblock.0."}, {"ffn_out.", "mlpblock.3."}},
      {{"tokens.", "model.embeddings.word_embeddings."},
       {"positions.", "model.embeddings.position_embeddings."},
       {"cls", "model.embeddings.cls"},
       {"features", "model.embeddings.features"},
       {"final_norm.", "model.norm."}},
      {"seq_classifer.mlpblock.0.", "seq_classifer.mlpblock.2."},
      {"seq_classifer.mlpblock.0.", "seq_classifer.mlpblock.2.", "seq_classifer.mlpblock.4."},
      "mha.attn.",
      false,
      nullptr};
  // fast_transformers' layer with axial_ordering normalises its input with norm2 and the feed-forward's with norm1
  static const Naming kl{
      "transformer.layers.",
      ".",
      {"attention.query_projection.", "attention.key_projection.", "attention.value_projection."},
      {{"norm1.", "norm2."}, {"out.", "attention.out_projection."}, {"norm2.", "norm1."}, {"ffn_in.", "linear1."}, {"ffn_out.", "linear2."}},
      {{"tokens.", "input_embeddings."},
       {"positions.weight", "pos_embedding"},
       {"sinusoid", "pos_embedding"},
       {"cls", "cls_embedding"},
       {"features", "features"},
       {"final_norm.", "transformer.norm."}},
      {"classifier.layer1.", "classifier.layer2."},
      {"dual_classifier.layer1.", "dual_classifier.layer2.", "dual_classifier.layer3."},
      "attention.inner_attention.",
      true,
      "output_norm."};
  return naming == WeightNaming::kl_authors ? kl : lra;
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.compare(0, prefix.size(), prefix) == 0; }

// "block3.rest" -> (3, "rest"); (-1, name) for a name outside the blocks.
std::pair<int, std::string> block_of(const std::string& name) {
  if (!starts_with(name, "block")) return {-1, name};
  std::size_t i = 5;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == 5 || i >= name.size() || name[i] != '.') return {-1, name};
  return {std::stoi(name.substr(5, i - 5)), name.substr(i + 1)};
}

// The authors' name(s) of one attnlab tensor, each with its view: q, k and v's thirds of the one
// projection; the CLS vector and position table shaped as their module holds them.
std::vector<NamedWeight> authors_names(const Naming& n, const std::string& name, const at::Tensor& t, bool pair_task,
                                       bool mid_layer) {
  const auto [block, rest] = block_of(name);
  if (block >= 0) {
    const std::string prefix = n.block + std::to_string(block) + n.block_end;
    if (starts_with(rest, "qkv.")) {
      const auto thirds = t.chunk(3, 0);
      const std::string leaf = rest.substr(4);
      return {{prefix + n.qkv[0] + leaf, thirds[0]}, {prefix + n.qkv[1] + leaf, thirds[1]}, {prefix + n.qkv[2] + leaf, thirds[2]}};
    }
    if (starts_with(rest, "attention.")) return {{prefix + n.attention + rest.substr(10), t}};
    for (const Rename& r : n.block_parts)
      if (starts_with(rest, r.ours)) return {{prefix + r.theirs + rest.substr(std::string(r.ours).size()), t}};
  }
  // the classifier's layers in order: in, (mid,) out
  const std::pair<const char*, int> heads[] = {{"head_in.", 0}, {"head_mid.", 1}, {"head_out.", mid_layer ? 2 : 1}};
  for (const auto& [head, index] : heads) {
    if (!starts_with(name, head)) continue;
    const std::string layer = name.substr(std::string(head).size());
    return {{(pair_task ? n.pair_head[index] : n.single_head[index]) + layer, t}};
  }
  for (const Rename& r : n.top) {
    if (!starts_with(name, r.ours)) continue;
    const bool batched = n.positions_batched && (name == "positions.weight" || name == "sinusoid" || name == "cls");
    const std::string leaf = name.substr(std::string(r.ours).size());
    std::vector<NamedWeight> named{{r.theirs + leaf, batched ? t.unsqueeze(0).view({1, -1, t.size(-1)}) : t}};
    if (n.final_norm_alias && std::string(r.ours) == "final_norm.") named.push_back({n.final_norm_alias + leaf, t, true});
    return named;
  }
  throw std::logic_error("weights: no authors' name for the model's " + name);
}

// Whether an authors' name is a method's own parameter (inside a block's attention module).
bool in_attention_module(const Naming& n, const std::string& name) {
  if (!starts_with(name, n.block)) return false;
  std::size_t i = std::string(n.block).size();
  const std::size_t digits = i;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  return i > digits && name.compare(i, std::string(n.block_end).size(), n.block_end) == 0 &&
         starts_with(name.substr(i + std::string(n.block_end).size()), n.attention);
}

std::string shape_text(at::IntArrayRef shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

safetensors::DType file_dtype(at::ScalarType type) {
  switch (type) {
    case at::kDouble: return safetensors::DType::F64;
    case at::kFloat: return safetensors::DType::F32;
    case at::kHalf: return safetensors::DType::F16;
    case at::kBFloat16: return safetensors::DType::BF16;
    case at::kLong: return safetensors::DType::I64;
    case at::kInt: return safetensors::DType::I32;
    case at::kBool: return safetensors::DType::BOOL;
    default: throw std::logic_error(std::string("weights: no safetensors dtype for ") + c10::toString(type));
  }
}

std::optional<at::ScalarType> floating_type(safetensors::DType dtype) {
  switch (dtype) {
    case safetensors::DType::F64: return at::kDouble;
    case safetensors::DType::F32: return at::kFloat;
    case safetensors::DType::F16: return at::kHalf;
    case safetensors::DType::BF16: return at::kBFloat16;
    default: return std::nullopt;
  }
}

// "the first; and N more" for an error that has several instances.
std::string and_more(std::size_t count) { return count > 1 ? " (and " + std::to_string(count - 1) + " more)" : ""; }

}  // namespace

WeightNaming weight_naming(const ModelConfig& config) {
  return config.init == Init::kl_authors ? WeightNaming::kl_authors : WeightNaming::lra_authors;
}

const char* word(WeightNaming naming) { return naming == WeightNaming::kl_authors ? "kl_authors" : "lra_authors"; }

std::vector<NamedWeight> named_weights(EncoderClassifier& model) {
  const Naming& n = naming_of(weight_naming(model->config()));
  const bool pair_task = model->task().inputs == 2;
  const bool mid_layer = pair_task && model->config().pair_head == PairHead::concat;  // its second hidden layer
  std::vector<NamedWeight> weights;
  std::unordered_set<const c10::TensorImpl*> seen;  // a weight layers share: once, under its first name
  for (const auto& p : model->named_parameters()) {
    if (!seen.insert(p.value().unsafeGetTensorImpl()).second) continue;
    for (auto& w : authors_names(n, p.key(), p.value(), pair_task, mid_layer)) weights.push_back(std::move(w));
  }
  // of the buffers, only what the authors' module holds too: the KL classifiers' sinusoid table
  if (&n == &naming_of(WeightNaming::kl_authors))
    for (const auto& b : model->named_buffers(/*recurse=*/false))
      if (b.key() == "sinusoid") weights.push_back(authors_names(n, b.key(), b.value(), pair_task, mid_layer).front());
  return weights;
}

void save_weights(EncoderClassifier& model, const std::string& path, safetensors::Metadata metadata) {
  std::vector<at::Tensor> kept;  // the bytes written, alive until written
  std::vector<safetensors::Tensor> tensors;
  for (const auto& w : named_weights(model)) {
    kept.push_back(w.tensor.detach().to(at::kCPU).contiguous());
    const auto& t = kept.back();
    tensors.push_back({w.name, file_dtype(t.scalar_type()), t.sizes().vec(), static_cast<const char*>(t.data_ptr()),
                       static_cast<std::size_t>(t.nbytes())});
  }
  metadata["format"] = "pt";
  metadata["attnlab.naming"] = word(weight_naming(model->config()));
  safetensors::write(path, tensors, metadata);
}

void load_weights(EncoderClassifier& model, const std::string& path, WeightsScope scope) {
  const Naming& n = naming_of(weight_naming(model->config()));
  std::optional<safetensors::File> file;
  try {
    file.emplace(path);
  } catch (const safetensors::FormatError& e) {
    throw WeightsFileError(e.what());
  }
  const auto fail = [&](const std::string& what) { throw WeightsFileError(path + ": " + what); };
  const auto skipped = [&](const std::string& name) {
    return scope == WeightsScope::without_attention && in_attention_module(n, name);
  };
  std::vector<std::pair<at::Tensor, const safetensors::Tensor*>> copies;
  std::vector<std::string> missing, wrong_shape, wrong_type;
  std::unordered_set<std::string> expected;
  const safetensors::Tensor* primary = nullptr;  // the file's tensor of the last weight that was not an alias
  for (const auto& w : named_weights(model)) {
    if (skipped(w.name)) continue;
    expected.insert(w.name);
    const safetensors::Tensor* t = file->find(w.name);
    if (w.alias) {  // optional; where both names are there, one weight
      if (t && primary && (t->shape != primary->shape || t->dtype != primary->dtype || t->bytes != primary->bytes ||
                           std::memcmp(t->data, primary->data, t->bytes) != 0))
        fail(w.name + " and " + primary->name + " are one weight in this model, but differ there");
      continue;
    }
    primary = t;
    if (!t) {
      missing.push_back(w.name);
    } else if (t->shape != w.tensor.sizes().vec()) {
      wrong_shape.push_back(w.name + " is " + shape_text(t->shape) + " there, " + shape_text(w.tensor.sizes()) + " in this model");
    } else if (!floating_type(t->dtype) && w.tensor.is_floating_point()) {
      wrong_type.push_back(w.name + " is " + safetensors::dtype_name(t->dtype) + ", not a floating-point type");
    } else {
      copies.push_back({w.tensor, t});
    }
  }
  const std::string naming = std::string(" (") + word(weight_naming(model->config())) + " names)";
  if (!missing.empty())
    fail("no tensor " + missing.front() + and_more(missing.size()) + ", a weight of this model" + naming);
  if (!wrong_shape.empty()) fail(wrong_shape.front() + and_more(wrong_shape.size()));
  if (!wrong_type.empty()) fail(wrong_type.front() + and_more(wrong_type.size()));
  std::vector<std::string> extra;
  for (const auto& t : file->tensors())
    if (!expected.count(t.name) && !skipped(t.name)) extra.push_back(t.name);
  if (!extra.empty()) fail("tensor " + extra.front() + and_more(extra.size()) + " is not a weight of this model" + naming);

  torch::NoGradGuard no_grad;
  for (auto& [view, t] : copies) {
    const auto type = floating_type(t->dtype).value_or(view.scalar_type());
    view.copy_(at::from_blob(const_cast<char*>(t->data), t->shape, at::TensorOptions().dtype(type)));
  }
}

}  // namespace attnlab
