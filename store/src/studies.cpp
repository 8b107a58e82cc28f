// The studies' results: attnlab bench and attnlab approx (schema version 2), attnlab spectrum
// (version 7), attnlab gradients (version 8); the rest of their provenance (version 10).
#include "attnlab/store/studies.hpp"

#include <string>

#include "access.hpp"
#include "provenance.hpp"
#include "sqlite.hpp"

namespace attnlab::store {
namespace {

// `head` with the provenance columns appended: "SELECT a, b" -> "SELECT a, b, device, ...".
std::string with_provenance(const std::string& head) { return head + ", " + kProvenanceColumns; }

void require_run(sqlite3* db, const std::string& path, std::int64_t run_id) {
  sql::Statement st(db, path, "SELECT 1 FROM runs WHERE id = ?1");
  st.bind(1, run_id);
  if (!st.step()) throw StoreError(path + ": no run with id " + std::to_string(run_id));
}

const std::string kBenchSelect =
    with_provenance("SELECT method, dataset, seq_len, batch_size, steps_timed, step_seconds_median, step_seconds_min, "
                    "step_seconds_max, peak_memory_bytes, status, error, config_toml, created_at, id, "
                    "host_seconds_median, ops_per_step, step_mode, concurrent") +
    " FROM bench_results";

BenchResult bench_row(sql::Statement& st) {
  BenchResult r;
  r.method = st.column_text(0);
  r.dataset = st.column_text(1);
  r.seq_len = st.column_int64(2);
  r.batch_size = st.column_int64(3);
  r.steps_timed = st.column_int64(4);
  r.step_seconds_median = st.column_double(5);
  r.step_seconds_min = st.column_double(6);
  r.step_seconds_max = st.column_double(7);
  r.peak_memory_bytes = st.column_double(8);
  r.status = st.column_text(9);
  r.error = st.column_text(10);
  r.config_toml = st.column_text(11);
  r.created_at = st.column_text(12);
  r.id = st.column_int64(13);
  r.host_seconds_median = st.column_double(14);
  r.ops_per_step = st.column_int64(15);
  r.step_mode = st.column_text(16);
  r.concurrent = st.column_int64(17);
  read_provenance(st, 18, r);
  return r;
}

}  // namespace

std::int64_t add_bench_result(Database& db, const BenchResult& r) {
  sqlite3* handle = sqlite_handle(db);
  sql::Transaction tx(handle, db.path());
  const std::string insert =
      with_provenance("INSERT INTO bench_results (method, dataset, seq_len, batch_size, steps_timed, step_seconds_median, "
                      "step_seconds_min, step_seconds_max, peak_memory_bytes, status, error, config_toml, "
                      "host_seconds_median, ops_per_step, step_mode, concurrent") +
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)";
  sql::Statement st(handle, db.path(), insert.c_str());
  st.bind(1, r.method).bind(2, r.dataset).bind(3, r.seq_len).bind(4, r.batch_size).bind(5, r.steps_timed)
      .bind(6, r.step_seconds_median).bind(7, r.step_seconds_min).bind(8, r.step_seconds_max)
      .bind(9, r.peak_memory_bytes).bind(10, r.status).bind_text_or_null(11, r.error).bind(12, r.config_toml)
      .bind(13, r.host_seconds_median);
  if (r.ops_per_step > 0) st.bind(14, r.ops_per_step);
  else st.bind_null(14);
  st.bind_text_or_null(15, r.step_mode).bind(16, r.concurrent);
  bind_provenance(st, 17, r);
  st.run();
  const std::int64_t id = sqlite3_last_insert_rowid(handle);
  tx.commit();
  return id;
}

std::vector<BenchResult> bench_results(ResultsReader& db) {
  const std::string select = kBenchSelect + " ORDER BY id";
  sql::Statement st(sqlite_handle(db), db.path(), select.c_str());
  std::vector<BenchResult> out;
  while (st.step()) out.push_back(bench_row(st));
  return out;
}

std::optional<BenchResult> bench_result(ResultsReader& db, std::int64_t id) {
  const std::string select = kBenchSelect + " WHERE id = ?1";
  sql::Statement st(sqlite_handle(db), db.path(), select.c_str());
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  return bench_row(st);
}

std::int64_t add_approx_results(Database& db, const std::vector<ApproxResult>& results) {
  sqlite3* handle = sqlite_handle(db);
  sql::Transaction tx(handle, db.path());
  const std::string insert =
      with_provenance("INSERT INTO approx_results (method, reference, source, param, features, seq_len, samples, "
                      "abs_error_mean, abs_error_std, rel_error_mean, rel_error_std") +
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)";
  sql::Statement st(handle, db.path(), insert.c_str());
  for (const auto& r : results) {
    st.bind(1, r.method).bind(2, r.reference).bind(3, r.source).bind(4, r.param).bind(5, r.features)
        .bind(6, r.seq_len).bind(7, r.samples).bind(8, r.abs_error_mean).bind(9, r.abs_error_std)
        .bind(10, r.rel_error_mean).bind(11, r.rel_error_std);
    bind_provenance(st, 12, r);
    st.run();
    st.reset();
  }
  tx.commit();
  return static_cast<std::int64_t>(results.size());
}

std::vector<ApproxResult> approx_results(ResultsReader& db) {
  const std::string select =
      with_provenance("SELECT method, reference, source, param, features, seq_len, samples, abs_error_mean, "
                      "abs_error_std, rel_error_mean, rel_error_std, created_at") +
      " FROM approx_results ORDER BY id";
  sql::Statement st(sqlite_handle(db), db.path(), select.c_str());
  std::vector<ApproxResult> out;
  while (st.step()) {
    ApproxResult r;
    r.method = st.column_text(0);
    r.reference = st.column_text(1);
    r.source = st.column_text(2);
    r.param = st.column_text(3);
    r.features = st.column_int64(4);
    r.seq_len = st.column_int64(5);
    r.samples = st.column_int64(6);
    r.abs_error_mean = st.column_double(7);
    r.abs_error_std = st.column_double(8);
    r.rel_error_mean = st.column_double(9);
    r.rel_error_std = st.column_double(10);
    r.created_at = st.column_text(11);
    read_provenance(st, 12, r);
    out.push_back(std::move(r));
  }
  return out;
}

void set_spectrum(Database& db, const SpectrumResult& r) {
  sqlite3* handle = sqlite_handle(db);
  const std::string& path = db.path();
  sql::Transaction tx(handle, path);
  require_run(handle, path, r.run_id);
  for (const char* remove : {"DELETE FROM spectrum_results WHERE run_id = ?1 AND layer = ?2 AND stage = ?3 AND batch = ?4",
                             "DELETE FROM spectrum_summaries WHERE run_id = ?1 AND layer = ?2 AND stage = ?3 AND batch = ?4"}) {
    sql::Statement st(handle, path, remove);
    st.bind(1, r.run_id).bind(2, r.layer).bind(3, r.stage).bind(4, r.batch);
    st.run();
  }
  {
    const std::string insert =
        with_provenance("INSERT INTO spectrum_summaries (run_id, layer, stage, batch, split, matrices, width, rows_min, "
                        "rows_max, k, rank90_mean, rank90_std, rank99_mean, rank99_std, stable_rank_mean") +
        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)";
    sql::Statement st(handle, path, insert.c_str());
    st.bind(1, r.run_id).bind(2, r.layer).bind(3, r.stage).bind(4, r.batch).bind(5, r.split).bind(6, r.matrices)
        .bind(7, r.width).bind(8, r.rows_min).bind(9, r.rows_max).bind(10, static_cast<std::int64_t>(r.values.size()))
        .bind(11, r.rank90_mean).bind(12, r.rank90_std).bind(13, r.rank99_mean).bind(14, r.rank99_std)
        .bind(15, r.stable_rank_mean);
    bind_provenance(st, 16, r);
    st.run();
  }
  sql::Statement st(handle, path,
                    "INSERT INTO spectrum_results (run_id, layer, stage, batch, idx, sigma_mean, sigma_std, normalised_mean, "
                    "normalised_std, energy_mean) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  for (std::size_t i = 0; i < r.values.size(); ++i) {
    const SpectrumValue& v = r.values[i];
    st.bind(1, r.run_id).bind(2, r.layer).bind(3, r.stage).bind(4, r.batch).bind(5, static_cast<std::int64_t>(i + 1))
        .bind(6, v.sigma_mean).bind(7, v.sigma_std).bind(8, v.normalised_mean).bind(9, v.normalised_std).bind(10, v.energy_mean);
    st.run();
    st.reset();
  }
  tx.commit();
}

std::vector<SpectrumResult> spectrum_results(ResultsReader& db, const std::vector<std::int64_t>& run_ids) {
  sqlite3* handle = sqlite_handle(db);
  // all runs, or the bound JSON array of ids (?2); ?1 says which
  const std::string select =
      with_provenance("SELECT run_id, layer, stage, batch, split, matrices, width, rows_min, rows_max, rank90_mean, "
                      "rank90_std, rank99_mean, rank99_std, stable_rank_mean, created_at") +
      " FROM spectrum_summaries WHERE ?1 = 0 OR run_id IN (SELECT value FROM json_each(?2)) "
      "ORDER BY run_id, layer, stage, batch";
  sql::Statement st(handle, db.path(), select.c_str());
  st.bind(1, static_cast<std::int64_t>(run_ids.empty() ? 0 : 1)).bind(2, sql::json_array(run_ids));
  std::vector<SpectrumResult> out;
  while (st.step()) {
    SpectrumResult r;
    r.run_id = st.column_int64(0);
    r.layer = st.column_int64(1);
    r.stage = st.column_text(2);
    r.batch = st.column_int64(3);
    r.split = st.column_text(4);
    r.matrices = st.column_int64(5);
    r.width = st.column_int64(6);
    r.rows_min = st.column_int64(7);
    r.rows_max = st.column_int64(8);
    r.rank90_mean = st.column_double(9);
    r.rank90_std = st.column_double(10);
    r.rank99_mean = st.column_double(11);
    r.rank99_std = st.column_double(12);
    r.stable_rank_mean = st.column_double(13);
    r.created_at = st.column_text(14);
    read_provenance(st, 15, r);
    out.push_back(std::move(r));
  }
  sql::Statement values(handle, db.path(),
                        "SELECT sigma_mean, sigma_std, normalised_mean, normalised_std, energy_mean FROM spectrum_results "
                        "WHERE run_id = ?1 AND layer = ?2 AND stage = ?3 AND batch = ?4 ORDER BY idx");
  for (auto& r : out) {
    values.bind(1, r.run_id).bind(2, r.layer).bind(3, r.stage).bind(4, r.batch);
    while (values.step())
      r.values.push_back({values.column_double(0), values.column_double(1), values.column_double(2), values.column_double(3),
                          values.column_double(4)});
    values.reset();
  }
  return out;
}

void set_gradient_stats(Database& db, const std::vector<GradientStats>& stats) {
  sqlite3* handle = sqlite_handle(db);
  const std::string& path = db.path();
  sql::Transaction tx(handle, path);
  const std::string insert =
      with_provenance("INSERT OR REPLACE INTO gradient_stats (run_id, mark, parameter, step, split, examples, repeats, "
                      "neurons, abs_mean, std") +
      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
  sql::Statement st(handle, path, insert.c_str());
  for (const auto& g : stats) {
    require_run(handle, path, g.run_id);
    st.bind(1, g.run_id).bind(2, g.mark).bind(3, g.parameter).bind(4, g.step).bind(5, g.split).bind(6, g.examples)
        .bind(7, g.repeats).bind(8, g.neurons).bind(9, g.abs_mean).bind(10, g.std);
    bind_provenance(st, 11, g);
    st.run();
    st.reset();
  }
  tx.commit();
}

std::vector<GradientStats> gradient_stats(ResultsReader& db, const std::vector<std::int64_t>& run_ids) {
  const std::string select =
      with_provenance("SELECT run_id, mark, parameter, step, split, examples, repeats, neurons, abs_mean, std, created_at") +
      " FROM gradient_stats WHERE ?1 = 0 OR run_id IN (SELECT value FROM json_each(?2)) ORDER BY run_id, mark, parameter";
  sql::Statement st(sqlite_handle(db), db.path(), select.c_str());
  st.bind(1, static_cast<std::int64_t>(run_ids.empty() ? 0 : 1)).bind(2, sql::json_array(run_ids));
  std::vector<GradientStats> out;
  while (st.step()) {
    GradientStats g;
    g.run_id = st.column_int64(0);
    g.mark = st.column_double(1);
    g.parameter = st.column_text(2);
    g.step = st.column_int64(3);
    g.split = st.column_text(4);
    g.examples = st.column_int64(5);
    g.repeats = st.column_int64(6);
    g.neurons = st.column_int64(7);
    g.abs_mean = st.column_double(8);
    g.std = st.column_double(9);
    g.created_at = st.column_text(10);
    read_provenance(st, 11, g);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace attnlab::store
