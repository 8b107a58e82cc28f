// A small, non-trivial approximation for approx_test: softmax attention over `landmarks` keys only,
// the first ones until redrawn, then a random subset. Stochastic; exact (up to rounding) when
// landmarks >= n.
#include <torch/version.h>

#include <algorithm>
#include <cmath>

#include <ATen/ops/arange.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randperm.h>
#include <ATen/ops/softmax.h>

#include "attnlab/attention.hpp"

namespace {

const attnlab::ParamSpec kParams[] = {
    {"landmarks", attnlab::ParamType::integer, "8", 1, 1000000, nullptr, "keys kept"},
};

class KeySample : public attnlab::AttentionMethod {
 public:
  KeySample(std::int64_t keys, std::int64_t max_len) : keys_(keys), max_len_(max_len) {}
  bool stochastic() const override { return true; }
  void redraw(at::Generator& generator) override {
    order_ = at::randperm(max_len_, generator, at::TensorOptions().dtype(at::kLong));
  }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& key_valid) override {
    const std::int64_t n = k.size(2), keep = std::min(keys_, n);
    at::Tensor index = order_.defined() ? order_.masked_select(order_ < n).slice(0, 0, keep)
                                        : at::arange(keep, at::TensorOptions().dtype(at::kLong));
    index = index.to(k.device());
    const auto ks = k.index_select(2, index), vs = v.index_select(2, index);
    const auto valid = key_valid.index_select(1, index).unsqueeze(1).unsqueeze(2);
    // a finite fill, then padded keys zeroed: a query whose kept keys are all padding gets 0 (not
    // NaN, and not anything that depends on what the padding holds)
    auto scores = at::matmul(q, ks.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
    scores = scores.masked_fill(valid.logical_not(), -1e9);
    return at::matmul(at::softmax(scores, -1) * valid, vs);
  }

 private:
  std::int64_t keys_, max_len_;
  at::Tensor order_;
};

std::shared_ptr<attnlab::AttentionMethod> create(const attnlab::AttentionShape& shape, const attnlab::ParamValues& params) {
  return std::make_shared<KeySample>(params.integer("landmarks"), shape.max_len);
}

}  // namespace

ATTNLAB_PLUGIN_INFO(attention, "keysample", "1.0", "test: softmax over a random subset of the keys", kParams);
ATTNLAB_ATTENTION_FACTORY(create);
