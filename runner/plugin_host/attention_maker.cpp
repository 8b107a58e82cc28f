#include "plugin_host/attention_maker.hpp"

#include "plugin_host/scripted_method.hpp"

namespace attnlab {

AttentionMaker attention_maker(const LoadedPlugin& method, const ParamValues& params) {
  if (method.scripted()) {
    const std::string path = params.string("script");
    return [path](const AttentionShape&) { return load_scripted_attention(path); };
  }
  AttentionFactory* factory = method.make_attention;
  return [factory, params](const AttentionShape& shape) { return factory(shape, params); };
}

}  // namespace attnlab
