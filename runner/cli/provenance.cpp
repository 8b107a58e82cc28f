#include "cli/provenance.hpp"

#include <ATen/Parallel.h>

#include "attnlab/torch_compat.hpp"
#include "build_info.hpp"

namespace attnlab {

void stamp_provenance(store::Provenance& row, const c10::Device& device) {
  row.device = device.str();
  row.device_name = compat::device_name(device);
  row.torch_version = compat::torch_version();
  row.git_revision = build_info::git_revision();
  row.threads = at::get_num_threads();
}

}  // namespace attnlab
