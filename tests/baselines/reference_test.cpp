// The reference the baselines' exactness limits are measured against: softmax attention written
// out in tests/method_support.hpp must agree with the softmax plugin, padding included.
#include <gtest/gtest.h>

#include "method_support.hpp"

namespace attnlab::testing {
namespace {

TEST(Reference, SoftmaxFormulaIsTheSoftmaxPlugin) {
  const auto x = make_batch({11, 6}, 2, 11, 8, 3);
  const auto expected = reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid));
  const auto out = make_method("softmax")->forward(x.q, x.k, x.v, x.valid);
  EXPECT_LT(max_diff(out[0], expected[0]), 1e-12);
  EXPECT_LT(max_diff(out[1].slice(1, 0, 6), expected[1].slice(1, 0, 6)), 1e-12);
}

TEST(Reference, ARowWithoutAllowedKeysIsZero) {
  const auto x = make_batch({5}, 1, 5, 4, 4);
  auto allowed = at::ones({1, 1, 5, 5}, at::kBool);
  allowed[0][0][2].fill_(false);
  const auto out = reference_softmax_attention(x.q, x.k, x.v, allowed);
  EXPECT_EQ(out[0][0][2].abs().max().item<double>(), 0.0);
  EXPECT_GT(out[0][0][1].abs().max().item<double>(), 0.0);
}

}  // namespace
}  // namespace attnlab::testing
