#include "results/stats.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>

#include <boost/math/distributions/students_t.hpp>

namespace attnlab::results {
namespace {

void check_level(double level) {
  if (!(level > 0 && level < 1))
    throw std::invalid_argument("confidence level must lie strictly between 0 and 1, not " + std::to_string(level));
}

double mean_of(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

// Sample variance (n − 1), two-pass for accuracy.
double variance_of(const std::vector<double>& values, double mean) {
  double sum = 0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return sum / static_cast<double>(values.size() - 1);
}

// A uniform index in [0, n) from raw 64-bit draws, rejecting the uneven tail: unlike
// std::uniform_int_distribution (whose algorithm each standard library chooses), the same on
// every platform.
std::size_t draw_index(std::mt19937_64& rng, std::size_t n) {
  const std::uint64_t range = n;
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % range;
  std::uint64_t x = rng();
  while (x >= limit) x = rng();
  return static_cast<std::size_t>(x % range);
}

double resampled_mean(std::mt19937_64& rng, const std::vector<double>& values) {
  double sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) sum += values[draw_index(rng, values.size())];
  return sum / static_cast<double>(values.size());
}

// Hyndman & Fan (1996) type 7 quantile of sorted values: position (m − 1)·p, interpolated.
double quantile_sorted(const std::vector<double>& sorted, double p) {
  const double h = static_cast<double>(sorted.size() - 1) * p;
  const auto below = static_cast<std::size_t>(std::floor(h));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (h - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

bool all_equal(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [&](double v) { return v == values.front(); });
}

}  // namespace

IntervalMethod parse_interval_method(const std::string& word) {
  if (word == "welch") return IntervalMethod::welch;
  if (word == "bootstrap") return IntervalMethod::bootstrap;
  throw std::invalid_argument("unknown interval method '" + word + "' (welch or bootstrap)");
}

const char* to_string(IntervalMethod method) { return method == IntervalMethod::welch ? "welch" : "bootstrap"; }

DifferenceInterval welch_interval(const std::vector<double>& a, const std::vector<double>& b, double level) {
  check_level(level);
  if (a.size() < 2 || b.size() < 2)
    throw std::invalid_argument("Welch's interval needs at least 2 values per group (got " + std::to_string(a.size()) +
                                " and " + std::to_string(b.size()) + ")");
  DifferenceInterval ci;
  ci.level = level;
  const double mean_a = mean_of(a), mean_b = mean_of(b);
  ci.diff = mean_a - mean_b;
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  const double va = variance_of(a, mean_a) / na, vb = variance_of(b, mean_b) / nb;  // s²/n per group
  ci.se = std::sqrt(va + vb);
  if (ci.se == 0) {
    ci.degenerate = true;
    ci.low = ci.high = ci.diff;
    ci.excludes_zero = ci.diff != 0;
    return ci;
  }
  // Welch–Satterthwaite: (sA²/nA + sB²/nB)² / ((sA²/nA)²/(nA − 1) + (sB²/nB)²/(nB − 1)).
  ci.df = (va + vb) * (va + vb) / (va * va / (na - 1) + vb * vb / (nb - 1));
  const double t = boost::math::quantile(boost::math::students_t(ci.df), (1 + level) / 2);
  ci.low = ci.diff - t * ci.se;
  ci.high = ci.diff + t * ci.se;
  ci.excludes_zero = ci.low > 0 || ci.high < 0;
  return ci;
}

DifferenceInterval bootstrap_interval(const std::vector<double>& a, const std::vector<double>& b, double level,
                                      int resamples, std::uint64_t seed) {
  check_level(level);
  if (a.empty() || b.empty())
    throw std::invalid_argument("the bootstrap needs at least 1 value per group (got " + std::to_string(a.size()) +
                                " and " + std::to_string(b.size()) + ")");
  if (resamples < 1) throw std::invalid_argument("the bootstrap needs at least 1 resample, not " + std::to_string(resamples));
  DifferenceInterval ci;
  ci.level = level;
  ci.resamples = resamples;
  ci.diff = mean_of(a) - mean_of(b);
  if (all_equal(a) && all_equal(b)) {  // every resample gives diff: say so rather than draw
    ci.degenerate = true;
    ci.low = ci.high = ci.diff;
    ci.excludes_zero = ci.diff != 0;
    return ci;
  }
  std::mt19937_64 rng(seed);
  std::vector<double> diffs(static_cast<std::size_t>(resamples));
  for (double& d : diffs) {
    const double resampled_a = resampled_mean(rng, a);  // A then B: the order fixes the stream
    d = resampled_a - resampled_mean(rng, b);
  }
  const double diffs_mean = mean_of(diffs);
  double sum = 0;
  for (double d : diffs) sum += (d - diffs_mean) * (d - diffs_mean);
  ci.se = resamples > 1 ? std::sqrt(sum / (resamples - 1)) : 0;
  std::sort(diffs.begin(), diffs.end());
  ci.low = quantile_sorted(diffs, (1 - level) / 2);
  ci.high = quantile_sorted(diffs, (1 + level) / 2);
  ci.excludes_zero = ci.low > 0 || ci.high < 0;
  return ci;
}

}  // namespace attnlab::results
