#pragma once
// A model's weights in and out of attnlab as safetensors files, under the names the papers'
// authors' PyTorch modules give them: `model.load_state_dict(safetensors.torch.load_file(F))` takes
// a file attnlab wrote into their model, and `[model] init_from = F` starts a run from one their
// code saved. Two namings, by the model's `init`:
//
//   lra_authors (init = "default"): Skyformer's and Nystromformer's LRA code (ModelForSC /
//     ModelForSCDual): model.embeddings.{word,position}_embeddings, model.transformer_{i}.{norm1,
//     mha.W_q, mha.W_k, mha.W_v, mha.ff, norm2, mlpblock.0, mlpblock.3}, model.norm,
//     seq_classifer.mlpblock.{0,2} (their spelling);
//   kl_authors (init = "kl_authors"): the KL authors' classifiers on fast_transformers:
//     input_embeddings, cls_embedding [1, 1, dim], pos_embedding [1, positions, dim] (their sinusoid
//     buffer), transformer.layers.{i}.{attention.{query,key,value,out}_projection, norm2 (the input's
//     norm there), norm1 (the feed-forward's), linear1, linear2}, transformer.norm (and output_norm,
//     the same module under a second name in their state_dict), classifier.layer{1,2} or, for two
//     inputs, dual_classifier.layer{1,2,3}. Their Text classifier alone names its sinusoid
//     pos_embedding.pe, [positions, dim]; their checkpoints, saved from nn.DataParallel, prefix every
//     name with "module.".
//
// Token ids are the dataset plugin's (ListOps' fixed table, datasets/listops/README.md); the
// authors' came from their pipelines' vocabularies (a Python set's order; first appearance), so
// moving a word embedding between the two needs its rows permuted by the caller.
//
// attnlab's one q, k, v matrix is three there (its rows in thirds). A method's own parameters go
// under the block's attention module by their attnlab names (mha.attn.NAME, attention.
// inner_attention.NAME). What their models lack keeps a name of the same style: the CLS vector of
// the LRA naming (model.embeddings.cls; their CLS is a vocabulary id), many-hot features
// (model.embeddings.features, features), a concat head's layers under the LRA naming
// (seq_classifer.mlpblock.{0,2,4}). A weight that layers share is written once, under its first
// layer's name.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "attnlab/train/model.hpp"
#include "attnlab/train/safetensors.hpp"

namespace attnlab {

enum class WeightNaming { lra_authors, kl_authors };
WeightNaming weight_naming(const ModelConfig& config);  // by config.init
const char* word(WeightNaming naming);                  // "lra_authors" | "kl_authors"

// A weights file that cannot start this model: one line, "PATH: what differs" (a name missing or
// extra, a shape, a dtype), naming the first difference and how many there are.
struct WeightsFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One tensor of the model under its authors' name: a view of the model's parameter (or of the
// buffer their module also holds), sharing its storage.
struct NamedWeight {
  std::string name;
  at::Tensor tensor;
  bool alias = false;  // a second name of the weight before it (the KL classifiers' output_norm.*, their
                       // transformer.norm.*): written, and optional in a file read (equal if there)
};

// Every weight of the model, each once, in the model's order.
std::vector<NamedWeight> named_weights(EncoderClassifier& model);

// The model's weights as a safetensors file (their dtype, on the CPU), `metadata` beside
// "format": "pt" and "attnlab.naming". FormatError when it cannot be written.
void save_weights(EncoderClassifier& model, const std::string& path, safetensors::Metadata metadata = {});

// Which of the model's weights a file must hold: all of them, or all but those of the attention
// methods (a model of another method started from the same file: Skyformer's instability score
// compares softmax attention from the method's initial weights).
enum class WeightsScope { all, without_attention };

// Copies a safetensors file's tensors into the model, as PyTorch's load_state_dict(strict=True)
// does: every weight of the scope present with its shape, nothing else in the file (under
// without_attention, the methods' own names are passed over), floating-point values converted to
// the model's dtype. Nothing is copied unless everything matches.
void load_weights(EncoderClassifier& model, const std::string& path, WeightsScope scope = WeightsScope::all);

}  // namespace attnlab
