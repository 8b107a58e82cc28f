#include "attnlab/seed_stream.hpp"

#include <algorithm>
#include <limits>
#include <mutex>
#include <stdexcept>

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

namespace {

// The live streams' training generators, in the order they were made.
struct Registry {
  std::mutex lock;
  std::vector<std::pair<const SeedStream*, at::Generator>> made;
};
Registry& registry() {
  static auto* r = new Registry();  // never destroyed: generators may outlive static destruction
  return *r;
}

std::uint64_t training_seed(std::uint64_t seed) { return mix_seed(seed); }
std::uint64_t evaluation_seed(std::uint64_t seed) { return mix_seed(mix_seed(seed) ^ ~std::uint64_t{0}); }

}  // namespace

SeedStream::~SeedStream() {
  auto& r = registry();
  std::lock_guard<std::mutex> guard(r.lock);
  for (auto it = r.made.begin(); it != r.made.end(); ++it)
    if (it->first == this) {
      r.made.erase(it);
      break;
    }
}

void SeedStream::reseed(at::Generator& generator) {
  const auto options = at::TensorOptions().dtype(at::kLong).device(generator.device());
  seed_ = static_cast<std::uint64_t>(
      at::randint(std::numeric_limits<std::int64_t>::max(), {1}, generator, options).cpu().item<std::int64_t>());
  if (training_.defined()) {
    std::lock_guard<std::mutex> lock(training_.mutex());
    training_.set_current_seed(training_seed(seed_));
  }
  pending_state_ = at::Tensor();
}

at::Generator SeedStream::next(const c10::Device& device, bool training) {
  if (!training) {
    if (!evaluation_.defined() || evaluation_.device() != device) evaluation_ = generator_on(device, 0);
    std::lock_guard<std::mutex> lock(evaluation_.mutex());
    evaluation_.set_current_seed(evaluation_seed(seed_));
    return evaluation_;
  }
  if (!training_.defined() || training_.device() != device) {
    training_ = generator_on(device, training_seed(seed_));
    if (pending_state_.defined() && pending_state_.numel() == training_.get_state().numel()) training_.set_state(pending_state_);
    pending_state_ = at::Tensor();
    auto& r = registry();
    std::lock_guard<std::mutex> guard(r.lock);
    r.made.erase(std::remove_if(r.made.begin(), r.made.end(), [&](const auto& entry) { return entry.first == this; }),
                 r.made.end());
    r.made.emplace_back(this, training_);
  }
  return training_;
}

void SeedStream::save(torch::serialize::OutputArchive& archive, const std::string& prefix) const {
  archive.write(prefix + "_seed", c10::IValue(static_cast<std::int64_t>(seed_)));
  const auto state = training_.defined() ? training_.get_state() : pending_state_;
  if (state.defined()) archive.write(prefix + "_state", state);
}

void SeedStream::load(torch::serialize::InputArchive& archive, const std::string& prefix) {
  c10::IValue seed;
  if (!archive.try_read(prefix + "_seed", seed)) return;
  seed_ = static_cast<std::uint64_t>(seed.toInt());
  at::Tensor state;
  if (!archive.try_read(prefix + "_state", state)) {
    c10::IValue draws;
    if (archive.try_read(prefix + "_draws", draws))
      throw std::runtime_error(prefix + " stream: written by an earlier attnlab (a seed and a count of draws, no "
                               "generator state): it cannot be continued");
    state = at::Tensor();  // drawn from never: the stream starts from its seed
  }
  // the state of a generator not yet made: it is set when the first training forward makes it
  if (training_.defined()) {
    std::lock_guard<std::mutex> lock(training_.mutex());
    training_.set_current_seed(training_seed(seed_));
    if (state.defined() && state.numel() == training_.get_state().numel()) training_.set_state(state);
  } else {
    pending_state_ = state;
  }
}

std::vector<at::Generator> stream_generators(const c10::Device& device) {
  auto& r = registry();
  std::lock_guard<std::mutex> guard(r.lock);
  std::vector<at::Generator> out;
  for (const auto& [stream, generator] : r.made)
    if (generator.device() == device) out.push_back(generator);
  return out;
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
