#include "results/bench_measured.hpp"

#include <toml++/toml.h>

namespace attnlab::results {

BenchMeasured bench_measured(const std::string& config_toml) {
  BenchMeasured m;
  try {
    const auto config = toml::parse(config_toml);
    m.precision = config["train"]["precision"].value_or(std::string("fp32"));
    if (config["bench"]["attention_only"].value_or(false)) m.part = "attention";
  } catch (const toml::parse_error&) {
  }
  return m;
}

}  // namespace attnlab::results
