// attnlab env: what a bug report needs to say about this build and this machine, read from what
// is loaded rather than assumed: the library whose BLAS this process calls, the allocator mapped
// into it, the threads as `run` would set them, the devices, the plugin folders and what each holds.
#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/Version.h>

#include "attnlab/torch_compat.hpp"
#include "build_info.hpp"
#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "plugin_host/plugin_host.hpp"
#include "results/formats.hpp"

namespace attnlab {
namespace {

// The first mapped file of this process whose name contains one of `parts` ("" if none).
std::string mapped_library(const std::vector<std::string>& parts) {
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string file = line.substr(slash);
    const std::string name = file.substr(file.rfind('/') + 1);
    for (const auto& part : parts)
      if (name.find(part) != std::string::npos) return file;
  }
  return "";
}

// The file that defines the sgemm_ this process calls (the Fortran BLAS entry): OpenBLAS through
// Debian's BLAS alternative for Debian's LibTorch, or libtorch_cpu itself for PyPI's, which links
// MKL statically.
std::string blas_library() {
  Dl_info info{};
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  if (!sgemm || !dladdr(sgemm, &info) || !info.dli_fname) return "";
  std::error_code ec;
  const auto file = std::filesystem::canonical(info.dli_fname, ec);  // through the alternatives' links
  return ec ? info.dli_fname : file.string();
}

// KEY=VALUE from LibTorch's "Build settings" line, or a line starting with `prefix`, trimmed.
std::string from_config(const std::string& config, const std::string& key) {
  const auto at = config.find(key);
  if (at == std::string::npos) return "";
  const auto start = at + key.size();
  const auto end = config.find_first_of(",\n", start);
  return config.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

std::string gib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

int cmd_env(const Args& args) {
  po::options_description options(
      "attnlab env [--threads N] [--plugins DIR]... [--format table|csv|json|markdown]: this build and machine, for a bug "
      "report (each run stores its host, device, LibTorch, threads, git revision and plugin hashes too)");
  add_plugins_option(options);
  options.add_options()
      ("threads", po::value<int>()->default_value(0), "intra-op threads as run would set them (0: ATTNLAB_THREADS or every core)")
      ("format", po::value<std::string>()->default_value("table"), "table, csv, json or markdown")
      ("help,h", "this help");
  const auto vm = parse_command_line("env", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  const auto format = results::parse_format(vm["format"].as<std::string>());

  std::vector<std::pair<std::string, std::string>> rows;
  rows.emplace_back("attnlab", std::string(build_info::kVersion) + " (git " + build_info::git_revision() + ")");
  const std::string config = at::show_config();
  rows.emplace_back("LibTorch", compat::torch_version() + (compat::built_with_cuda() ? ", with CUDA" : ", without CUDA"));
  if (compat::built_with_cuda()) rows.emplace_back("CUDA", compat::cuda_versions());

  const std::string blas = blas_library();
  rows.emplace_back("BLAS", from_config(config, "BLAS_INFO=") + " interface: " + (blas.empty() ? "no sgemm_ found" : blas));
  const std::string allocator = mapped_library({"tcmalloc", "jemalloc"});
  rows.emplace_back("allocator", allocator.empty() ? "glibc malloc" : allocator);

  const c10::Device cpu(c10::kCPU);
  const std::string capability = from_config(config, "CPU capability usage: ");
  rows.emplace_back("CPU", compat::device_name(cpu) + ", " + std::to_string(std::thread::hardware_concurrency()) +
                               " cores" + (capability.empty() ? "" : ", kernels " + capability) + ", " +
                               gib(compat::device_memory_bytes(cpu)));
  const int requested = vm["threads"].as<int>();
  const char* env_threads = std::getenv("ATTNLAB_THREADS");
  const int threads = compat::configure_threads(requested);
  rows.emplace_back("threads", std::to_string(threads) + " intra-op (" +
                                   (requested > 0 ? std::string("--threads")
                                    : env_threads && std::atoi(env_threads) > 0 ? "ATTNLAB_THREADS"
                                                                                  : "every core") +
                                   "), " + std::to_string(at::get_num_interop_threads()) + " inter-op, " +
                                   from_config(at::get_parallel_info(), "ATen parallel backend: "));
  std::string devices = "cpu";
  for (int i = 0; i < compat::cuda_device_count(); ++i) {
    const c10::Device gpu(c10::kCUDA, static_cast<c10::DeviceIndex>(i));
    devices += "; cuda:" + std::to_string(i) + " " + compat::device_name(gpu) + ", " + gib(compat::device_memory_bytes(gpu));
  }
  if (compat::built_with_cuda() && compat::cuda_device_count() == 0) devices += "; no CUDA device present";
  rows.emplace_back("devices", devices);

  const auto registry = load_plugins(plugin_folders(vm), /*report_refused=*/false);
  for (const auto& folder : registry.searched()) {
    std::error_code ec;
    const std::string canonical = std::filesystem::weakly_canonical(folder, ec).string();  // as LoadedPlugin::path
    std::map<PluginKind, int> found;
    for (const auto& p : registry.plugins())
      if (std::filesystem::path(p.path).parent_path().string() == canonical) ++found[p.kind()];
    rows.emplace_back("plugin folder", folder + ": " + std::to_string(found[PluginKind::attention]) + " attention, " +
                                           std::to_string(found[PluginKind::dataset]) + " dataset");
  }
  if (!registry.errors().empty())
    rows.emplace_back("plugins refused", std::to_string(registry.errors().size()) + " (attnlab plugins lists them)");

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  struct utsname os {};
  uname(&os);
  rows.emplace_back("host", std::string(host) + ", " + os.sysname + " " + os.release + " " + os.machine);

  results::Grid grid;
  grid.header = {"item", "value"};
  for (const auto& [item, value] : rows) grid.rows.push_back({results::Cell::of_text(item), results::Cell::of_text(value)});
  std::cout << results::render(grid, format);
  return 0;
}

}  // namespace attnlab
