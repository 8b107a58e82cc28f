// select_jobs: the rows of `job_outcomes` a Selection asks for. The statement's text is built from
// constant fragments (filter.cpp's, and one placeholder per group key); keys, values and metric
// names are bound.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

#include "attnlab/query.hpp"
#include "access.hpp"
#include "builtin_keys.hpp"
#include "sqlite.hpp"

namespace attnlab::store {
namespace {

std::string json_array(const std::vector<std::string>& words) {
  std::string out = "[";
  for (std::size_t i = 0; i < words.size(); ++i) {
    out += i ? ",\"" : "\"";
    for (char c : words[i]) {
      if (c == '"' || c == '\\') out += '\\';
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
        continue;
      }
      out += c;
    }
    out += '"';
  }
  return out + "]";
}

std::vector<std::string> column_values(ResultsReader& db, const char* sql) {
  sql::Statement st(sqlite_handle(db), db.path(), sql);
  std::vector<std::string> out;
  while (st.step()) out.push_back(st.column_text(0));
  return out;
}

// A key or metric nobody has is a typo far more often than a question: say which ones exist.
[[noreturn]] void unknown(const std::string& what, const std::string& name, const std::vector<std::string>& known) {
  std::string line = "unknown " + what + " '" + name + "'";
  std::vector<std::string> close;
  for (const auto& k : known)
    if (k.find(name) != std::string::npos || name.find(k) != std::string::npos ||
        (k.size() > 3 && name.size() > 3 && k.substr(k.size() - 3) == name.substr(name.size() - 3)))
      close.push_back(k);
  const auto& list = close.empty() || close.size() > 8 ? known : close;
  if (list.empty()) throw QueryError(line + " (the database has none)");
  line += close.empty() || close.size() > 8 ? " (the database has: " : " (did you mean: ";
  for (std::size_t i = 0; i < list.size() && i < 40; ++i) line += (i ? ", " : "") + list[i];
  throw QueryError(line + (list.size() > 40 ? ", ...)" : ")"));
}

}  // namespace

std::vector<std::string> config_keys(ResultsReader& db) {
  return column_values(db, "SELECT DISTINCT key FROM job_params ORDER BY key");
}

namespace {

// Each config row (key, value) of `job_ids`, as `row(i, key, value)` with i the job's place in
// `job_ids` (the texts valid for the call only). Where the jobs are most of the database's, one scan
// of the table in storage order; otherwise each job's rows through the primary key (job_id, key),
// which for every job costs an index search and a table search per row: 7 ms against 2 ms for a
// week's 33,000 rows. Reading rows this way and telling them apart in C++ replaced SQL's DISTINCT
// and GROUP BY, which sorted every row in a temporary b-tree (10 to 25 ms each on those rows).
template <typename Row>
void each_config_row(ResultsReader& db, const std::vector<std::int64_t>& job_ids, Row&& row) {
  if (job_ids.empty()) return;
  std::unordered_map<std::int64_t, std::size_t> place;
  place.reserve(job_ids.size());
  for (std::size_t i = 0; i < job_ids.size(); ++i) place.emplace(job_ids[i], i);
  std::int64_t jobs_stored = 0;
  {
    sql::Statement last(sqlite_handle(db), db.path(), "SELECT coalesce(max(id), 0) FROM jobs");
    if (last.step()) jobs_stored = last.column_int64(0);
  }
  const bool scan = static_cast<std::int64_t>(place.size()) * 4 > jobs_stored;
  sql::Statement st(sqlite_handle(db), db.path(),
                    scan ? "SELECT job_id, key, value FROM job_params"
                         : "SELECT job_id, key, value FROM job_params WHERE job_id IN (SELECT value FROM json_each(?1))");
  if (!scan) st.bind(1, sql::json_array(job_ids));
  std::int64_t last_job = -1;  // a job's rows come together: one look-up per job
  const std::size_t* last_place = nullptr;
  while (st.step()) {
    const std::int64_t job = st.column_int64(0);
    if (job != last_job) {
      const auto it = place.find(job);
      last_job = job, last_place = it == place.end() ? nullptr : &it->second;
    }
    if (last_place) row(*last_place, st.column_view(1), st.column_view(2));
  }
}

// Names seen, each stored once: a number per distinct text, looked up without a copy.
class Interned {
 public:
  std::size_t operator()(std::string_view text) {
    const auto it = index_.find(text);
    if (it != index_.end()) return it->second;
    names_.emplace_back(text);
    return index_.emplace(names_.back(), names_.size() - 1).first->second;
  }
  const std::string& name(std::size_t i) const { return names_[i]; }
  std::size_t size() const { return names_.size(); }

 private:
  std::deque<std::string> names_;  // a deque: its strings never move, so the views stay valid
  std::unordered_map<std::string_view, std::size_t> index_;
};

}  // namespace

std::vector<std::string> keys_varying_within_groups(ResultsReader& db, const std::vector<std::int64_t>& job_ids) {
  // Each job's group: its (method, dataset).
  std::vector<std::size_t> group_of(job_ids.size(), 0);
  {
    std::unordered_map<std::int64_t, std::size_t> place;
    for (std::size_t i = 0; i < job_ids.size(); ++i) place.emplace(job_ids[i], i);
    std::map<std::pair<std::string, std::string>, std::size_t> groups;
    sql::Statement st(sqlite_handle(db), db.path(),
                      "SELECT id, method, dataset FROM jobs WHERE id IN (SELECT value FROM json_each(?1))");
    st.bind(1, sql::json_array(job_ids));
    while (st.step())
      group_of[place.at(st.column_int64(0))] =
          groups.emplace(std::make_pair(st.column_text(1), st.column_text(2)), groups.size()).first->second;
  }
  // Not the seed (what a group summarises over), nor what never changes a job's numbers.
  static const std::set<std::string, std::less<>> never = {"method", "dataset", "seed", "train.checkpoint_every",
                                                           "train.accuracy_checkpoints"};
  struct Seen {
    std::string first;     // the first value met in the group
    bool differs = false;  // another value met since
  };
  Interned keys;
  std::vector<bool> counted;  // per key: not one of `never`
  std::unordered_map<std::uint64_t, Seen> seen;  // by group << 32 | key
  std::set<std::string> varying;
  each_config_row(db, job_ids, [&](std::size_t job, std::string_view key_text, std::string_view value) {
    const std::size_t key = keys(key_text);
    if (key == counted.size()) counted.push_back(!never.count(key_text));
    if (!counted[key]) return;
    const auto [it, first] = seen.try_emplace(static_cast<std::uint64_t>(group_of[job]) << 32 | key);
    if (first) {
      it->second.first = value;
    } else if (!it->second.differs && it->second.first != value) {
      it->second.differs = true;
      varying.insert(keys.name(key));
    }
  });
  return {varying.begin(), varying.end()};
}

std::vector<std::pair<std::string, std::string>> config_key_values(ResultsReader& db, const std::vector<std::int64_t>& job_ids) {
  Interned keys;
  std::vector<std::set<std::string, std::less<>>> values;  // per key
  each_config_row(db, job_ids, [&](std::size_t, std::string_view key_text, std::string_view value) {
    const std::size_t key = keys(key_text);
    if (key == values.size()) values.emplace_back();
    if (values[key].find(value) == values[key].end()) values[key].emplace(value);
  });
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t key = 0; key < keys.size(); ++key)
    for (const auto& value : values[key]) out.emplace_back(keys.name(key), value);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<JobParam> job_params(ResultsReader& db, const std::vector<std::int64_t>& job_ids, const std::vector<std::string>& keys) {
  // the primary key (job_id, key) finds each pair: no scan of the other keys
  sql::Statement st(sqlite_handle(db), db.path(),
                    "SELECT job_id, key, value FROM job_params WHERE job_id IN (SELECT value FROM json_each(?1)) "
                    "AND key IN (SELECT value FROM json_each(?2)) ORDER BY job_id, key");
  st.bind(1, sql::json_array(job_ids)).bind(2, json_array(keys));
  std::vector<JobParam> out;
  while (st.step()) out.push_back({st.column_int64(0), st.column_text(1), st.column_text(2)});
  return out;
}

std::vector<std::string> config_values(ResultsReader& db, const std::vector<std::int64_t>& job_ids, const std::string& key) {
  std::string ids = "[";
  for (std::size_t i = 0; i < job_ids.size(); ++i) ids += (i ? "," : "") + std::to_string(job_ids[i]);
  sql::Statement st(sqlite_handle(db), db.path(),
                    "SELECT DISTINCT value FROM job_params WHERE job_id IN (SELECT value FROM json_each(?1)) AND key = ?2 "
                    "ORDER BY value");
  st.bind(1, ids + "]");
  st.bind(2, key);
  std::vector<std::string> values;
  while (st.step()) values.push_back(st.column_text(0));
  return values;
}

std::vector<ExperimentJobStates> job_states_by_experiment(ResultsReader& db) {
  sql::Statement st(sqlite_handle(db), db.path(),
                    "SELECT e.name, j.state, COUNT(DISTINCT j.id) FROM experiment_jobs AS ej "
                    "JOIN experiments AS e ON e.id = ej.experiment_id JOIN jobs AS j ON j.id = ej.job_id "
                    "GROUP BY e.name, j.state ORDER BY (SELECT min(id) FROM experiments WHERE name = e.name), j.state");
  std::vector<ExperimentJobStates> out;
  while (st.step()) {
    if (out.empty() || out.back().experiment != st.column_text(0)) out.push_back({st.column_text(0), {}});
    out.back().states.emplace_back(st.column_text(1), st.column_int64(2));
  }
  return out;
}

std::vector<std::string> result_names(ResultsReader& db) {
  return column_values(db, "SELECT DISTINCT name FROM results ORDER BY name");
}

std::vector<std::string> run_environments(ResultsReader& db, const std::vector<std::int64_t>& run_ids) {
  std::string ids = "[";
  for (std::size_t i = 0; i < run_ids.size(); ++i) ids += (i ? "," : "") + std::to_string(run_ids[i]);
  sql::Statement st(sqlite_handle(db), db.path(),
                    "SELECT coalesce(device, '?'), coalesce(device_name, ''), coalesce(threads, 0), "
                    "coalesce(torch_version, '?'), COUNT(*) FROM runs WHERE id IN (SELECT value FROM json_each(?)) "
                    "GROUP BY 1, 2, 3, 4 ORDER BY 5 DESC, 1, 2, 3, 4");
  st.bind(1, ids + "]");
  std::vector<std::string> out;
  while (st.step()) {
    const std::string name = st.column_text(1);
    const std::int64_t threads = st.column_int64(2), runs = st.column_int64(4);
    out.push_back(st.column_text(0) + (name.empty() ? "" : " (" + name + ")") +
                  (threads ? ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") : "") +
                  ", LibTorch " + st.column_text(3) + ": " + std::to_string(runs) + (runs == 1 ? " run" : " runs"));
  }
  return out;
}

namespace {

// Unknown names are refused before the query: they would silently select nothing.
void refuse_unknown_names(ResultsReader& db, const Selection& selection, const std::vector<CompiledFilter>& filters) {
  std::vector<std::string> keys_named;
  for (const auto& f : filters) keys_named.insert(keys_named.end(), f.config_keys.begin(), f.config_keys.end());
  for (const auto& g : selection.group_by)
    if (!builtin_column(g)) keys_named.push_back(g);
  // each key looked for until its first row (a key every job has: the first job's rows), the whole
  // list of keys (a scan of every row, sorted) read only to say what a missing one might have been
  for (const auto& k : keys_named) {
    sql::Statement st(sqlite_handle(db), db.path(), "SELECT 1 FROM job_params WHERE key = ?1 LIMIT 1");
    st.bind(1, k);
    if (!st.step()) unknown("key", k, config_keys(db));
  }
  if (!selection.metrics.empty()) {
    const auto known = result_names(db);
    for (const auto& m : selection.metrics)
      if (!std::binary_search(known.begin(), known.end(), m)) unknown("metric", m, known);
  }
}

// The rows' jobs, group values and filters: one statement, every key and value bound.
std::vector<JobRow> job_rows(ResultsReader& db, const Selection& selection, const std::vector<CompiledFilter>& filters) {
  std::string sql = "SELECT o.job_id, o.run_id, o.experiment, o.method, o.dataset, o.seed, o.state";
  for (const auto& g : selection.group_by) {
    const char* column = builtin_column(g);
    sql += ", ";
    sql += column ? column : "(SELECT value FROM job_params WHERE job_id = o.job_id AND key = ?)";
  }
  sql += " FROM job_outcomes AS o";
  for (std::size_t i = 0; i < filters.size(); ++i) sql += (i ? " AND " : " WHERE ") + filters[i].sql;
  sql += " ORDER BY o.job_id";

  sql::Statement st(sqlite_handle(db), db.path(), sql.c_str());
  int index = 1;
  for (const auto& g : selection.group_by)
    if (!builtin_column(g)) st.bind(index++, g);
  for (const auto& f : filters)
    for (const auto& p : f.params) {
      using Kind = CompiledFilter::Param::Kind;
      if (p.kind == Kind::text) st.bind(index++, p.text);
      else if (p.kind == Kind::integer) st.bind(index++, p.integer);
      else st.bind(index++, p.real);
    }

  std::vector<JobRow> rows;
  const int first_group = 7;
  while (st.step()) {
    JobRow row;
    row.job_id = st.column_int64(0);
    row.run_id = st.column_is_null(1) ? 0 : st.column_int64(1);
    row.experiment = st.column_text(2);
    row.method = st.column_text(3);
    row.dataset = st.column_text(4);
    row.seed = st.column_int64(5);
    row.state = parse_job_state(st.column_text(6));
    for (std::size_t g = 0; g < selection.group_by.size(); ++g)
      row.group.push_back(st.column_text(first_group + static_cast<int>(g)));
    row.metrics.assign(selection.metrics.size(), std::nullopt);
    rows.push_back(std::move(row));
  }
  return rows;
}

// The metrics' values, read as REAL (not through JSON text): exact doubles, NULL as NaN.
void read_metrics(ResultsReader& db, const std::vector<std::string>& metrics, std::vector<JobRow>& rows) {
  sql::Statement values(sqlite_handle(db), db.path(),
                        "SELECT o.job_id, r.name, r.value FROM job_outcomes AS o JOIN results AS r ON r.run_id = o.run_id "
                        "WHERE r.name IN (SELECT value FROM json_each(?)) "
                        "AND o.job_id IN (SELECT value FROM json_each(?)) ORDER BY o.job_id");
  std::string ids = "[";
  for (std::size_t i = 0; i < rows.size(); ++i) ids += (i ? "," : "") + std::to_string(rows[i].job_id);
  values.bind(1, json_array(metrics)).bind(2, ids + "]");
  std::map<std::int64_t, std::size_t> row_of;
  for (std::size_t i = 0; i < rows.size(); ++i) row_of[rows[i].job_id] = i;
  while (values.step()) {
    auto& row = rows[row_of.at(values.column_int64(0))];
    const std::string name = values.column_text(1);
    for (std::size_t m = 0; m < metrics.size(); ++m)
      if (metrics[m] == name) row.metrics[m] = values.column_double(2);  // NULL reads as NaN
  }
}

}  // namespace

std::vector<JobRow> select_jobs(ResultsReader& db, const Selection& selection) {
  std::vector<CompiledFilter> filters;
  for (const auto& w : selection.where) filters.push_back(compile_filter(w));
  refuse_unknown_names(db, selection, filters);
  auto rows = job_rows(db, selection, filters);
  if (!selection.metrics.empty() && !rows.empty()) read_metrics(db, selection.metrics, rows);
  return rows;
}

}  // namespace attnlab::store
