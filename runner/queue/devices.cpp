#include "queue/devices.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "attnlab/torch_compat.hpp"

namespace attnlab {

std::vector<std::string> resolve_devices(const std::string& spec) {
  std::vector<std::string> devices;
  if (spec == "all") {
    const int count = compat::cuda_device_count();
    for (int i = 0; i < count; ++i) devices.push_back("cuda:" + std::to_string(i));
    if (devices.empty()) devices.push_back("cpu");
    return devices;
  }
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    const c10::Device device = compat::parse_device(item);  // throws, naming it, if absent or malformed
    const std::string name = device.is_cpu() ? "cpu" : "cuda:" + std::to_string(device.index() < 0 ? 0 : device.index());
    if (std::find(devices.begin(), devices.end(), name) != devices.end())
      throw std::invalid_argument("device '" + name + "' is named twice");
    devices.push_back(name);
  }
  if (devices.empty()) throw std::invalid_argument("no device named (cpu, cuda:0,cuda:1, ... or all)");
  return devices;
}

}  // namespace attnlab
