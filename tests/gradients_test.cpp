// attnlab gradients (the KL-Transformer's Table 14): the spread of the classifier's gradient over
// fresh random features, against the gradient computed directly; zero for a deterministic method;
// the printed paper cells; and the command end to end on a tiny sparse-sum run with accuracy
// checkpoints (rows stored, Table 14's layout printed, a run without checkpoints left out).
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <fstream>
#include <string>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "attnlab/train/model.hpp"
#include "studies/gradients.hpp"

namespace attnlab {
namespace {

EncoderClassifier tiny_classifier(const std::string& method) {
  const auto* plugin = testing::built_plugins().find(PluginKind::attention, method);
  if (!plugin) throw std::runtime_error(method + " plugin not built");
  const auto params = plugin->defaults();
  return EncoderClassifier(testing::tiny_model(), TaskInfo{10, 3, 12, 1},
                           [plugin, params](const AttentionShape& shape) { return plugin->make_attention(shape, params); });
}

SplitData toy_examples(std::int64_t n) {
  SplitData d;
  d.tokens = at::randint(1, 10, {n, 1, 12}, at::kLong);
  d.lengths = at::full({n, 1}, 12, at::kLong);
  d.labels = at::randint(0, 3, {n}, at::kLong);
  return d;
}

TEST(GradientSpread, DeterministicAttentionHasNoSpreadAndItsMeanIsTheGradient) {
  torch::manual_seed(1);
  auto model = tiny_classifier("softmax");
  const auto data = toy_examples(20);
  AttentionDraws draws(model->attention_methods(), 5);
  const auto spread = measure_gradient_spread(model, data, 8, 4, draws, "head_in.bias", c10::Device(c10::kCPU));
  EXPECT_EQ(spread.neurons, 32);  // tiny_model's ffn_dim: the classifier's hidden width
  EXPECT_NEAR(spread.std, 0.0, 1e-12);
  // the mean |gradient| is that of one pass, worked out directly on the first 8 examples
  model->zero_grad();
  at::cross_entropy_loss(model->forward(data.tokens.slice(0, 0, 8), data.lengths.slice(0, 0, 8)),
                         data.labels.slice(0, 0, 8)).backward();
  at::Tensor bias;
  for (const auto& p : model->named_parameters())
    if (p.key() == "head_in.bias") bias = p.value();
  EXPECT_NEAR(spread.abs_mean, bias.grad().abs().mean().item<double>(), 1e-7);
  EXPECT_THROW(measure_gradient_spread(model, data, 8, 4, draws, "head_in.nope", c10::Device(c10::kCPU)),
               std::invalid_argument);
}

TEST(GradientSpread, RandomFeaturesSpreadTheGradientAndTheSeedFixesIt) {
  torch::manual_seed(2);
  auto model = tiny_classifier("performer");
  const auto data = toy_examples(20);
  AttentionDraws first(model->attention_methods(), 9), again(model->attention_methods(), 9);
  const auto a = measure_gradient_spread(model, data, 20, 5, first, "head_in.bias", c10::Device(c10::kCPU));
  const auto b = measure_gradient_spread(model, data, 20, 5, again, "head_in.bias", c10::Device(c10::kCPU));
  EXPECT_GT(a.std, 0.0);
  EXPECT_EQ(a.std, b.std);
  EXPECT_EQ(a.abs_mean, b.abs_mean);
}

TEST(GradientSpread, Table14AsPrinted) {
  ASSERT_NE(published_table14("gmm_prf", 0.5, 0.8), nullptr);
  EXPECT_EQ(published_table14("gmm_prf", 0.5, 0.8)->std, 22.46943);
  EXPECT_EQ(published_table14("gmm_prf", 0.5, 0.8)->abs_mean, 42.14157);
  EXPECT_EQ(published_table14("gmm_rks", 0.1, 0.4)->abs_mean, 0.16609);
  EXPECT_EQ(published_table14("gmm_rks", 0.9, 0.2)->std, 0.059153);
  EXPECT_EQ(published_table14("gmm_rks", 0.3, 0.2), nullptr);
  EXPECT_EQ(published_table14("softmax", 0.1, 0.2), nullptr);
}

struct GradientsCli : testing::CliTest {
  std::string db() const { return path("g.db"); }
  std::string common() const { return "--db " + db() + " --threads 1 --cache-dir " + path("cache"); }
};

// Marks of 0.1: a balanced 9-class task reaches 1/9 at its first validation, so the first mark is
// always kept; the second method keeps none (no accuracy_checkpoints) and is left out (exit 3).
TEST_F(GradientsCli, MeasuresStoresAndPrintsTable14) {
  const std::string toml = path("g.toml");
  std::ofstream(toml) << "[experiment]\nname = \"g\"\n"
                      << "[datasets.sparse_sum]\nlength = 20\nsparsity = 0.1\ntrain_size = 90\nval_size = 18\ntest_size = 18\n"
                      << "[model]\nlayers = 1\ndim = 16\nffn_dim = 8\nheads = 2\npooling = \"first\"\n"
                      << "[train]\nsteps = 10\nbatch_size = 9\nlr = 0.003\nwarmup = 2\neval_every = 5\n"
                      << "accuracy_checkpoints = 0.1\nvariance_passes = 0\n"
                      << "[methods.gmm_prf]\nfeatures = 8\n"
                      << "[methods.softmax]\n[methods.softmax.train]\naccuracy_checkpoints = 0.0\n";
  std::string out;
  ASSERT_EQ(attnlab("run " + toml + " " + common(), out), 0) << out;
  EXPECT_EQ(attnlab("gradients 1 2 --examples 9 --repeats 3 " + common(), out), 3) << out;
  EXPECT_NE(out.find("run 2 (softmax/sparse_sum) kept no accuracy checkpoints"), std::string::npos) << out;
  EXPECT_NE(out.find("gmm_prf std (paper)"), std::string::npos) << out;
  EXPECT_NE(out.find("0.079822"), std::string::npos) << out;  // the paper's cell for sparsity 0.1 at 20%
  const std::string first_mark = testing::query_one(db(), "SELECT min(mark) FROM gradient_stats WHERE run_id = 1");
  EXPECT_EQ(first_mark, "0.1");
  EXPECT_EQ(testing::query_one(db(), "SELECT parameter || ' ' || examples || ' ' || repeats || ' ' || neurons || ' ' || split "
                                     "FROM gradient_stats WHERE run_id = 1 AND mark = 0.1"),
            "head_in.bias 9 3 8 val");
  EXPECT_EQ(testing::query_one(db(), "SELECT count(*) FROM gradient_stats WHERE run_id = 2"), "0");
  EXPECT_EQ(attnlab("gradients --show " + common(), out), 0) << out;
  EXPECT_NE(out.find("sparse_sum  0.1"), std::string::npos) << out;
  EXPECT_EQ(attnlab("gradients 2 " + common(), out), 2) << out;
  EXPECT_NE(out.find("none of the runs named has an accuracy checkpoint"), std::string::npos) << out;
}

}  // namespace
}  // namespace attnlab
