// attnlab-serve: `attnlab serve` in a process of its own. attnlab links LibTorch (and, in the 2.x
// build, CUDA's libraries), whose loading alone keeps ~370 MB resident; serving a database needs
// none of it, so `attnlab serve` hands its arguments over to this executable (serve/exec_serve.cpp).
#include <signal.h>

#include <iostream>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);  // a browser that goes away mid-reply must not end the server
  try {
    return attnlab::cmd_serve(attnlab::Args(argv + 1, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "attnlab: error: " << e.what() << "\n";
    return 2;
  }
}
