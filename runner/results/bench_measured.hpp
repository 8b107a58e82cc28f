// What a stored `attnlab bench` row measured beyond its columns, read from its config_toml: shared
// by `bench --show` (studies/bench.cpp) and `attnlab serve`'s /api/bench.
#pragma once

#include <string>

namespace attnlab::results {

struct BenchMeasured {
  std::string precision = "?";  // [train] precision; fp32 for a row stored before the key existed
  std::string part = "step";    // "step", or "attention" for [bench] attention_only
  std::string model;            // the [model] table as the bench wrote it (rows of different models never compare)
  std::string method_params;    // the [methods.<method>] table, likewise
  bool operator==(const BenchMeasured& o) const { return precision == o.precision && part == o.part; }
};

// A table of a configuration (a job's or a bench row's, both written by the same TOML writer) as
// text, for comparing one with the other: "" where it is missing or the text does not parse.
std::string config_table(const std::string& config_toml, const std::string& dotted_name);

// A text that does not parse gives precision "?" (never an exception: the row is still shown).
BenchMeasured bench_measured(const std::string& config_toml);

}  // namespace attnlab::results
