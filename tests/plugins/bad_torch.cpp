// A plugin stamped as built against another LibTorch: the host must refuse it in one line.
#include "attnlab/plugin.hpp"

static const attnlab::ParamSpec kParams[] = {{"x", attnlab::ParamType::integer, "1", 0, 9, nullptr, "unused"}};
extern "C" BOOST_SYMBOL_EXPORT const attnlab::PluginInfo attnlab_plugin_info;
extern "C" BOOST_SYMBOL_EXPORT const attnlab::PluginInfo attnlab_plugin_info = {
    attnlab::kContractVersion, 0, 1, attnlab::PluginKind::attention, "old_torch", "1.0", "LibTorch 0.1", kParams, 1};
