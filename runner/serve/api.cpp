#include "serve/api.hpp"

#include <sstream>

#include "attnlab/query.hpp"
#include "results/formats.hpp"
#include "results/results_query.hpp"

namespace attnlab::serve {
namespace {

using results::json_string;

// "a,b" and repeated parameters: every non-empty word, in order.
std::vector<std::string> words_of(const Params& params, const std::string& name) {
  std::vector<std::string> out;
  const auto [begin, end] = params.equal_range(name);
  for (auto it = begin; it != end; ++it) {
    std::stringstream list(it->second);
    for (std::string word; std::getline(list, word, ',');)
      if (!word.empty()) out.push_back(word);
  }
  return out;
}

std::string job_fields(const store::Job& job) {
  return "\"job\": " + std::to_string(job.id) + ", \"method\": " + json_string(job.method) +
         ", \"dataset\": " + json_string(job.dataset) + ", \"seed\": " + std::to_string(job.seed);
}

}  // namespace

Reply error_reply(int status, const std::string& what) { return {status, "{\"error\": " + json_string(what) + "}"}; }

Reply queue_json(store::Database& db) {
  store::ReadTransaction snapshot(db);
  std::string body = "{\"counts\": {";
  bool first = true;
  for (const auto& [state, count] : db.queue_counts()) {
    body += std::string(first ? "" : ", ") + json_string(store::to_string(state)) + ": " + std::to_string(count);
    first = false;
  }
  body += "}, \"running\": [";
  first = true;
  for (const auto& queued : db.list_jobs({{store::JobState::running}, {}, {}, {}})) {
    const auto attempts = db.attempts_of_job(queued.job.id);
    if (attempts.empty()) continue;
    const auto& run = attempts.back();
    body += std::string(first ? "" : ", ") + "{" + job_fields(queued.job) + ", \"run\": " + std::to_string(run.run_id) +
            ", \"device\": " + json_string(run.device) + ", \"worker\": " + json_string(run.worker) +
            ", \"host\": " + json_string(run.host) + ", \"started_at\": " + json_string(run.started_at) +
            ", \"heartbeat_at\": " + json_string(run.heartbeat_at) + "}";
    first = false;
  }
  body += "], \"failed\": [";
  first = true;
  for (const auto& queued : db.list_jobs({{store::JobState::failed}, {}, {}, {}})) {
    body += std::string(first ? "" : ", ") + "{" + job_fields(queued.job) + ", \"attempts\": [";
    bool first_attempt = true;
    for (const auto& run : db.attempts_of_job(queued.job.id)) {
      body += std::string(first_attempt ? "" : ", ") + "{\"run\": " + std::to_string(run.run_id) +
              ", \"status\": " + json_string(store::to_string(run.status)) + ", \"device\": " + json_string(run.device) +
              ", \"error\": " + json_string(run.error) + "}";
      first_attempt = false;
    }
    body += "]}";
    first = false;
  }
  return {200, body + "]}"};
}

Reply results_json(store::Database& db, const Params& params) {
  for (const auto& [name, value] : params)
    if (name != "where" && name != "group_by" && name != "metric" && name != "jobs")
      return error_reply(400, "unknown parameter '" + name + "' (known: where, group_by, metric, jobs)");
  results::ResultsQuery query;
  for (auto [it, end] = params.equal_range("where"); it != end; ++it) query.where.push_back(it->second);
  query.group_by = words_of(params, "group_by");
  query.metrics = words_of(params, "metric");
  const auto jobs = params.find("jobs");
  query.per_job = jobs != params.end() && jobs->second != "0";
  try {
    store::ReadTransaction snapshot(db);
    return {200, results::render(results::results_for(db, query, /*compact=*/false), results::Format::json)};
  } catch (const store::QueryError& e) {
    return error_reply(400, e.what());
  }
}

}  // namespace attnlab::serve
