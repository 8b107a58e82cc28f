// GET /api/runs, /api/run and /api/curves: the runs with their results, one run in full (its
// configuration, environment, plugins, attempts, results and every curve), and curves of several
// runs or their mean over seeds (what `attnlab curves` selects and averages).
#include <algorithm>
#include <set>

#include "attnlab/query.hpp"
#include "results/curves_query.hpp"
#include "results/formats.hpp"
#include "serve/params.hpp"

namespace attnlab::serve {
namespace {

using json = nlohmann::ordered_json;

json results_object(const std::vector<std::pair<std::string, double>>& results) {
  json out = json::object();
  for (const auto& [name, value] : results) out[name] = value;
  return out;
}

json summary_json(const store::RunSummary& run) {
  return {{"run", run.run_id},         {"job", run.job_id},       {"experiment", run.experiment},
          {"method", run.method},      {"dataset", run.dataset},  {"seed", run.seed},
          {"attempt", run.attempt},    {"status", store::to_string(run.status)},
          {"device", run.device},      {"error", run.error},      {"started_at", run.started_at},
          {"finished_at", run.finished_at}, {"results", results_object(run.results)}};
}

}  // namespace

Reply runs_json(store::Database& db, const Params& params) {
  return answer_with(db, params, {"where", "status"}, [&] {
    const auto where = values(params, "where");
    std::set<std::int64_t> jobs;
    if (!where.empty()) {
      store::Selection selection;
      selection.where = where;
      for (const auto& row : store::select_jobs(db, selection)) jobs.insert(row.job_id);
    }
    const auto statuses = words(params, "status");
    for (const auto& s : statuses) {
      try {
        store::parse_run_status(s);
      } catch (const store::StoreError& e) {
        throw BadRequest(std::string("parameter 'status': ") + e.what());
      }
    }
    json runs = json::array();
    for (const auto& run : db.run_summaries()) {
      if (!where.empty() && !jobs.count(run.job_id)) continue;
      if (!statuses.empty() && std::find(statuses.begin(), statuses.end(), store::to_string(run.status)) == statuses.end())
        continue;
      runs.push_back(summary_json(run));
    }
    return dump(runs);
  });
}

Reply run_json(store::Database& db, const Params& params) {
  return answer_with(db, params, {"id"}, [&] {
    const auto id = integer(params, "id");
    if (!id) throw BadRequest("name the run: id=N");
    const auto summary = db.run_summary(*id);
    if (!summary) throw BadRequest("no run with id " + std::to_string(*id) + " in " + db.path(), 404);
    json run = summary_json(*summary);
    run["config"] = results::readable_toml(db.job(summary->job_id).config_toml);
    const auto env = db.run_environment(*id);
    run["environment"] = {{"host", env.host},
                          {"device", env.device},
                          {"device_name", env.device_name},
                          {"torch_version", env.torch_version},
                          {"attnlab_version", env.attnlab_version},
                          {"git_revision", env.git_revision},
                          {"threads", env.threads},
                          {"pid", env.pid}};
    run["plugins"] = json::array();
    for (const auto& p : env.plugins)
      run["plugins"].push_back(
          {{"kind", p.kind}, {"name", p.name}, {"version", p.version}, {"path", p.path}, {"sha256", p.sha256}});
    run["attempts"] = json::array();
    for (const auto& a : db.attempts_of_job(summary->job_id))
      run["attempts"].push_back({{"run", a.run_id}, {"attempt", a.attempt}, {"status", store::to_string(a.status)},
                                 {"host", a.host}, {"device", a.device}, {"started_at", a.started_at},
                                 {"finished_at", a.finished_at}, {"error", a.error}});
    // every curve, in (split, name, step) order: [[step, wall_seconds, value], ...] per curve
    run["curves"] = json::array();
    for (const auto& p : db.curve(*id)) {
      auto& curves = run["curves"];
      if (curves.empty() || curves.back()["split"] != p.split || curves.back()["name"] != p.name)
        curves.push_back({{"split", p.split}, {"name", p.name}, {"label", results::curve_label(p.split, p.name)},
                          {"points", json::array()}});
      curves.back()["points"].push_back({p.step, p.wall_seconds, p.value});
    }
    return dump(run);
  });
}

Reply curves_json(store::Database& db, const Params& params) {
  return answer_with(db, params, {"run", "where", "split", "metric", "mean", "group_by"}, [&] {
    results::CurvesQuery query;
    for (const auto& word : words(params, "run")) {
      const auto id = integer({{"run", word}}, "run");
      if (!id || *id <= 0) throw BadRequest("parameter 'run': '" + word + "' is not a run id");
      query.run_ids.push_back(*id);
    }
    query.where = values(params, "where");
    query.split = text(params, "split", query.split);
    query.name = text(params, "metric", query.name);
    query.group_by = words(params, "group_by");
    query.mean = flag(params, "mean");
    const auto answer = results::curves_for(db, query);
    json runs = json::array();
    for (const auto& run : answer.runs) {
      json points = json::array();
      for (const auto& p : run.points) points.push_back({p.step, p.wall_seconds, p.value});
      runs.push_back({{"run", run.run_id}, {"job", run.job_id}, {"method", run.method}, {"dataset", run.dataset},
                      {"seed", run.seed}, {"group", run.group}, {"status", store::to_string(run.status)},
                      {"label", results::legend(run)}, {"points", points}});
    }
    json means = json::array();
    for (const auto& mean : answer.means) {
      json points = json::array();
      for (const auto& p : mean.points) points.push_back({p.step, p.wall_seconds, p.mean, p.std, p.min, p.max, p.n});
      means.push_back({{"method", mean.method}, {"dataset", mean.dataset}, {"group", mean.group},
                       {"runs", mean.run_ids}, {"seeds", mean.seeds}, {"label", results::legend(mean)},
                       {"points", points}});
    }
    return dump({{"split", query.split}, {"metric", query.name}, {"label", results::curve_label(query.split, query.name)},
                 {"runs", runs}, {"means", means}, {"jobs_without_run", answer.jobs_without_run}});
  });
}

}  // namespace attnlab::serve
