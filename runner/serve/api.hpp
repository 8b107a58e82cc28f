// The JSON endpoints of `attnlab serve`, as plain functions of a database and the query's
// parameters: what the page reads, what a user may script (runner/serve/README.md), and what the
// tests call without HTTP. Each answers from one read transaction; nothing here writes (the server
// opens the database read-only). Filters go through the results commands' own code (one --where
// parser, never SQL from the request).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "attnlab/store.hpp"

namespace attnlab::serve {

struct Reply {
  int status = 200;  // 200; 400 a bad parameter, 404 an unknown run, 503 an unreadable database
  std::string body;  // JSON; an error is {"error": "one line"}
};

using Params = std::multimap<std::string, std::string>;  // a query string's name=value pairs, repeats kept

Reply error_reply(int status, const std::string& what);

Reply queue_json(store::ResultsReader& db, const Params& params);    // GET /api/queue
Reply experiments_json(store::ResultsReader& db, const Params& params);  // GET /api/experiments
Reply results_json(store::ResultsReader& db, const Params& params);  // GET /api/results
Reply table_json(store::ResultsReader& db, const Params& params);    // GET /api/table
Reply compare_json(store::ResultsReader& db, const Params& params);  // GET /api/compare
Reply runs_json(store::ResultsReader& db, const Params& params);     // GET /api/runs
Reply run_json(store::ResultsReader& db, const Params& params);      // GET /api/run
Reply curves_json(store::ResultsReader& db, const Params& params);   // GET /api/curves
Reply bench_json(store::ResultsReader& db, const Params& params);    // GET /api/bench
Reply approx_json(store::ResultsReader& db, const Params& params);   // GET /api/approx

// Every endpoint by path, for the server (and the tests that walk them all).
struct Endpoint {
  const char* path;
  Reply (*answer)(store::ResultsReader&, const Params&);
};
const std::vector<Endpoint>& endpoints();

}  // namespace attnlab::serve
