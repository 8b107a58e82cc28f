// Informer's ProbSparse self-attention (Zhou et al., 2021, §3.1, eq. 3-4 and Lemma 1), as
// Skyformer's code runs it (src/models/attention_informer.py), with the padding masked. For a
// sequence of L real tokens, c = ⌈budget / ln max_len⌉ and U = u = min(c ⌈ln L⌉, L). Query i draws
// U keys s(i, 1..U) uniformly with replacement among the real ones and gets the sparsity measurement
//   M̄(q_i, K) = max_t q_i·k_s(i,t) − (1/L) Σ_t q_i·k_s(i,t);
// the u queries of largest M̄ (per sequence and head) attend exactly, over the real keys,
//   out_i = softmax(q_i Kᵀ / √d) V,
// and every other ("lazy") query outputs the mean of the real rows of V.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "attnlab/attention.hpp"
#include "attnlab/precision.hpp"
#include "attnlab/seed_stream.hpp"

namespace attnlab::informer {

const ParamSpec kParams[] = {
    {"budget", ParamType::real, "128", 1e-3, 1e9, nullptr,
     "sampling factor c = ceil(budget / ln max_len), so that U = u = min(c ceil(ln L), L), the keys sampled per query "
     "and the queries attending exactly, is about budget (Skyformer's in_nb_features = 128)"},
    {"measure", ParamType::string, "auto", 0, 0, "auto|gather",
     "how the sparsity measurement is computed: auto = a fused loop on the CPU (no gathered keys), gathered keys in "
     "chunks elsewhere; gather = gathered keys everywhere (the GPU path, here to be tested on the CPU)"},
};

// min(c ⌈ln L⌉, L): keys sampled per query and queries attending exactly, for L real tokens.
std::int64_t sample_count(std::int64_t c, std::int64_t len) {
  if (len <= 1) return 0;  // ⌈ln 1⌉ = 0, as in the reference (one token: every output is its v)
  return std::min(c * static_cast<std::int64_t>(std::ceil(std::log(static_cast<double>(len)))), len);
}

// The r-th real position of each sequence, [B, N] (entries past the real count are 0).
at::Tensor real_positions(const at::Tensor& valid) {
  const auto batch = valid.size(0), n = valid.size(1);
  const auto longs = valid.options().dtype(at::kLong);
  const auto count = valid.to(at::kLong).cumsum(1);
  const auto slot = at::where(valid, count - 1, at::full_like(count, n));  // padding → a spare column
  auto table = at::zeros({batch, n + 1}, longs);
  table.scatter_(1, slot, at::arange(n, longs).expand({batch, n}));
  return table.slice(1, 0, n);
}

template <typename T>
T dot(const T* a, const T* b, std::int64_t d) {
  T part[8] = {};  // independent partial sums: the compiler vectorises the inner loop
  std::int64_t e = 0;
  for (; e + 8 <= d; e += 8)
    for (int j = 0; j < 8; ++j) part[j] += a[e + j] * b[e + j];
  T sum = 0;
  for (; e < d; ++e) sum += a[e] * b[e];
  for (int j = 0; j < 8; ++j) sum += part[j];
  return sum;
}

// M̄ [B, H, N] on the CPU, in one pass with no gathered keys: query i of sequence b uses the
// first U_b columns of its uniforms, sample t being the real key of rank ⌊u_it L_b⌋. Rows are
// laid out [B, N, H, d], so one sampled key row serves every head.
at::Tensor measure_loop(const at::Tensor& qs, const at::Tensor& ks, const at::Tensor& uniform,
                        const at::Tensor& positions, const at::Tensor& len, const at::Tensor& samples) {
  const auto type = qs.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const auto q = qs.to(type).permute({0, 2, 1, 3}).contiguous(), k = ks.to(type).permute({0, 2, 1, 3}).contiguous();
  const auto u = uniform.contiguous(), pos = positions.contiguous(), l = len.contiguous(), s = samples.contiguous();
  const auto batch = q.size(0), n = q.size(1), heads = q.size(2), d = q.size(3), cap = u.size(1), width = heads * d;
  auto out = at::empty({batch, n, heads}, q.options());
  AT_DISPATCH_FLOATING_TYPES(type, "informer_measure", [&] {
    const auto *qp = q.data_ptr<scalar_t>(), *kp = k.data_ptr<scalar_t>();
    const auto* up = u.data_ptr<double>();
    const auto *pp = pos.data_ptr<std::int64_t>(), *lp = l.data_ptr<std::int64_t>(), *sp = s.data_ptr<std::int64_t>();
    auto* op = out.data_ptr<scalar_t>();
    at::parallel_for(0, batch * n, 16, [&](std::int64_t begin, std::int64_t end) {
      std::vector<scalar_t> top(heads), sum(heads);
      for (auto row = begin; row < end; ++row) {
        const auto b = row / n, i = row % n, real = lp[b], count = sp[b];
        const scalar_t* qi = qp + row * width;
        std::fill(top.begin(), top.end(), -std::numeric_limits<scalar_t>::infinity());
        std::fill(sum.begin(), sum.end(), scalar_t(0));
        for (std::int64_t t = 0; t < count; ++t) {
          const auto rank = std::min(static_cast<std::int64_t>(up[i * cap + t] * static_cast<double>(real)), real - 1);
          const scalar_t* kj = kp + (b * n + pp[b * n + rank]) * width;
          for (std::int64_t h = 0; h < heads; ++h) {
            const scalar_t x = dot(qi + h * d, kj + h * d, d);
            top[h] = std::max(top[h], x);
            sum[h] += x;
          }
        }
        for (std::int64_t h = 0; h < heads; ++h)
          op[row * heads + h] = top[h] - sum[h] / static_cast<scalar_t>(std::max<std::int64_t>(real, 1));
      }
    });
  });
  return out.permute({0, 2, 1});
}

// The same with ATen ops (any device): the sampled keys gathered for a chunk of queries at a time
// (about 4M numbers), never [B, H, N, U, d] at once.
at::Tensor measure_gather(const at::Tensor& qs, const at::Tensor& ks, const at::Tensor& uniform,
                          const at::Tensor& positions, const at::Tensor& len, const at::Tensor& samples) {
  const auto batch = qs.size(0), heads = qs.size(1), n = qs.size(2), d = qs.size(3), cap = uniform.size(1);
  const auto real = len.view({batch, 1, 1});
  const auto rank = at::minimum((uniform.unsqueeze(0) * real.to(at::kDouble)).floor().to(at::kLong), real - 1).clamp_min(0);
  const auto key = positions.gather(1, rank.view({batch, n * cap})).view({batch, n, cap}) +
                   at::arange(batch, len.options()).mul(n).view({batch, 1, 1});  // rows of key_rows
  const auto unused = (at::arange(cap, len.options()).view({1, 1, cap, 1}) >= samples.view({batch, 1, 1, 1}));
  const auto type = qs.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;  // half and bfloat16 rank in float
  const auto key_rows = ks.to(type).permute({0, 2, 1, 3}).reshape({batch * n, heads * d});
  const auto query_rows = qs.to(type).permute({0, 2, 1, 3});  // [B, N, H, d]
  const auto divisor = len.clamp_min(1).to(type).view({batch, 1, 1});
  const auto chunk = std::max<std::int64_t>(1, (std::int64_t{1} << 22) / std::max<std::int64_t>(1, batch * cap * heads * d));
  std::vector<at::Tensor> parts;
  for (std::int64_t start = 0; start < n; start += chunk) {
    const auto m = std::min(chunk, n - start);
    const auto picked = key_rows.index_select(0, key.slice(1, start, start + m).reshape(-1)).view({batch, m, cap, heads, d});
    const auto x = (picked * query_rows.slice(1, start, start + m).unsqueeze(2)).sum(-1);  // [B, m, U, H]
    const auto top = x.masked_fill(unused, -std::numeric_limits<double>::infinity()).amax(2);
    parts.push_back(top - x.masked_fill(unused, 0.0).sum(2) / divisor);  // [B, m, H]
  }
  return at::cat(parts, 1).permute({0, 2, 1});
}

// softmax(q Kᵀ/√d) V of the active rows q [B, H, u, d] over the keys where `keys` [B, N] (every row
// has one at least). One [B, H, u, N] tensor is kept, the probabilities, computed in place; the
// backward needs one more, overwritten in place: dS = P ∘ (dP − rowsum(dO ∘ O)).
struct ActiveAttention : public torch::autograd::Function<ActiveAttention> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& keys) {
    NoAutocast one_type;  // P in the inputs' type, as the backward's matmuls need (precision.hpp)
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    auto probs = at::matmul(q * scale, k.transpose(-2, -1));
    probs.masked_fill_(keys.logical_not().view({q.size(0), 1, 1, k.size(2)}), -std::numeric_limits<double>::infinity());
    probs.sub_(std::get<0>(probs.max(-1, /*keepdim=*/true))).exp_();
    probs.div_(probs.sum(-1, /*keepdim=*/true));
    auto out = at::matmul(probs, v);
    ctx->save_for_backward({q, k, v, probs, out});
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &probs = saved[3], &out = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const auto& g = grads[0];
    auto grad_scores = at::matmul(g, v.transpose(-2, -1));                    // dP
    grad_scores.sub_((g * out).sum(-1, /*keepdim=*/true)).mul_(probs);         // dS, in place
    return {at::matmul(grad_scores, k).mul_(scale), at::matmul(grad_scores.transpose(-2, -1), q).mul_(scale),
            at::matmul(probs.transpose(-2, -1), g), at::Tensor()};
  }
};

class InformerAttention : public SeedStreamAttention {
 public:
  InformerAttention(std::int64_t max_len, double budget, bool gather)
      : SeedStreamAttention("sample"),
        max_len_(std::max<std::int64_t>(max_len, 1)),
        factor_(static_cast<std::int64_t>(std::ceil(budget / std::log(std::max<double>(max_len_, 2))))),
        gather_(gather) {
    // With u = L for every length up to max_len, every query attends exactly: the draw changes
    // nothing (softmax attention), and the method says it is not stochastic.
    for (std::int64_t len = 2; len <= max_len_ && !stochastic_; ++len) stochastic_ = sample_count(factor_, len) < len;
  }

  bool stochastic() const override { return stochastic_; }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const auto batch = q.size(0), heads = q.size(1), n = q.size(2), dim = q.size(3);
    // padded rows zeroed: nothing at a padded position (even inf or nan) reaches a real token
    const auto valid = key_valid.to(at::kBool);
    const auto padded = valid.logical_not().view({batch, 1, n, 1});
    const auto qs = q.masked_fill(padded, 0.0), ks = k.masked_fill(padded, 0.0), vs = v.masked_fill(padded, 0.0);
    const auto len = valid.sum(1);  // [B] real tokens L_b
    const auto longs = len.options();
    // One draw [span, cap] for the whole batch: row i holds query i's uniforms, sequence b uses
    // its first U_b columns. Its shape depends on max_len only, so a sequence gets the same samples
    // whatever its padding or its neighbours.
    const auto span = std::max(max_len_, n), cap = sample_count(factor_, span);
    const auto samples = sample_counts(len, cap);  // [B] U_b = u_b
    auto generator = draw_generator(q.device());
    const auto uniform = at::rand({span, cap}, generator, q.options().dtype(at::kDouble)).slice(0, 0, n);
    const auto positions = real_positions(valid);
    at::Tensor measure;  // [B, H, N], −∞ at padded queries: they never attend
    {
      at::NoGradGuard no_grad;  // M̄ only selects queries
      measure = !gather_ && q.device().is_cpu() ? measure_loop(qs, ks, uniform, positions, len, samples)
                                                : measure_gather(qs, ks, uniform, positions, len, samples);
      measure.masked_fill_(valid.logical_not().unsqueeze(1), -std::numeric_limits<double>::infinity());
    }
    // the top-u queries in order of M̄; slot r attends exactly when r < u_b
    const auto slots = std::min(cap, n);
    const auto top = std::get<1>(measure.topk(slots, -1, /*largest=*/true, /*sorted=*/true));
    const auto rows = top.unsqueeze(-1).expand({batch, heads, slots, dim});
    // softmax(q Kᵀ/√d) V over the real keys for those rows (over all, zeros, in a sequence without
    // a real token, so that no row is empty)
    const auto keys = valid.logical_or(len.eq(0).unsqueeze(1));
    const auto exact = ActiveAttention::apply(qs.gather(2, rows), ks, vs, keys);
    const auto lazy = vs.sum(2, /*keepdim=*/true) / len.clamp_min(1).to(q.scalar_type()).view({batch, 1, 1, 1});
    const auto active = at::arange(slots, longs).view({1, 1, slots, 1}) < samples.view({batch, 1, 1, 1});
    return at::scatter(lazy.expand({batch, heads, n, dim}).contiguous(), 2, rows, at::where(active, exact, lazy));
  }

 private:
  // U_b = min(c ⌈ln L_b⌉, L_b) per sequence, on the device ([B] long)
  at::Tensor sample_counts(const at::Tensor& len, std::int64_t cap) const {
    const auto ceil_log = len.clamp_min(1).to(at::kDouble).log().ceil().to(at::kLong);
    return at::minimum(ceil_log * factor_, len).clamp_max(cap);  // the draw's columns (U_b ≤ U_cap anyway)
  }

  std::int64_t max_len_;
  std::int64_t factor_;  // c
  bool gather_;
  bool stochastic_ = false;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& shape, const ParamValues& params) {
  const bool gather = params.choice<bool>("measure", {{"auto", false}, {"gather", true}});
  return std::make_shared<InformerAttention>(shape.max_len, params.real("budget"), gather);
}

}  // namespace attnlab::informer

ATTNLAB_PLUGIN_INFO(attention, "informer", "1.0",
                    "Informer ProbSparse attention: the top-u queries by a sampled sparsity measurement attend exactly, "
                    "the others output mean(V)",
                    attnlab::informer::kParams);
ATTNLAB_ATTENTION_FACTORY(attnlab::informer::create);
