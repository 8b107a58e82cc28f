#pragma once
// The randomness of a method that draws afresh at every training forward (Skyformer's landmarks,
// Informer's sampled keys, Reformer's rotations): one seed taken from the trainer's generator at
// each redraw, then a generator per forward derived from it. Training forwards take the stream's
// next generator; evaluation forwards always the same one, so evaluating is repeatable and does
// not move the training stream. Generators are made on the tensors' device: no host-to-device
// copy, no synchronisation.
#include <cstdint>
#include <string>
#include <utility>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include "attnlab/attention.hpp"

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

// An attention method whose randomness is one SeedStream (Skyformer, Informer, Reformer): the
// redraw, and the stream's place in the module's checkpoints, written once. The stream is not a
// buffer; the trainer's resume checkpoints save the model through Module::save, so save/load carry
// it as `<stream_name>_seed` and `<stream_name>_draws`. An archive without them loads the tensors only.
class SeedStreamAttention : public AttentionMethod {
 public:
  explicit SeedStreamAttention(std::string stream_name) : stream_name_(std::move(stream_name)) {}
  // One seed from the trainer's generator; every later draw derives from it.
  void redraw(at::Generator& generator) override { stream_.reseed(generator); }
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 protected:
  // The generator of this forward: the stream's next while training, the fixed one in evaluation.
  at::Generator draw_generator(const c10::Device& device) { return stream_.next(device, is_training()); }

 private:
  std::string stream_name_;
  SeedStream stream_;
};

// SplitMix64: independent seeds from one seed and a counter.
std::uint64_t mix_seed(std::uint64_t x);
// A generator on `device` seeded with `seed` (a CPU generator, or a clone of the device's default).
at::Generator generator_on(const c10::Device& device, std::uint64_t seed);

}  // namespace attnlab
