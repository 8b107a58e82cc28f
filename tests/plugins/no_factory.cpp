// A descriptor without the factory.
#include <torch/version.h>

#include "attnlab/plugin.hpp"

static const attnlab::ParamSpec kParams[] = {{"x", attnlab::ParamType::integer, "1", 0, 9, nullptr, "unused"}};
ATTNLAB_PLUGIN_INFO(attention, "no_factory", "1.0", "descriptor only", kParams);
