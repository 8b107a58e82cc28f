#include "plugin_host/scripted_method.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/passes/autocast.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>
#include <torch/version.h>

namespace attnlab {
namespace {

// What LibTorch said, without the C++ backtrace a c10::Error carries.
std::string error_text(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e)) return error->what_without_backtrace();
  return e.what();
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The last line that says something: for an exception a script raised, after the interpreter's
// traceback, the script's own "builtins.ValueError: what".
std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line.substr(line.find_first_not_of(" \t"));
  return last;
}

// LibTorch's file errors go on about miniz and corrupted checkpoints: the first sentence says it.
std::string first_sentence(const std::string& text) {
  const std::string line = first_line(text);
  return line.substr(0, line.find(". "));
}

const std::string kBuildTorch = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);

// "2.11.0+cu130" -> 2.11 is newer than this build's LibTorch?
bool newer_than_build(const std::string& version) {
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return false;
  return major > TORCH_VERSION_MAJOR || (major == TORCH_VERSION_MAJOR && minor > TORCH_VERSION_MINOR);
}

// A file from a newer PyTorch than this build's LibTorch is refused before LibTorch reads its
// code (it would fail later, on the first operator it does not know, in words naming neither
// version). The version is the note the export script adds (`_extra_files={"torch_version":
// torch.__version__}`); without it, PyTorch 2's byteorder record tells a 1.13 build enough.
void check_producer(const std::string& path) {
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  } catch (const std::exception& e) {
    throw ScriptError(path + ": not a TorchScript file (" + first_sentence(error_text(e)) + ")");
  }
  const std::string advice = ": script it with PyTorch " + kBuildTorch + ", or run it with an attnlab built against its version";
  if (reader->hasRecord("extra/torch_version")) {
    const auto record = reader->getRecord("extra/torch_version");
    const std::string version(static_cast<const char*>(std::get<0>(record).get()), std::get<1>(record));
    if (newer_than_build(version))
      throw ScriptError(path + ": scripted by PyTorch " + version + ", newer than this build's LibTorch " + kBuildTorch + advice);
  } else if (TORCH_VERSION_MAJOR < 2 && reader->hasRecord("byteorder")) {
    throw ScriptError(path + ": written by a PyTorch newer than this build's LibTorch " + kBuildTorch +
                      " (its archive has the byteorder record PyTorch 2 writes; it names no torch_version)" + advice);
  }
}

torch::jit::Module load_module(const std::string& path) {
  // TorchScript's graph optimisations are off: its first calls would run the graph as profiled and
  // later ones an optimised graph with gradients of its own (a resumed run would then not match
  // one that never stopped), and its autocast pass writes the casts of the precision it first met
  // into that graph (a graph met in bf16, then in fp16, mixes the two). Without them each operator
  // runs as in eager PyTorch, under LibTorch's autograd and autocast, as a compiled plugin's does.
  static const bool plain_interpreter = (torch::jit::setGraphExecutorOptimize(false), torch::jit::setAutocastMode(false), true);
  (void)plain_interpreter;
  check_producer(path);
  try {
    return torch::jit::load(path, c10::Device(c10::kCPU));  // the model moves it to the job's device
  } catch (const std::exception& e) {
    throw ScriptError(path + ": not a TorchScript module (" + first_sentence(error_text(e)) + ")");
  }
}

bool is_tensor(const c10::TypePtr& type) { return type->kind() == c10::TypeKind::TensorType; }

void check_signature(const torch::jit::Module& module, const std::string& path) {
  const auto forward = module.find_method("forward");
  if (!forward) throw ScriptError(path + ": the module has no forward method");
  const auto& schema = forward->function().getSchema();
  bool fits = schema.arguments().size() == 5 && schema.returns().size() == 1 && is_tensor(schema.returns()[0].type());
  for (std::size_t i = 1; fits && i < 5; ++i) fits = is_tensor(schema.arguments()[i].type());
  if (fits) return;
  std::ostringstream text;
  text << schema;
  throw ScriptError(path + ": its forward is " + text.str() +
                    "; attnlab calls forward(self, q: Tensor, k: Tensor, v: Tensor, key_valid: Tensor) -> Tensor");
}

// Dropout whose training flag is a constant: what torch.jit.trace leaves of a module's dropout (it
// records the branch it saw: traced in eval, it never drops in training; in training, it drops at
// evaluation too). A scripted module's flag is its `training` attribute, read at each call.
bool has_frozen_dropout(const torch::jit::Block& block) {
  static const std::vector<c10::Symbol> dropouts = {
      c10::Symbol::fromQualString("aten::dropout"),       c10::Symbol::fromQualString("aten::dropout_"),
      c10::Symbol::fromQualString("aten::feature_dropout"), c10::Symbol::fromQualString("aten::feature_dropout_"),
      c10::Symbol::fromQualString("aten::alpha_dropout"), c10::Symbol::fromQualString("aten::alpha_dropout_"),
      c10::Symbol::fromQualString("aten::feature_alpha_dropout"),
      c10::Symbol::fromQualString("aten::feature_alpha_dropout_")};
  for (const torch::jit::Node* node : block.nodes()) {
    if (std::find(dropouts.begin(), dropouts.end(), node->kind()) != dropouts.end() && node->inputs().size() == 3 &&
        node->input(2)->node()->kind() == c10::prim::Constant)
      return true;
    for (const torch::jit::Block* inner : node->blocks())
      if (has_frozen_dropout(*inner)) return true;
  }
  return false;
}

void check_not_frozen(const torch::jit::Module& module, const std::string& path) {
  const auto graph = module.get_method("forward").graph()->copy();
  torch::jit::Inline(*graph);  // the submodules' and functions' code, in place of their calls
  if (has_frozen_dropout(*graph->block()))
    throw ScriptError(path + ": its dropout's training flag is a constant, as torch.jit.trace leaves it (it never "
                             "drops in training, or always drops): script the module with torch.jit.script");
}

// What PyTorch 2's torch.jit.trace writes beside the code (the traced inputs); 1.13 writes no mark.
bool saved_by_trace(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    return reader.hasRecord("traced_inputs.pkl");
  } catch (const std::exception&) {
    return false;
  }
}

template <typename T>
T attribute_or(const torch::jit::Module& module, const char* name, T otherwise, const std::string& path) {
  if (!module.hasattr(name)) return otherwise;
  const auto value = module.attr(name);
  if constexpr (std::is_same_v<T, bool>) {
    if (value.isBool()) return value.toBool();
  } else if (value.isInt()) {
    return value.toInt();
  }
  throw ScriptError(path + ": its attribute " + name + " is a " + value.tagKind() + ", not " +
                    (std::is_same_v<T, bool> ? "a bool" : "an int"));
}

// Sets a default generator's seed for one call and puts its state back after: the script's draws
// follow the seed given, and nothing else that draws from the default generator (dropout) sees a
// difference.
class SeededDefaultGenerator {
 public:
  SeededDefaultGenerator(c10::Device device, std::uint64_t seed) : generator_(at::globalContext().defaultGenerator(device)) {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    saved_ = generator_.get_state();
    generator_.set_current_seed(seed);
  }
  ~SeededDefaultGenerator() {
    std::lock_guard<std::mutex> lock(generator_.mutex());
    generator_.set_state(saved_);
  }
  SeededDefaultGenerator(const SeededDefaultGenerator&) = delete;
  SeededDefaultGenerator& operator=(const SeededDefaultGenerator&) = delete;

 private:
  at::Generator generator_;
  at::Tensor saved_;
};

// The scripted module, its parameters and buffers registered as this module's own (the same
// tensors, shared), so that the model's optimizer trains them, `to(device)` moves them and the
// resume checkpoints hold them. Submodules' names "a.b" become "a_b" (a module name has no dots).
class ScriptedAttention : public AttentionMethod {
 public:
  ScriptedAttention(torch::jit::Module module, std::string path) : module_(std::move(module)), path_(std::move(path)) {
    reset_parameters();  // first: it may assign new tensors, which are the ones to register
    try {
      for (const auto& p : module_.named_parameters(/*recurse=*/true))
        register_parameter(member_name(p.name), p.value, p.value.requires_grad());
      for (const auto& b : module_.named_buffers(/*recurse=*/true)) register_buffer(member_name(b.name), b.value);
    } catch (const c10::Error& e) {
      throw ScriptError(path_ + ": " + first_line(e.what_without_backtrace()));
    }
    draws_ = module_.find_method("redraw").has_value();
    redraw_every_ = attribute_or<std::int64_t>(module_, "redraw_every", 0, path_);
    fresh_draw_at_eval_ = attribute_or<bool>(module_, "fresh_draw_at_eval", false, path_);
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    try {
      return module_.forward({q, k, v, key_valid}).toTensor();
    } catch (const std::exception& e) {
      throw ScriptError(path_ + ": forward raised " + error_line(e));
    }
  }

  void train(bool on) override {
    AttentionMethod::train(on);
    module_.train(on);
  }

  bool stochastic() const override { return draws_; }
  std::int64_t redraw_every() const override { return redraw_every_; }
  bool fresh_draw_at_eval() const override { return fresh_draw_at_eval_; }

  // The script's redraw() draws from the default generators (TorchScript in PyTorch 1.13 takes no
  // Generator): each is seeded with one draw from `generator` for the call.
  void redraw(at::Generator& generator) override {
    std::uint64_t seed = 0;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      seed = at::check_generator<at::CPUGeneratorImpl>(generator)->random64();
    }
    SeededDefaultGenerator cpu(c10::Device(c10::kCPU), seed);
    std::optional<SeededDefaultGenerator> accelerator;
    if (const auto device = tensor_device(); device.is_cuda()) accelerator.emplace(device, seed);
    try {
      module_.run_method("redraw");
    } catch (const std::exception& e) {
      throw ScriptError(path_ + ": redraw raised " + error_line(e));
    }
  }

 private:
  // The script's reset_parameters(), where it has one: its initial values drawn from the default
  // CPU generator (the module is loaded on the CPU), which the model's builder has seeded with the
  // job's seed, so that each layer's copy and each seed start from their own draw, as a compiled
  // plugin's do. A resumed run then loads the checkpoint's values over them.
  void reset_parameters() {
    if (!module_.find_method("reset_parameters")) return;
    torch::NoGradGuard no_grad;  // as torch.nn.init does: parameters are written in place
    try {
      module_.run_method("reset_parameters");
    } catch (const std::exception& e) {
      throw ScriptError(path_ + ": reset_parameters raised " + error_line(e));
    }
  }

  static std::string member_name(std::string name) {
    for (auto& c : name)
      if (c == '.') c = '_';
    return name;
  }

  c10::Device tensor_device() const {
    for (const auto& p : parameters()) return p.device();
    for (const auto& b : buffers()) return b.device();
    return c10::Device(c10::kCPU);
  }

  torch::jit::Module module_;
  std::string path_;
  bool draws_ = false;
  std::int64_t redraw_every_ = 0;
  bool fresh_draw_at_eval_ = false;
};

}  // namespace

std::string error_line(const std::exception& error) {
  const std::string text = error_text(error);
  return text.rfind("The following operation failed in the TorchScript interpreter", 0) == 0 ? last_line(text)
                                                                                               : first_line(text);
}

std::shared_ptr<AttentionMethod> load_scripted_attention(const std::string& path) {
  auto module = load_module(path);
  check_signature(module, path);
  check_not_frozen(module, path);
  return std::make_shared<ScriptedAttention>(std::move(module), path);
}

bool scripted_fixed_length(const std::string& path) {
  return attribute_or<bool>(load_module(path), "fixed_length", false, path);
}

std::vector<std::string> scripted_warnings(const std::string& path) {
  const auto module = load_module(path);
  std::vector<std::string> warnings;
  if (saved_by_trace(path))
    warnings.push_back(path + ": saved by torch.jit.trace: its shapes and branches are the traced inputs'; it has no "
                              "dropout to freeze and runs at this shape, but only torch.jit.script keeps its control flow");
  if (module.find_method("reset_parameters")) return warnings;
  // buffers a redraw() fills are drawn from the job's seed already
  const std::size_t parameters = module.parameters(/*recurse=*/true).size();
  const std::size_t buffers = module.find_method("redraw") ? 0 : module.buffers(/*recurse=*/true).size();
  if (parameters + buffers == 0) return warnings;
  const std::string kinds = parameters && buffers ? " parameter and buffer" : parameters ? " parameter" : " buffer";
  warnings.push_back(path + ": its " + std::to_string(parameters + buffers) + kinds +
                     " tensors start from the file's values in every layer and seed; export reset_parameters() to draw "
                     "them from the job's seed");
  return warnings;
}

void check_scripted_attention(const std::string& path, const AttentionShape& shape, std::int64_t batch) {
  auto method = load_scripted_attention(path);
  method->eval();
  const std::int64_t n = std::min<std::int64_t>(2048, shape.max_len), real = std::max<std::int64_t>(1, n * 5 / 8);
  batch = std::max<std::int64_t>(2, batch);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
  if (method->stochastic()) method->redraw(generator);
  auto draw = [&] { return at::randn({batch, shape.heads, n, shape.head_dim}, generator); };
  const auto q = draw(), k = draw(), v = draw();
  auto key_valid = at::ones({batch, n}, at::kBool);
  key_valid[batch - 1].slice(0, real).fill_(false);
  torch::NoGradGuard no_grad;
  const auto out = method->forward(q, k, v, key_valid);
  if (out.sizes() != q.sizes()) {
    std::ostringstream text;
    text << path << ": forward returned " << out.sizes() << " for q, k, v of " << q.sizes() << "; it must return q's shape";
    throw ScriptError(text.str());
  }
}

}  // namespace attnlab
