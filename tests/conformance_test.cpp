// The conformance suite every attention plugin runs (in the spirit of llama.cpp's test-backend-ops):
// the checks of runner/plugin_host/conformance.hpp (parameters, shapes and dtypes, padding invariance,
// finite-difference gradients, seeded determinism, large inputs, batch independence, reduced
// precision under autocast), that each kind of defect fails exactly its check, and each method's
// exactness limit where it converges to exact attention.
// A new plugin is picked up automatically: every attention plugin the host finds is tested.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "test_support.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include "attnlab/precision.hpp"
#include "attnlab/attention.hpp"
#include "plugin_host/conformance.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {
namespace {

const PluginRegistry& registry() { return testing::built_plugins(); }

std::vector<std::string> attention_plugins() { return registry().names(PluginKind::attention); }

struct Inputs {
  at::Tensor q, k, v, valid;
};

// B = 2 sequences of n positions; the second has `real` real tokens, the rest padding.
Inputs make_inputs(std::int64_t n, std::int64_t real, std::int64_t heads, std::int64_t dim, at::ScalarType dtype,
                   std::uint64_t seed) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto opts = at::TensorOptions().dtype(dtype);
  Inputs in;
  in.q = at::randn({2, heads, n, dim}, g, opts) * 0.5;
  in.k = at::randn({2, heads, n, dim}, g, opts) * 0.5;
  in.v = at::randn({2, heads, n, dim}, g, opts);
  in.valid = at::ones({2, n}, at::kBool);
  in.valid[1].slice(0, real, n).fill_(false);
  return in;
}

// The checks themselves live in runner/plugin_host/ (conformance.hpp), which `attnlab check` runs too: the suite
// and the command cannot disagree. One case per plugin and check.
class Conformance : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Conformance, Passes) {
  const auto& [name, check] = GetParam();
  const auto r = check_attention(*registry().find(PluginKind::attention, name), check, c10::Device(c10::kCPU));
  EXPECT_TRUE(r.passed) << name << ": " << check << ": " << r.failure;
  EXPECT_FALSE(r.figure.empty()) << name << ": " << check << " measured nothing";
}

std::string test_name(std::string text) {
  for (char& c : text)
    if (c == ' ') c = '_';
  return text;
}

INSTANTIATE_TEST_SUITE_P(EveryAttentionPlugin, Conformance,
                         ::testing::Combine(::testing::ValuesIn(attention_plugins()),
                                            ::testing::ValuesIn(attention_check_names())),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + test_name(std::get<1>(info.param));
                         });

// Each kind of defect fails exactly its check, with a message saying what differed.
TEST(ConformanceChecks, EachDefectFailsExactlyItsCheck) {
  PluginRegistry defects;
  defects.load_folders({ATTNLAB_DEFECT_PLUGIN_DIR});
  ASSERT_TRUE(defects.errors().empty()) << defects.errors().front().line();
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"defect_padding", "padding invariance"}, {"defect_overflow", "large inputs"},
      {"defect_detached", "gradients"},          {"defect_batch", "batch independence"},
      {"defect_seed", "seeded determinism"},     {"defect_precision", "reduced precision"}};
  const std::map<std::string, std::string> message = {
      {"defect_padding", "garbage at the padded positions changed real tokens' outputs by up to"},
      {"defect_overflow", "outputs not finite at |q|, |k| ~ 30 (float)"},
      {"defect_detached", "no gradient reaches k (a detached path?)"},
      {"defect_batch", "changing the other sequence of the batch changed this one's output by up to"},
      {"defect_seed", "stochastic, but a new seed drew nothing new"},
      {"defect_precision", "bf16: relative error"}};
  // Where fp16 autocast runs (LibTorch 2 on the CPU), the unstabilised exponential of
  // defect_overflow is caught there too: e^16 is past fp16's largest number, 65504.
  const bool fp16 = autocast_supported(c10::Device(c10::kCPU), Precision::fp16);
  for (const auto& [name, failing] : expected) {
    const auto* plugin = defects.find(PluginKind::attention, name);
    ASSERT_NE(plugin, nullptr) << name;
    for (const auto& check : attention_check_names()) {
      const auto r = check_attention(*plugin, check, c10::Device(c10::kCPU));
      const bool also = fp16 && name == "defect_overflow" && check == "reduced precision";
      EXPECT_EQ(r.passed, check != failing && !also) << name << ": " << check << ": " << r.failure;
      if (check == failing) {
        EXPECT_EQ(r.failure.rfind(message.at(name), 0), 0u) << name << ": " << r.failure;
      }
      if (check == failing && check == "reduced precision")  // the finding names what addresses it
        EXPECT_NE(r.failure.find("keep its attention in fp32: [model] attention_precision = \"fp32\""), std::string::npos)
            << r.failure;
      if (also) {
        EXPECT_EQ(r.failure.rfind("fp16: a real token's output is not finite", 0), 0u) << r.failure;
      }
    }
  }
}

// Every check runs at the length it is given (issue 59, item 1): a method whose padding leaks only
// past 32 tokens passes every check at the checks' own lengths (6 to 40), and padding invariance
// at 64 tokens finds it; `check --length` once fed at most what a check chose itself (24 here).
TEST(ConformanceChecks, EveryCheckRunsAtTheLengthItIsGiven) {
  PluginRegistry defects;
  defects.load_folders({ATTNLAB_DEFECT_PLUGIN_DIR});
  const auto* plugin = defects.find(PluginKind::attention, "defect_long");
  ASSERT_NE(plugin, nullptr);
  for (const auto& check : attention_check_names()) {
    const auto r = check_attention(*plugin, check, c10::Device(c10::kCPU));
    EXPECT_TRUE(r.passed) << check << ": " << r.failure;
  }
  const auto at_64 = check_attention(*plugin, "padding invariance", c10::Device(c10::kCPU), CheckShape{0, 0, 64, false});
  EXPECT_FALSE(at_64.passed);
  EXPECT_EQ(at_64.failure.rfind("garbage at the padded positions changed real tokens' outputs by up to", 0), 0u) << at_64.failure;
  for (const auto& check : attention_check_names())  // and every other check holds there
    if (check != "padding invariance") {
      const auto r = check_attention(*plugin, check, c10::Device(c10::kCPU), CheckShape{0, 0, 64, false});
      EXPECT_TRUE(r.passed) << check << ": " << r.failure;
    }
}

// The dataset checks `attnlab check NAME` runs: a small generated configuration passes all five;
// a folder that does not exist fails the first, in one line naming it, and nothing else runs.
TEST(ConformanceChecks, DatasetChecksPassOnAGeneratedTaskAndNameAMissingFolder) {
  const auto* sparse_sum = registry().find(PluginKind::dataset, "sparse_sum");
  const auto* listops = registry().find(PluginKind::dataset, "listops");
  if (!sparse_sum || !listops) GTEST_SKIP() << "sparse_sum or listops not built";
  ParamValues small = sparse_sum->defaults();
  small.set("train_size", std::int64_t{90});
  small.set("val_size", std::int64_t{18});
  small.set("test_size", std::int64_t{18});
  const auto results = check_dataset(*sparse_sum, small);
  ASSERT_EQ(results.size(), dataset_check_names().size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].name, dataset_check_names()[i]);
    EXPECT_TRUE(results[i].passed) << results[i].name << ": " << results[i].failure;
  }
  EXPECT_EQ(results[3].figure, "train 90, val 18, test 18 examples, each within its task");
  // sparse_sum's bounds, each one step past, refused by the host in one line naming the parameter
  EXPECT_NE(results[1].figure.find("bad value(s) refused in one line, e.g. "), std::string::npos) << results[1].figure;

  ParamValues missing = listops->defaults();
  missing.set("source", std::string("files"));
  missing.set("path", std::string("/nonexistent-attnlab-folder"));
  const auto refused = check_dataset(*listops, missing);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_FALSE(refused[0].passed);
  EXPECT_EQ(refused[0].failure, "/nonexistent-attnlab-folder: no such directory (listops path)");

  // each defect fails exactly its check: data that ignores its seed, a missing path that escapes
  // as a filesystem_error instead of a one-line DataError
  PluginRegistry defects;
  defects.load_folders({ATTNLAB_DEFECT_PLUGIN_DIR});
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"defect_unseeded", "seeded reproducibility"}, {"defect_path", "bad parameters refused"}};
  for (const auto& [name, check] : cases) {
    const auto* defect = defects.find(PluginKind::dataset, name);
    ASSERT_NE(defect, nullptr) << name;
    const auto checked = check_dataset(*defect, defect->defaults());
    ASSERT_EQ(checked.size(), dataset_check_names().size()) << name;
    for (const auto& r : checked) EXPECT_EQ(r.passed, r.name != check) << name << ": " << r.name << ": " << r.failure;
    if (std::string(name) == "defect_unseeded")
      EXPECT_EQ(checked[4].failure, "train: built again from the same parameters, its labels differ");
    else
      EXPECT_EQ(checked[1].failure.rfind("path = \"/nonexistent/attnlab-check\": refused with an error that is neither "
                                         "a ParamError nor a DataError: ", 0), 0u) << checked[1].failure;
  }
}

// --- exactness limits: (method, parameters that make it exact) -> reference method -----------

struct Limit {
  const char* method;
  std::vector<std::pair<const char*, ParamValue>> params;  // `landmarks` = n is set by the test
  const char* reference;
};

const std::vector<Limit>& limits() {
  static const std::vector<Limit> table = {
      // Nyströmformer with one segment per token and an exact pseudo-inverse is softmax attention.
      {"nystromformer", {{"pinv", std::string("exact")}, {"conv_kernel", std::int64_t{0}}}, "softmax"},
      // Skyformer with every row of [Q; K] a landmark, no ridge and an exact pseudo-inverse is
      // kernelized attention.
      {"skyformer", {{"sampling", std::string("all")}, {"gamma", 0.0}, {"pinv", std::string("exact")}}, "kernelized"},
  };
  return table;
}

TEST(ExactnessLimits, MethodsConvergeToExactAttention) {
  int checked = 0;
  for (const auto& limit : limits()) {
    const auto* method = registry().find(PluginKind::attention, limit.method);
    const auto* reference = registry().find(PluginKind::attention, limit.reference);
    if (!method || !reference) continue;  // checked once both plugins exist
    const std::int64_t n = 16, real = 11;
    auto in = make_inputs(n, real, 2, 8, at::kDouble, 9);
    ParamValues params = method->defaults();
    for (const auto& [name, value] : limit.params) params.set(name, value);
    if (params.has("landmarks")) params.set("landmarks", n);
    auto m = method->make_attention({2, 8, n}, params);
    auto r = reference->make_attention({2, 8, n}, reference->defaults());
    m->eval();
    r->eval();
    c10::InferenceMode guard;
    auto g = at::make_generator<at::CPUGeneratorImpl>(1);
    if (m->stochastic()) m->redraw(g);
    auto got = m->forward(in.q, in.k, in.v, in.valid), want = r->forward(in.q, in.k, in.v, in.valid);
    EXPECT_TRUE(at::allclose(got[0], want[0], 1e-6, 1e-8)) << limit.method << " vs " << limit.reference << ": max diff "
                                                           << (got[0] - want[0]).abs().max().item<double>();
    EXPECT_TRUE(at::allclose(got[1].slice(1, 0, real), want[1].slice(1, 0, real), 1e-6, 1e-8)) << limit.method << " (padded)";
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no method with a known exactness limit is built";
}

}  // namespace
}  // namespace attnlab
