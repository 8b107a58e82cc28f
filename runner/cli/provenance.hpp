#pragma once
// What every stored measurement says of where it was taken (store::Provenance), stamped here only.
#include <c10/core/Device.h>

#include "attnlab/store.hpp"

namespace attnlab {

// `row`'s provenance, this process's on `device`: the device as LibTorch names it (cpu, cuda:0), its
// name (the GPU's, or the CPU model), this LibTorch's version, this build's git revision, the
// intra-op threads set now (compat::configure_threads sets them).
void stamp_provenance(store::Provenance& row, const c10::Device& device);

}  // namespace attnlab
