#include "studies/spectrum.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <stdexcept>

#include <ATen/ops/linalg_svdvals.h>
#include <ATen/ops/zeros.h>

#include "cli/text_table.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab {
namespace {

double mean_of(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v;
  return sum / static_cast<double>(x.size());
}

// Sample standard deviation (n - 1), two passes; NaN for fewer than two values.
double std_of(const std::vector<double>& x) {
  if (x.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  const double m = mean_of(x);
  double sum = 0;
  for (double v : x) sum += (v - m) * (v - m);
  return std::sqrt(sum / static_cast<double>(x.size() - 1));
}

std::string number(double v, const char* format) {
  if (std::isnan(v)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

const SpectrumRunInfo* info_of(const std::vector<SpectrumRunInfo>& runs, std::int64_t run_id) {
  for (const auto& r : runs)
    if (r.run_id == run_id) return &r;
  return nullptr;
}

}  // namespace

at::Tensor real_row_singular_values(const at::Tensor& outputs, const at::Tensor& valid) {
  if (outputs.dim() != 3 || valid.dim() != 2 || valid.size(0) != outputs.size(0) || valid.size(1) != outputs.size(1))
    throw std::invalid_argument("spectrum: outputs must be [M, N, D] and valid [M, N]");
  const auto x = outputs.detach().to(at::kCPU, at::kDouble);
  const auto rows = valid.to(at::kCPU, at::kBool);
  const std::int64_t m = x.size(0), width = x.size(2);
  std::vector<at::Tensor> sigmas;
  std::int64_t most = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    const auto real = x[i].index({rows[i]});  // [r, D]
    const auto s = real.size(0) == 0 ? at::zeros({0}, x.options()) : at::linalg_svdvals(real);
    most = std::max(most, s.size(0));
    sigmas.push_back(s);
  }
  const std::int64_t k = std::min(width, most);
  auto out = at::zeros({m, k}, x.options());
  for (std::int64_t i = 0; i < m; ++i)
    if (sigmas[i].size(0) > 0) out[i].slice(0, 0, sigmas[i].size(0)).copy_(sigmas[i]);
  return out;
}

std::int64_t energy_rank(const std::vector<double>& sigma, double fraction) {
  double total = 0;
  for (double s : sigma) total += s * s;
  if (total == 0) return 0;
  const double target = fraction * total * (1.0 - 1e-12);
  double sum = 0;
  for (std::size_t i = 0; i < sigma.size(); ++i) {
    sum += sigma[i] * sigma[i];
    if (sum >= target) return static_cast<std::int64_t>(i + 1);
  }
  return static_cast<std::int64_t>(sigma.size());
}

store::SpectrumResult spectrum_statistics(const at::Tensor& singular_values) {
  const auto s = singular_values.to(at::kCPU, at::kDouble).contiguous();
  if (s.dim() != 2 || s.size(0) == 0 || s.size(1) == 0) throw std::invalid_argument("spectrum: no singular values to summarise");
  const std::int64_t m = s.size(0), k = s.size(1);
  const double* p = s.data_ptr<double>();
  std::vector<std::vector<double>> sigma(k), normalised(k), energy(k);
  std::vector<double> rank90, rank99, stable;
  for (std::int64_t i = 0; i < m; ++i) {
    const std::vector<double> row(p + i * k, p + (i + 1) * k);
    const double first = row[0];
    if (!(first > 0))
      throw std::invalid_argument("spectrum: matrix " + std::to_string(i) + " is all zero: its normalised spectrum is undefined");
    double total = 0;
    for (double v : row) total += v * v;
    for (std::int64_t j = 0; j < k; ++j) {
      sigma[j].push_back(row[j]);
      normalised[j].push_back(row[j] / first);
      energy[j].push_back(row[j] * row[j] / total);
    }
    rank90.push_back(static_cast<double>(energy_rank(row, 0.90)));
    rank99.push_back(static_cast<double>(energy_rank(row, 0.99)));
    stable.push_back(total / (first * first));
  }
  store::SpectrumResult r;
  r.matrices = m;
  for (std::int64_t j = 0; j < k; ++j)
    r.values.push_back({mean_of(sigma[j]), std_of(sigma[j]), mean_of(normalised[j]), std_of(normalised[j]), mean_of(energy[j])});
  r.rank90_mean = mean_of(rank90);
  r.rank90_std = std_of(rank90);
  r.rank99_mean = mean_of(rank99);
  r.rank99_std = std_of(rank99);
  r.stable_rank_mean = mean_of(stable);
  return r;
}

std::string parse_spectrum_stage(const std::string& word) {
  if (word == "out" || word == "heads") return word;
  throw std::invalid_argument("unknown stage '" + word + "' (out: after the output projection; heads: the heads concatenated)");
}

std::string spectrum_table(const std::vector<store::SpectrumResult>& rows, const std::vector<SpectrumRunInfo>& runs) {
  TextTable table({"run", "task", "method", "layer", "stage", "matrices", "rows", "rank@90%", "rank@99%", "stable rank",
                   "σ2/σ1", "σ3/σ1", "σ4/σ1", "σ5/σ1"});
  for (const auto& r : rows) {
    const SpectrumRunInfo* info = info_of(runs, r.run_id);
    std::vector<std::string> cells = {
        std::to_string(r.run_id), info ? info->task : "?", info ? info->method : "?", std::to_string(r.layer), r.stage,
        std::to_string(r.matrices) + " x " + std::to_string(r.width),
        r.rows_min == r.rows_max ? std::to_string(r.rows_min) : std::to_string(r.rows_min) + "-" + std::to_string(r.rows_max),
        number(r.rank90_mean, "%.2f") + (std::isnan(r.rank90_std) ? "" : " ± " + number(r.rank90_std, "%.2f")),
        number(r.rank99_mean, "%.2f") + (std::isnan(r.rank99_std) ? "" : " ± " + number(r.rank99_std, "%.2f")),
        number(r.stable_rank_mean, "%.3g")};
    for (std::size_t i = 1; i <= 4; ++i)
      cells.push_back(i < r.values.size() ? number(r.values[i].normalised_mean, "%.3g") : "-");
    table.add(cells);
  }
  return table.str();
}

results::Plot spectrum_plot(const std::vector<store::SpectrumResult>& rows, const std::vector<SpectrumRunInfo>& runs, bool raw,
                            const std::string& title) {
  results::Plot plot;
  plot.title = title;
  if (plot.title.empty()) {
    std::set<std::int64_t> layers;
    for (const auto& r : rows) layers.insert(r.layer);
    std::string which;
    for (auto l : layers) which += (which.empty() ? "" : ",") + std::to_string(l);
    plot.title = std::string(raw ? "Singular values" : "Normalised singular values") + " of the attention output (layer " +
                 which + "), mean over one test batch";
  }
  plot.x_label = "index i";
  plot.y_label = raw ? "singular value σ_i" : "σ_i / σ_1";
  plot.log_y = true;
  for (const auto& r : rows) {
    const SpectrumRunInfo* info = info_of(runs, r.run_id);
    results::Series s;
    const auto same_run = std::count_if(rows.begin(), rows.end(), [&](const auto& o) { return o.run_id == r.run_id; });
    s.title = (info ? info->task + " (" + info->method + ", run " : "(run ") + std::to_string(r.run_id) +
              (same_run > 1 ? ", layer " + std::to_string(r.layer) + " " + r.stage + " batch " + std::to_string(r.batch) : "") +
              ")";
    for (std::size_t i = 0; i < r.values.size(); ++i) {
      const double y = raw ? r.values[i].sigma_mean : r.values[i].normalised_mean;
      s.x.push_back(static_cast<double>(i + 1));
      s.y.push_back(y > 0 ? y : std::numeric_limits<double>::quiet_NaN());
    }
    plot.series.push_back(std::move(s));
  }
  return plot;
}

}  // namespace attnlab
