// The JSON endpoints of `attnlab serve`, as plain functions of a database and the query's
// parameters: what the page reads, what a user may script, and what the tests call without HTTP.
// Each answers from one read transaction; nothing here writes (the database is opened read-only).
#pragma once

#include <map>
#include <string>

#include "attnlab/store.hpp"

namespace attnlab::serve {

struct Reply {
  int status = 200;  // 200, or 400 with {"error": "..."} for a bad parameter
  std::string body;  // JSON
};

using Params = std::multimap<std::string, std::string>;  // a query string's name=value pairs, repeats kept

// GET /api/queue: {"counts": {"queued": n, ...every state}, "running": [job, run, method, dataset,
// seed, device, worker, host, started_at, heartbeat_at], "failed": [job, method, dataset, seed,
// "attempts": [run, status, device, error]]}.
Reply queue_json(store::Database& db);

// GET /api/results?where=EXPR&where=...&group_by=a,b&metric=m1,m2&jobs=1: exactly what
// `attnlab results --format json` prints for the same options (results::results_for).
Reply results_json(store::Database& db, const Params& params);

// {"error": "what"} with `status` (400: a bad parameter; 503: the database cannot be read).
Reply error_reply(int status, const std::string& what);

}  // namespace attnlab::serve
