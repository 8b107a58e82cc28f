// @NAME@: an attention method for attnlab. Say here what it computes, with the paper's equation.
//
// As written it is exact softmax attention (Vaswani et al., 2017, eq. 1),
//   ATTN(Q, K, V) = softmax(Q Kᵀ / (√d · temperature)) V,  padded keys masked out,
// so that it passes `attnlab check` before you change anything. Replace forward()'s body with
// your method; keep what the comments ask of it.
#include <cmath>
#include <limits>
#include <memory>

#include <ATen/ATen.h>

#include "attnlab/attention.hpp"

namespace @NAME@_plugin {
using namespace attnlab;

// What a [methods.@NAME@] table may set: name, type, default, lower and upper bound, the allowed
// words of a string (nullptr: any), and the help `attnlab plugins` prints.
const ParamSpec kParams[] = {
    {"temperature", ParamType::real, "1.0", 1e-3, 1e3, nullptr, "divides the scores (1: softmax attention)"},
};

class Attention : public AttentionMethod {
 public:
  explicit Attention(double temperature) : temperature_(temperature) {}

  // q, k, v: [B, H, N, d]; key_valid: [B, N], true at real tokens, false at padding. Returns
  // [B, H, N, d]. What a real query gets must not depend on anything at padded positions, nor on
  // the other sequences of the batch.
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const double scale = 1.0 / (std::sqrt(static_cast<double>(q.size(-1))) * temperature_);
    const auto padded_key = key_valid.logical_not().unsqueeze(1).unsqueeze(2);  // [B, 1, 1, N]
    const auto scores = at::matmul(q, k.transpose(-2, -1)).mul(scale).masked_fill(
        padded_key, -std::numeric_limits<double>::infinity());  // [B, H, N, N]
    return at::matmul(at::softmax(scores, -1), v);
  }

  // A method that draws random numbers (features, landmarks) returns true from stochastic() and
  // draws them in redraw(generator) only, from that generator: then a run's seed fixes them.

 private:
  double temperature_;
};

std::shared_ptr<AttentionMethod> create(const AttentionShape& /*shape*/, const ParamValues& params) {
  return std::make_shared<Attention>(params.real("temperature"));
}

}  // namespace @NAME@_plugin

// The plugin's name (what an experiment file's [methods.NAME] says), its version, one line
// describing it, and its parameters. attnlab checks the contract and LibTorch versions stamped here
// before it runs anything of the file.
ATTNLAB_PLUGIN_INFO(attention, "@NAME@", "0.1", "@NAME@ attention (as written: exact softmax)", @NAME@_plugin::kParams);
ATTNLAB_ATTENTION_FACTORY(@NAME@_plugin::create);
