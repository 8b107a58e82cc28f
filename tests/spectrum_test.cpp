// attnlab spectrum: singular values and energy ranks against hand-made matrices (a known rank-2
// output, padded rows left out), the statistics stored per measurement, the model's hook for a
// layer's attention output against its parts, and the command end to end on a tiny trained
// softmax run (rows stored, summary printed, picture, one-line refusals).
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/linalg_qr.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/utils.h>

#include "attnlab/store.hpp"
#include "attnlab/store/studies.hpp"
#include "attnlab/train/model.hpp"
#include "studies/spectrum.hpp"

namespace attnlab {
namespace {

// Q [n, 2] and V [d, 2] with orthonormal columns, then X = 3 q1 v1ᵀ + q2 v2ᵀ: singular values
// exactly (3, 1, 0, ...), energy shares 0.9 and 0.1.
at::Tensor rank_two(std::int64_t n, std::int64_t d, std::uint64_t seed) {
  torch::manual_seed(seed);
  const auto o = at::TensorOptions().dtype(at::kDouble);
  const auto q = std::get<0>(at::linalg_qr(at::randn({n, 2}, o)));
  const auto v = std::get<0>(at::linalg_qr(at::randn({d, 2}, o)));
  return 3.0 * q.select(1, 0).outer(v.select(1, 0)) + q.select(1, 1).outer(v.select(1, 1));
}

TEST(SpectrumNumerics, AKnownRankTwoOutputWithPaddedRowsLeftOut) {
  const std::int64_t n = 6, d = 4, padded = 3;
  // one matrix, its real rows then rows of padding that would change the spectrum if counted
  const auto x = at::cat({rank_two(n, d, 1), at::full({padded, d}, 100.0, at::kDouble)}, 0).unsqueeze(0).to(at::kFloat);
  auto valid = at::zeros({1, n + padded}, at::kBool);
  valid.slice(1, 0, n).fill_(true);
  const auto s = real_row_singular_values(x, valid);
  ASSERT_EQ(s.sizes(), (std::vector<std::int64_t>{1, d}));
  EXPECT_EQ(s.scalar_type(), at::kDouble);
  EXPECT_NEAR(s[0][0].item<double>(), 3.0, 1e-6);  // float32 input
  EXPECT_NEAR(s[0][1].item<double>(), 1.0, 1e-6);
  EXPECT_NEAR(s[0][2].item<double>(), 0.0, 1e-6);
  EXPECT_NEAR(s[0][3].item<double>(), 0.0, 1e-6);

  // in double, exact to rounding
  const auto exact = real_row_singular_values(rank_two(n, d, 2).unsqueeze(0), at::ones({1, n}, at::kBool));
  EXPECT_NEAR(exact[0][0].item<double>(), 3.0, 1e-12);
  EXPECT_NEAR(exact[0][1].item<double>(), 1.0, 1e-12);
  const std::vector<double> sigma(exact.data_ptr<double>(), exact.data_ptr<double>() + d);
  EXPECT_EQ(energy_rank(sigma, 0.90), 1);  // 9 / 10 of the energy, exactly at the boundary
  EXPECT_EQ(energy_rank(sigma, 0.99), 2);
  EXPECT_EQ(energy_rank(sigma, 0.80), 1);
  EXPECT_EQ(energy_rank({1, 1, 1, 1}, 0.90), 4);
  EXPECT_EQ(energy_rank({1, 1, 1, 1}, 0.50), 2);
  EXPECT_EQ(energy_rank({0, 0}, 0.90), 0);

  const store::SpectrumResult r = spectrum_statistics(exact);
  ASSERT_EQ(r.values.size(), 4u);
  EXPECT_NEAR(r.values[0].normalised_mean, 1.0, 1e-15);
  EXPECT_NEAR(r.values[1].normalised_mean, 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(r.values[0].energy_mean, 0.9, 1e-12);
  EXPECT_NEAR(r.values[1].energy_mean, 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(r.rank90_mean, 1);
  EXPECT_DOUBLE_EQ(r.rank99_mean, 2);
  EXPECT_TRUE(std::isnan(r.rank90_std));  // one matrix
  EXPECT_NEAR(r.stable_rank_mean, 10.0 / 9.0, 1e-12);
}

// A matrix with fewer real rows than columns has as many nonzero singular values as rows; the
// measurement's width is the most any matrix can have.
TEST(SpectrumNumerics, ShortMatricesArePaddedWithTheirZeroSingularValues) {
  const std::int64_t d = 5;
  auto x = at::randn({2, 8, d}, at::kDouble);
  auto valid = at::zeros({2, 8}, at::kBool);
  valid[0].slice(0, 0, 2).fill_(true);  // 2 real rows
  valid[1].slice(0, 0, 3).fill_(true);  // 3 real rows
  const auto s = real_row_singular_values(x, valid);
  ASSERT_EQ(s.sizes(), (std::vector<std::int64_t>{2, 3}));  // min(d, most real rows)
  EXPECT_GT(s[0][1].item<double>(), 0);
  EXPECT_EQ(s[0][2].item<double>(), 0);
  EXPECT_GT(s[1][2].item<double>(), 0);
}

TEST(SpectrumNumerics, MeansStdsAndRanksOverMatrices) {
  // (3, 1, 0, 0): energy 0.9, 0.1; rank@90 1, rank@99 2; stable rank 10/9.
  // (4, 2, 2, 0): energy 16/24, 4/24, 4/24; rank@90 3, rank@99 3; stable rank 24/16.
  const auto s = at::tensor({3.0, 1.0, 0.0, 0.0, 4.0, 2.0, 2.0, 0.0}, at::kDouble).view({2, 4});
  const store::SpectrumResult r = spectrum_statistics(s);
  EXPECT_EQ(r.matrices, 2);
  ASSERT_EQ(r.values.size(), 4u);
  EXPECT_DOUBLE_EQ(r.values[0].sigma_mean, 3.5);
  EXPECT_NEAR(r.values[0].sigma_std, std::sqrt(0.5), 1e-15);
  EXPECT_DOUBLE_EQ(r.values[0].normalised_mean, 1.0);
  EXPECT_DOUBLE_EQ(r.values[0].normalised_std, 0.0);
  EXPECT_NEAR(r.values[1].normalised_mean, (1.0 / 3.0 + 0.5) / 2, 1e-15);
  EXPECT_NEAR(r.values[2].normalised_mean, 0.25, 1e-15);
  EXPECT_NEAR(r.values[0].energy_mean, (0.9 + 16.0 / 24) / 2, 1e-15);
  EXPECT_NEAR(r.values[2].energy_mean, (0.0 + 4.0 / 24) / 2, 1e-15);
  EXPECT_DOUBLE_EQ(r.rank90_mean, 2);
  EXPECT_NEAR(r.rank90_std, std::sqrt(2.0), 1e-15);
  EXPECT_DOUBLE_EQ(r.rank99_mean, 2.5);
  EXPECT_NEAR(r.rank99_std, std::sqrt(0.5), 1e-15);
  EXPECT_NEAR(r.stable_rank_mean, (10.0 / 9 + 1.5) / 2, 1e-15);

  EXPECT_THROW(spectrum_statistics(at::zeros({1, 3}, at::kDouble)), std::invalid_argument);  // σ_1 = 0
  EXPECT_THROW(parse_spectrum_stage("middle"), std::invalid_argument);
}

// The hook reads what forward() computes: the heads are the block's attention on its q, k, v,
// and the projected output is their concatenation through the block's `out` layer.
TEST(SpectrumModel, LayerOutputsAreTheBlocksAttentionAndItsProjection) {
  const auto& registry = testing::built_plugins();
  const auto* softmax = registry.find(PluginKind::attention, "softmax");
  ASSERT_NE(softmax, nullptr);
  ModelConfig config = testing::tiny_model();
  config.layers = 2;
  TaskInfo task;
  task.vocab_size = 12;
  task.num_classes = 3;
  task.max_len = 10;
  for (const Norm norm : {Norm::post, Norm::pre}) {
    config.norm = norm;
    torch::manual_seed(3);
    EncoderClassifier model(config, task, [&](const AttentionShape& shape) { return softmax->make_attention(shape, softmax->defaults()); });
    model->eval();
    at::NoGradGuard no_grad;
    const auto tokens = at::randint(0, 12, {3, 10}, at::kLong);
    const auto lengths = at::tensor({10, 4, 7}, at::kLong);
    for (std::int64_t layer = 0; layer < 2; ++layer) {
      const auto out = model->layer_outputs(tokens, lengths, layer);
      const auto in = model->layer_inputs(tokens, lengths, layer);
      const auto heads = model->attention_methods()[static_cast<std::size_t>(layer)]->forward(in.q, in.k, in.v, in.key_valid);
      EXPECT_TRUE(at::allclose(out.heads, heads, 0, 0)) << word(norm) << " layer " << layer;
      at::Tensor weight, bias;
      for (const auto& p : model->named_parameters()) {
        if (p.key() == "block" + std::to_string(layer) + ".out.weight") weight = p.value();
        if (p.key() == "block" + std::to_string(layer) + ".out.bias") bias = p.value();
      }
      ASSERT_TRUE(weight.defined() && bias.defined());
      const auto concat = heads.transpose(1, 2).reshape({3, 10, config.heads * config.head_dim});
      EXPECT_TRUE(at::allclose(out.projected, at::linear(concat, weight, bias), 1e-6, 1e-6)) << word(norm) << " layer " << layer;
      EXPECT_EQ(out.projected.sizes(), (std::vector<std::int64_t>{3, 10, config.dim}));
      EXPECT_TRUE(at::equal(out.key_valid, in.key_valid));
    }
  }
}

// --- the command end to end ------------------------------------------------------------------------

struct SpectrumCli : attnlab::testing::CliTest {
  std::string db() const { return path("r.db"); }
  std::string common() const { return "--db " + db() + " --threads 1 --cache-dir " + path("cache"); }
  std::string query(const std::string& sql) const { return attnlab::testing::query_one(db(), sql); }

  // Two seeds of a 2-layer softmax model on a tiny ListOps, trained for a few steps.
  void train() {
    const std::string toml = path("tiny.toml");
    std::ofstream(toml) << "[experiment]\nname = \"tiny\"\nseeds = [1, 2]\n"
                        << "[model]\nlayers = 2\ndim = 16\nffn_dim = 32\nheads = 2\n"
                        << "[train]\nsteps = 10\nbatch_size = 8\nlr = 0.002\nwarmup = 2\neval_every = 5\nlog_every = 5\n"
                        << "[methods.softmax]\n"
                        << "[datasets.listops]\nmax_len = 64\ntrain_size = 16\nval_size = 8\ntest_size = 12\n"
                        << "max_depth = 3\nmax_args = 4\nmin_length = 20\nmax_length = 60\n";
    std::string out;
    ASSERT_EQ(attnlab("run " + toml + " " + common(), out), 0) << out;
  }
};

#define EXPECT_HAS(text, piece) EXPECT_NE((text).find(piece), std::string::npos) << "no '" << (piece) << "' in:\n" << (text)

TEST_F(SpectrumCli, MeasuresStoresPrintsAndDrawsATrainedRun) {
  train();
  std::string out;
  ASSERT_EQ(attnlab("spectrum 1 " + common(), out), 0) << out;
  // the default: the last layer (2 of 2), after the output projection, one batch of the run's size
  EXPECT_EQ(query("SELECT layer || ' ' || stage || ' ' || batch || ' ' || matrices || ' ' || width || ' ' || split "
                  "FROM spectrum_summaries WHERE run_id = 1"),
            "2 out 8 8 16 test");
  const std::int64_t rows_max = std::stoll(query("SELECT rows_max FROM spectrum_summaries WHERE run_id = 1"));
  const std::int64_t rows_min = std::stoll(query("SELECT rows_min FROM spectrum_summaries WHERE run_id = 1"));
  EXPECT_GE(rows_min, 20);
  EXPECT_LE(rows_max, 64);
  EXPECT_EQ(query("SELECT count(*) FROM spectrum_results WHERE run_id = 1"), std::to_string(std::min<std::int64_t>(rows_max, 16)));
  EXPECT_EQ(query("SELECT k FROM spectrum_summaries WHERE run_id = 1"), std::to_string(std::min<std::int64_t>(rows_max, 16)));

  store::ResultsReader database(db());
  const auto stored = store::spectrum_results(database, {1});
  ASSERT_EQ(stored.size(), 1u);
  const auto& values = stored[0].values;
  ASSERT_FALSE(values.empty());
  EXPECT_DOUBLE_EQ(values[0].normalised_mean, 1.0);
  EXPECT_DOUBLE_EQ(values[0].normalised_std, 0.0);
  double energy = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    energy += values[i].energy_mean;
    EXPECT_GT(values[i].sigma_mean, 0) << i;
    if (i > 0) {
      EXPECT_LE(values[i].normalised_mean, values[i - 1].normalised_mean) << i;
      EXPECT_LE(values[i].sigma_mean, values[i - 1].sigma_mean) << i;
    }
  }
  EXPECT_NEAR(energy, 1.0, 1e-9);
  EXPECT_GE(stored[0].rank90_mean, 1);
  EXPECT_LE(stored[0].rank90_mean, stored[0].rank99_mean);
  EXPECT_LE(stored[0].rank99_mean, static_cast<double>(values.size()));

  EXPECT_HAS(out, "rank@90%");
  EXPECT_HAS(out, "σ2/σ1");
  EXPECT_HAS(out, "1    listops  softmax  2      out    8 x 16");
  EXPECT_HAS(out, "stored 1 spectrum(s) in " + db());

  // the heads before the projection, the first layer, two examples; again replaces, not adds
  ASSERT_EQ(attnlab("spectrum 1 --stage heads --layer 1 --batch 2 " + common(), out), 0) << out;
  ASSERT_EQ(attnlab("spectrum 1 --stage heads --layer 1 --batch 2 " + common(), out), 0) << out;
  EXPECT_EQ(query("SELECT count(*) || ' ' || max(matrices) || ' ' || max(width) FROM spectrum_summaries WHERE stage = 'heads'"),
            "1 2 16");  // 2 heads of 8

  // two runs in one call, one line each in the picture
  ASSERT_EQ(attnlab("spectrum 1,2 --plot " + path("spectrum.png") + " " + common(), out), 0) << out;
  EXPECT_HAS(out, "stored 2 spectrum(s)");
  if (std::system("command -v gnuplot > /dev/null 2>&1") == 0) {
    EXPECT_HAS(out, "wrote " + path("spectrum.png") + " (2 line(s)");
    EXPECT_TRUE(std::filesystem::exists(path("spectrum.png")));
    std::ifstream data(path("spectrum.dat"));
    std::stringstream text;
    text << data.rdbuf();
    EXPECT_HAS(text.str(), "listops (softmax, run 2)");
  }
  EXPECT_EQ(query("SELECT count(*) FROM spectrum_summaries"), "3");

  // --show reads them back, all or the named runs'
  ASSERT_EQ(attnlab("spectrum --show --db " + db(), out), 0) << out;
  EXPECT_HAS(out, "heads");
  EXPECT_HAS(out, "2    listops  softmax  2      out");
  ASSERT_EQ(attnlab("spectrum --show 2 --db " + db(), out), 0) << out;
  EXPECT_EQ(out.find("1    listops"), std::string::npos) << out;
}

TEST_F(SpectrumCli, RefusesInOneLine) {
  train();
  std::string out;
  // the error is the last thing said, in one line (plugin warnings may come before it)
  auto one_line = [](const std::string& text) {
    const auto at = text.find("attnlab: error: ");
    return at != std::string::npos && text.find('\n', at) == text.size() - 1;
  };
  EXPECT_EQ(attnlab("spectrum 99 " + common(), out), 2);
  EXPECT_HAS(out, "attnlab: error: spectrum: " + db() + ": no run with id 99");
  EXPECT_TRUE(one_line(out)) << out;
  EXPECT_EQ(attnlab("spectrum 1 --layer 3 " + common(), out), 2);
  EXPECT_HAS(out, "attnlab: error: spectrum: --layer 3: run 1 (softmax/listops) has 2 layer(s) (1..2)");
  EXPECT_TRUE(one_line(out)) << out;
  EXPECT_EQ(attnlab("spectrum 1 --stage middle " + common(), out), 2);
  EXPECT_HAS(out, "unknown stage 'middle'");
  EXPECT_EQ(attnlab("spectrum 1 --plot x.pdf " + common(), out), 2);
  EXPECT_HAS(out, "must end in .png or .svg");
  EXPECT_EQ(attnlab("spectrum 1,x " + common(), out), 2);
  EXPECT_EQ(attnlab("spectrum --show --db " + db(), out), 2);
  EXPECT_HAS(out, "holds no spectrum");
  EXPECT_EQ(query("SELECT count(*) FROM spectrum_summaries"), "0");

  // a run that did not end done: nothing measured, not even the runs named with it
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db().c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, "UPDATE runs SET status = 'failed' WHERE id = 2", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(raw);
  }
  EXPECT_EQ(attnlab("spectrum 1,2 " + common(), out), 2);
  EXPECT_HAS(out, "attnlab: error: spectrum: run 2 (softmax/listops) is failed, not done: only a finished run's checkpoint is measured");
  EXPECT_TRUE(one_line(out)) << out;
  EXPECT_EQ(query("SELECT count(*) FROM spectrum_summaries"), "0");
}

}  // namespace
}  // namespace attnlab
