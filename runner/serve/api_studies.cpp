// GET /api/bench and /api/approx: every stored `attnlab bench` row (step time and peak memory per
// method and length) and `attnlab approx` cell (error against exact attention per method, length
// and d), oldest first, optionally for some methods only.
#include <algorithm>

#include "results/bench_measured.hpp"
#include "serve/params.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab::serve {
namespace {

using json = nlohmann::ordered_json;

bool wanted(const std::vector<std::string>& methods, const std::string& method) {
  return methods.empty() || std::find(methods.begin(), methods.end(), method) != methods.end();
}

}  // namespace

Reply bench_json(store::ResultsReader& db, const Params& params) {
  return answer_with(db, params, {"method"}, [&] {
    const auto methods = words(params, "method");
    json rows = json::array();
    for (const auto& r : store::bench_results(db)) {
      if (!wanted(methods, r.method)) continue;
      const auto measured = results::bench_measured(r.config_toml);
      rows.push_back({{"method", r.method},
                      {"dataset", r.dataset},
                      {"seq_len", r.seq_len},
                      {"batch_size", r.batch_size},
                      {"precision", measured.precision},
                      {"part", measured.part},
                      {"device", r.device},
                      {"device_name", r.device_name},
                      {"torch_version", r.torch_version},
                      {"git_revision", r.git_revision},
                      {"threads", r.threads},
                      {"steps_timed", r.steps_timed},
                      {"step_seconds_median", r.step_seconds_median},
                      {"step_seconds_min", r.step_seconds_min},
                      {"step_seconds_max", r.step_seconds_max},
                      {"peak_memory_bytes", r.peak_memory_bytes},
                      {"status", r.status},
                      {"error", r.error},
                      {"created_at", r.created_at}});
    }
    return dump(rows);
  });
}

Reply approx_json(store::ResultsReader& db, const Params& params) {
  return answer_with(db, params, {"method"}, [&] {
    const auto methods = words(params, "method");
    json rows = json::array();
    for (const auto& r : store::approx_results(db)) {
      if (!wanted(methods, r.method)) continue;
      rows.push_back({{"method", r.method},
                      {"reference", r.reference},
                      {"source", r.source},
                      {"param", r.param},
                      {"features", r.features},
                      {"seq_len", r.seq_len},
                      {"samples", r.samples},
                      {"abs_error_mean", r.abs_error_mean},
                      {"abs_error_std", r.abs_error_std},
                      {"rel_error_mean", r.rel_error_mean},
                      {"rel_error_std", r.rel_error_std},
                      {"device", r.device},
                      {"torch_version", r.torch_version},
                      {"git_revision", r.git_revision},
                      {"created_at", r.created_at}});
    }
    return dump(rows);
  });
}

}  // namespace attnlab::serve
