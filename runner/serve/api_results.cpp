// GET /api/results, /api/table and /api/compare: the results commands' answers (the same
// functions `attnlab results`, `table` and `compare` call), as JSON.
#include "attnlab/query.hpp"
#include "results/compare.hpp"
#include "results/formats.hpp"
#include "results/paper_tables.hpp"
#include "results/results_query.hpp"
#include "serve/params.hpp"

namespace attnlab::serve {
namespace {

using json = nlohmann::ordered_json;

// A grid as the page shows it and a script reads it: "header" and "text" (the cells as a terminal
// table prints them, marks included), "rows" (what --format json prints: numbers at full
// precision, null where missing) and "notes" (the table's footnotes).
json grid_json(const results::Grid& shown, const results::Grid& data, const std::vector<std::string>& notes) {
  json text = json::array();
  for (const auto& row : shown.rows) {
    json cells = json::array();
    for (const auto& cell : row) cells.push_back(cell.text);
    text.push_back(std::move(cells));
  }
  return {{"header", shown.header}, {"text", text}, {"rows", json::parse(results::render(data, results::Format::json))},
          {"notes", notes}};
}

// experiment=NAME adds "experiment = 'NAME'" to the filters; experiment=latest names the
// experiment enqueued last (none yet: no filter); absent or "*": every experiment.
std::vector<std::string> with_experiment(store::ResultsReader& db, const Params& params, std::vector<std::string> where) {
  std::string name = text(params, "experiment", "*");
  if (name == "latest") {
    const auto all = db.experiments();
    name = all.empty() ? "*" : all.back().name;
  }
  if (name == "*" || name.empty()) return where;
  std::string quoted = "'";
  for (char c : name) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  where.push_back("experiment = " + quoted + "'");
  return where;
}

}  // namespace

Reply results_json(store::ResultsReader& db, const Params& params) {
  return answer_with(db, params, {"where", "group_by", "metric", "jobs", "experiment"}, [&] {
    results::ResultsQuery query;
    query.where = with_experiment(db, params, values(params, "where"));
    query.group_by = words(params, "group_by");
    query.metrics = words(params, "metric");
    query.per_job = flag(params, "jobs");
    return results::render(results::results_for(db, query, /*compact=*/false), results::Format::json);
  });
}

Reply table_json(store::ResultsReader& db, const Params& params) {
  return answer_with(db, params, {"table", "where", "metric"}, [&] {
    results::PaperTableOptions options;
    const auto which = results::parse_paper_table(text(params, "table", "accuracy"));
    options.where = values(params, "where");
    options.accuracy_metric = text(params, "metric", options.accuracy_metric);
    options.wide = true;
    const results::Grid wide = results::paper_table(db, which, options);
    options.wide = false;
    return dump(grid_json(wide, results::paper_table(db, which, options), wide.notes));
  });
}

Reply compare_json(store::ResultsReader& db, const Params& params) {
  return answer_with(db, params, {"a", "b", "metric", "where", "by", "pick", "ci", "level"}, [&] {
    results::CompareOptions options;
    options.a = text(params, "a", "");
    options.b = text(params, "b", "");
    if (options.a.empty() || options.b.empty()) throw BadRequest("name the two groups: a=METHOD|EXPR&b=METHOD|EXPR");
    options.metric = text(params, "metric", options.metric);
    options.where = values(params, "where");
    if (params.count("by")) options.by = words(params, "by");
    options.pick = results::parse_pick(text(params, "pick", "best-val"));
    options.interval = results::parse_interval_method(text(params, "ci", "welch"));
    const std::string level = text(params, "level", "0.95");
    try {
      std::size_t used = 0;
      options.level = std::stod(level, &used);
      if (used != level.size()) throw std::invalid_argument(level);
    } catch (const std::exception&) {
      throw BadRequest("parameter 'level': '" + level + "' is not a number");
    }
    const auto comparison = results::compare(db, options);
    return dump(grid_json(comparison.grid, comparison.grid, comparison.notes));
  });
}

}  // namespace attnlab::serve
