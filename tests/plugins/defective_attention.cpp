// Softmax attention with one defect, chosen at compile time (DEFECT), for the test that each kind
// of defect fails exactly its conformance check (`attnlab check`, runner/plugin_host/attention_checks.cpp):
//   1 padding: padded keys are not masked          -> "padding invariance"
//   2 overflow: exp of raw scores, no max taken    -> "large inputs"
//   3 detached: no gradient flows to k             -> "gradients"
//   4 batch: the first sequence sees the second's  -> "batch independence"
//   5 seed: draws its randomness from its own seed -> "seeded determinism"
//   6 precision: adds (256 v + 1) − 256 v − 1, 0 in exact arithmetic, ~1 in bf16 -> "reduced precision"
//   7 long: padded keys are not masked past 32 tokens -> "padding invariance", at a length past 32
//     only (every check at its own length passes: a defect only the given length shows)
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <memory>

#include "attnlab/attention.hpp"

namespace defective {
using namespace attnlab;

class DefectiveAttention : public AttentionMethod {
 public:
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const auto keys = DEFECT == 3 ? k.detach() : k;
    auto scores = at::matmul(q, keys.transpose(-2, -1)) * (scale_ / std::sqrt(static_cast<double>(q.size(-1))));
    const auto real = key_valid.unsqueeze(1).unsqueeze(2);  // [B, 1, 1, N]
    at::Tensor weights;
    if (DEFECT == 1 || (DEFECT == 7 && q.size(2) > 32)) {
      weights = at::softmax(scores, -1);
    } else if (DEFECT == 2) {
      const auto e = at::exp(scores) * real;
      weights = e / e.sum(-1, true);
    } else {
      weights = at::softmax(scores.masked_fill(real.logical_not(), -INFINITY), -1);
    }
    auto out = at::matmul(weights, v);
    if (DEFECT == 6) out = out + ((v * 256 + 1) - v * 256 - 1);  // a cancellation bf16 cannot afford
    if (DEFECT == 4 && out.size(0) > 1) out = at::cat({out.slice(0, 0, 1) + 0.01 * v.slice(0, 1, 2).mean(), out.slice(0, 1)}, 0);
    return out;
  }
  bool stochastic() const override { return DEFECT == 5; }
  void redraw(at::Generator& /*generator*/) override {
    if (DEFECT != 5) return;
    auto own = at::make_generator<at::CPUGeneratorImpl>(42);  // the defect: not the generator given
    scale_ = at::rand({1}, own, at::kDouble).item<double>() + 0.5;
  }

 private:
  double scale_ = 1.0;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape&, const ParamValues&) {
  return std::make_shared<DefectiveAttention>();
}

}  // namespace defective

ATTNLAB_PLUGIN_INFO(attention, DEFECT_NAME, "1.0", "softmax with a defect (tests only)", nullptr);
ATTNLAB_ATTENTION_FACTORY(defective::create);
