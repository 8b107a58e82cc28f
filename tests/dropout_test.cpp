// inverted_dropout on the CPU (train/src/dropout.cpp): the counter-based mask's rate, values,
// gradient, seeding and independence from the thread count.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <torch/utils.h>

#include "attnlab/train/model.hpp"

namespace attnlab {
namespace {

TEST(Dropout, KeepsOneMinusPAndScalesTheKeptValues) {
  const double p = 0.1;
  const auto x = at::rand({1000, 1000}, at::kDouble) + 1.0;  // no zeros: a zero output means dropped
  const auto y = inverted_dropout(x, p, true);
  const auto kept = y.ne(0);
  const double n = static_cast<double>(x.numel());
  const double rate = kept.sum().item<double>() / n;
  // Binomial(n, 0.9): standard deviation sqrt(0.09 / n) = 3e-4; allow 5 of them.
  EXPECT_NEAR(rate, 1 - p, 5 * std::sqrt(p * (1 - p) / n));
  // Kept values are exactly x / (1 - p).
  EXPECT_TRUE(at::allclose(y.masked_select(kept), x.masked_select(kept) / (1 - p), 1e-15, 0));
  // Neighbouring elements are independent: P(both kept) = 0.81 within 5 standard deviations.
  const auto flat = kept.flatten().to(at::kDouble);
  const double both = (flat.slice(0, 0, -1) * flat.slice(0, 1)).mean().item<double>();
  EXPECT_NEAR(both, (1 - p) * (1 - p), 5 * std::sqrt(0.81 * 0.19 / n));
}

TEST(Dropout, BackwardAppliesTheForwardsMask) {
  const auto x = (at::rand({64, 33}, at::kDouble) + 1.0).requires_grad_(true);
  const auto w = at::randn({64, 33}, at::kDouble);
  const auto y = inverted_dropout(x, 0.3, true);
  (y * w).sum().backward();
  const auto expected = w * y.ne(0).to(at::kDouble) / 0.7;
  EXPECT_TRUE(at::allclose(x.grad(), expected, 1e-15, 0));
}

TEST(Dropout, TheSeedFixesTheMaskAndEachCallDrawsAFreshOne) {
  const auto x = at::ones({4096}, at::kFloat);
  torch::manual_seed(7);
  const auto a1 = inverted_dropout(x, 0.5, true), a2 = inverted_dropout(x, 0.5, true);
  torch::manual_seed(7);
  const auto b1 = inverted_dropout(x, 0.5, true);
  EXPECT_TRUE(at::equal(a1, b1));
  EXPECT_FALSE(at::equal(a1, a2));
}

TEST(Dropout, TheMaskDoesNotDependOnTheThreadCount) {
  const int threads = at::get_num_threads();
  const auto x = at::ones({300001}, at::kFloat);  // several parallel chunks, an odd size
  at::set_num_threads(1);
  torch::manual_seed(3);
  const auto one = inverted_dropout(x, 0.2, true);
  at::set_num_threads(4);
  torch::manual_seed(3);
  const auto four = inverted_dropout(x, 0.2, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(one, four));
}

TEST(Dropout, ReducedPrecisionAndNonContiguousInputs) {
  torch::manual_seed(5);
  const auto x = at::rand({50, 40}, at::kFloat).add_(1.0).t();  // non-contiguous
  torch::manual_seed(9);
  const auto f = inverted_dropout(x, 0.25, true);
  torch::manual_seed(9);
  const auto b = inverted_dropout(x.to(at::kBFloat16), 0.25, true);
  EXPECT_EQ(f.sizes(), x.sizes());
  EXPECT_TRUE(at::equal(f.ne(0), b.ne(0)));  // the same mask whatever the dtype
  EXPECT_TRUE(at::allclose(b.to(at::kFloat), f, 1e-2, 0));
}

TEST(Dropout, IdentityWhenNotTrainingOrPZero) {
  const auto x = at::randn({10, 10});
  EXPECT_TRUE(inverted_dropout(x, 0.5, false).is_same(x));
  EXPECT_TRUE(inverted_dropout(x, 0.0, true).is_same(x));
}

}  // namespace
}  // namespace attnlab
