// Weights in and out as safetensors files (train/include/attnlab/train/weights.hpp, safetensors.hpp):
// the format's round trip and every malformed file refused in one line; the authors' names of both
// namings (the LRA code's and the KL classifiers'), written once per weight and read back exactly
// into another model; a file of another model refused, naming the first difference, with nothing
// copied. (That PyTorch's own library reads and writes these files, and that the names are the
// ones their modules have, is authors_model_test.cpp's.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <ATen/ATen.h>

#include "attnlab/train/safetensors.hpp"
#include "attnlab/train/weights.hpp"
#include "test_support.hpp"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("attnlab-weights-" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir / name;
}

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& file, const std::string& bytes) { std::ofstream(file, std::ios::binary) << bytes; }

// A file of the given header (its length prefixed, little-endian) and data.
std::string raw_file(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string error_reading(const std::string& bytes) {
  const auto file = scratch("bad.safetensors");
  write_bytes(file, bytes);
  try {
    safetensors::File read(file.string());
  } catch (const safetensors::FormatError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Safetensors, TensorsAndMetadataRoundTrip) {
  const double d[] = {1.5, -2.25, 3e-300};
  const std::int64_t ids[] = {7, -1};
  const std::uint8_t flags[] = {1, 0, 1, 1};
  const auto file = scratch("round.safetensors").string();
  safetensors::write(file,
                     {{"weights", safetensors::DType::F64, {3}, reinterpret_cast<const char*>(d), sizeof d},
                      {"ids", safetensors::DType::I64, {2, 1}, reinterpret_cast<const char*>(ids), sizeof ids},
                      {"flags", safetensors::DType::BOOL, {2, 2}, reinterpret_cast<const char*>(flags), sizeof flags},
                      {"empty", safetensors::DType::F32, {0, 4}, nullptr, 0}},
                     {{"format", "pt"}, {"note", "a \"quoted\" line"}});
  const std::string bytes = bytes_of(file);
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(header % 8, 0u) << "the header is padded so that the data is aligned";
  EXPECT_EQ(bytes.size(), 8 + header + sizeof d + sizeof ids + sizeof flags);

  const safetensors::File read(file);
  ASSERT_EQ(read.tensors().size(), 4u);
  const auto* w = read.find("weights");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, safetensors::DType::F64);
  EXPECT_EQ(w->shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(std::memcmp(w->data, d, sizeof d), 0);
  EXPECT_EQ(read.find("ids")->shape, (std::vector<std::int64_t>{2, 1}));
  EXPECT_EQ(std::memcmp(read.find("ids")->data, ids, sizeof ids), 0);
  EXPECT_EQ(read.find("flags")->dtype, safetensors::DType::BOOL);
  EXPECT_EQ(read.find("empty")->numel(), 0);
  EXPECT_EQ(read.find("absent"), nullptr);
  EXPECT_EQ(read.metadata().at("note"), "a \"quoted\" line");
}

TEST(Safetensors, AMalformedFileIsOneLineNamingIt) {
  const std::string path = scratch("bad.safetensors").string();
  const std::string eight(8, 'x');
  const auto entry = [](const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return R"({"t": {"dtype": ")" + dtype + R"(", "shape": )" + shape + R"(, "data_offsets": )" + offsets + "}}";
  };
  const std::pair<std::string, std::string> cases[] = {
      {"abc", "not a safetensors file (3 bytes, no header length)"},
      {raw_file(std::string(10, ' '), "").substr(0, 12), "not a safetensors file (a header of 10 bytes in a file of 12)"},
      {raw_file("{not json", ""), "not a safetensors file (its header is not JSON: "},
      {raw_file("[1, 2]", ""), "not a safetensors file (its header is not a JSON object)"},
      {raw_file(entry("F8", "[2]", "[0, 8]"), eight), "tensor t: dtype \"F8\" is not one attnlab reads"},
      {raw_file(entry("F32", "[-2]", "[0, 8]"), eight), "tensor t: shape [-2] is not of sizes >= 0"},
      {raw_file(entry("F32", "[2]", "[0, 16]"), eight), "tensor t: data_offsets [0, 16] outside the 8 bytes of data"},
      {raw_file(entry("F32", "[3]", "[0, 8]"), eight), "tensor t: 8 bytes for a shape of 3 F32 values"},
      {raw_file(entry("F32", "[1]", "[4, 8]"), eight), "a gap in the data at byte 0"},
      {raw_file(entry("F32", "[1]", "[0, 4]"), eight), "4 bytes of data after the last tensor"},
      {raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                eight),
       "two tensors' data overlap"},
      {raw_file(R"({"__metadata__": {"k": 1}})", ""), "__metadata__ k is not a string"},
  };
  for (const auto& [bytes, message] : cases) {
    const std::string error = error_reading(bytes);
    EXPECT_EQ(error.rfind(path + ": " + message, 0), 0u) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  EXPECT_EQ(error_reading(raw_file("{}", "")), "(no error)");
}

// A model of the LRA code's shape (2 layers of dim 16, 2 heads of 8) for `task`, seeded.
EncoderClassifier lra_model(const std::string& method, std::uint64_t seed, const TaskInfo& task, ModelConfig m = {}) {
  m.dim = 16;
  m.ffn_dim = 24;
  m.heads = 2;
  m.head_dim = 8;
  const auto* plugin = testing::built_plugins().find(PluginKind::attention, method);
  auto params = plugin->defaults();
  if (method == "linformer") {
    params.set("k", std::int64_t{4});
    params.set("share_e", true);
  }
  torch::manual_seed(seed);
  return EncoderClassifier(m, task, [plugin, params](const AttentionShape& s) { return plugin->make_attention(s, params); });
}

TaskInfo task(std::int64_t inputs = 1) {
  TaskInfo t;
  t.vocab_size = 12;
  t.num_classes = 3;
  t.max_len = 10;
  t.inputs = inputs;
  return t;
}

std::vector<std::string> names_of(EncoderClassifier& model) {
  std::vector<std::string> names;
  for (const auto& w : named_weights(model)) names.push_back(w.name + " " + c10::str(w.tensor.sizes()));
  return names;
}

TEST(Weights, LraNamesAreTheLraCodesAndQkvIsThreeMatrices) {
  auto model = lra_model("softmax", 1, task());
  std::vector<std::string> expected = {"model.embeddings.word_embeddings.weight [12, 16]",
                                       "model.embeddings.position_embeddings.weight [10, 16]"};
  for (const std::string layer : {"0", "1"}) {
    const std::string p = "model.transformer_" + layer + ".";
    for (const std::string part : {"mha.W_q", "mha.W_k", "mha.W_v"}) expected.push_back(p + part + ".weight [16, 16]");
    for (const std::string part : {"mha.W_q", "mha.W_k", "mha.W_v"}) expected.push_back(p + part + ".bias [16]");
    expected.insert(expected.end(), {p + "mha.ff.weight [16, 16]", p + "mha.ff.bias [16]", p + "mlpblock.0.weight [24, 16]",
                                     p + "mlpblock.0.bias [24]", p + "mlpblock.3.weight [16, 24]", p + "mlpblock.3.bias [16]",
                                     p + "norm1.weight [16]", p + "norm1.bias [16]", p + "norm2.weight [16]", p + "norm2.bias [16]"});
  }
  expected.insert(expected.end(), {"model.norm.weight [16]", "model.norm.bias [16]", "seq_classifer.mlpblock.0.weight [24, 16]",
                                   "seq_classifer.mlpblock.0.bias [24]", "seq_classifer.mlpblock.2.weight [3, 24]",
                                   "seq_classifer.mlpblock.2.bias [3]"});
  auto names = names_of(model);
  std::sort(names.begin(), names.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(names, expected);
  // W_k is the middle third of attnlab's one projection, and a view of it
  for (auto& w : named_weights(model))
    if (w.name == "model.transformer_1.mha.W_k.weight") {
      const auto qkv = model->named_parameters()["block1.qkv.weight"];
      EXPECT_TRUE(at::equal(w.tensor, qkv.slice(0, 16, 32)));
      EXPECT_EQ(w.tensor.data_ptr(), qkv.slice(0, 16, 32).data_ptr());
    }
}

TEST(Weights, KlNamesAreTheKlClassifiersWithTheirNormsAndShapes) {
  ModelConfig kl;
  kl.init = Init::kl_authors;
  kl.norm = Norm::normed_input;
  kl.attention_bias = false;
  kl.pooling = Pooling::cls;
  kl.positions = Positions::sinusoidal;
  kl.pair_head = PairHead::concat;
  auto model = lra_model("softmax", 1, task(2), kl);
  const auto names = names_of(model);
  auto has = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) != names.end(); };
  for (const char* name : {"input_embeddings.weight [12, 16]", "cls_embedding [1, 1, 16]", "pos_embedding [1, 11, 16]",
                           "transformer.layers.0.attention.query_projection.weight [16, 16]",
                           "transformer.layers.1.attention.value_projection.weight [16, 16]",
                           "transformer.layers.1.attention.out_projection.weight [16, 16]",
                           "transformer.layers.0.linear1.bias [24]", "transformer.layers.0.norm2.weight [16]",
                           "transformer.norm.weight [16]", "output_norm.weight [16]", "dual_classifier.layer1.weight [24, 32]",
                           "dual_classifier.layer2.weight [12, 24]", "dual_classifier.layer3.bias [3]"})
    EXPECT_TRUE(has(name)) << name;
  EXPECT_FALSE(has("transformer.layers.0.attention.query_projection.bias [16]")) << "their projections have no bias";
  // their norm2 normalises the layer's input, as attnlab's norm1
  for (auto& w : named_weights(model))
    if (w.name == "transformer.layers.0.norm2.weight")
      EXPECT_EQ(w.tensor.data_ptr(), model->named_parameters()["block0.norm1.weight"].data_ptr());
}

TEST(Weights, AFileStartsAnotherModelAtTheSameWeightsAndASharedWeightIsWrittenOnce) {
  auto trained = lra_model("linformer", 1, task());  // one E for both layers (share_e)
  {
    torch::NoGradGuard no_grad;
    for (auto& p : trained->parameters()) p.add_(at::randn_like(p));
  }
  const auto names = names_of(trained);
  EXPECT_NE(std::find(names.begin(), names.end(), "model.transformer_0.mha.attn.E [2, 4, 10]"), names.end());
  EXPECT_EQ(std::count_if(names.begin(), names.end(), [](const std::string& n) { return n.find(".mha.attn.E") != std::string::npos; }), 1);
  const auto file = scratch("trained.safetensors").string();
  save_weights(trained, file, {{"attnlab.run", "7"}});
  EXPECT_EQ(safetensors::File(file).metadata().at("attnlab.naming"), "lra_authors");
  EXPECT_EQ(safetensors::File(file).metadata().at("attnlab.run"), "7");

  auto started = lra_model("linformer", 2, task());
  load_weights(started, file);
  const auto a = trained->named_parameters(), b = started->named_parameters();
  for (const auto& p : a) EXPECT_TRUE(at::equal(p.value(), b[p.key()])) << p.key();
  EXPECT_TRUE(at::equal(b["block1.attention.E"], b["block0.attention.E"]));
  // the same weights in another dtype: converted
  auto wide = lra_model("linformer", 3, task());
  wide->to(at::kDouble);
  load_weights(wide, file);
  EXPECT_TRUE(at::equal(wide->named_parameters()["block0.qkv.weight"], a["block0.qkv.weight"].to(at::kDouble)));
  // the weights a softmax model has too, without the method's own
  auto softmax = lra_model("softmax", 4, task());
  load_weights(softmax, file, WeightsScope::without_attention);
  EXPECT_TRUE(at::equal(softmax->named_parameters()["head_out.weight"], a["head_out.weight"]));
}

TEST(Weights, AFileOfAnotherModelIsRefusedInOneLineWithNothingCopied) {
  auto model = lra_model("softmax", 1, task());
  const auto file = scratch("softmax.safetensors").string();
  save_weights(model, file);
  auto refused = [&](EncoderClassifier& into, const std::string& path) {
    const auto before = into->named_parameters()["block0.qkv.weight"].clone();
    try {
      load_weights(into, path);
    } catch (const WeightsFileError& e) {
      EXPECT_TRUE(at::equal(into->named_parameters()["block0.qkv.weight"], before)) << "nothing copied";
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  auto linformer = lra_model("linformer", 2, task());
  EXPECT_EQ(refused(linformer, file), file + ": no tensor model.transformer_0.mha.attn.E, a weight of this model (lra_authors names)");
  auto wider = lra_model("softmax", 2, task(), [] {
    ModelConfig m;
    m.layers = 3;
    return m;
  }());
  EXPECT_EQ(refused(wider, file), file + ": no tensor model.transformer_2.mha.W_q.weight (and 15 more), a weight of this model "
                                         "(lra_authors names)");
  TaskInfo other = task();
  other.vocab_size = 17;
  auto vocabulary = lra_model("softmax", 2, other);
  EXPECT_EQ(refused(vocabulary, file), file + ": model.embeddings.word_embeddings.weight is [12, 16] there, [17, 16] in this model");
  const auto linformer_file = scratch("linformer.safetensors").string();
  save_weights(linformer, linformer_file);
  auto softmax = lra_model("softmax", 2, task());
  EXPECT_EQ(refused(softmax, linformer_file),
            linformer_file + ": tensor model.transformer_0.mha.attn.E is not a weight of this model (lra_authors names)");
  write_bytes(scratch("text.safetensors"), "not weights at all");
  EXPECT_EQ(refused(softmax, scratch("text.safetensors").string()).rfind(scratch("text.safetensors").string() + ": not a safetensors file", 0), 0u);
  EXPECT_EQ(refused(softmax, scratch("missing.safetensors").string()),
            scratch("missing.safetensors").string() + ": cannot read (No such file or directory)");
}

}  // namespace
}  // namespace attnlab
