#include "serve/api.hpp"

#include "serve/params.hpp"

namespace attnlab::serve {

Reply error_reply(int status, const std::string& what) { return {status, dump({{"error", what}})}; }

const std::vector<Endpoint>& endpoints() {
  static const std::vector<Endpoint> all = {
      {"/api/queue", queue_json},     {"/api/experiments", experiments_json}, {"/api/results", results_json}, {"/api/table", table_json},
      {"/api/compare", compare_json}, {"/api/runs", runs_json},       {"/api/run", run_json},
      {"/api/curves", curves_json},   {"/api/bench", bench_json},     {"/api/approx", approx_json},
  };
  return all;
}

}  // namespace attnlab::serve
