#include "results/bench_measured.hpp"

#include <sstream>

#include <toml++/toml.h>

namespace attnlab::results {
namespace {

std::string table_text(const toml::table& root, const std::string& dotted_name) {
  const auto* table = root.at_path(dotted_name).as_table();
  if (!table) return "";
  std::ostringstream text;
  text << *table;
  return text.str();
}

}  // namespace

BenchMeasured bench_measured(const std::string& config_toml) {
  BenchMeasured m;
  try {
    const auto config = toml::parse(config_toml);
    m.precision = config["train"]["precision"].value_or(std::string("fp32"));
    if (config["bench"]["attention_only"].value_or(false)) m.part = "attention";
    m.model = table_text(config, "model");
    if (const auto method = config["method"].value<std::string>()) m.method_params = table_text(config, "methods." + *method);
  } catch (const toml::parse_error&) {
  }
  return m;
}

std::string config_table(const std::string& config_toml, const std::string& dotted_name) {
  try {
    return table_text(toml::parse(config_toml), dotted_name);
  } catch (const toml::parse_error&) {
    return "";
  }
}

}  // namespace attnlab::results
