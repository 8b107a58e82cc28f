// The KL-Transformer's variance metrics (§4.1) on hand-made outputs with known answers.
#include <gtest/gtest.h>

#include <cmath>

#include <ATen/ATen.h>

#include "attnlab/train/variance.hpp"

namespace attnlab {
namespace {

// Two classes: logits (0, o) give the margin o directly.
at::Tensor two_class_logits(const std::vector<std::vector<double>>& margins_per_example) {
  const auto n = static_cast<std::int64_t>(margins_per_example.size());
  const auto r = static_cast<std::int64_t>(margins_per_example[0].size());
  auto logits = at::zeros({r, n, 2}, at::kDouble);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t p = 0; p < r; ++p) logits[p][i][1] = margins_per_example[i][p];
  return logits;
}

TEST(Variance, TwoClassesByHand) {
  // example 0 (label 1): margins 1, 2, 3, -2 -> mean 1, sample std sqrt(14/3), 3 of 4 passes say 1
  // example 1 (label 0): margins all -1 -> std 0, every pass says 0
  const auto m = variance_metrics(two_class_logits({{1, 2, 3, -2}, {-1, -1, -1, -1}}), at::tensor({1, 0}, at::kLong));
  EXPECT_EQ(m.passes, 4);
  EXPECT_EQ(m.examples, 2);
  EXPECT_NEAR(m.example_rsd[0], std::sqrt(14.0 / 3.0), 1e-12);
  EXPECT_DOUBLE_EQ(m.example_rsd[1], 0.0);
  EXPECT_NEAR(m.rsd, std::sqrt(14.0 / 3.0) / 2, 1e-12);
  EXPECT_EQ(m.example_pi, (std::vector<std::int64_t>{1, 0}));  // min(3, 1) and min(0, 4)
  EXPECT_DOUBLE_EQ(m.pi, 0.5);
  EXPECT_EQ(m.example_vote, (std::vector<std::int64_t>{1, 0}));
  EXPECT_DOUBLE_EQ(m.va, 1.0);
  EXPECT_DOUBLE_EQ(m.mean_acc, 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(m.agv, 8.0 / 7.0);
}

TEST(Variance, ManyClassesUseTheTrueClassMargin) {
  // label 2; passes (0,1,3) (2,0,1) (0,0,4): margins 2, -1, 4; predictions 2, 0, 2
  auto logits = at::tensor({0., 1., 3., 2., 0., 1., 0., 0., 4.}, at::kDouble).view({3, 1, 3});
  const auto m = variance_metrics(logits, at::tensor({2}, at::kLong));
  const double mean = 5.0 / 3.0;
  const double var = ((2 - mean) * (2 - mean) + (-1 - mean) * (-1 - mean) + (4 - mean) * (4 - mean)) / 2.0;
  EXPECT_NEAR(m.rsd, std::sqrt(var) / mean, 1e-12);
  EXPECT_DOUBLE_EQ(m.pi, 1.0);  // 3 passes, 2 agree with the vote
  EXPECT_EQ(m.example_vote[0], 2);
  EXPECT_DOUBLE_EQ(m.va, 1.0);
  EXPECT_DOUBLE_EQ(m.mean_acc, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.agv, 1.5);
}

TEST(Variance, TiesVoteForTheSmallerClassAndZeroMeanIsInfiniteRsd) {
  const auto m = variance_metrics(two_class_logits({{1, -1}}), at::tensor({1}, at::kLong));
  EXPECT_EQ(m.example_vote[0], 0);
  EXPECT_DOUBLE_EQ(m.va, 0.0);
  EXPECT_DOUBLE_EQ(m.mean_acc, 0.5);
  EXPECT_DOUBLE_EQ(m.agv, 0.0);
  EXPECT_DOUBLE_EQ(m.pi, 1.0);
  EXPECT_TRUE(std::isinf(m.rsd));
}

TEST(Variance, RefusesOnePassAndBadShapes) {
  EXPECT_THROW(variance_metrics(at::zeros({1, 3, 2}), at::zeros({3}, at::kLong)), std::invalid_argument);
  EXPECT_THROW(variance_metrics(at::zeros({4, 3, 2}), at::zeros({2}, at::kLong)), std::invalid_argument);
  EXPECT_THROW(variance_metrics(at::zeros({4, 3}), at::zeros({3}, at::kLong)), std::invalid_argument);
}

}  // namespace
}  // namespace attnlab
