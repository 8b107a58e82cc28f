// The studies' results: attnlab bench and attnlab approx (schema version 2), attnlab spectrum
// (version 7), attnlab gradients (version 8).

#include "attnlab/store.hpp"
#include "sqlite.hpp"

namespace attnlab::store {

std::int64_t Database::add_bench_result(const BenchResult& r) {
  sql::Transaction tx(db_, path_);
  sql::Statement st(db_, path_,
                    "INSERT INTO bench_results (method, dataset, seq_len, batch_size, device, device_name, "
                    "torch_version, git_revision, threads, steps_timed, step_seconds_median, step_seconds_min, "
                    "step_seconds_max, peak_memory_bytes, status, error, config_toml) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)");
  st.bind(1, r.method).bind(2, r.dataset).bind(3, r.seq_len).bind(4, r.batch_size).bind(5, r.device)
      .bind_text_or_null(6, r.device_name).bind_text_or_null(7, r.torch_version).bind_text_or_null(8, r.git_revision)
      .bind(9, r.threads).bind(10, r.steps_timed).bind(11, r.step_seconds_median).bind(12, r.step_seconds_min)
      .bind(13, r.step_seconds_max).bind(14, r.peak_memory_bytes).bind(15, r.status).bind_text_or_null(16, r.error)
      .bind(17, r.config_toml);
  st.run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

namespace {

constexpr const char* kBenchColumns =
    "SELECT method, dataset, seq_len, batch_size, device, device_name, torch_version, git_revision, "
    "threads, steps_timed, step_seconds_median, step_seconds_min, step_seconds_max, "
    "peak_memory_bytes, status, error, config_toml, created_at, id FROM bench_results";

BenchResult bench_row(sql::Statement& st) {
  BenchResult r;
  r.method = st.column_text(0);
  r.dataset = st.column_text(1);
  r.seq_len = st.column_int64(2);
  r.batch_size = st.column_int64(3);
  r.device = st.column_text(4);
  r.device_name = st.column_text(5);
  r.torch_version = st.column_text(6);
  r.git_revision = st.column_text(7);
  r.threads = st.column_int64(8);
  r.steps_timed = st.column_int64(9);
  r.step_seconds_median = st.column_double(10);
  r.step_seconds_min = st.column_double(11);
  r.step_seconds_max = st.column_double(12);
  r.peak_memory_bytes = st.column_double(13);
  r.status = st.column_text(14);
  r.error = st.column_text(15);
  r.config_toml = st.column_text(16);
  r.created_at = st.column_text(17);
  r.id = st.column_int64(18);
  return r;
}

}  // namespace

std::vector<BenchResult> Database::bench_results() {
  const std::string select = std::string(kBenchColumns) + " ORDER BY id";
  sql::Statement st(db_, path_, select.c_str());
  std::vector<BenchResult> out;
  while (st.step()) out.push_back(bench_row(st));
  return out;
}

std::optional<BenchResult> Database::bench_result(std::int64_t id) {
  const std::string select = std::string(kBenchColumns) + " WHERE id = ?1";
  sql::Statement st(db_, path_, select.c_str());
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  return bench_row(st);
}

std::int64_t Database::add_approx_results(const std::vector<ApproxResult>& results) {
  sql::Transaction tx(db_, path_);
  sql::Statement st(db_, path_,
                    "INSERT INTO approx_results (method, reference, source, param, features, seq_len, samples, "
                    "abs_error_mean, abs_error_std, rel_error_mean, rel_error_std, device, torch_version, git_revision) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)");
  for (const auto& r : results) {
    st.bind(1, r.method).bind(2, r.reference).bind(3, r.source).bind(4, r.param).bind(5, r.features)
        .bind(6, r.seq_len).bind(7, r.samples).bind(8, r.abs_error_mean).bind(9, r.abs_error_std)
        .bind(10, r.rel_error_mean).bind(11, r.rel_error_std).bind_text_or_null(12, r.device)
        .bind_text_or_null(13, r.torch_version).bind_text_or_null(14, r.git_revision);
    st.run();
    st.reset();
  }
  tx.commit();
  return static_cast<std::int64_t>(results.size());
}

std::vector<ApproxResult> Database::approx_results() {
  sql::Statement st(db_, path_,
                    "SELECT method, reference, source, param, features, seq_len, samples, abs_error_mean, abs_error_std, "
                    "rel_error_mean, rel_error_std, device, torch_version, git_revision, created_at "
                    "FROM approx_results ORDER BY id");
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
    r.device = st.column_text(11);
    r.torch_version = st.column_text(12);
    r.git_revision = st.column_text(13);
    r.created_at = st.column_text(14);
    out.push_back(std::move(r));
  }
  return out;
}

void Database::set_spectrum(const SpectrumResult& r) {
  sql::Transaction tx(db_, path_);
  {
    sql::Statement st(db_, path_, "SELECT 1 FROM runs WHERE id = ?1");
    st.bind(1, r.run_id);
    if (!st.step()) throw StoreError(path_ + ": no run with id " + std::to_string(r.run_id));
  }
  for (const char* remove : {"DELETE FROM spectrum_results WHERE run_id = ?1 AND layer = ?2 AND stage = ?3 AND batch = ?4",
                             "DELETE FROM spectrum_summaries WHERE run_id = ?1 AND layer = ?2 AND stage = ?3 AND batch = ?4"}) {
    sql::Statement st(db_, path_, remove);
    st.bind(1, r.run_id).bind(2, r.layer).bind(3, r.stage).bind(4, r.batch);
    st.run();
  }
  {
    sql::Statement st(db_, path_,
                      "INSERT INTO spectrum_summaries (run_id, layer, stage, batch, split, matrices, width, rows_min, rows_max, k, "
                      "rank90_mean, rank90_std, rank99_mean, rank99_std, stable_rank_mean, device, torch_version, git_revision) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)");
    st.bind(1, r.run_id).bind(2, r.layer).bind(3, r.stage).bind(4, r.batch).bind(5, r.split).bind(6, r.matrices)
        .bind(7, r.width).bind(8, r.rows_min).bind(9, r.rows_max).bind(10, static_cast<std::int64_t>(r.values.size()))
        .bind(11, r.rank90_mean).bind(12, r.rank90_std).bind(13, r.rank99_mean).bind(14, r.rank99_std)
        .bind(15, r.stable_rank_mean).bind_text_or_null(16, r.device).bind_text_or_null(17, r.torch_version)
        .bind_text_or_null(18, r.git_revision);
    st.run();
  }
  sql::Statement st(db_, path_,
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

std::vector<SpectrumResult> Database::spectrum_results(const std::vector<std::int64_t>& run_ids) {
  // all runs, or the bound JSON array of ids (?2); ?1 says which
  sql::Statement st(db_, path_,
                    "SELECT run_id, layer, stage, batch, split, matrices, width, rows_min, rows_max, rank90_mean, rank90_std, "
                    "rank99_mean, rank99_std, stable_rank_mean, device, torch_version, git_revision, created_at "
                    "FROM spectrum_summaries WHERE ?1 = 0 OR run_id IN (SELECT value FROM json_each(?2)) "
                    "ORDER BY run_id, layer, stage, batch");
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
    r.device = st.column_text(14);
    r.torch_version = st.column_text(15);
    r.git_revision = st.column_text(16);
    r.created_at = st.column_text(17);
    out.push_back(std::move(r));
  }
  sql::Statement values(db_, path_,
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

void Database::set_gradient_stats(const std::vector<GradientStats>& stats) {
  sql::Transaction tx(db_, path_);
  sql::Statement run(db_, path_, "SELECT 1 FROM runs WHERE id = ?1");
  sql::Statement st(db_, path_,
                    "INSERT OR REPLACE INTO gradient_stats (run_id, mark, parameter, step, split, examples, repeats, neurons, "
                    "abs_mean, std, device, torch_version, git_revision) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
  for (const auto& g : stats) {
    run.bind(1, g.run_id);
    if (!run.step()) throw StoreError(path_ + ": no run with id " + std::to_string(g.run_id));
    run.reset();
    st.bind(1, g.run_id).bind(2, g.mark).bind(3, g.parameter).bind(4, g.step).bind(5, g.split).bind(6, g.examples)
        .bind(7, g.repeats).bind(8, g.neurons).bind(9, g.abs_mean).bind(10, g.std).bind_text_or_null(11, g.device)
        .bind_text_or_null(12, g.torch_version).bind_text_or_null(13, g.git_revision);
    st.run();
    st.reset();
  }
  tx.commit();
}

std::vector<GradientStats> Database::gradient_stats(const std::vector<std::int64_t>& run_ids) {
  sql::Statement st(db_, path_,
                    "SELECT run_id, mark, parameter, step, split, examples, repeats, neurons, abs_mean, std, device, "
                    "torch_version, git_revision, created_at FROM gradient_stats "
                    "WHERE ?1 = 0 OR run_id IN (SELECT value FROM json_each(?2)) ORDER BY run_id, mark, parameter");
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
    g.device = st.column_text(10);
    g.torch_version = st.column_text(11);
    g.git_revision = st.column_text(12);
    g.created_at = st.column_text(13);
    out.push_back(std::move(g));
  }
  return out;
}

std::string Database::checkpoint_of_run(std::int64_t run_id) {
  sql::Statement st(db_, path_, "SELECT checkpoint_path FROM runs WHERE id = ?1");
  st.bind(1, run_id);
  if (!st.step()) throw StoreError(path_ + ": no run with id " + std::to_string(run_id));
  return st.column_text(0);
}

}  // namespace attnlab::store
