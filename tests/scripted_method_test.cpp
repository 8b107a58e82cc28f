// Methods written in PyTorch (runner/plugin_host/scripted_method.cpp): modules of
// tests/scripted/methods.py, scripted in the test by the Python torch of this build, compute what
// the native methods compute, draw what the seed says, are held to the conformance suite, are
// named by experiment files, and every malformed file is refused in one line naming it.
// (Trained, checkpointed and resumed to the bit: resume_test.cpp's scripted_* cases.)
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adamw.h>

#include "attnlab/attention.hpp"
#include "attnlab/train/model.hpp"
#include "experiment/enqueue.hpp"
#include "experiment/experiment.hpp"
#include "experiment/train_job.hpp"
#include "plugin_host/conformance.hpp"
#include "plugin_host/hashing.hpp"
#include "plugin_host/scripted_method.hpp"

namespace attnlab {
namespace {

namespace fs = std::filesystem;
using testing::scripted_method;

struct Inputs {
  at::Tensor q, k, v, valid;
};

// Two sequences of 12 tokens, the second padded after 7, in double.
Inputs inputs(std::uint64_t seed) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto draw = [&] { return at::randn({2, 2, 12, 8}, g, at::kDouble).requires_grad_(true); };
  Inputs in{draw(), draw(), draw(), at::ones({2, 12}, at::kBool)};
  in.valid[1].slice(0, 7).fill_(false);
  return in;
}

// The outputs of real tokens only (padded queries' outputs are unspecified).
at::Tensor real_rows(const at::Tensor& out) { return at::cat({out[0], out[1].slice(1, 0, 7)}, 1); }

TEST(ScriptedMethod, SoftmaxMatchesTheNativeSoftmaxInOutputsAndGradients) {
  const auto& native = *testing::built_plugins().find(PluginKind::attention, "softmax");
  const AttentionShape shape{2, 8, 12};
  auto reference = attention_maker(native, native.defaults())(shape);
  auto scripted = load_scripted_attention(scripted_method("softmax_script"));
  const Inputs a = inputs(1), b = inputs(1);
  const auto want = real_rows(reference->forward(a.q, a.k, a.v, a.valid));
  const auto got = real_rows(scripted->forward(b.q, b.k, b.v, b.valid));
  EXPECT_LT((got - want).abs().max().item<double>(), 1e-12);
  const auto weights = at::randn(want.sizes(), at::kDouble);
  (want * weights).sum().backward();
  (got * weights).sum().backward();
  for (const auto& [x, y] : {std::pair{a.q, b.q}, {a.k, b.k}, {a.v, b.v}})
    EXPECT_LT((x.grad() - y.grad()).abs().max().item<double>(), 1e-12);
}

TEST(ScriptedMethod, ParametersAndBuffersAreTheModelsOwnTensors) {
  auto projection = load_scripted_attention(scripted_method("projection"));
  ASSERT_EQ(projection->named_parameters().size(), 1u);
  EXPECT_TRUE(projection->named_parameters().contains("projection"));
  // one AdamW step over the method's parameters, as the model's optimiser takes it: the script's
  // gradient reaches the registered tensor, and the update reaches the script
  const Inputs in = inputs(2);
  const auto e = projection->named_parameters()["projection"];
  const auto e_before = e.detach().clone();
  torch::optim::AdamW optimizer(projection->parameters(), torch::optim::AdamWOptions(0.1));
  const auto before = projection->forward(in.q.to(at::kFloat), in.k.to(at::kFloat), in.v.to(at::kFloat), in.valid);
  before.pow(2).sum().backward();
  ASSERT_TRUE(e.grad().defined());
  EXPECT_GT(e.grad().abs().max().item<double>(), 0);
  optimizer.step();
  EXPECT_GT((e - e_before).abs().max().item<double>(), 0.05);
  const auto after = projection->forward(in.q.to(at::kFloat), in.k.to(at::kFloat), in.v.to(at::kFloat), in.valid);
  EXPECT_GT((after - before).abs().max().item<double>(), 1e-3);
  auto features = load_scripted_attention(scripted_method("features"));
  EXPECT_TRUE(features->named_buffers().contains("omega"));
  EXPECT_TRUE(features->stochastic());
  EXPECT_EQ(features->redraw_every(), 4);
  EXPECT_TRUE(features->fresh_draw_at_eval());
  EXPECT_FALSE(projection->stochastic());
}

TEST(ScriptedMethod, DrawsFollowTheSeedAndLeaveTheDefaultGeneratorAlone) {
  const Inputs in = inputs(3);
  auto output_after_redraw = [&](std::uint64_t seed) {
    auto method = load_scripted_attention(scripted_method("features"));
    auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
    method->redraw(g);
    return method->forward(in.q, in.k, in.v, in.valid).detach();
  };
  at::manual_seed(11);
  const auto stream_before = at::randn({4}, at::kDouble);
  at::manual_seed(11);
  const auto five = output_after_redraw(5);
  EXPECT_TRUE(at::equal(at::randn({4}, at::kDouble), stream_before)) << "redraw moved the default generator";
  at::manual_seed(99);  // the default generator's state does not decide the draws
  EXPECT_TRUE(at::equal(output_after_redraw(5), five));
  EXPECT_FALSE(at::allclose(output_after_redraw(6), five));
}

TEST(ScriptedMethod, ALeakyScriptFailsExactlyThePaddingCheck) {
  PluginRegistry registry;
  const auto& leaky = registry.add_script("leaky", scripted_method("leaky"));
  for (const auto& check : attention_check_names()) {
    const auto r = check_attention(leaky, check, c10::Device(c10::kCPU));
    EXPECT_EQ(r.passed, check != "padding invariance") << check << ": " << r.figure << " " << r.failure;
  }
  const auto& softmax = registry.add_script("softmax_script", scripted_method("softmax_script"));
  for (const auto& check : attention_check_names()) {
    const auto r = check_attention(softmax, check, c10::Device(c10::kCPU));
    EXPECT_TRUE(r.passed) << check << ": " << r.failure;
  }
}

// Issue 41, defect 1: a model of two layers built under seeds 1 and 2 (as a run builds it:
// torch::manual_seed(seed), then the model) starts each layer's copy of the script from its own
// draw, and the same seed from the same one; a file without reset_parameters() says so in one line.
TEST(ScriptedMethod, ResetParametersDrawsEachLayerAndSeedFromTheJobsSeed) {
  const std::string path = scripted_method("reset_projection");
  auto initial = [&](std::uint64_t seed) {
    ModelConfig config;
    config.dim = 16;
    config.heads = 2;
    config.head_dim = 8;
    torch::manual_seed(seed);
    EncoderClassifier model(config, TaskInfo{10, 2, 64, 1}, [&](const AttentionShape&) { return load_scripted_attention(path); });
    std::vector<at::Tensor> e;
    for (const auto& layer : model->attention_methods()) e.push_back(layer->named_parameters()["projection"].detach().clone());
    return e;
  };
  const auto seed1 = initial(1), seed2 = initial(2);
  const std::vector<at::Tensor> four = {seed1[0], seed1[1], seed2[0], seed2[1]};
  for (std::size_t i = 0; i < four.size(); ++i)
    for (std::size_t j = i + 1; j < four.size(); ++j) EXPECT_FALSE(at::equal(four[i], four[j])) << i << " and " << j;
  const auto again = initial(1);
  EXPECT_TRUE(at::equal(again[0], seed1[0]) && at::equal(again[1], seed1[1]));
  // drawn as the script says: N(0, 1/64) entries, not the file's values
  EXPECT_NEAR(seed1[0].std().item<double>(), 0.125, 0.03);

  EXPECT_TRUE(scripted_warnings(path).empty());
  EXPECT_TRUE(scripted_warnings(scripted_method("softmax_script")).empty());
  EXPECT_TRUE(scripted_warnings(scripted_method("features")).empty()) << "its buffer is redrawn from the job's seed";
  const std::string projection = scripted_method("projection");
  EXPECT_EQ(scripted_warnings(projection),
            std::vector<std::string>{projection + ": its 1 parameter tensors start from the file's values in every layer "
                                                  "and seed; export reset_parameters() to draw them from the job's seed"});
}

// Defect 3: a forward that draws is one finding, and the other checks, the draw held, pass.
TEST(ScriptedMethod, AForwardThatDrawsIsOneFindingAndTheOtherChecksHoldItFixed) {
  PluginRegistry registry;
  const auto& drawing = registry.add_script("drawing", scripted_method("draws_in_forward"));
  for (const auto& check : attention_check_names()) {
    const auto r = check_attention(drawing, check, c10::Device(c10::kCPU));
    if (check == "draws in forward") {
      EXPECT_FALSE(r.passed);
      EXPECT_EQ(r.failure.rfind(drawing.path + ": forward draws random numbers itself (two calls differ by ", 0), 0u) << r.failure;
      EXPECT_NE(r.failure.find("): move the draws into redraw() (plugins/README.md); the checks below hold the draw fixed"),
                std::string::npos)
          << r.failure;
    } else {
      EXPECT_TRUE(r.passed) << check << ": " << r.failure;
    }
  }
}

// Defect 2: a module sized for its job (E of exactly 128 columns, a head size of 16) is checked at
// that shape, every check; at the checks' own shape it cannot run.
TEST(ScriptedMethod, AShapeBoundModulePassesEveryCheckAtItsOwnShape) {
  PluginRegistry registry;
  const auto& bound = registry.add_script("bound", scripted_method("shape_bound"));
  EXPECT_TRUE(scripted_fixed_length(bound.path));
  EXPECT_FALSE(scripted_fixed_length(scripted_method("projection")));
  const CheckShape shape{2, 16, 128, true};
  for (const auto& check : attention_check_names()) {
    const auto r = check_attention(bound, check, c10::Device(c10::kCPU), shape);
    EXPECT_TRUE(r.passed) << check << ": " << r.failure;
  }
  const auto at_own_shape = check_attention(bound, "padding invariance", c10::Device(c10::kCPU));
  EXPECT_FALSE(at_own_shape.passed);
  EXPECT_NE(at_own_shape.failure.find("made for 128 tokens, given 24"), std::string::npos) << at_own_shape.failure;
}

// Issue 59, item 2: a draw in forward whose size follows the length is a different draw for the
// sequence alone (shorter): said as a draw, not as the padding leaking in.
TEST(ScriptedMethod, ADrawThatFollowsTheLengthIsToldSoNotAPaddingFailure) {
  PluginRegistry registry;
  const auto& drawing = registry.add_script("by_length", scripted_method("draws_by_length"));
  const auto r = check_attention(drawing, "padding invariance", c10::Device(c10::kCPU));
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.failure.find("the method draws in forward, and a draw whose size follows the length is another draw at "
                           "another length (a draw, not padding)"),
            std::string::npos)
      << r.failure;
}

// Issue 59, item 2: for a module of one length, "the sequence alone" keeps its padding, so what it
// finds is the batch the sequence sits in: said as batch coupling, not as padding.
TEST(ScriptedMethod, AFixedLengthModuleCouplingItsBatchIsToldSoNotAPaddingFailure) {
  PluginRegistry registry;
  const auto& coupled = registry.add_script("coupled", scripted_method("batch_coupled"));
  const CheckShape shape{2, 8, 128, true};
  const auto padding = check_attention(coupled, "padding invariance", c10::Device(c10::kCPU), shape);
  EXPECT_FALSE(padding.passed);
  EXPECT_EQ(padding.failure.rfind("the sequence differs alone in its batch (its padding the same) by up to ", 0), 0u)
      << padding.failure;
  EXPECT_NE(padding.failure.find("couples the sequences of a batch"), std::string::npos) << padding.failure;
  EXPECT_FALSE(check_attention(coupled, "batch independence", c10::Device(c10::kCPU), shape).passed);
}

// Defect 5: a traced module is told apart. Its dropout, frozen by the trace, is refused (above);
// one without dropout runs (at the shape the pre-run checks) and, where PyTorch 2 marks the file
// as traced, is said to be; the same module scripted, dropout and all, is not flagged.
TEST(ScriptedMethod, ATracedModuleWithoutDropoutRunsAndIsSaidToBeTraced) {
  const std::string traced = scripted_method("traced_softmax");
  EXPECT_NO_THROW(check_scripted_attention(traced, {2, 8, 16}));
  const auto warnings = scripted_warnings(traced);
  if (TORCH_VERSION_MAJOR >= 2) {
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0].rfind(traced + ": saved by torch.jit.trace: ", 0), 0u) << warnings[0];
  } else {
    EXPECT_TRUE(warnings.empty()) << "1.13's trace marks nothing";
  }
  const std::string scripted = scripted_method("dropout_script");
  EXPECT_NO_THROW(check_scripted_attention(scripted, {2, 8, 16}));
  EXPECT_TRUE(scripted_warnings(scripted).empty());
  // and its dropout drops in training
  auto method = load_scripted_attention(scripted);
  const Inputs in = inputs(4);
  method->train(true);
  const auto a = method->forward(in.q, in.k, in.v, in.valid), b = method->forward(in.q, in.k, in.v, in.valid);
  EXPECT_FALSE(at::equal(a, b));
}

// Issue 41, item 7: each idiom of plugins/README.md's "Bringing a PyTorch module", written as it
// reads after its edit (tests/scripted/porting.py), scripts with this build's PyTorch and passes
// every check (head size 8: one module's plan is drawn for it).
class PortedModules : public ::testing::TestWithParam<const char*> {};

TEST_P(PortedModules, ScriptAndPassEveryCheck) {
  PluginRegistry registry;
  const auto& ported = registry.add_script(GetParam(), scripted_method(GetParam()));
  for (const auto& check : attention_check_names()) {
    const auto r = check_attention(ported, check, c10::Device(c10::kCPU), CheckShape{0, 8, 0, false});
    EXPECT_TRUE(r.passed) << check << ": " << r.failure;
  }
}

INSTANTIATE_TEST_SUITE_P(Idioms, PortedModules,
                         ::testing::Values("port_no_grad", "port_positional", "port_kernel_by_name", "port_annotated_ints",
                                           "port_locals", "port_math", "port_reshape", "port_optional",
                                           "port_list_shapes", "port_torch_plan"));

struct Malformed {
  const char* file;
  const char* says;
};

class MalformedScript : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedScript, IsRefusedInOneLineNamingTheFile) {
  const std::string path = scripted_method(GetParam().file);
  try {
    check_scripted_attention(path, {2, 8, 64});
    FAIL() << path << " was accepted";
  } catch (const ScriptError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_NE(what.find(GetParam().says), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

const std::string kBuildTorch = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);

INSTANTIATE_TEST_SUITE_P(
    Files, MalformedScript,
    ::testing::Values(Malformed{"text", "not a TorchScript file"}, Malformed{"tensor", "not a TorchScript module"},
                      Malformed{"wrong_signature", "attnlab calls forward(self, q: Tensor, k: Tensor, v: Tensor, "
                                                   "key_valid: Tensor) -> Tensor"},
                      Malformed{"raises", "forward raised builtins.ValueError: this method is not written yet"},
                      Malformed{"future", "scripted by PyTorch 99.1.0, newer than this build's LibTorch"},
                      Malformed{"traced_dropout", "its dropout's training flag is a constant, as torch.jit.trace "
                                                  "leaves it (it never drops in training, or always drops): script the "
                                                  "module with torch.jit.script"}),
    [](const auto& info) { return std::string(info.param.file); });

TEST(ScriptedMethod, AFileFromANewerPyTorchNamesBothVersions) {
  try {
    load_scripted_attention(scripted_method("future"));
    FAIL() << "accepted";
  } catch (const ScriptError& e) {
    EXPECT_NE(std::string(e.what()).find("99.1.0, newer than this build's LibTorch " + kBuildTorch + ": script it with "
                                         "PyTorch " + kBuildTorch),
              std::string::npos)
        << e.what();
  }
  // without the export script's note, a file of this build's own PyTorch loads
  EXPECT_NO_THROW(check_scripted_attention(scripted_method("no_version_note"), {2, 8, 64}));
}

struct ScriptedExperiment : testing::CliTest {
  // softmax and a scripted method named `name` (its table), the script at `script` relative to the file
  std::string write(const std::string& name, const std::string& script, const std::string& extra = "") const {
    const std::string file = path("exp.toml");
    std::ofstream(file) << "[experiment]\nname = \"scripted\"\n"
                        << "[model]\nlayers = 1\ndim = 16\nffn_dim = 32\nheads = 2\n"
                        << "[train]\nsteps = 4\nbatch_size = 4\nwarmup = 1\n"
                        << "[methods.softmax]\n[methods." << name << "]\nscript = \"" << script << "\"\n" << extra
                        << "[datasets.listops]\nmax_len = 64\ntrain_size = 16\nval_size = 8\ntest_size = 8\n"
                        << "max_depth = 2\nmax_args = 3\nmin_length = 3\nmax_length = 60\n";
    return file;
  }
  std::string error_of(const std::string& file) const {
    PluginRegistry registry = load_plugins({});
    try {
      check_experiment(file, registry, path("cache"));
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(accepted)";
  }
};

TEST_F(ScriptedExperiment, ATableNamesTheFileAndAStoredJobFindsItAgain) {
  fs::copy_file(scripted_method("projection"), path("mine.pt"));
  PluginRegistry registry = load_plugins({});
  const Experiment experiment = load_experiment(write("mine", "mine.pt"), registry);
  ASSERT_EQ(experiment.jobs.size(), 2u);
  const JobPlan& job = experiment.jobs[1];
  EXPECT_EQ(job.method, "mine");
  const std::string absolute = fs::canonical(path("mine.pt")).string();
  EXPECT_EQ(job.method_params.string("script"), absolute);
  EXPECT_NE(job.config_toml.find(absolute), std::string::npos) << job.config_toml;

  // the job process: a registry that has never seen the file, as a worker's
  PluginRegistry fresh = load_plugins({});
  const JobPlan again = parse_job_config(job.config_toml, "job 2", fresh);
  EXPECT_EQ(again.config_hash, job.config_hash);
  const auto* mine = fresh.find(PluginKind::attention, "mine");
  ASSERT_NE(mine, nullptr);
  EXPECT_TRUE(mine->scripted());
  EXPECT_EQ(mine->path, absolute);
  EXPECT_EQ(mine->sha256, sha256_of_file(absolute));
  EXPECT_EQ(std::string(mine->info->version), "torchscript");
}

TEST_F(ScriptedExperiment, BadScriptsAreOneLineBeforeAnythingIsQueued) {
  fs::copy_file(scripted_method("raises"), path("raises.pt"));
  std::string error = error_of(write("mine", "raises.pt"));
  EXPECT_NE(error.find("exp.toml: [methods.mine] " + fs::canonical(path("raises.pt")).string() +
                       ": forward raised builtins.ValueError: this method is not written yet; nothing queued"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;

  error = error_of(write("mine", "missing.pt"));
  EXPECT_NE(error.find("exp.toml:14: [methods.mine] script: "), std::string::npos) << error;
  EXPECT_NE(error.find("missing.pt: no such file"), std::string::npos) << error;

  fs::copy_file(scripted_method("softmax_script"), path("softmax.pt"));
  std::ofstream(path("taken.toml")) << "[methods.softmax]\nscript = \"softmax.pt\"\n[datasets.listops]\n";
  error = error_of(path("taken.toml"));
  EXPECT_NE(error.find("taken.toml:2: [methods.softmax] script: the name 'softmax' is taken by the attention plugin "),
            std::string::npos)
      << error;

  // checked at the job's length: Linformer's E of 64 columns cannot take 96 tokens
  fs::copy_file(scripted_method("projection"), path("short.pt"));
  std::ofstream(path("long.toml")) << "[methods.short]\nscript = \"short.pt\"\n[datasets.listops]\nmax_len = 96\n";
  error = error_of(path("long.toml"));
  EXPECT_NE(error.find("long.toml: [methods.short] " + fs::canonical(path("short.pt")).string() +
                       ": forward raised RuntimeError: The size of tensor a (64) must match the size of tensor b (96)"),
            std::string::npos)
      << error;

  // and at the job's batch size (4 here): a module made for batches of 2 is refused before anything is queued
  fs::copy_file(scripted_method("batch_of_two"), path("two.pt"));
  error = error_of(write("two", "two.pt"));
  EXPECT_NE(error.find("exp.toml: [methods.two] " + fs::canonical(path("two.pt")).string() +
                       ": forward raised builtins.ValueError: made for batches of 2, given 4; nothing queued"),
            std::string::npos)
      << error;

  error = error_of(write("mine", "softmax.pt", "[methods.mine.datasets.listops]\nscript = \"other.pt\"\n"));
  EXPECT_NE(error.find("[methods.mine.datasets.listops] script: a scripted method's file is set in [methods.mine] only"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace attnlab
