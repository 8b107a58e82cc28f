#pragma once
// The randomness of a method that draws afresh at every training forward (Skyformer's landmarks,
// Informer's sampled keys, Reformer's rotations): one seed taken from the trainer's generator at
// each redraw, then a generator per forward derived from it. Training forwards take the stream's
// next generator; evaluation forwards always the same one, so evaluating is repeatable and does
// not move the training stream. Generators are made on the tensors' device: no host-to-device
// copy, no synchronisation.
#include <cstdint>
#include <string>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace torch::serialize {
class InputArchive;
class OutputArchive;
}  // namespace torch::serialize

namespace attnlab {

class SeedStream {
 public:
  // One seed from `generator` (the trainer's, seeded by the run); the stream restarts.
  void reseed(at::Generator& generator);
  // The generator of the next training forward (training = true), or the fixed evaluation one.
  at::Generator next(const c10::Device& device, bool training);

  // The stream's position travels with the module's checkpoints (call from save/load overrides):
  // values `<prefix>_seed` and `<prefix>_draws`. An archive without them leaves the stream as is.
  void save(torch::serialize::OutputArchive& archive, const std::string& prefix) const;
  void load(torch::serialize::InputArchive& archive, const std::string& prefix);

 private:
  std::uint64_t seed_ = 0;
  std::uint64_t draws_ = 0;
};

// SplitMix64: independent seeds from one seed and a counter.
std::uint64_t mix_seed(std::uint64_t x);
// A generator on `device` seeded with `seed` (a CPU generator, or a clone of the device's default).
at::Generator generator_on(const c10::Device& device, std::uint64_t seed);

}  // namespace attnlab
