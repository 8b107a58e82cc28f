#pragma once
// The plugin contract. Every attention or dataset plugin exports a plain `PluginInfo` under the
// C name `attnlab_plugin_info`; the host reads and checks it before it touches anything else
// (contract version first, then the LibTorch version), and only then looks up the factory.
#include <cstddef>
#include <cstdint>
#include <memory>

#include <boost/config.hpp>
// TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO (a tiny header), where LibTorch is on the
// include path: every plugin. The host's LibTorch-free code reads PluginInfo, never expands it.
#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

namespace attnlab {

// Bump whenever anything a plugin sees changes layout or meaning: PluginInfo, ParamSpec,
// ParamValues, the factory signatures, AttentionMethod, Dataset.
// 2: TaskInfo::many_hot, SplitData::origin, the token cache; AttentionMethod::redraw_every and
// fresh_draw_at_eval.
// 3: Dataset::estimate_size.
// 4: SeedStream keeps one generator for the training draws (CUDA graphs replay it), which changes
//    SeedStreamAttention's layout; DatasetContext::describe_only.
// 5: AttentionShape::first_layer (a weight shared across layers).
inline constexpr std::uint32_t kContractVersion = 5;

enum class PluginKind : std::uint32_t { attention = 1, dataset = 2 };
enum class ParamType : std::uint32_t { integer = 1, real = 2, boolean = 3, string = 4 };

// One parameter of a plugin (or of the model/train sections): what the TOML table may set.
struct ParamSpec {
  const char* name;
  ParamType type;
  const char* default_value;  // as TOML would write it: "128", "0.1", "true", "uniform"
  double min_value;           // inclusive bounds for integer and real parameters
  double max_value;
  const char* choices;        // string parameters: "a|b|c", or nullptr for free text
  const char* doc;
};

// Plain data with a fixed layout: the first field must stay the contract version, so that a host
// of any version can read it and refuse a plugin of another one in one sentence.
struct PluginInfo {
  std::uint32_t contract_version;
  std::uint32_t torch_major;  // LibTorch the plugin was compiled against
  std::uint32_t torch_minor;
  PluginKind kind;
  const char* name;
  const char* version;
  const char* description;
  const ParamSpec* params;
  std::size_t param_count;
};

// What a plugin's factory (exported as ATTNLAB_FACTORY_SYMBOL) makes, declared here without
// LibTorch so that a host which only finds, lists and checks plugins need not compile against it:
// attention.hpp and dataset.hpp define the classes.
class AttentionMethod;
struct AttentionShape;
class Dataset;
struct DatasetContext;
class ParamValues;
using AttentionFactory = std::shared_ptr<AttentionMethod>(const AttentionShape&, const ParamValues&);
using DatasetFactory = std::shared_ptr<Dataset>(const DatasetContext&, const ParamValues&);

namespace detail {
// The schema argument of ATTNLAB_PLUGIN_INFO: an array of ParamSpec, or nullptr for a plugin
// without parameters (C++ has no zero-length arrays, so `const ParamSpec k[] = {};` is no option).
template <std::size_t N>
constexpr const ParamSpec* param_specs(const ParamSpec (&specs)[N]) noexcept { return specs; }
template <std::size_t N>
constexpr std::size_t param_spec_count(const ParamSpec (&)[N]) noexcept { return N; }
constexpr const ParamSpec* param_specs(std::nullptr_t) noexcept { return nullptr; }
constexpr std::size_t param_spec_count(std::nullptr_t) noexcept { return 0; }
}  // namespace detail

inline const char* to_string(PluginKind kind) {
  return kind == PluginKind::attention ? "attention" : kind == PluginKind::dataset ? "dataset" : "unknown";
}
inline const char* to_string(ParamType type) {
  switch (type) {
    case ParamType::integer: return "integer";
    case ParamType::real: return "real";
    case ParamType::boolean: return "boolean";
    case ParamType::string: return "string";
  }
  return "unknown";
}

}  // namespace attnlab

#define ATTNLAB_PLUGIN_INFO_SYMBOL "attnlab_plugin_info"
#define ATTNLAB_FACTORY_SYMBOL "attnlab_create"

// Exports the descriptor of the plugin being compiled, stamped with the LibTorch version it is
// compiled against (TORCH_VERSION_MAJOR/MINOR come from <torch/version.h>). `params_` is a
// ParamSpec array, or nullptr when the plugin has no parameters.
#define ATTNLAB_PLUGIN_INFO(kind_, name_, version_, description_, params_)                         \
  extern "C" BOOST_SYMBOL_EXPORT const ::attnlab::PluginInfo attnlab_plugin_info;                  \
  extern "C" BOOST_SYMBOL_EXPORT const ::attnlab::PluginInfo attnlab_plugin_info = {              \
      ::attnlab::kContractVersion, TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,                      \
      ::attnlab::PluginKind::kind_, name_, version_, description_,                                 \
      ::attnlab::detail::param_specs(params_), ::attnlab::detail::param_spec_count(params_)}
