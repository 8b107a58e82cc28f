#pragma once
// Typed parameter values checked against a ParamSpec schema. Plugins read their parameters from
// a ParamValues; the host fills it from TOML (after checking names, types and ranges).
#include <cstdint>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "attnlab/plugin.hpp"

namespace attnlab {

using ParamValue = std::variant<std::int64_t, double, bool, std::string>;

// Thrown for an unknown name, a wrong type or an out-of-range value; the message names the key.
struct ParamError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ParamValues {
 public:
  ParamValues() = default;
  // All parameters of a schema at their defaults.
  static ParamValues defaults(const ParamSpec* specs, std::size_t count);

  std::int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;  // integers read as reals too
  bool boolean(const std::string& name) const;
  const std::string& string(const std::string& name) const;
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  // A string parameter as the plugin's own enum, `words` naming each value:
  //   params.choice<Sampling>("sampling", {{"qk_halves", Sampling::qk_halves}, {"all", Sampling::all}})
  // Any other text throws ParamError "sampling: expected qk_halves or all, got 'x'".
  template <typename Enum>
  Enum choice(const std::string& name, std::initializer_list<std::pair<const char*, Enum>> words) const {
    const std::string& text = string(name);
    std::string expected;
    std::size_t i = 0;
    for (const auto& [word, value] : words) {
      if (text == word) return value;
      if (i > 0) expected += i + 1 == words.size() ? " or " : ", ";
      expected += word;
      ++i;
    }
    throw ParamError(name + ": expected " + expected + ", got '" + text + "'");
  }

  void set(const std::string& name, ParamValue value) { values_[name] = std::move(value); }
  const std::map<std::string, ParamValue>& all() const { return values_; }

 private:
  const ParamValue& at(const std::string& name) const;
  std::map<std::string, ParamValue> values_;
};

// Parses `text` as the spec's type ("128", "1e-4", "true", "mean"); throws ParamError.
ParamValue parse_param(const ParamSpec& spec, const std::string& text);
// Checks a typed value against the spec's type, range and choices; returns the value converted
// to the spec's type (an integer given for a real parameter becomes a double). Throws ParamError
// whose message starts with the key name.
ParamValue check_param(const ParamSpec& spec, const ParamValue& value);
// Finds a spec by name, or nullptr.
const ParamSpec* find_param(const ParamSpec* specs, std::size_t count, const std::string& name);
// "128", "0.1", "true", "\"mean\"": how a value is written back to TOML.
std::string to_toml(const ParamValue& value);
std::string to_text(const ParamValue& value);
// Bounds and other numbers for people: 1000000, 0.99, 1e-08.
std::string format_number(double x);

}  // namespace attnlab
