// attnlab gradients (the KL-Transformer's Table 14): the spread of the classifier's gradient over
// fresh random features, against the gradient computed directly; zero for a deterministic method;
// the printed paper cells; and the command end to end on a tiny sparse-sum run with accuracy
// checkpoints (rows stored, Table 14's layout printed, a run without checkpoints left out).
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <fstream>
#include <sstream>
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

// A validation that jumps from below 20% to 64% passes three marks at once: the curve keeps 60% at
// that step, and 20% and 40% are read as reached there too (their checkpoints were saved then).
TEST(GradientSpread, MarksPassedTogetherShareTheirStep) {
  const std::vector<std::pair<std::int64_t, double>> curve = {{1500, 0.8}, {800, 0.6}};
  const std::vector<std::pair<double, std::int64_t>> want = {{0.2, 800}, {0.4, 800}, {0.6, 800}, {0.8, 1500}};
  EXPECT_EQ(marks_reached(curve, 0.2), want);
  EXPECT_TRUE(marks_reached({}, 0.2).empty());
  const std::vector<std::pair<double, std::int64_t>> halves = {{0.5, 10}};
  EXPECT_EQ(marks_reached({{10, 0.5}}, 0.5), halves);  // 100% never reached
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

// conf/kl-sparsity.toml as shipped, shrunk to a few steps on tiny splits (CI): the sweep makes its
// six jobs, they run, `results` keeps the sparsities apart, and Fig. 6 is one curves command.
TEST_F(GradientsCli, TheSparsityExperimentFileRunsShort) {
  std::ifstream in(std::string(ATTNLAB_SOURCE_DIR) + "/conf/kl-sparsity.toml");
  std::stringstream text;
  text << in.rdbuf();
  std::string toml = text.str();
  const std::vector<std::pair<std::string, std::string>> shrink = {
      {"length = 200", "length = 20"},   {"train_size = 160002", "train_size = 90"}, {"val_size = 39996", "val_size = 18"},
      {"test_size = 39996", "test_size = 18"}, {"steps = 8000", "steps = 4"},       {"batch_size = 400", "batch_size = 9"},
      {"eval_every = 200", "eval_every = 2"},  {"warmup = 100", "warmup = 2"},        {"log_every = 50", "log_every = 2"}};
  for (const auto& [from, to] : shrink) {
    const auto at = toml.find(from);
    ASSERT_NE(at, std::string::npos) << "conf/kl-sparsity.toml has no '" << from << "'";
    toml.replace(at, from.size(), to);
  }
  std::ofstream(path("kl-sparsity.toml")) << toml;
  std::string out;
  ASSERT_EQ(attnlab("run " + path("kl-sparsity.toml") + " " + common(), out), 0) << out;
  EXPECT_EQ(testing::query_one(db(), "SELECT count(*) FROM jobs WHERE state = 'done'"), "6");
  ASSERT_EQ(attnlab("results --format csv " + common().substr(0, common().find(" --threads")), out), 0) << out;
  EXPECT_EQ(out.rfind("method,dataset,datasets.sparse_sum.sparsity,", 0), 0u) << out;
  EXPECT_NE(out.find("gmm_prf,sparse_sum,0.5,1,1,"), std::string::npos) << out;
  ASSERT_EQ(attnlab("curves --db " + db() + " --where \"experiment = kl-sparsity\" --metric acc --split val "
                    "--group-by method,datasets.sparse_sum.sparsity --format csv", out), 0) << out;
  EXPECT_NE(out.find("gmm_rks sparsity=0.9"), std::string::npos) << out;
  ASSERT_EQ(attnlab("table accuracy --format csv --db " + db(), out), 0) << out;
  EXPECT_NE(out.find("gmm_prf,sparse_sum sparsity=0.5,"), std::string::npos) << out;  // a column per sparsity
}

}  // namespace
}  // namespace attnlab
