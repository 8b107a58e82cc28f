#pragma once
// What a study's command line (add_study_options) says of the machine it measures on, read once:
// --threads put in force, --device parsed (a bad one refused here, before any run is read), and
// the folder of --cache-dir.
#include <string>

#include <c10/core/Device.h>

#include "attnlab/torch_compat.hpp"
#include "cli/cli_options.hpp"
#include "experiment/cache_dir.hpp"

namespace attnlab {

struct StudyMachine {
  c10::Device device = c10::Device(c10::kCPU);
  std::string device_text;  // as given: "cpu", "cuda:0"
  std::string cache;        // dataset_cache_dir(--cache-dir)
};

inline StudyMachine study_machine(const po::variables_map& vm) {
  compat::configure_threads(vm["threads"].as<int>());
  StudyMachine m;
  m.device_text = vm["device"].as<std::string>();
  m.device = compat::parse_device(m.device_text);
  m.cache = dataset_cache_dir(vm["cache-dir"].as<std::string>());
  return m;
}

}  // namespace attnlab
