// attnlab: the command line. `attnlab <command> [options]`; see `attnlab --help`.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <iterator>
#include <iostream>
#include <string>
#include <vector>

#include "build_info.hpp"
#include "cli/commands.hpp"

namespace {
using attnlab::Args;

// Every command, once: its name, its line in the usage (internal ones have none: the processes
// attnlab starts itself), its entry point (cli/commands.hpp). The entry points that start attnlab
// processes get this executable's path.
struct Command {
  const char* name;
  const char* summary;
  int (*run)(const Args& args, const std::string& self_exe);
};
const Command kCommands[] = {
    {"plugins", "list the attention methods and datasets found, with their parameters",
     [](const Args& a, const std::string&) { return attnlab::cmd_plugins(a); }},
    {"check", "the conformance suite of an attention or dataset plugin (a file or a name) as a checklist; --bench times it",
     [](const Args& a, const std::string& self) { return attnlab::cmd_check(a, self); }},
    {"new", "write a new attention or dataset plugin's folder, ready to build against the installed attnlab "
            "(--python: a method in PyTorch, to script)",
     [](const Args& a, const std::string&) { return attnlab::cmd_new(a); }},
    {"run", "run an experiment file (methods x datasets x seeds) and store the results",
     [](const Args& a, const std::string& self) { return attnlab::cmd_run(a, self); }},
    {"results", "query the stored results: filter, group, aggregate over seeds (table, csv, json, markdown)",
     [](const Args& a, const std::string&) { return attnlab::cmd_results(a); }},
    {"table", "the papers' tables: accuracy, cost (time, memory) or variance per method x task",
     [](const Args& a, const std::string&) { return attnlab::cmd_table(a); }},
    {"compare", "two methods (or groups) on their shared tasks: difference of means with a 95% interval",
     [](const Args& a, const std::string&) { return attnlab::cmd_compare(a); }},
    {"curves", "training curves of runs (or their mean over seeds) as CSV or a picture (gnuplot)",
     [](const Args& a, const std::string&) { return attnlab::cmd_curves(a); }},
    {"report", "a folder with every table and picture the database can give",
     [](const Args& a, const std::string&) { return attnlab::cmd_report(a); }},
    {"approx", "approximation error of methods against exact attention (spectral norm)",
     [](const Args& a, const std::string&) { return attnlab::cmd_approx(a); }},
    {"bench", "time a training step and its peak memory per method and sequence length",
     [](const Args& a, const std::string& self) { return attnlab::cmd_bench(a, self); }},
    {"estimate", "each job's wall time and an experiment's on a device, from the bench figures, before queueing",
     [](const Args& a, const std::string&) { return attnlab::cmd_estimate(a); }},
    {"instability", "Skyformer's instability score of an experiment's jobs against softmax",
     [](const Args& a, const std::string&) { return attnlab::cmd_instability(a); }},
    {"variance", "RSD, PI, VA and AGV of a stored run of a stochastic method, from its checkpoint",
     [](const Args& a, const std::string&) { return attnlab::cmd_variance(a); }},
    {"inspect", "eigenvalues of a stored GMM-kernel run's learned covariances",
     [](const Args& a, const std::string&) { return attnlab::cmd_inspect(a); }},
    {"gradients", "spread of the classifier's gradient over fresh random features at a run's accuracy checkpoints",
     [](const Args& a, const std::string&) { return attnlab::cmd_gradients(a); }},
    {"spectrum", "singular values of a stored run's attention output over one test batch (decay per task)",
     [](const Args& a, const std::string&) { return attnlab::cmd_spectrum(a); }},
    {"export", "a stored run's weights (best, last or initial) as a safetensors file named as the authors' PyTorch model names them",
     [](const Args& a, const std::string&) { return attnlab::cmd_export(a); }},
    {"data", "load and check an experiment's datasets: sizes, lengths, classes, load time, cache",
     [](const Args& a, const std::string&) { return attnlab::cmd_data(a); }},
    {"queue", "the job queue: add an experiment's jobs, list, show, cancel, retry",
     [](const Args& a, const std::string&) { return attnlab::cmd_queue(a); }},
    {"db", "the database itself: migrate (to this attnlab's schema), check (integrity), gc (unneeded checkpoint files)",
     [](const Args& a, const std::string&) { return attnlab::cmd_db(a); }},
    {"worker", "claim and run queued jobs, one process per device, until told to stop (or --idle-exit)",
     [](const Args& a, const std::string& self) { return attnlab::cmd_worker(a, self); }},
    {"bench-queue", "claims per second of 1, 4, 8 workers on no-op jobs",
     [](const Args& a, const std::string& self) { return attnlab::cmd_bench_queue(a, self); }},
    {"slurm", "run an experiment as a SLURM job array (submit) and merge its results (collect)",
     [](const Args& a, const std::string& self) { return attnlab::cmd_slurm(a, self); }},
    {"env", "this build and machine for a bug report: LibTorch, CUDA, BLAS, allocator, threads, devices, plugin folders",
     [](const Args& a, const std::string&) { return attnlab::cmd_env(a); }},
    {"serve", "the database and the live queue in a browser (read-only; JSON endpoints too)",
     [](const Args& a, const std::string& self) { return attnlab::cmd_serve_apart(a, self); }},
    {"exec-job", nullptr,
     [](const Args& a, const std::string&) { return attnlab::cmd_exec_job(a); }},
    {"bench-one", nullptr,
     [](const Args& a, const std::string&) { return attnlab::cmd_bench_one(a); }},
    {"worker-device", nullptr,
     [](const Args& a, const std::string& self) { return attnlab::cmd_worker_device(a, self); }},
};

std::string usage() {
  std::string text = "attnlab: experiments on efficient attention\n\nusage: attnlab <command> [options]\n";
  for (const auto& c : kCommands) {
    if (!c.summary) continue;
    const std::size_t width = std::strlen(c.name);
    text += "  " + std::string(c.name) + std::string(width < 10 ? 10 - width : 2, ' ') + c.summary + "\n";
  }
  return text + "\nattnlab <command> --help shows a command's options.\n";
}

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
  if (argc < 2) return std::cerr << usage(), 2;
  const std::string name = argv[1];
  const Args args(argv + 2, argv + argc);
  if (name == "--help" || name == "-h" || name == "help") return std::cout << usage(), 0;
  if (name == "--version") return std::cout << "attnlab " << attnlab::build_info::kVersion << " (" << attnlab::build_info::git_revision() << ")\n", 0;
  const auto* command = std::find_if(std::begin(kCommands), std::end(kCommands), [&](const Command& c) { return name == c.name; });
  if (command == std::end(kCommands)) return std::cerr << "attnlab: unknown command '" << name << "'\n" << usage(), 2;
  try {
    return command->run(args, self_executable(argv[0]));
  } catch (const std::exception& e) {
    std::cerr << "attnlab: error: " << e.what() << "\n";
    return 2;
  }
}
