#pragma once
// The randomness of a method that draws afresh at every training forward (Skyformer's landmarks,
// Informer's sampled keys, Reformer's rotations): one seed taken from the trainer's generator at
// each redraw, which seeds the stream's generator; training forwards draw from it in turn, each
// moving it on; evaluation forwards from a second one set back to a fixed seed every time, so
// evaluating is repeatable and does not move the training stream. Generators are made on the
// tensors' device: no host-to-device copy, no synchronisation.
//
// One generator for all the training forwards (not one per forward) is what a CUDA graph can
// replay: a captured step reads the generator's seed and offset from device memory, and each
// replay moves the offset on, so that replay k draws what eager step k would
// (stream_generators() lists them for registration before capture).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "attnlab/attention.hpp"

namespace torch::serialize {
class InputArchive;
class OutputArchive;
}  // namespace torch::serialize

namespace attnlab {

class SeedStream {
 public:
  SeedStream() = default;
  SeedStream(const SeedStream&) = delete;
  SeedStream& operator=(const SeedStream&) = delete;
  ~SeedStream();

  // One seed from `generator` (the trainer's, seeded by the run); the stream restarts.
  void reseed(at::Generator& generator);
  // The generator of the next training forward (training = true: the stream's own, moving on with
  // every draw), or the evaluation one, set back to its fixed seed.
  at::Generator next(const c10::Device& device, bool training);

  // The stream's place travels with the module's checkpoints (call from save/load overrides):
  // `<prefix>_seed` and `<prefix>_state`, the training generator's state. An archive without them
  // leaves the stream as it is; one with a seed and no state (written before the stream kept one
  // generator) cannot continue it: std::runtime_error. A state from another kind of device (a
  // checkpoint moved from a GPU to the CPU) restarts the stream from its seed.
  void save(torch::serialize::OutputArchive& archive, const std::string& prefix) const;
  void load(torch::serialize::InputArchive& archive, const std::string& prefix);

 private:
  std::uint64_t seed_ = 0;
  at::Generator training_, evaluation_;  // made at their first draw, on the device asked for
  at::Tensor pending_state_;             // a loaded state, for the training generator once made
};

// The training generators on `device` of every live SeedStream, in the order they were made (the
// model's layers in order, on its first forward): what a CUDA graph of a training step registers
// before it is captured.
std::vector<at::Generator> stream_generators(const c10::Device& device);

// An attention method whose randomness is one SeedStream (Skyformer, Informer, Reformer): the
// redraw, and the stream's place in the module's checkpoints, written once. The stream is not a
// buffer; the trainer's resume checkpoints save the model through Module::save, so save/load carry
// it as `<stream_name>_seed` and `<stream_name>_state`. An archive without them loads the tensors only.
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
