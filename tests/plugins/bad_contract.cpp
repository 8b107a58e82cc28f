// A plugin that claims a future contract version: the host must refuse it in one line.
#include <torch/version.h>

#include "attnlab/plugin.hpp"

static const attnlab::ParamSpec kParams[] = {{"x", attnlab::ParamType::integer, "1", 0, 9, nullptr, "unused"}};
extern "C" BOOST_SYMBOL_EXPORT const attnlab::PluginInfo attnlab_plugin_info;
extern "C" BOOST_SYMBOL_EXPORT const attnlab::PluginInfo attnlab_plugin_info = {
    999, TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, attnlab::PluginKind::attention, "future", "1.0", "contract 999", kParams, 1};
