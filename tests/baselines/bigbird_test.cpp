// BigBird block-sparse attention (plugins/bigbird): the attention pattern written out here as a
// dense allowed-key mask from the rule (global first and last blocks, window, r random blocks of
// highest priority), and softmax attention over that mask in double matching the plugin; the
// exactness limit; the random blocks themselves, read from the plugin by probing it.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <vector>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "method_support.hpp"

namespace attnlab::testing {
namespace {

at::Tensor priority_of(AttentionMethod& m) {
  for (const auto& item : m.named_buffers())
    if (item.key() == "random_priority") return item.value().to(at::kCPU);
  throw std::runtime_error("bigbird has no random_priority buffer");
}

// The key blocks query block i of a sequence of nb blocks attends (r random ones from the head's
// priority row), written from the rule.
std::set<std::int64_t> rule_blocks(const at::Tensor& priority, std::int64_t head, std::int64_t i, std::int64_t nb,
                                   std::int64_t r) {
  std::set<std::int64_t> blocks;
  if (i == 0 || i == nb - 1) {
    for (std::int64_t j = 0; j < nb; ++j) blocks.insert(j);
    return blocks;
  }
  blocks = {0, i - 1, i, i + 1, nb - 1};
  std::vector<std::int64_t> candidates;
  for (std::int64_t j = 1; j <= nb - 2; ++j)
    if (j < i - 1 || j > i + 1) candidates.push_back(j);
  const auto p = priority[head][i];
  std::sort(candidates.begin(), candidates.end(),
            [&](std::int64_t a, std::int64_t c) { return p[a].item<std::int64_t>() > p[c].item<std::int64_t>(); });
  for (std::size_t t = 0; t < candidates.size() && t < static_cast<std::size_t>(r); ++t) blocks.insert(candidates[t]);
  return blocks;
}

// Dense allowed mask [B, H, N, N]: query q and key k of sequence s (both real) when k's block is
// one query q's block attends. Padded query rows allow nothing (their outputs are unspecified).
at::Tensor rule_mask(const at::Tensor& priority, const std::vector<std::int64_t>& real, std::int64_t heads,
                     std::int64_t n, std::int64_t b, std::int64_t r) {
  auto allowed = at::zeros({static_cast<std::int64_t>(real.size()), heads, n, n}, at::kBool);
  auto a = allowed.accessor<bool, 4>();
  for (std::size_t s = 0; s < real.size(); ++s) {
    const auto len = real[s], nb = (len + b - 1) / b;
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < nb; ++i)
        for (const auto j : rule_blocks(priority, h, i, nb, r))
          for (std::int64_t qi = i * b; qi < std::min(len, (i + 1) * b); ++qi)
            for (std::int64_t kj = j * b; kj < std::min(len, (j + 1) * b); ++kj) a[s][h][qi][kj] = true;
  }
  return allowed;
}

double real_rows_diff(const at::Tensor& a, const at::Tensor& b, const std::vector<std::int64_t>& real) {
  double worst = 0;
  for (std::size_t s = 0; s < real.size(); ++s)
    worst = std::max(worst, max_diff(a[s].slice(1, 0, real[s]), b[s].slice(1, 0, real[s])));
  return worst;
}

// b = 4, r = 2, N = 40: the full sequence has 10 blocks, the other 27 real tokens, 7 blocks (the
// last one partial).
const std::vector<std::int64_t> kReal = {40, 27};
constexpr std::int64_t kN = 40, kBlock = 4, kRandom = 2, kHeads = 2, kDim = 8;

std::shared_ptr<AttentionMethod> small_bigbird(std::int64_t r = kRandom, std::int64_t block = kBlock,
                                               AttentionShape shape = {kHeads, kDim, kN}) {
  return make_method("bigbird", {{"block", block}, {"random_blocks", r}}, shape);
}

TEST(BigBird, IsSoftmaxOverTheRulesPatternWithPadding) {
  const auto x = make_batch(kReal, kHeads, kN, kDim, 21);
  for (const std::int64_t r : {kRandom, std::int64_t{0}}) {
    auto m = small_bigbird(r);
    ASSERT_EQ(m->stochastic(), r > 0);
    const auto out = seeded_forward(*m, x.q, x.k, x.v, x.valid, 5);
    const auto allowed = rule_mask(priority_of(*m), kReal, kHeads, kN, kBlock, r);
    // sparse indeed: the longer sequence's middle rows see far from every key
    EXPECT_LT(allowed[0].sum().item<std::int64_t>(), kHeads * kN * kN * 4 / 5);
    EXPECT_LT(real_rows_diff(out, reference_softmax_attention(x.q, x.k, x.v, allowed), kReal), 1e-12) << "r = " << r;
  }
}

TEST(BigBird, GradientsAreThoseOfSoftmaxOverThePattern) {
  const auto x = make_batch(kReal, kHeads, kN, kDim, 22);
  auto m = small_bigbird();
  auto g = seeded_generator(5);
  m->redraw(g);
  const auto allowed = rule_mask(priority_of(*m), kReal, kHeads, kN, kBlock, kRandom);
  auto weights = at::randn({2, kHeads, kN, kDim}, seeded_generator(3), at::kDouble);
  weights[1].slice(1, kReal[1], kN).zero_();  // padded query rows are unspecified
  std::vector<at::Tensor> grads[2];
  for (int which = 0; which < 2; ++which) {
    auto q = x.q.clone().requires_grad_(true), k = x.k.clone().requires_grad_(true), v = x.v.clone().requires_grad_(true);
    const auto out = which == 0 ? m->forward(q, k, v, x.valid) : reference_softmax_attention(q, k, v, allowed);
    (out * weights).sum().backward();
    grads[which] = {q.grad(), k.grad(), v.grad()};
  }
  for (int t = 0; t < 3; ++t) EXPECT_LT(real_rows_diff(grads[0][t], grads[1][t], kReal), 1e-12) << "input " << t;
}

TEST(BigBird, FourBlocksWithoutRandomBlocksIsSoftmax) {
  // nb = 4: every block is global or sees all four; with r = 3 there is no candidate either.
  const std::vector<std::int64_t> real = {16, 13};
  const auto x = make_batch(real, kHeads, 16, kDim, 23);
  const auto expected = reference_softmax_attention(x.q, x.k, x.v, real_keys(x.valid));
  for (const std::int64_t r : {0, 3}) {
    auto m = small_bigbird(r, 4, {kHeads, kDim, 16});
    EXPECT_FALSE(m->stochastic());
    EXPECT_LT(real_rows_diff(seeded_forward(*m, x.q, x.k, x.v, x.valid), expected, real), 1e-13) << "r = " << r;
  }
  // and a sequence of fewer blocks than the batch's longest is dense as well
  auto m = small_bigbird(3, 4);
  const auto y = make_batch({40, 15}, kHeads, kN, kDim, 24);
  const auto out = seeded_forward(*m, y.q, y.k, y.v, y.valid);
  EXPECT_LT(max_diff(out[1].slice(1, 0, 15),
                     reference_softmax_attention(y.q, y.k, y.v, real_keys(y.valid))[1].slice(1, 0, 15)),
            1e-13);
}

// The plugin's attention weights, read by probing: q = 0 makes them uniform over the allowed keys,
// and v = I (head dim = N) writes row i's weights out. [B, H, N, N].
at::Tensor probe_weights(AttentionMethod& m, const at::Tensor& valid) {
  const auto batch = valid.size(0), n = valid.size(1);
  const auto q = at::zeros({batch, kHeads, n, n}, at::kDouble);
  const auto v = at::eye(n, at::kDouble).expand({batch, kHeads, n, n});
  return m.forward(q, q, v, valid);
}

// The key blocks each real query block attends, per sequence and head, read from probed weights;
// checks that every real row's weights are uniform over its keys (no block counted twice, no
// weight on padding).
std::vector<std::vector<std::vector<std::set<std::int64_t>>>> probed_blocks(const at::Tensor& w,
                                                                            const std::vector<std::int64_t>& real,
                                                                            std::int64_t b) {
  std::vector<std::vector<std::vector<std::set<std::int64_t>>>> out(real.size());
  for (std::size_t s = 0; s < real.size(); ++s) {
    const auto nb = (real[s] + b - 1) / b;
    for (std::int64_t h = 0; h < w.size(1); ++h) {
      out[s].emplace_back(nb);
      for (std::int64_t i = 0; i < nb; ++i) {
        const auto rows = w[s][h].slice(0, i * b, std::min(real[s], (i + 1) * b));
        const auto row = rows[0];
        const auto count = row.gt(0).sum().item<double>();
        EXPECT_LT((rows.sum(1) - 1).abs().max().item<double>(), 1e-12);                       // all on real keys
        EXPECT_LT(max_diff(rows.masked_select(rows.gt(0)), at::full({}, 1 / count, at::kDouble)), 1e-12);  // uniform
        EXPECT_TRUE(at::equal(rows.gt(0), row.gt(0).expand_as(rows)));  // the same keys for the whole block
        for (std::int64_t j = 0; j < nb; ++j)
          if (row.slice(0, j * b, std::min(real[s], (j + 1) * b)).gt(0).any().item<bool>()) out[s][h][i].insert(j);
      }
    }
  }
  return out;
}

TEST(BigBird, RandomBlocksAreDistinctOutsideTheWindowAndFixedUntilRedrawn) {
  constexpr std::int64_t n = 32, b = 2, r = 3;  // 16 blocks, and 10 for the 19-token sequence
  const std::vector<std::int64_t> real = {32, 19};
  auto valid = at::zeros({2, n}, at::kBool);
  for (int s = 0; s < 2; ++s) valid[s].slice(0, 0, real[s]).fill_(true);
  auto m = small_bigbird(r, b, {kHeads, n, n});
  ASSERT_TRUE(m->stochastic());
  auto g = seeded_generator(31);
  m->redraw(g);
  const auto first = probe_weights(*m, valid);
  const auto blocks = probed_blocks(first, real, b);
  std::int64_t differing_heads = 0;
  for (std::size_t s = 0; s < real.size(); ++s) {
    const auto nb = (real[s] + b - 1) / b;
    for (std::int64_t h = 0; h < kHeads; ++h) {
      EXPECT_EQ(blocks[s][h][0].size(), static_cast<std::size_t>(nb));       // global
      EXPECT_EQ(blocks[s][h][nb - 1].size(), static_cast<std::size_t>(nb));  // global
      for (std::int64_t i = 1; i <= nb - 2; ++i) {
        std::set<std::int64_t> fixed = {0, i - 1, i, i + 1, nb - 1}, random;
        for (const auto j : fixed) EXPECT_TRUE(blocks[s][h][i].count(j)) << "s " << s << " block " << i << " misses " << j;
        for (const auto j : blocks[s][h][i])
          if (!fixed.count(j)) random.insert(j);
        const std::int64_t candidates = (nb - 2) - std::min<std::int64_t>(i + 1, nb - 2) + std::max<std::int64_t>(i - 1, 1) - 1;
        EXPECT_EQ(static_cast<std::int64_t>(random.size()), std::min(r, candidates)) << "s " << s << " block " << i;
        for (const auto j : random) EXPECT_TRUE(j >= 1 && j <= nb - 2 && std::abs(j - i) > 1);
      }
      if (s == 0 && h == 1) differing_heads += blocks[0][0] != blocks[0][1];
    }
  }
  EXPECT_EQ(differing_heads, 1);  // each head its own draw
  // the same in every forward, in training mode too
  m->train();
  EXPECT_TRUE(at::equal(probe_weights(*m, valid), first));
  m->eval();
  // the same after a save and a load into a method drawn from another seed
  torch::serialize::OutputArchive out;
  m->save(out);
  std::stringstream bytes;
  out.save_to(bytes);
  auto loaded = small_bigbird(r, b, {kHeads, n, n});
  auto other = seeded_generator(32);
  loaded->redraw(other);
  EXPECT_FALSE(at::equal(probe_weights(*loaded, valid), first));  // another seed, other blocks
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  loaded->load(in);
  EXPECT_TRUE(at::equal(probe_weights(*loaded, valid), first));
  // and different after a redraw from another seed
  auto third = seeded_generator(33);
  m->redraw(third);
  EXPECT_FALSE(at::equal(probe_weights(*m, valid), first));
}

TEST(BigBird, GarbageAtPaddingChangesNothing) {
  const auto x = make_batch(kReal, kHeads, kN, kDim, 25);
  auto m = small_bigbird();
  const auto base = seeded_forward(*m, x.q, x.k, x.v, x.valid);
  for (const double garbage : {1e6, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    const auto y = fill_padding(x, garbage);
    const auto out = seeded_forward(*m, y.q, y.k, y.v, y.valid);
    EXPECT_TRUE(at::equal(out[0], base[0])) << garbage;
    EXPECT_TRUE(at::equal(out[1].slice(1, 0, kReal[1]), base[1].slice(1, 0, kReal[1]))) << garbage;
  }
}

TEST(BigBird, ASequenceAloneEqualsItPaddedBesideALongerOne) {
  const std::vector<std::int64_t> real = {40, 30};  // 10 blocks beside 8, the last of 2 tokens
  const auto x = make_batch(real, kHeads, kN, kDim, 26);
  auto m = small_bigbird();  // r = 2: blocks 2 to 5 of the 8 have 3 or 4 candidates
  const auto batched = seeded_forward(*m, x.q, x.k, x.v, x.valid);
  const auto a = alone(x, 1, real[1]);
  const auto by_itself = seeded_forward(*m, a.q, a.k, a.v, a.valid);
  EXPECT_LT(max_diff(by_itself[0], batched[1].slice(1, 0, real[1])), 1e-13);
}

TEST(BigBird, LongSequencesComputedInChunksAreTheSequencesAlone) {
  // defaults (b = 64, r = 3) at N = 1024: 4 (sequence, head) pairs exceed the CPU chunk budget
  // and go in two chunks; each sequence alone (2 pairs) in one.
  const std::vector<std::int64_t> real = {1024, 700};
  const auto x = make_batch(real, kHeads, 1024, kDim, 28);
  auto m = make_method("bigbird", {}, {kHeads, kDim, 1024});
  ASSERT_TRUE(m->stochastic());
  const auto batched = seeded_forward(*m, x.q, x.k, x.v, x.valid);
  for (std::int64_t s = 0; s < 2; ++s) {
    const auto a = alone(x, s, real[s]);
    EXPECT_LT(max_diff(seeded_forward(*m, a.q, a.k, a.v, a.valid)[0], batched[s].slice(1, 0, real[s])), 1e-13);
  }
}

TEST(BigBird, RefusesBadParametersAndTooLongInputs) {
  const auto& info = *attention_plugin("bigbird").info;
  EXPECT_THROW(check_param(*find_param(info.params, info.param_count, "block"), ParamValue(std::int64_t{0})), ParamError);
  EXPECT_THROW(check_param(*find_param(info.params, info.param_count, "random_blocks"), ParamValue(std::int64_t{-1})),
               ParamError);
  auto m = small_bigbird(kRandom, kBlock, {kHeads, kDim, 16});  // 4 blocks at most
  const auto x = make_batch({20}, kHeads, 20, kDim, 27);
  EXPECT_THROW(m->forward(x.q, x.k, x.v, x.valid), std::invalid_argument);
  // random only where some block has more than r candidates (nb_max > r + 4)
  EXPECT_FALSE(small_bigbird(3, 4, {kHeads, kDim, 28})->stochastic());
  EXPECT_TRUE(small_bigbird(3, 4, {kHeads, kDim, 29})->stochastic());
}

}  // namespace
}  // namespace attnlab::testing
