// A valid plugin that reuses the name "softmax": the first one found wins, this one is refused.
#include <torch/version.h>

#include "attnlab/attention.hpp"

namespace {
const attnlab::ParamSpec kParams[] = {{"x", attnlab::ParamType::integer, "1", 0, 9, nullptr, "unused"}};
std::shared_ptr<attnlab::AttentionMethod> create(const attnlab::AttentionShape&, const attnlab::ParamValues&) { return nullptr; }
}  // namespace

ATTNLAB_PLUGIN_INFO(attention, "softmax", "9.9", "an impostor", kParams);
ATTNLAB_ATTENTION_FACTORY(create);
