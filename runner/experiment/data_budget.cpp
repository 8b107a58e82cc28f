#include "experiment/data_budget.hpp"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace attnlab {
namespace fs = std::filesystem;

std::uint64_t estimated_data_bytes(const TaskInfo& task, const SizeEstimate& size) {
  if (size.examples <= 0 || size.token_bytes <= 0) return 0;
  const auto per_example = static_cast<long double>(task.inputs) * task.max_len * size.token_bytes  // tokens
                           + task.inputs * 8.0L + 8.0L;                                              // lengths, label
  const long double total = per_example * size.examples;
  return total >= 1.8e19L ? UINT64_MAX : static_cast<std::uint64_t>(total);
}

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 999.5 && unit < 6) value /= 1000, ++unit;  // 999.5 would print as 1e+03
  char text[32];
  if (unit == 0) std::snprintf(text, sizeof text, "%.0f %s", value, units[unit]);
  else std::snprintf(text, sizeof text, "%.3g %s", value, units[unit]);
  return text;
}

DataBound data_bound(const std::string& dataset, const std::string& cache_dir) {
  if (const char* set = std::getenv("ATTNLAB_DATA_BOUND"); set && *set) {
    char* end = nullptr;
    const unsigned long long bytes = std::strtoull(set, &end, 10);
    if (*end != '\0') throw DataSizeError(std::string("ATTNLAB_DATA_BOUND='") + set + "': expected a number of bytes");
    return {bytes, "ATTNLAB_DATA_BOUND"};
  }
  const auto pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const std::uint64_t memory = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * page : 0;
  DataBound bound{memory / 2, "half of this machine's " + human_bytes(memory) + " of memory"};

  // Free disk where the cache will be written: the nearest folder of cache_dir that exists.
  std::error_code ec;
  fs::path where = fs::absolute(cache_dir.empty() ? "." : cache_dir, ec);
  while (!where.empty() && !fs::exists(where, ec) && where != where.parent_path()) where = where.parent_path();
  struct statvfs st {};
  if (::statvfs(where.c_str(), &st) != 0) return bound;
  std::uint64_t disk = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
  std::uint64_t cached = 0;  // this dataset's token cache files: a rebuild replaces them
  for (fs::directory_iterator it(fs::path(cache_dir) / "tokens", ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(dataset + "-", 0) == 0) {
      std::error_code size_ec;
      const auto file_bytes = it->file_size(size_ec);
      if (!size_ec) cached += file_bytes;
    }
  disk += cached;
  if (disk < bound.bytes)
    bound = {disk, human_bytes(disk) + " free for the token cache in " + where.string() +
                       (cached ? " (counting " + dataset + "'s cache files there)" : "")};
  return bound;
}

void check_data_size(const std::string& dataset, const Dataset& data, const TaskInfo& task, const std::string& cache_dir) {
  const SizeEstimate size = data.estimate_size();
  const std::uint64_t bytes = estimated_data_bytes(task, size);
  if (bytes == 0) return;
  const DataBound bound = data_bound(dataset, cache_dir);
  if (bytes <= bound.bytes) return;
  throw DataSizeError(dataset + ": max_len = " + std::to_string(task.max_len) + " needs about " + human_bytes(bytes) +
                      " in memory and again in the token cache (" + std::to_string(size.examples) + " examples x " +
                      std::to_string(task.inputs) + " input(s) x " + std::to_string(task.max_len) + " tokens x " +
                      std::to_string(size.token_bytes) + " bytes), past the bound of " + human_bytes(bound.bytes) +
                      " (" + bound.why + "); --force loads it anyway");
}

}  // namespace attnlab
