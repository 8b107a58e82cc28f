#pragma once
// The devices `attnlab run --devices` and `attnlab worker --devices` name, checked against this
// machine's LibTorch: the one place the queue's LibTorch-free processes ask it about devices.
#include <string>
#include <vector>

namespace attnlab {

// "cpu", "cuda", "cuda:0,cuda:1", "all" (every CUDA device, else cpu) -> device names, each
// checked on this machine (std::invalid_argument naming the one that is not).
std::vector<std::string> resolve_devices(const std::string& spec);

}  // namespace attnlab
