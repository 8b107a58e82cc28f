#pragma once
// The conformance suite every plugin must pass: one implementation, two front ends,
// `attnlab check` (a checklist) and tests/conformance_test.cpp (one GoogleTest case per check),
// so that the two can never disagree. Each check builds the method from its defaults (eval mode,
// torch seed 0 for methods with weights of their own) on small double inputs.
#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "plugin_host/plugin_host.hpp"

namespace attnlab {

struct CheckResult {
  std::string name;
  bool passed = false;
  std::string figure;   // what was measured ("max change 0", "max relative error 3e-9", ...)
  std::string failure;  // for a failure: what differed and where
};

// The checks, in the order they run: "draws in forward", "parameters", "shape and dtype",
// "padding invariance", "gradients", "seeded determinism", "large inputs", "batch independence",
// "reduced precision". The first runs the forward twice on one input and redraw seed: a method
// whose outputs differ draws random numbers of its own in forward; every later check re-seeds the
// default generators before each forward, so that such draws are held fixed and each check says
// only what it tests.
const std::vector<std::string>& attention_check_names();

// The shape the checks build the method for and feed it. By default (zeros) each check's own small
// one (2 heads of 8, 6 to 64 tokens); `check --heads H --head-dim D --length N` sets it for a
// method whose state is sized for its job: built for N tokens, fed at most N (each check's own
// length where shorter), and exactly N where the method takes only one length (a script's
// `fixed_length = True`).
struct CheckShape {
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t length = 0;
  bool fixed_length = false;
};

// One check of an attention plugin on `device`; an exception the plugin throws is a failure.
CheckResult check_attention(const LoadedPlugin& plugin, const std::string& check, const c10::Device& device,
                            const CheckShape& shape = {});

// The checks of a dataset plugin, on the configuration `params` (its defaults, with what the user
// set): "parameters", "descriptor", "splits" (each split loaded and put through check_split, as
// `attnlab data` does), "seeded reproducibility" (every split built again in a fresh cache folder
// is the same to the bit). Data generated or cached goes to a scratch folder, removed after.
const std::vector<std::string>& dataset_check_names();
std::vector<CheckResult> check_dataset(const LoadedPlugin& plugin, const ParamValues& params);

}  // namespace attnlab
