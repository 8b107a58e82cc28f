#include "attnlab/params.hpp"

#include <charconv>
#include <cmath>
#include <cstring>

namespace attnlab {
namespace {

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

const char* type_name(const ParamValue& v) {
  switch (v.index()) {
    case 0: return "integer";
    case 1: return "real";
    case 2: return "boolean";
    default: return "string";
  }
}

bool in_choices(const char* choices, const std::string& value) {
  std::string all = choices;
  std::size_t start = 0;
  while (start <= all.size()) {
    std::size_t bar = all.find('|', start);
    if (bar == std::string::npos) bar = all.size();
    if (all.compare(start, bar - start, value) == 0 && bar - start == value.size()) return true;
    start = bar + 1;
  }
  return false;
}

}  // namespace

std::string format_number(double x) {
  // whole numbers as integers (1000000, not 1e+06); others as the shortest round trip
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e15) return std::to_string(static_cast<std::int64_t>(x));
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, x).ptr);
}

ParamValues ParamValues::defaults(const ParamSpec* specs, std::size_t count) {
  ParamValues values;
  for (std::size_t i = 0; i < count; ++i) values.set(specs[i].name, parse_param(specs[i], specs[i].default_value));
  return values;
}

const ParamValue& ParamValues::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw ParamError("parameter '" + name + "' is not set");
  return it->second;
}

std::int64_t ParamValues::integer(const std::string& name) const {
  const auto& v = at(name);
  if (auto p = std::get_if<std::int64_t>(&v)) return *p;
  throw ParamError("parameter '" + name + "' is a " + type_name(v) + ", not an integer");
}

double ParamValues::real(const std::string& name) const {
  const auto& v = at(name);
  if (auto p = std::get_if<double>(&v)) return *p;
  if (auto p = std::get_if<std::int64_t>(&v)) return static_cast<double>(*p);
  throw ParamError("parameter '" + name + "' is a " + type_name(v) + ", not a real");
}

bool ParamValues::boolean(const std::string& name) const {
  const auto& v = at(name);
  if (auto p = std::get_if<bool>(&v)) return *p;
  throw ParamError("parameter '" + name + "' is a " + type_name(v) + ", not a boolean");
}

const std::string& ParamValues::string(const std::string& name) const {
  const auto& v = at(name);
  if (auto p = std::get_if<std::string>(&v)) return *p;
  throw ParamError("parameter '" + name + "' is a " + type_name(v) + ", not a string");
}

ParamValue parse_param(const ParamSpec& spec, const std::string& text) {
  const std::string where = std::string(spec.name) + ": ";
  switch (spec.type) {
    case ParamType::integer: {
      std::size_t used = 0;
      std::int64_t v = 0;
      try { v = std::stoll(text, &used); } catch (const std::exception&) { used = 0; }
      if (used == 0 || used != text.size()) throw ParamError(where + "expected an integer, got '" + text + "'");
      return check_param(spec, v);
    }
    case ParamType::real: {
      std::size_t used = 0;
      double v = 0;
      try { v = std::stod(text, &used); } catch (const std::exception&) { used = 0; }
      if (used == 0 || used != text.size()) throw ParamError(where + "expected a real number, got '" + text + "'");
      return check_param(spec, v);
    }
    case ParamType::boolean:
      if (text == "true") return true;
      if (text == "false") return false;
      throw ParamError(where + "expected true or false, got '" + text + "'");
    case ParamType::string:
      return check_param(spec, text);
  }
  throw ParamError(where + "unknown parameter type");
}

ParamValue check_param(const ParamSpec& spec, const ParamValue& value) {
  const std::string where = std::string(spec.name) + ": ";
  switch (spec.type) {
    case ParamType::integer: {
      auto p = std::get_if<std::int64_t>(&value);
      if (!p) throw ParamError(where + "expected an integer, got a " + type_name(value));
      if (*p < spec.min_value || *p > spec.max_value)
        throw ParamError(where + std::to_string(*p) + " is out of range [" + format_number(spec.min_value) + ", " +
                         format_number(spec.max_value) + "]");
      return *p;
    }
    case ParamType::real: {
      double v = 0;
      if (auto p = std::get_if<double>(&value)) v = *p;
      else if (auto q = std::get_if<std::int64_t>(&value)) v = static_cast<double>(*q);
      else throw ParamError(where + "expected a real number, got a " + type_name(value));
      if (!std::isfinite(v) || v < spec.min_value || v > spec.max_value)
        throw ParamError(where + format_number(v) + " is out of range [" + format_number(spec.min_value) + ", " +
                         format_number(spec.max_value) + "]");
      return v;
    }
    case ParamType::boolean:
      if (!std::holds_alternative<bool>(value)) throw ParamError(where + "expected true or false, got a " + type_name(value));
      return value;
    case ParamType::string: {
      auto p = std::get_if<std::string>(&value);
      if (!p) throw ParamError(where + "expected a string, got a " + type_name(value));
      if (spec.choices && !in_choices(spec.choices, *p))
        throw ParamError(where + "'" + *p + "' is not one of " + spec.choices);
      return value;
    }
  }
  throw ParamError(where + "unknown parameter type");
}

const ParamSpec* find_param(const ParamSpec* specs, std::size_t count, const std::string& name) {
  for (std::size_t i = 0; i < count; ++i)
    if (name == specs[i].name) return &specs[i];
  return nullptr;
}

std::string to_text(const ParamValue& value) {
  switch (value.index()) {
    case 0: return std::to_string(std::get<std::int64_t>(value));
    case 1: {
      char buf[32];
      // shortest round trip, in %g style (0.0001, not 1e-04)
      auto end = std::to_chars(buf, buf + sizeof buf, std::get<double>(value), std::chars_format::general).ptr;
      std::string s(buf, end);
      // keep reals recognisable as reals when written back ("1" -> "1.0")
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
      return s;
    }
    case 2: return std::get<bool>(value) ? "true" : "false";
    default: return std::get<std::string>(value);
  }
}

std::string to_toml(const ParamValue& value) {
  return value.index() == 3 ? quote(std::get<std::string>(value)) : to_text(value);
}

}  // namespace attnlab
