#pragma once
// Confidence intervals for the difference of two groups' means (A − B), e.g. one method's test
// accuracy over seeds against another's: what `attnlab compare` prints.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace attnlab::results {

enum class IntervalMethod { welch, bootstrap };

// "welch" | "bootstrap"; anything else is a std::invalid_argument naming the word and the choices.
IntervalMethod parse_interval_method(const std::string& word);
const char* to_string(IntervalMethod method);

struct DifferenceInterval {
  double diff = 0;   // mean(A) − mean(B)
  double low = 0;    // the interval at `level`
  double high = 0;
  bool excludes_zero = false;  // low > 0 or high < 0
  double level = 0.95;
  // Particulars. Welch: the standard error of the difference and the Welch–Satterthwaite degrees
  // of freedom. Bootstrap: se is the standard deviation of the resampled differences, df is NaN.
  double se = 0;
  double df = std::numeric_limits<double>::quiet_NaN();
  int resamples = 0;  // bootstrap only
  // Both groups constant (every value equal within each group): no spread to estimate, so the
  // interval is the point diff itself rather than NaN.
  bool degenerate = false;
};

// Welch's t interval: se = sqrt(sA²/nA + sB²/nB) with sample variances, df by Welch–Satterthwaite
// (Welch 1947, Biometrika 34:28), diff ± t_{(1+level)/2, df} · se. Needs nA, nB ≥ 2 and level in
// (0, 1), else std::invalid_argument.
DifferenceInterval welch_interval(const std::vector<double>& a, const std::vector<double>& b, double level = 0.95);

// Percentile bootstrap (Efron & Tibshirani 1993, ch. 13): each group resampled with replacement
// `resamples` times from std::mt19937_64 seeded with `seed`, the difference of the resampled means
// each time, and its (1 − level)/2 and (1 + level)/2 quantiles (linear interpolation between order
// statistics, Hyndman & Fan type 7). The same inputs and seed give the same interval on every
// platform. Needs nA, nB ≥ 1, level in (0, 1) and resamples ≥ 1, else std::invalid_argument.
DifferenceInterval bootstrap_interval(const std::vector<double>& a, const std::vector<double>& b, double level = 0.95,
                                      int resamples = 10000, std::uint64_t seed = 1);

}  // namespace attnlab::results
