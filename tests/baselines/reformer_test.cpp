// Reformer's LSH attention (plugins/reformer): its formula written out densely in double: shared
// query/key x, keys normalised, padded keys and the query itself masked (itself only when nothing
// else); for N ≤ chunk full attention; otherwise, per hash round, the positions sorted by (bucket,
// position) and each chunk seeing itself and the previous chunk, rounds combined by their
// log-normalisers. The rotations are redrawn here from the same SeedStream the plugin uses.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attnlab/seed_stream.hpp"
#include "method_support.hpp"

namespace attnlab::testing {
namespace {

// The shared query/key of the plugin's `qk` choices.
at::Tensor shared_x(const Batch& x, bool q_only) {
  const auto padded = x.valid.logical_not().unsqueeze(1).unsqueeze(-1);
  return (q_only ? x.q : (x.q + x.k) / std::sqrt(2.0)).masked_fill(padded, 0.0);
}

// k̂_j = x_j / sqrt(mean(x_j²) + 1e-6) / sqrt(d)
at::Tensor normalised_keys(const at::Tensor& x) {
  return x / (x.pow(2).mean(-1, true) + 1e-6).sqrt() / std::sqrt(static_cast<double>(x.size(-1)));
}

// One softmax per query over the keys `allowed` [B, H, N, N] (bool) with logits x_i·k̂_j; a query
// with no allowed key attends to itself (log-normaliser −1e5, the self logit). Returns the output
// and the log-normalisers ℓ [B, H, N].
std::pair<at::Tensor, at::Tensor> masked_round(const at::Tensor& x, const at::Tensor& v, at::Tensor allowed) {
  const auto n = x.size(2);
  const auto logits = at::matmul(x, normalised_keys(x).transpose(-2, -1));
  const auto alone = allowed.any(-1, true).logical_not();  // [B, H, N, 1]
  const auto eye = at::eye(n, at::kDouble).to(at::kBool);
  allowed = allowed.logical_or(alone.logical_and(eye));
  const auto masked = at::where(allowed, logits, at::full_like(logits, -INFINITY));
  auto lse = at::logsumexp(masked, -1, true);
  const auto out = at::matmul((masked - lse).exp(), v);
  lse = at::where(alone, at::full_like(lse, -1e5), lse);
  return {out, lse.squeeze(-1)};
}

// Shared-QK, key-normalised, self-excluded softmax attention over the real keys: the N ≤ chunk form.
at::Tensor dense_reformer(const Batch& x, bool q_only = false) {
  const auto n = x.q.size(2);
  const auto others = at::eye(n, at::kDouble).to(at::kBool).logical_not();
  const auto allowed = real_keys(x.valid).logical_and(others).expand({x.q.size(0), x.q.size(1), n, n});
  return masked_round(shared_x(x, q_only), x.v.masked_fill(x.valid.logical_not().unsqueeze(1).unsqueeze(-1), 0.0),
                      allowed.clone())
      .first;
}

// Given each round's buckets [B, H, R, N] (padded tokens already in the extra bucket), the keys a
// query sees in round r: real, not itself, and in its chunk or the previous one of the order sorted
// by (bucket, position). Written as loops over the ranks.
at::Tensor dense_lsh(const Batch& x, const at::Tensor& buckets, std::int64_t chunk) {
  const auto b_n = x.q.size(0), h_n = x.q.size(1), rounds = buckets.size(2), n = x.q.size(2);
  const auto xs = shared_x(x, false);
  const auto v = x.v.masked_fill(x.valid.logical_not().unsqueeze(1).unsqueeze(-1), 0.0);
  std::vector<at::Tensor> outs, lses;
  const auto bucket = buckets.contiguous();
  const auto bucket_of = bucket.accessor<std::int64_t, 4>();
  const auto real = x.valid.accessor<bool, 2>();
  for (std::int64_t r = 0; r < rounds; ++r) {
    auto allowed = at::zeros({b_n, h_n, n, n}, at::kBool);
    auto allow = allowed.accessor<bool, 4>();
    for (std::int64_t b = 0; b < b_n; ++b)
      for (std::int64_t h = 0; h < h_n; ++h) {
        std::vector<std::int64_t> rank(n, 0);  // items before i in the order: smaller bucket, or same and earlier
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            const auto bi = bucket_of[b][h][r][i], bj = bucket_of[b][h][r][j];
            if (bj < bi || (bj == bi && j < i)) ++rank[i];
          }
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            const auto ci = rank[i] / chunk, cj = rank[j] / chunk;
            if (j != i && real[b][j] && (cj == ci || cj == ci - 1)) allow[b][h][i][j] = true;
          }
      }
    auto [o, l] = masked_round(xs, v, allowed);
    outs.push_back(o);
    lses.push_back(l);
  }
  const auto weights = at::softmax(at::stack(lses, 2), 2).unsqueeze(-1);  // [B, H, R, N, 1]
  return (at::stack(outs, 2) * weights).sum(2);
}

// The plugin's buckets for a forward in evaluation after redraw(seeded_generator(seed)): the eval
// generator of a SeedStream reseeded alike, R ~ N(0, 1) [H, d, n_h, n_b/2], argmax([xR; −xR]).
at::Tensor expected_buckets(const Batch& x, std::int64_t rounds, std::int64_t buckets, std::uint64_t seed) {
  SeedStream stream;
  auto g = seeded_generator(seed);
  stream.reseed(g);
  auto generator = stream.next(c10::Device(c10::kCPU), false);
  const auto h_n = x.q.size(1), d = x.q.size(3);
  const auto rotations = at::randn({h_n, d, rounds, buckets / 2}, generator, at::kDouble);
  const auto rotated = at::einsum("bhnd,hdrk->bhrnk", {shared_x(x, false), rotations});
  const auto hashed = at::cat({rotated, -rotated}, -1).argmax(-1);
  return hashed.masked_fill(x.valid.logical_not().unsqueeze(1).unsqueeze(1), buckets);
}

Batch padded_slice(const Batch& x, std::int64_t b) {
  return {x.q.slice(0, b, b + 1), x.k.slice(0, b, b + 1), x.v.slice(0, b, b + 1), x.valid.slice(0, b, b + 1)};
}

double real_diff(const at::Tensor& a, const at::Tensor& b, const at::Tensor& valid) {
  const auto rows = valid.unsqueeze(1).unsqueeze(-1);
  return max_diff(a.masked_fill(rows.logical_not(), 0.0), b.masked_fill(rows.logical_not(), 0.0));
}

TEST(Reformer, OneChunkIsSharedQKSelfExcludedSoftmax) {
  // N ≤ chunk: full attention; the 1-token sequence can only attend to itself
  const auto x = make_batch({11, 6, 1}, 2, 11, 8, 3);
  for (bool q_only : {false, true}) {
    const auto m = make_method("reformer", {{"qk", std::string(q_only ? "q" : "sum")}}, {2, 8, 11});
    const auto out = seeded_forward(*m, x.q, x.k, x.v, x.valid);
    EXPECT_LT(real_diff(out, dense_reformer(x, q_only), x.valid), 1e-12) << "qk = " << (q_only ? "q" : "sum");
  }
  EXPECT_LT(max_diff(seeded_forward(*make_method("reformer", {}, {2, 8, 11}), x.q, x.k, x.v, x.valid)[2][0][0],
                     x.v[2][0][0]), 1e-12);
}

TEST(Reformer, QOnlyIgnoresK) {
  const auto x = make_batch({24, 13}, 2, 24, 8, 4);
  const auto m = make_method("reformer", {{"qk", std::string("q")}, {"chunk", std::int64_t{4}}}, {2, 8, 24});
  const auto a = seeded_forward(*m, x.q, x.k, x.v, x.valid), b = seeded_forward(*m, x.q, x.k * 3 + 1, x.v, x.valid);
  EXPECT_EQ(max_diff(a, b), 0.0);
}

TEST(Reformer, OneBucketIsChunksOfThePositions) {
  // buckets = 1: the order is the real positions, then the padded ones; query of rank i sees the real
  // keys of ranks in its chunk and the previous one (interior padding in the third sequence)
  auto x = make_batch({13, 9, 13, 1}, 2, 13, 8, 5);
  for (std::int64_t i : {1, 5, 6, 11}) x.valid[2][i] = false;
  for (std::int64_t hashes : {1, 3}) {
    const auto m = make_method("reformer", {{"chunk", std::int64_t{4}}, {"buckets", std::int64_t{1}},
                                            {"hashes", hashes}}, {2, 8, 13});
    const auto out = seeded_forward(*m, x.q, x.k, x.v, x.valid);
    const auto one_bucket = at::zeros({4, 2, 1, 13}, at::kLong).masked_fill(
        x.valid.logical_not().unsqueeze(1).unsqueeze(1), 1);  // padded tokens in the extra bucket
    const auto expected = dense_lsh(x, one_bucket, 4);
    EXPECT_LT(real_diff(out, expected, x.valid), 1e-12) << hashes << " hash round(s)";
  }
}

TEST(Reformer, HashedRoundsMatchTheDenseFormula) {
  // random rotations, 4 buckets, 3 rounds combined by their log-normalisers; padding in the batch
  const auto x = make_batch({24, 13}, 2, 24, 8, 6, 1.0);
  const auto m = make_method("reformer", {{"chunk", std::int64_t{4}}, {"buckets", std::int64_t{4}},
                                          {"hashes", std::int64_t{3}}}, {2, 8, 24});
  ASSERT_TRUE(m->stochastic());
  const auto out = seeded_forward(*m, x.q, x.k, x.v, x.valid, 11);
  const auto buckets = expected_buckets(x, 3, 4, 11);
  EXPECT_TRUE(buckets[0].ne(buckets[0][0][0][0]).any().item<bool>());  // more than one bucket in use
  EXPECT_LT(real_diff(out, dense_lsh(x, buckets, 4), x.valid), 1e-12);
  // each round alone is not the combination: the rounds do differ
  EXPECT_GT(real_diff(out, dense_lsh(x, buckets.slice(2, 0, 1), 4), x.valid), 1e-3);
}

TEST(Reformer, DefaultBucketsFollowMaxLen) {
  // n_b = 2^floor(log2(2 floor(L / c))): L = 24, c = 4 gives 8; checked through the dense formula
  const auto x = make_batch({24, 17}, 2, 24, 8, 7, 1.0);
  const auto m = make_method("reformer", {{"chunk", std::int64_t{4}}}, {2, 8, 24});
  const auto out = seeded_forward(*m, x.q, x.k, x.v, x.valid, 3);
  EXPECT_LT(real_diff(out, dense_lsh(x, expected_buckets(x, 2, 8, 3), 4), x.valid), 1e-12);
}

TEST(Reformer, IdenticalRoundsAreOneRound) {
  const auto x = make_batch({24, 13}, 2, 24, 8, 8);
  auto one = make_method("reformer", {{"chunk", std::int64_t{4}}, {"buckets", std::int64_t{1}}, {"hashes", std::int64_t{1}}},
                         {2, 8, 24});
  auto two = make_method("reformer", {{"chunk", std::int64_t{4}}, {"buckets", std::int64_t{1}}, {"hashes", std::int64_t{2}}},
                         {2, 8, 24});
  EXPECT_LT(real_diff(seeded_forward(*one, x.q, x.k, x.v, x.valid), seeded_forward(*two, x.q, x.k, x.v, x.valid), x.valid),
            1e-14);
}

TEST(Reformer, SeededAndFreshEachTrainingForward) {
  const auto x = make_batch({24, 24}, 2, 24, 8, 9, 1.0);
  auto m = make_method("reformer", {{"chunk", std::int64_t{4}}}, {2, 8, 24});
  ASSERT_TRUE(m->stochastic());
  const auto a = seeded_forward(*m, x.q, x.k, x.v, x.valid, 1);
  EXPECT_TRUE(at::equal(a, seeded_forward(*m, x.q, x.k, x.v, x.valid, 1)));
  EXPECT_TRUE(at::equal(a, m->forward(x.q, x.k, x.v, x.valid)));  // evaluation: one fixed draw
  EXPECT_GT(max_diff(a, seeded_forward(*m, x.q, x.k, x.v, x.valid, 2)), 1e-3);
  m->train();
  auto g = seeded_generator(1);
  m->redraw(g);
  const auto t1 = m->forward(x.q, x.k, x.v, x.valid), t2 = m->forward(x.q, x.k, x.v, x.valid);
  EXPECT_GT(max_diff(t1, t2), 1e-3);  // training: fresh rotations every forward
  m->redraw(g = seeded_generator(1));
  EXPECT_TRUE(at::equal(t1, m->forward(x.q, x.k, x.v, x.valid)));
  // sequences that fit in one chunk never hash: not stochastic
  EXPECT_FALSE(make_method("reformer", {}, {2, 8, 64})->stochastic());
  EXPECT_TRUE(make_method("reformer", {}, {2, 8, 65})->stochastic());
}

TEST(Reformer, ChunkedPathIgnoresPaddingAndTheBatch) {
  const auto x = make_batch({24, 13}, 2, 24, 8, 10, 1.0);
  const auto m = make_method("reformer", {{"chunk", std::int64_t{4}}}, {2, 8, 24});
  const auto base = seeded_forward(*m, x.q, x.k, x.v, x.valid);
  for (double garbage : {1e6, double(INFINITY), double(NAN)}) {
    const auto y = fill_padding(x, garbage);
    EXPECT_EQ(real_diff(seeded_forward(*m, y.q, y.k, y.v, y.valid), base, x.valid), 0.0) << garbage;
  }
  // the 13 tokens alone (N = 13, other chunk padding) and each sequence alone in its batch
  const auto a = alone(x, 1, 13);
  EXPECT_LT(max_diff(seeded_forward(*m, a.q, a.k, a.v, a.valid)[0], base[1].slice(1, 0, 13)), 1e-12);
  const auto first = padded_slice(x, 0);
  EXPECT_LT(max_diff(seeded_forward(*m, first.q, first.k, first.v, first.valid)[0], base[0]), 1e-12);
  // gradients stay finite and zero at padded positions with garbage there
  auto y = fill_padding(x, NAN);
  auto q = y.q.clone().requires_grad_(true), k = y.k.clone().requires_grad_(true), v = y.v.clone().requires_grad_(true);
  auto g = seeded_generator(7);
  m->redraw(g);
  const auto out = m->forward(q, k, v, y.valid);
  out.masked_fill(y.valid.logical_not().unsqueeze(1).unsqueeze(-1), 0.0).sum().backward();
  for (const auto& t : {q, k, v}) EXPECT_TRUE(t.grad().isfinite().all().item<bool>());
  EXPECT_EQ(q.grad()[1].slice(1, 13, 24).abs().max().item<double>(), 0.0);
}

TEST(Reformer, ChunkedPathGradientsMatchFiniteDifferences) {
  const auto x = make_batch({12, 9}, 1, 12, 4, 11, 1.0);
  const auto m = make_method("reformer", {{"chunk", std::int64_t{4}}}, {1, 4, 12});
  const auto weights = at::randn({2, 1, 12, 4}, seeded_generator(12), at::kDouble)
                           .masked_fill(x.valid.logical_not().unsqueeze(1).unsqueeze(-1), 0.0);
  auto loss = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return (seeded_forward(*m, q, k, v, x.valid) * weights).sum();
  };
  auto q = x.q.clone().requires_grad_(true), k = x.k.clone().requires_grad_(true), v = x.v.clone().requires_grad_(true);
  loss(q, k, v).backward();
  const at::Tensor grads[] = {q.grad(), k.grad(), v.grad()};
  const at::Tensor* points[] = {&x.q, &x.k, &x.v};
  double worst = 0;
  for (int which = 0; which < 3; ++which) {
    EXPECT_GT(grads[which].abs().sum().item<double>(), 0.0);
    for (std::int64_t i = 0; i < points[which]->numel(); i += 5) {
      at::Tensor moved[2] = {points[which]->clone(), points[which]->clone()};
      moved[0].view(-1)[i] += 1e-6;
      moved[1].view(-1)[i] -= 1e-6;
      double l[2];
      for (int s = 0; s < 2; ++s)
        l[s] = (which == 0 ? loss(moved[s], x.k, x.v) : which == 1 ? loss(x.q, moved[s], x.v) : loss(x.q, x.k, moved[s]))
                   .item<double>();
      const double numeric = (l[0] - l[1]) / 2e-6;
      worst = std::max(worst, std::abs(grads[which].view(-1)[i].item<double>() - numeric) / std::max(1.0, std::abs(numeric)));
    }
  }
  EXPECT_LT(worst, 1e-6);
}

TEST(Reformer, FloatFollowsDouble) {
  const auto x = make_batch({24, 13}, 2, 24, 8, 13, 1.0);
  const auto m = make_method("reformer", {{"chunk", std::int64_t{4}}, {"buckets", std::int64_t{1}}}, {2, 8, 24});
  const auto d = seeded_forward(*m, x.q, x.k, x.v, x.valid);
  const auto f = seeded_forward(*m, x.q.to(at::kFloat), x.k.to(at::kFloat), x.v.to(at::kFloat), x.valid);
  EXPECT_EQ(f.scalar_type(), at::kFloat);
  EXPECT_LT(real_diff(f.to(at::kDouble), d, x.valid), 1e-5);
}

TEST(Reformer, RefusesAnOddBucketCount) {
  try {
    make_method("reformer", {{"buckets", std::int64_t{3}}});
    FAIL() << "buckets = 3 accepted";
  } catch (const ParamError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("buckets", 0), 0u) << e.what();
  }
  const auto& info = *attention_plugin("reformer").info;
  for (const char* name : {"chunk", "hashes"})
    EXPECT_THROW(check_param(*find_param(info.params, info.param_count, name), ParamValue{std::int64_t{0}}), ParamError);
  EXPECT_THROW(check_param(*find_param(info.params, info.param_count, "qk"), ParamValue{std::string("k")}), ParamError);
}

}  // namespace
}  // namespace attnlab::testing
