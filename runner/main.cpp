// attnlab: the command line. `attnlab <command> [options]`; see `attnlab --help`.
#include <signal.h>
#include <unistd.h>

#include <climits>
#include <iostream>
#include <string>
#include <vector>

#include "build_info.hpp"
#include "cli/commands.hpp"

namespace {
const char* kUsage =
    "attnlab: experiments on efficient attention\n"
    "\n"
    "usage: attnlab <command> [options]\n"
    "  plugins   list the attention methods and datasets found, with their parameters\n"
    "  check     the conformance suite of an attention or dataset plugin (a file or a name) as a checklist; --bench times it\n"
    "  new       write a new attention or dataset plugin's folder, ready to build against the installed attnlab\n"
    "  run       run an experiment file (methods x datasets x seeds) and store the results\n"
    "  results   query the stored results: filter, group, aggregate over seeds (table, csv, json, markdown)\n"
    "  table     the papers' tables: accuracy, cost (time, memory) or variance per method x task\n"
    "  compare   two methods (or groups) on their shared tasks: difference of means with a 95% interval\n"
    "  curves    training curves of runs (or their mean over seeds) as CSV or a picture (gnuplot)\n"
    "  report    a folder with every table and picture the database can give\n"
    "  approx    approximation error of methods against exact attention (spectral norm)\n"
    "  bench     time a training step and its peak memory per method and sequence length\n"
    "  instability  Skyformer's instability score of an experiment's jobs against softmax\n"
    "  variance  RSD, PI, VA and AGV of a stored run of a stochastic method, from its checkpoint\n"
    "  inspect   eigenvalues of a stored GMM-kernel run's learned covariances\n"
    "  gradients spread of the classifier's gradient over fresh random features at a run's accuracy checkpoints\n"
    "  spectrum  singular values of a stored run's attention output over one test batch (decay per task)\n"
    "  data      load and check an experiment's datasets: sizes, lengths, classes, load time, cache\n"
    "  queue     the job queue: add an experiment's jobs, list, show, cancel, retry\n"
    "  db        db migrate: bring a results database to this attnlab's schema\n"
    "  worker    claim and run queued jobs, one process per device, until told to stop (or --idle-exit)\n"
    "  bench-queue  claims per second of 1, 4, 8 workers on no-op jobs\n"
    "  slurm     run an experiment as a SLURM job array (submit) and merge its results (collect)\n"
    "  env       this build and machine for a bug report: LibTorch, CUDA, BLAS, allocator, threads, devices, plugin folders\n"
    "  serve     the database and the live queue in a browser (read-only; JSON endpoints too)\n"
    "\n"
    "attnlab <command> --help shows a command's options.\n";

// The job processes are this same binary: resolve it once, by its real path.
std::string self_executable(const char* argv0) {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string(argv0);
}
}  // namespace

int main(int argc, char** argv) {
  // A reader that closes our stdout (`attnlab run ... | head -2`) must not kill any attnlab process:
  // without SIGPIPE a write there fails with EPIPE (std::cout goes bad and prints nothing more), and
  // the front end, its workers and their job processes (which inherit this stdout) carry on.
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) return std::cerr << kUsage, 2;
  const std::string command = argv[1];
  const attnlab::Args args(argv + 2, argv + argc);
  if (command == "--help" || command == "-h" || command == "help") return std::cout << kUsage, 0;
  if (command == "--version") return std::cout << "attnlab " << attnlab::build_info::kVersion << " (" << attnlab::build_info::git_revision() << ")\n", 0;
  try {
    if (command == "plugins") return attnlab::cmd_plugins(args);
    if (command == "env") return attnlab::cmd_env(args);
    if (command == "serve") return attnlab::cmd_serve(args);
    if (command == "new") return attnlab::cmd_new(args);
    if (command == "check") return attnlab::cmd_check(args, self_executable(argv[0]));
    if (command == "run") return attnlab::cmd_run(args, self_executable(argv[0]));
    if (command == "results") return attnlab::cmd_results(args);
    if (command == "table") return attnlab::cmd_table(args);
    if (command == "compare") return attnlab::cmd_compare(args);
    if (command == "curves") return attnlab::cmd_curves(args);
    if (command == "report") return attnlab::cmd_report(args);
    if (command == "approx") return attnlab::cmd_approx(args);
    if (command == "data") return attnlab::cmd_data(args);
    if (command == "variance") return attnlab::cmd_variance(args);
    if (command == "inspect") return attnlab::cmd_inspect(args);
    if (command == "spectrum") return attnlab::cmd_spectrum(args);
    if (command == "gradients") return attnlab::cmd_gradients(args);
    if (command == "queue") return attnlab::cmd_queue(args);
    if (command == "db") return attnlab::cmd_db(args);
    if (command == "exec-job") return attnlab::cmd_exec_job(args);
    if (command == "bench") return attnlab::cmd_bench(args, self_executable(argv[0]));
    if (command == "bench-one") return attnlab::cmd_bench_one(args);
    if (command == "instability") return attnlab::cmd_instability(args);
    if (command == "worker") return attnlab::cmd_worker(args, self_executable(argv[0]));
    if (command == "worker-device") return attnlab::cmd_worker_device(args, self_executable(argv[0]));
    if (command == "bench-queue") return attnlab::cmd_bench_queue(args, self_executable(argv[0]));
    if (command == "slurm") return attnlab::cmd_slurm(args, self_executable(argv[0]));
    std::cerr << "attnlab: unknown command '" << command << "'\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "attnlab: error: " << e.what() << "\n";
    return 2;
  }
}
