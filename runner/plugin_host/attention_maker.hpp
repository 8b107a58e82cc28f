#pragma once
// What the model calls for each layer to make its attention method: a plugin's factory with the
// parameters a job gives it, or a TorchScript method's file (scripted_method.hpp) loaded once per
// layer. The job, the checks and the studies all make their methods here, so the two kinds never part.
#include "attnlab/params.hpp"
#include "attnlab/train/model.hpp"  // AttentionMaker
#include "plugin_host/plugin_host.hpp"

namespace attnlab {

AttentionMaker attention_maker(const LoadedPlugin& method, const ParamValues& params);

}  // namespace attnlab
