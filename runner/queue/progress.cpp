#include "queue/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/quantities.hpp"

namespace attnlab {

ProgressPrinter::ProgressPrinter(std::string label)
    : label_(std::move(label)), terminal_(isatty(STDOUT_FILENO) != 0), last_plain_(std::chrono::steady_clock::now()) {}

void ProgressPrinter::update(const Progress& p) {
  if (closed_) return;
  char val[32] = "val -    ";
  if (std::isfinite(p.val_acc)) std::snprintf(val, sizeof val, "val %.3f", p.val_acc);
  const double eta = (p.total_steps - p.step) / std::max(p.steps_per_second, 1e-9);
  char line[256];
  std::snprintf(line, sizeof line, "%s step %lld/%lld  loss %.4f  acc %.3f  %s  %.2f step/s  ETA %s", label_.c_str(),
                static_cast<long long>(p.step), static_cast<long long>(p.total_steps), p.train_loss, p.train_acc, val,
                p.steps_per_second, format_duration(eta).c_str());
  const bool new_val = std::isfinite(p.val_acc) && p.val_acc != last_val_;
  if (new_val) last_val_ = p.val_acc;
  show(line, new_val || p.step == p.total_steps);
}

void ProgressPrinter::variance_pass(std::int64_t done, std::int64_t passes, double seconds) {
  if (closed_) return;
  const double eta = seconds / static_cast<double>(std::max<std::int64_t>(done, 1)) * static_cast<double>(passes - done);
  char line[256];
  std::snprintf(line, sizeof line, "%s variance pass %lld/%lld  ETA %s", label_.c_str(), static_cast<long long>(done),
                static_cast<long long>(passes), format_duration(eta).c_str());
  show(line, done == passes);
}

// In place on a terminal; on a pipe or file, a plain line when `always` or every 5 seconds.
void ProgressPrinter::show(const char* line, bool always) {
  if (terminal_) {
    std::printf("\r\033[K%s", line);
    line_open_ = true;
  } else {
    const auto now = std::chrono::steady_clock::now();
    if (!always && now - last_plain_ <= std::chrono::seconds(5)) return;
    std::printf("%s\n", line);
    last_plain_ = now;
  }
  flush();
}

void ProgressPrinter::finish(const std::string& status_line) {
  if (closed_) return;
  if (line_open_) std::printf("\r\033[K");
  std::printf("%s %s\n", label_.c_str(), status_line.c_str());
  flush();
  line_open_ = false;
}

// stdout's reader may go away (`attnlab run | head`): SIGPIPE is ignored (main.cpp), the write
// fails with EPIPE, and from then on this job prints nothing; its training goes on regardless.
void ProgressPrinter::flush() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) closed_ = true;
}

}  // namespace attnlab
