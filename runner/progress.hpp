#pragma once
// Live progress of one job: a line rewritten in place on a terminal; on a pipe or file, plain
// lines at most every few seconds (and at each validation), so logs stay readable.
#include <chrono>
#include <string>

#include "attnlab/trainer.hpp"

namespace attnlab {

class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string label);
  void update(const Progress& progress);
  void finish(const std::string& status_line);

 private:
  std::string label_;
  bool terminal_;
  bool line_open_ = false;
  std::chrono::steady_clock::time_point last_plain_;
  double last_val_ = -1;
};

std::string format_duration(double seconds);  // "1h02m", "3m07s", "12.3s"
std::string format_bytes(double bytes);       // "812.4 MiB"

}  // namespace attnlab
