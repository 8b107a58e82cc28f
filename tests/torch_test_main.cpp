// The main of every LibTorch test program: one intra-op thread, set before any test as the attnlab
// binary sets a job's (compat::configure_threads; ATTNLAB_THREADS, where set, still decides).
// ctest runs as many tests at once as the machine has cores: with two threads each, every
// parallel region of one test waits for a thread the other test holds, and the toy-sized ops of
// the tests gain nothing from a second thread (the methods label: 67 s at two threads a test, 54 s
// at one, ctest -j2 on 2 cores). at::set_num_threads also turns off MKL's dynamic choice of thread
// count, which MKL names among its conditions for identical results from run to run. Tests that
// are about thread counts set their own (dropout_test.cpp).
#include <gtest/gtest.h>

#include <cstdlib>

#include "attnlab/torch_compat.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  attnlab::compat::configure_threads(std::getenv("ATTNLAB_THREADS") ? 0 : 1);
  return RUN_ALL_TESTS();
}
