// An attention method that kills its own process on purpose, for the worker's crash handling
// (queue_test): after `calls` forward passes it raises SIGSEGV or calls abort(), as a buggy
// kernel would. Loaded from its own folder with --plugins.
#include <csignal>
#include <cstdlib>

#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>

#include "attnlab/attention.hpp"

namespace {

const attnlab::ParamSpec kParams[] = {
    {"how", attnlab::ParamType::string, "segv", 0, 0, "segv|abort", "how the process dies"},
    {"calls", attnlab::ParamType::integer, "0", 0, 1000000, nullptr, "forward passes before the crash"},
};

class Crash : public attnlab::AttentionMethod {
 public:
  Crash(bool abort, std::int64_t calls) : abort_(abort), calls_left_(calls) {}
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    if (calls_left_-- == 0) {
      if (abort_) std::abort();
      std::raise(SIGSEGV);
    }
    auto scores = at::matmul(q, k.transpose(-2, -1)).masked_fill(key_valid.logical_not().unsqueeze(1).unsqueeze(2), -1e9);
    return at::matmul(at::softmax(scores, -1), v);
  }

 private:
  bool abort_;
  std::int64_t calls_left_;
};

std::shared_ptr<attnlab::AttentionMethod> create(const attnlab::AttentionShape&, const attnlab::ParamValues& params) {
  return std::make_shared<Crash>(params.string("how") == "abort", params.integer("calls"));
}

}  // namespace

ATTNLAB_PLUGIN_INFO(attention, "crash", "1.0", "test: kills its process (SIGSEGV or abort) after some forward passes", kParams);
ATTNLAB_ATTENTION_FACTORY(create);
