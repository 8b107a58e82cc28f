#pragma once
// An experiment file (TOML): methods x datasets x seeds with model/training settings, checked
// completely against the schemas (core's [model]/[train], each plugin's own) before anything runs.
// Every error is one line: FILE:LINE: [section] key: problem.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attnlab/params.hpp"
#include "plugin_host/plugin_host.hpp"

namespace attnlab {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One job: (method, dataset, seed) with everything resolved.
struct JobPlan {
  std::string method, dataset;
  std::int64_t seed = 0;
  ParamValues model, train, method_params, dataset_params;
  std::string config_toml;  // resolved, canonical (sorted keys): what the job runs with
  std::string config_hash;  // sha256 of config_toml
  std::vector<std::pair<std::string, std::string>> flat;  // "train.lr" -> "0.0001", for queries
};

struct Experiment {
  std::string name, description, source_path, source_text;
  std::vector<std::int64_t> seeds;
  std::vector<JobPlan> jobs;  // methods x datasets x seeds; methods and datasets in name order (TOML tables are unordered)
  // Settings that are allowed but probably not meant, one line each ("FILE:LINE: [train] warmup = 100
  // is longer than steps = 20: ..."); check_experiment prints them on stderr.
  std::vector<std::string> warnings;
};

Experiment load_experiment(const std::string& path, const PluginRegistry& registry);
// The resolved configuration of a stored job back into a plan (`where` names it in errors).
JobPlan parse_job_config(const std::string& config_toml, const std::string& where, const PluginRegistry& registry);

}  // namespace attnlab
