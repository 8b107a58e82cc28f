// GET /api/experiments: every experiment by name (its latest file when it was enqueued with
// several texts), with its description and its jobs per state, oldest first: what the page's
// picker offers, and what a script lists before it asks for one experiment's results.
#include <map>

#include <toml++/toml.h>

#include "attnlab/query.hpp"
#include "serve/params.hpp"

namespace attnlab::serve {
namespace {

using json = nlohmann::ordered_json;

// [experiment] description of an experiment file's text, "" when it has none (or does not parse:
// it parsed when it was enqueued, by another attnlab perhaps)
std::string description_of(const std::string& config_text) {
  try {
    const toml::table file = toml::parse(config_text);
    return file["experiment"]["description"].value_or(std::string());
  } catch (const toml::parse_error&) {
    return "";
  }
}

}  // namespace

Reply experiments_json(store::ResultsReader& db, const Params& params) {
  return answer_with(db, params, {}, [&] {
    std::map<std::string, json> states;  // by experiment name: jobs per state, reused ones included
    for (const auto& e : store::job_states_by_experiment(db)) {
      json counts = json::object();
      for (const auto& [state, n] : e.states) counts[state] = n;
      states[e.experiment] = std::move(counts);
    }
    std::vector<std::string> order;  // names by first appearance
    std::map<std::string, store::ExperimentFile> latest;
    for (auto& e : db.experiments()) {
      if (!latest.count(e.name)) order.push_back(e.name);
      latest[e.name] = std::move(e);
    }
    json out = json::array();
    for (const auto& name : order) {
      const auto& e = latest.at(name);
      json counts = states.count(name) ? states.at(name) : json::object();
      std::int64_t jobs = 0;
      for (const auto& [state, n] : counts.items()) jobs += n.get<std::int64_t>();
      out.push_back({{"name", name}, {"description", description_of(e.config_text)}, {"file", e.source_path},
                     {"jobs", jobs}, {"states", counts}});
    }
    return dump(out);
  });
}

}  // namespace attnlab::serve
