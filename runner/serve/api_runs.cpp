// GET /api/runs, /api/run and /api/curves: the runs with their results, one run in full (its
// configuration, environment, plugins, attempts, results and every curve), and curves of several
// runs or their mean over seeds (what `attnlab curves` selects and averages).
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "attnlab/query.hpp"
#include "results/curves_query.hpp"
#include "results/formats.hpp"
#include "results/sweep.hpp"
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

// Labels that tell the runs shown apart: each run's method, dataset and values of `keys` (the
// grouping keys, else a sweep's) as parts ("performer", "listops", "lr=0.001"); a part every run
// has is said once (`shared`, above the chart), a run's label holds the rest, whole. A key a run
// lacks (another dataset's) is no part of its label: never "sparsity=-".
struct Labels {
  std::string shared;              // "performer listops": what every line shown has
  std::vector<std::string> each;   // per run: what differs
};

Labels differing_labels(store::ResultsReader& db, const std::vector<results::RunCurve>& runs, const std::vector<std::string>& keys) {
  std::map<std::int64_t, std::vector<std::string>> values;  // by job: one per key
  if (!keys.empty()) {
    store::Selection selection;
    selection.group_by = keys;
    for (auto& row : store::select_jobs(db, selection)) values[row.job_id] = std::move(row.group);
  }
  std::vector<std::vector<std::string>> parts;
  for (const auto& run : runs) {
    auto& mine = parts.emplace_back(std::vector<std::string>{run.method, run.dataset});
    auto& value = values[run.job_id];
    value.resize(keys.size());  // a job the selection missed: ""
    for (std::size_t k = 0; k < keys.size(); ++k)
      mine.push_back(value[k].empty() ? "" : results::key_value_label(keys[k], value[k]));
  }
  Labels labels;
  labels.each.resize(runs.size());
  const auto join = [](std::string& to, const std::string& part) { to += (to.empty() || part.empty() ? "" : " ") + part; };
  for (std::size_t p = 0; !runs.empty() && p < parts.front().size(); ++p) {
    const bool everywhere = std::all_of(parts.begin(), parts.end(), [&](const auto& run) { return run[p] == parts.front()[p]; });
    if (everywhere) {
      join(labels.shared, parts.front()[p]);
      continue;
    }
    for (std::size_t i = 0; i < runs.size(); ++i) join(labels.each[i], parts[i][p]);
  }
  return labels;
}

// `labels` made unique: the seed added where two still read the same, then the run; a label left
// empty (a run alone) is its seed.
std::vector<std::string> told_apart(const std::vector<results::RunCurve>& runs, std::vector<std::string> labels) {
  const auto add_where_shared = [&](const std::function<std::string(const results::RunCurve&)>& suffix) {
    std::vector<bool> shared(runs.size());
    for (std::size_t i = 0; i < runs.size(); ++i) shared[i] = std::count(labels.begin(), labels.end(), labels[i]) > 1;
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (shared[i]) labels[i] += (labels[i].empty() ? "" : " ") + suffix(runs[i]);
  };
  const auto seed = [](const results::RunCurve& run) { return "seed " + std::to_string(run.seed); };
  add_where_shared(seed);
  add_where_shared([](const results::RunCurve& run) { return "(run " + std::to_string(run.run_id) + ")"; });
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (labels[i].empty()) labels[i] = seed(runs[i]);  // one run: everything else is shared
  return labels;
}

// The grouping keys a curves answer's labels draw from: the ones asked for, else a sweep's.
std::vector<std::string> label_keys(store::ResultsReader& db, const results::CurvesQuery& query,
                                    const std::vector<results::RunCurve>& runs) {
  std::vector<std::string> keys;
  for (const auto& key : query.group_by)
    if (key != "method" && key != "dataset" && key != "seed") keys.push_back(key);
  if (!query.group_by.empty()) return keys;
  std::vector<std::int64_t> jobs;
  for (const auto& run : runs) jobs.push_back(run.job_id);
  return store::keys_varying_within_groups(db, jobs);
}

}  // namespace

// A method's own setting (methods.skyformer.landmarks) is compared with the same setting of the
// other methods (methods.nystromformer.landmarks) as one key, "methods.*.landmarks": each run's
// value is its own method's.
std::string across_methods(const std::string& key) {
  const auto dot = key.rfind("methods.", 0) == 0 ? key.find('.', 8) : std::string::npos;
  return dot == std::string::npos ? key : "methods.*" + key.substr(dot);
}

// The runs table's default columns: the config keys whose values differ among these jobs (method,
// dataset and seed aside, which the table shows anyway), a method's own setting as methods.*.NAME;
// and each job's values of them, {key: value} in key order, "" where the job lacks the key (none at
// all when no key differs). Two reads: the distinct (key, value) pairs of the jobs, then the jobs'
// values of the keys that differ (a statement per key and a scan per read of every key's name, as
// before, took ten times the rest of the answer on a week's database of 500 runs).
std::map<std::int64_t, json> differing_key_values(store::ResultsReader& db, const std::vector<std::int64_t>& jobs) {
  std::map<std::int64_t, json> out;
  if (jobs.size() < 2) return out;
  std::map<std::string, std::set<std::string>> values;  // by key as shown
  std::map<std::string, std::string> shown_as;          // key as stored -> as shown
  for (auto& [key, value] : store::config_key_values(db, jobs)) {
    if (store::is_builtin_key(key)) continue;
    const auto& shown = shown_as.emplace(key, across_methods(key)).first->second;
    values[shown].insert(std::move(value));
  }
  std::vector<std::string> keys, stored;  // both sorted
  for (const auto& [key, seen] : values)
    if (seen.size() > 1) keys.push_back(key);
  if (keys.empty()) return out;
  for (const auto& [key, shown] : shown_as)
    if (std::binary_search(keys.begin(), keys.end(), shown)) stored.push_back(key);
  json empty = json::object();
  for (const auto& key : keys) empty[key] = "";
  for (const auto job : jobs) out[job] = empty;
  // by job then stored key: a job with two of a methods.*.NAME's keys shows the last, as key_values
  for (const auto& p : store::job_params(db, jobs, stored))
    if (!p.value.empty()) out[p.job_id][shown_as.at(p.key)] = p.value;
  return out;
}

// Each run's values of `keys`, by job: {key: value}, "" where the job lacks the key; a
// methods.*.NAME key gives the job's own method's value.
std::map<std::int64_t, json> key_values(store::ResultsReader& db, const std::vector<std::string>& keys) {
  std::map<std::int64_t, json> out;
  if (keys.empty()) return out;
  std::vector<std::string> stored;       // the keys as the database has them
  std::vector<std::size_t> shown_as;     // which of `keys` each stands for
  const auto all = store::config_keys(db);
  for (std::size_t k = 0; k < keys.size(); ++k) {
    if (keys[k].rfind("methods.*.", 0) != 0) {
      stored.push_back(keys[k]), shown_as.push_back(k);
      continue;
    }
    for (const auto& key : all)
      if (across_methods(key) == keys[k]) stored.push_back(key), shown_as.push_back(k);
  }
  store::Selection selection;
  selection.group_by = stored;
  for (const auto& row : store::select_jobs(db, selection)) {
    json values = json::object();
    for (const auto& key : keys) values[key] = "";
    for (std::size_t k = 0; k < stored.size(); ++k)
      if (!row.group[k].empty()) values[keys[shown_as[k]]] = row.group[k];
    out[row.job_id] = std::move(values);
  }
  return out;
}

namespace {

// held=1-40,42,43:1200: what a page polling the same runs or curves holds already. RUN or
// FIRST-LAST: runs it holds whole (they had ended: a row comes back as its id, "unchanged", and its
// config columns; a curve without points); RUN:STEP: a curve held up to that step (its points
// after it, with "after_step").
std::map<std::int64_t, std::int64_t> held_runs(const Params& params) {
  constexpr std::int64_t kWhole = std::numeric_limits<std::int64_t>::max(), kMostRuns = 100000;
  std::map<std::int64_t, std::int64_t> held;
  for (const auto& word : words(params, "held")) {
    const auto bad = [&] { return BadRequest("parameter 'held': '" + word + "' is not RUN, FIRST-LAST or RUN:STEP"); };
    const auto number = [&](const std::string& text) {
      const auto n = integer({{"held", text}}, "held");
      if (!n || *n < 0) throw bad();
      return *n;
    };
    const auto dash = word.find('-', 1), colon = word.find(':');
    if (colon != std::string::npos) {
      held[number(word.substr(0, colon))] = number(word.substr(colon + 1));
    } else if (dash != std::string::npos) {
      const std::int64_t first = number(word.substr(0, dash)), last = number(word.substr(dash + 1));
      if (last < first || last - first + static_cast<std::int64_t>(held.size()) > kMostRuns) throw bad();
      for (std::int64_t id = first; id <= last; ++id) held[id] = kWhole;
    } else {
      held[number(word)] = kWhole;
    }
    if (static_cast<std::int64_t>(held.size()) > kMostRuns) throw bad();
  }
  return held;
}

}  // namespace

Reply runs_json(store::ResultsReader& db, const Params& params) {
  return answer_with(db, params, {"where", "status", "columns", "held"}, [&] {
    const auto held = held_runs(params);  // ended runs a polling page holds: their rows come as ids
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
    std::vector<store::RunSummary> shown;
    for (auto& run : db.run_summaries()) {
      if (!where.empty() && !jobs.count(run.job_id)) continue;
      if (!statuses.empty() && std::find(statuses.begin(), statuses.end(), store::to_string(run.status)) == statuses.end())
        continue;
      shown.push_back(std::move(run));
    }
    // columns=KEY,...: those config keys' values per run ("params"); by default the keys that differ
    std::map<std::int64_t, json> values_by_job;
    if (params.count("columns")) {
      values_by_job = key_values(db, words(params, "columns"));
    } else {
      std::set<std::int64_t> shown_jobs;
      for (const auto& run : shown) shown_jobs.insert(run.job_id);
      values_by_job = differing_key_values(db, std::vector<std::int64_t>(shown_jobs.begin(), shown_jobs.end()));
    }
    json runs = json::array();
    for (const auto& run : shown) {
      const bool unchanged = held.count(run.run_id) && run.status != store::RunStatus::running;
      json row = unchanged ? json{{"run", run.run_id}, {"unchanged", true}} : summary_json(run);
      const auto it = values_by_job.find(run.job_id);
      row["params"] = it == values_by_job.end() ? json::object() : it->second;  // the columns may change
      runs.push_back(std::move(row));
    }
    return dump(runs);
  });
}

Reply run_json(store::ResultsReader& db, const Params& params) {
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
                          {"pid", env.pid},
                          {"step_mode", env.step_mode},
                          {"warnings", env.warnings}};
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

namespace {

// JSON as dump() (params.hpp) writes it, built piece by piece: the points of hundreds of curves go
// straight into the answer's text, never into a tree of a JSON value per number. A tree held an
// array and three values per point: most of a curves answer's time and memory (a week's training
// loss, 521,000 points, held about 100 MB on the way to 16 MB of text).
class JsonText {
 public:
  JsonText() : out_(text_), serializer_(out_, ' ', json::error_handler_t::replace) {}
  // `object` without its closing brace, for fields written after it
  void open(const json& object) {
    value(object);
    text_.pop_back();
  }
  void raw(const char* text) { text_ += text; }
  void value(const json& value) { serializer_.dump(value, false, false, 0); }
  // [[a, b, ...], ...]: each point's numbers as one JSON array
  template <typename Points, typename Numbers>
  void points(const Points& points, Numbers numbers) {
    text_ += '[';
    for (std::size_t i = 0; i < points.size(); ++i) {
      text_ += i ? ",[" : "[";
      bool first = true;
      numbers(points[i], [&](const json& number) {
        if (!first) text_ += ',';
        first = false;
        value(number);
      });
      text_ += ']';
    }
    text_ += ']';
  }
  std::string take() { return std::move(text_); }

 private:
  std::string text_;
  nlohmann::detail::output_adapter<char, std::string> out_;
  nlohmann::detail::serializer<json> serializer_;
};

}  // namespace

Reply curves_json(store::ResultsReader& db, const Params& params) {
  return answer_with(db, params, {"run", "where", "split", "metric", "mean", "group_by", "held"}, [&] {
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
    query.leave_out_empty = true;  // a failed run never blocks the chart: it is left out, and named
    query.running_too = true;      // a live page: a running job's curve so far, each poll its new points
    query.held = held_runs(params);
    const auto answer = results::curves_for(db, query);
    const auto keys = label_keys(db, query, answer.runs);
    const auto labels = differing_labels(db, answer.runs, keys);
    const auto short_labels = told_apart(answer.runs, labels.each);
    // {"split", "metric", "label", "shared", "runs", "means", "jobs_without_run", "left_out"}, as
    // one dump() of the whole would write it
    JsonText out;
    out.open({{"split", query.split}, {"metric", query.name}, {"label", results::curve_label(query.split, query.name)},
              {"shared", labels.shared}});
    out.raw(",\"runs\":[");
    for (std::size_t i = 0; i < answer.runs.size(); ++i) {
      const auto& run = answer.runs[i];
      if (i) out.raw(",");
      out.open({{"run", run.run_id}, {"job", run.job_id}, {"method", run.method}, {"dataset", run.dataset},
                {"seed", run.seed}, {"group", run.group}, {"status", store::to_string(run.status)},
                {"label", results::legend(run)}, {"short_label", short_labels[i]}});
      out.raw(",\"points\":");
      out.points(run.points, [](const results::CurveSample& p, const auto& number) {
        number(p.step), number(p.wall_seconds), number(p.value);
      });
      if (run.after_step == std::numeric_limits<std::int64_t>::max()) {
        out.raw(",\"unchanged\":true");
      } else if (run.after_step) {
        out.raw(",\"after_step\":");
        out.value(*run.after_step);
      }
      out.raw("}");
    }
    out.raw("],\"means\":[");
    for (std::size_t m = 0; m < answer.means.size(); ++m) {
      const auto& mean = answer.means[m];
      // a mean's label: its runs' (theirs differ by seed and run only)
      std::string short_label;
      for (std::size_t i = 0; i < answer.runs.size(); ++i)
        if (answer.runs[i].run_id == mean.run_ids.front()) short_label = labels.each[i];
      short_label += std::string(short_label.empty() ? "" : " ") + "(" + std::to_string(mean.run_ids.size()) +
                     (mean.run_ids.size() == 1 ? " run)" : " runs, mean ± std)");
      if (m) out.raw(",");
      out.open({{"method", mean.method}, {"dataset", mean.dataset}, {"group", mean.group},
                {"runs", mean.run_ids}, {"seeds", mean.seeds}, {"label", results::legend(mean)},
                {"short_label", short_label}});
      out.raw(",\"points\":");
      out.points(mean.points, [](const results::MeanCurvePoint& p, const auto& number) {
        number(p.step), number(p.wall_seconds), number(p.mean), number(p.std), number(p.min), number(p.max), number(p.n);
      });
      out.raw("}");
    }
    out.raw("],\"jobs_without_run\":");
    out.value(answer.jobs_without_run);
    out.raw(",\"left_out\":");
    out.value(answer.left_out);
    out.raw("}");
    return out.take();
  });
}

}  // namespace attnlab::serve
