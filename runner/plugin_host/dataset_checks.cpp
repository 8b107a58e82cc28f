// The dataset checks of the conformance suite (conformance.hpp): the plugin built from the
// configuration checked, its refusals, its descriptor, its splits, and their reproducibility.
#include "plugin_host/conformance.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>

#include "attnlab/dataset.hpp"
#include "attnlab/params.hpp"
#include "plugin_host/check_support.hpp"

namespace attnlab {
namespace {

const Split kSplits[] = {Split::train, Split::val, Split::test};

// A value of `spec` that must be refused: one step past a bound, a word that is not a choice; or,
// for free text, a path that does not exist. nullopt for a boolean (it has no bad value).
std::optional<ParamValue> bad_value(const ParamSpec& spec) {
  constexpr double kUnbounded = 1e300;
  switch (spec.type) {
    case ParamType::integer:
    case ParamType::real: {
      const bool above = spec.max_value < kUnbounded;
      if (!above && spec.min_value <= -kUnbounded) return std::nullopt;
      const double bound = above ? spec.max_value : spec.min_value;
      const double past = bound + (above ? 1 : -1) * std::max(1.0, std::abs(bound));
      if (spec.type == ParamType::integer) return ParamValue{static_cast<std::int64_t>(past)};
      return ParamValue{past};
    }
    case ParamType::string:
      return ParamValue{std::string(spec.choices ? "not-one-of-the-choices" : "/nonexistent/attnlab-check")};
    default:
      return std::nullopt;
  }
}

// The one-line message of a refusal, or a throw saying why it is not one.
std::string one_line_refusal(const std::string& what, const std::string& name) {
  if (what.find('\n') != std::string::npos) throw std::runtime_error(name + ": refused in more than one line: " + what);
  return what;
}

class DatasetChecks {
 public:
  DatasetChecks(const LoadedPlugin& plugin, const ParamValues& params) : plugin_(plugin), params_(params) {}

  // In order; a plugin that does not build stops after "parameters", one whose splits do not load
  // before "seeded reproducibility".
  std::vector<CheckResult> run() {
    if (!add("parameters", [&] { return parameters(); })) return out_;
    add("bad parameters refused", [&] { return bad_parameters_refused(); });
    add("descriptor", [&] { return descriptor(); });
    if (!add("splits", [&] { return splits(); })) return out_;
    add("seeded reproducibility", [&] { return seeded_reproducibility(); });
    return out_;
  }

 private:
  // One check: its figure, or the first line of what it threw.
  bool add(const std::string& name, const std::function<std::string()>& body) {
    CheckResult r{name, true, "", ""};
    try {
      r.figure = body();
    } catch (const std::exception& e) {
      const std::string what = e.what();
      r.passed = false;
      r.failure = what.substr(0, what.find('\n'));
    }
    out_.push_back(r);
    return r.passed;
  }

  // Built, and built only to describe its task (bench, estimate: DatasetContext::describe_only) it
  // describes the same task.
  std::string parameters() {
    check_defaults(*plugin_.info);
    dataset_ = plugin_.make_dataset({scratch_.path("first")}, params_);
    const TaskInfo task = dataset_->info();
    const TaskInfo described = plugin_.make_dataset({scratch_.path("described"), /*describe_only=*/true}, params_)->info();
    if (described.vocab_size != task.vocab_size || described.num_classes != task.num_classes ||
        described.max_len != task.max_len || described.inputs != task.inputs || described.many_hot != task.many_hot)
      throw std::runtime_error("built with describe_only, it describes another task (vocabulary, classes, length, "
                               "inputs or features differ)");
    return std::to_string(plugin_.info->param_count) + " parameter(s), defaults within their bounds; built; describes "
           "its task without loading";
  }

  // A bound or choice is refused by the host against the schema (so the schema must be able to say
  // no); a free-text value (a path, usually) reaches the plugin, which must accept it or refuse it
  // as a ParamError or DataError in one line: those are what block a job with one line.
  std::string bad_parameters_refused() {
    std::string example;
    std::size_t tried = 0;
    for (std::size_t i = 0; i < plugin_.info->param_count; ++i) {
      const ParamSpec& spec = plugin_.info->params[i];
      const auto bad = bad_value(spec);
      if (!bad) continue;
      ++tried;
      const std::string shown = std::string(spec.name) + " = " + to_toml(*bad);
      const std::string refusal = spec.type != ParamType::string || spec.choices ? schema_refusal(spec, *bad, shown)
                                                                                : plugin_refusal(spec, *bad, shown);
      if (example.empty() && !refusal.empty()) example = shown + ": \"" + refusal + "\"";
    }
    if (tried == 0) return "no parameter has a value to refuse";
    return std::to_string(tried) + " bad value(s) refused in one line" + (example.empty() ? "" : ", e.g. " + example);
  }

  // The schema's one-line refusal of a value past a bound or outside the choices.
  static std::string schema_refusal(const ParamSpec& spec, const ParamValue& bad, const std::string& shown) {
    try {
      check_param(spec, bad);
    } catch (const ParamError& e) {
      return one_line_refusal(e.what(), shown);
    }
    throw std::runtime_error(shown + ": accepted, outside the declared bounds or choices");
  }

  // The plugin's one-line refusal of a free-text value, "" when it accepts it (text that is not a path).
  std::string plugin_refusal(const ParamSpec& spec, const ParamValue& bad, const std::string& shown) const {
    ParamValues with_bad = params_;
    with_bad.set(spec.name, bad);
    try {
      plugin_.make_dataset({scratch_.path("bad")}, with_bad)->load(Split::train);
      return "";
    } catch (const ParamError& e) {
      return one_line_refusal(e.what(), shown);
    } catch (const DataError& e) {
      return one_line_refusal(e.what(), shown);
    } catch (const std::exception& e) {
      throw std::runtime_error(shown + ": refused with an error that is neither a ParamError nor a DataError: " +
                               std::string(e.what()));
    }
  }

  std::string descriptor() const {
    const TaskInfo t = dataset_->info();
    auto require = [](bool ok, const std::string& what) {
      if (!ok) throw std::runtime_error(what);
    };
    require(t.num_classes >= 2, "num_classes = " + std::to_string(t.num_classes) + ": at least 2");
    require(t.max_len >= 1, "max_len = " + std::to_string(t.max_len) + ": at least 1");
    require(t.inputs == 1 || t.inputs == 2, "inputs = " + std::to_string(t.inputs) + ": 1 or 2");
    require(t.vocab_size >= 1, "vocab_size = " + std::to_string(t.vocab_size) + ": at least 1");
    require(t.many_hot == 0 || (t.many_hot < 63 && t.vocab_size == (std::int64_t{1} << t.many_hot)),
            "many_hot = " + std::to_string(t.many_hot) + " needs vocab_size = 2^many_hot, not " + std::to_string(t.vocab_size));
    const SizeEstimate size = dataset_->estimate_size();
    require(size.examples >= 0 && (size.examples == 0 || size.token_bytes >= 1),
            "estimate_size: " + std::to_string(size.examples) + " examples of " + std::to_string(size.token_bytes) + " bytes");
    return "vocabulary " + std::to_string(t.vocab_size) + ", " + std::to_string(t.num_classes) + " classes, " +
           std::to_string(t.inputs) + " input(s) of " + std::to_string(t.max_len) + " tokens";
  }

  std::string splits() {
    std::string sizes;
    for (const Split split : kSplits) {
      first_.push_back(load_checked(plugin_.name(), *dataset_, split));
      sizes += (sizes.empty() ? "" : ", ") + std::string(to_string(split)) + " " + std::to_string(first_.back().size());
    }
    return sizes + " examples, each within its task";
  }

  std::string seeded_reproducibility() const {
    auto again = plugin_.make_dataset({scratch_.path("second")}, params_);
    for (std::size_t i = 0; i < 3; ++i) {
      const SplitData data = load_checked(plugin_.name(), *again, kSplits[i]);
      const char* differs = !at::equal(data.labels, first_[i].labels)   ? "labels"
                            : !at::equal(data.lengths, first_[i].lengths) ? "lengths"
                            : !at::equal(data.tokens, first_[i].tokens)   ? "tokens"
                                                                          : nullptr;
      if (differs)
        throw std::runtime_error(std::string(to_string(kSplits[i])) + ": built again from the same parameters, its " +
                                 differs + " differ");
    }
    return "every split the same to the bit when built again in a fresh cache folder";
  }

  const LoadedPlugin& plugin_;
  const ParamValues& params_;
  const ScratchFolder scratch_;
  std::shared_ptr<Dataset> dataset_;
  std::vector<SplitData> first_;  // the splits as first built
  std::vector<CheckResult> out_;
};

}  // namespace

const std::vector<std::string>& dataset_check_names() {
  static const std::vector<std::string> names = {"parameters", "bad parameters refused", "descriptor", "splits",
                                                 "seeded reproducibility"};
  return names;
}

std::vector<CheckResult> check_dataset(const LoadedPlugin& plugin, const ParamValues& params) {
  return DatasetChecks(plugin, params).run();
}

}  // namespace attnlab
