#pragma once
// Live progress of one job: a line rewritten in place on a terminal; on a pipe or file, plain
// lines at most every few seconds (and at each validation), so logs stay readable. Once stdout
// cannot be written (a closed pipe) it prints nothing more.
#include <chrono>
#include <string>

#include "attnlab/train/measurements.hpp"

namespace attnlab {

class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string label);
  void update(const Progress& progress);
  // The variance passes after a stochastic run: "LABEL variance pass 3/100  ETA 1m02s", the same
  // way (in place on a terminal; on a pipe every few seconds and at the last pass).
  void variance_pass(std::int64_t done, std::int64_t passes, double seconds);
  void finish(const std::string& status_line);
  const std::string& label() const { return label_; }

 private:
  void show(const char* line, bool last);
  void flush();

  std::string label_;
  bool terminal_;
  bool closed_ = false;  // a write to stdout failed (its reader closed it): print nothing more
  bool line_open_ = false;
  std::chrono::steady_clock::time_point last_plain_;
  double last_val_ = -1;
};

}  // namespace attnlab
