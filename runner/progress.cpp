#include "progress.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace attnlab {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, (int(s) % 3600) / 60);
  return buf;
}

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return "-";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

ProgressPrinter::ProgressPrinter(std::string label)
    : label_(std::move(label)), terminal_(isatty(STDOUT_FILENO) != 0), last_plain_(std::chrono::steady_clock::now()) {}

void ProgressPrinter::update(const Progress& p) {
  char val[32] = "val -    ";
  if (std::isfinite(p.val_acc)) std::snprintf(val, sizeof val, "val %.3f", p.val_acc);
  const double eta = (p.total_steps - p.step) / std::max(p.steps_per_second, 1e-9);
  char line[256];
  std::snprintf(line, sizeof line, "%s step %lld/%lld  loss %.4f  acc %.3f  %s  %.2f step/s  ETA %s", label_.c_str(),
                static_cast<long long>(p.step), static_cast<long long>(p.total_steps), p.train_loss, p.train_acc, val,
                p.steps_per_second, format_duration(eta).c_str());
  if (terminal_) {
    std::printf("\r\033[K%s", line);
    line_open_ = true;
  } else {
    const auto now = std::chrono::steady_clock::now();
    const bool new_val = std::isfinite(p.val_acc) && p.val_acc != last_val_;
    if (new_val || now - last_plain_ > std::chrono::seconds(5) || p.step == p.total_steps) {
      std::printf("%s\n", line);
      last_plain_ = now;
      last_val_ = p.val_acc;
    }
  }
  std::fflush(stdout);
}

void ProgressPrinter::finish(const std::string& status_line) {
  if (line_open_) std::printf("\r\033[K");
  std::printf("%s %s\n", label_.c_str(), status_line.c_str());
  std::fflush(stdout);
  line_open_ = false;
}

}  // namespace attnlab
