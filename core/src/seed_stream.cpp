#include "attnlab/seed_stream.hpp"

#include <limits>
#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

namespace attnlab {

std::uint64_t mix_seed(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

at::Generator generator_on(const c10::Device& device, std::uint64_t seed) {
  if (device.is_cpu()) return at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Generator device_default = at::globalContext().defaultGenerator(device);
  at::Generator g;
  {
    std::lock_guard<std::mutex> lock(device_default.mutex());
    g = device_default.clone();
  }
  g.set_current_seed(seed);
  return g;
}

void SeedStream::reseed(at::Generator& generator) {
  const auto options = at::TensorOptions().dtype(at::kLong).device(generator.device());
  seed_ = static_cast<std::uint64_t>(
      at::randint(std::numeric_limits<std::int64_t>::max(), {1}, generator, options).cpu().item<std::int64_t>());
  draws_ = 0;
}

at::Generator SeedStream::next(const c10::Device& device, bool training) {
  const std::uint64_t stream = training ? draws_++ : ~std::uint64_t{0};
  return generator_on(device, mix_seed(mix_seed(seed_) ^ stream));
}

void SeedStream::save(torch::serialize::OutputArchive& archive, const std::string& prefix) const {
  archive.write(prefix + "_seed", c10::IValue(static_cast<std::int64_t>(seed_)));
  archive.write(prefix + "_draws", c10::IValue(static_cast<std::int64_t>(draws_)));
}

void SeedStream::load(torch::serialize::InputArchive& archive, const std::string& prefix) {
  c10::IValue seed, draws;
  if (archive.try_read(prefix + "_seed", seed) && archive.try_read(prefix + "_draws", draws)) {
    seed_ = static_cast<std::uint64_t>(seed.toInt());
    draws_ = static_cast<std::uint64_t>(draws.toInt());
  }
}

void SeedStreamAttention::save(torch::serialize::OutputArchive& archive) const {
  AttentionMethod::save(archive);
  stream_.save(archive, stream_name_);
}

void SeedStreamAttention::load(torch::serialize::InputArchive& archive) {
  AttentionMethod::load(archive);
  stream_.load(archive, stream_name_);
}

}  // namespace attnlab
