// The main of every LibTorch test program: the intra-op threads set before any test as the attnlab
// binary sets them for a job (compat::configure_threads). at::set_num_threads also turns off MKL's
// dynamic choice of thread count, which MKL names among its conditions for identical results from
// run to run; the tests that compare two runs in one process to the bit (resume, seeded
// determinism) compare them under the conditions the product runs in.
#include <gtest/gtest.h>

#include "attnlab/torch_compat.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  attnlab::compat::configure_threads(0);
  return RUN_ALL_TESTS();
}
