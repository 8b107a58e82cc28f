// Inverted dropout: keep each value with probability 1 - p and scale the kept ones by 1 / (1 - p).
//
// On the CPU the mask is counter-based: element i of a call is kept iff a 32-bit hash of i keyed by
// `seed` falls below keep·2³², where `seed` is one 64-bit draw from the default generator per call (so torch::manual_seed and the resume checkpoint's generator state still fix
// every mask). A pure function of (seed, i): it is drawn in parallel and is the same for any
// thread count, and the backward recomputes it instead of keeping a mask tensor. LibTorch's own
// CPU draws (bernoulli_, or uniform_ then a comparison) run on one thread through the generator's
// lock, and were about an eighth of a whole training step of the LRA model.
#include "attnlab/train/model.hpp"

#include <cstdint>
#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

namespace attnlab {
namespace {

// A keyed 32-bit hash of the element's index: murmur3's finaliser twice, keyed by the two halves
// of the call's seed. 32-bit multiplies only, so the loop below vectorises.
inline std::uint32_t fmix32(std::uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bU;
  h ^= h >> 13;
  h *= 0xc2b2ae35U;
  return h ^ (h >> 16);
}
inline std::uint32_t mask_bits(std::uint32_t key_lo, std::uint32_t key_hi, std::uint32_t i) {
  return fmix32(fmix32(i * 0x9e3779b1U + key_lo) ^ key_hi);
}

// The float loop, the one training runs: built for AVX-512, AVX2 and the baseline, picked at load.
__attribute__((target_clones("avx512f", "avx2", "default")))
void mask_floats(const float* in, float* out, std::int64_t begin, std::int64_t end, std::uint32_t key_lo,
                 std::uint32_t key_hi, std::uint32_t threshold, float scale) {
  for (std::int64_t i = begin; i < end; ++i)
    out[i] = mask_bits(key_lo, key_hi, static_cast<std::uint32_t>(i)) < threshold ? in[i] * scale : 0.0f;
}

// x ⊙ mask(seed) / keep, for x of any floating type (made contiguous).
at::Tensor apply_mask(const at::Tensor& input, double keep, std::uint64_t seed) {
  const at::Tensor x = input.contiguous();
  TORCH_CHECK(x.numel() <= (std::int64_t{1} << 32), "inverted_dropout: more than 2^32 elements in one tensor");
  at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  const auto key_lo = static_cast<std::uint32_t>(seed), key_hi = static_cast<std::uint32_t>(seed >> 32);
  // Kept iff bits < threshold: probability threshold / 2^32, within 2^-32 of keep.
  const auto threshold = static_cast<std::uint32_t>(keep * 4294967296.0);
  if (x.scalar_type() == at::kFloat) {
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const auto scale = static_cast<float>(1.0 / keep);
    at::parallel_for(0, x.numel(), 32768, [&](std::int64_t begin, std::int64_t end) {
      mask_floats(in, o, begin, end, key_lo, key_hi, threshold, scale);
    });
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "inverted_dropout", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const acc_t scale = static_cast<acc_t>(1.0 / keep);
    const scalar_t* in = x.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, x.numel(), 32768, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i)
        o[i] = mask_bits(key_lo, key_hi, static_cast<std::uint32_t>(i)) < threshold
                   ? static_cast<scalar_t>(static_cast<acc_t>(in[i]) * scale)
                   : scalar_t(0);
    });
  });
  return out;
}

struct CounterDropout : public torch::autograd::Function<CounterDropout> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, double keep, std::int64_t seed) {
    ctx->saved_data["keep"] = keep;
    ctx->saved_data["seed"] = seed;
    return apply_mask(x, keep, static_cast<std::uint64_t>(seed));
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    const double keep = ctx->saved_data["keep"].toDouble();
    const auto seed = static_cast<std::uint64_t>(ctx->saved_data["seed"].toInt());
    return {apply_mask(grads[0], keep, seed), at::Tensor(), at::Tensor()};
  }
};

std::uint64_t draw_seed() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(generator)->random64();
}

}  // namespace

at::Tensor inverted_dropout(const at::Tensor& x, double p, bool training) {
  if (!training || p == 0) return x;
  if (!x.is_cpu()) return at::dropout(x, p, true);  // the device's fused kernel
  if (p >= 1) return at::zeros_like(x);
  return CounterDropout::apply(x, 1.0 - p, static_cast<std::int64_t>(draw_seed()));
}

}  // namespace attnlab
