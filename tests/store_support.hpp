#pragma once
// What the store suites share: a scratch folder per test, raw SQL on a file, and jobs and runs
// made the way the runner makes them (a run exists only through a claim).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "attnlab/store/run_writer.hpp"
#include "../store/src/access.hpp"

namespace attnlab::store::testing {

namespace fs = std::filesystem;

// Runs one query with no parameters on a raw handle; returns the first column of each row as text
// ("NULL" for NULL).
inline std::vector<std::string> query(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db) << ": " << sql;
  std::vector<std::string> rows;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const auto* text = sqlite3_column_text(st, 0);
    rows.emplace_back(text ? reinterpret_cast<const char*>(text) : "NULL");
  }
  EXPECT_EQ(rc, SQLITE_DONE) << sqlite3_errmsg(db);
  sqlite3_finalize(st);
  return rows;
}

inline std::string query_one(sqlite3* db, const std::string& sql) {
  auto rows = query(db, sql);
  EXPECT_EQ(rows.size(), 1u) << sql;
  return rows.empty() ? std::string() : rows.front();
}

// Runs SQL on the file through a separate, raw connection.
// The job's newest attempt, if any.
inline std::optional<std::int64_t> latest_run_of_job(store::ResultsReader& db, std::int64_t job_id) {
  const auto attempts = db.attempts_of_job(job_id);
  if (attempts.empty()) return std::nullopt;
  return attempts.back().run_id;
}

// The jobs an experiment's file names (experiment_jobs), by id: what no command asks the store.
inline std::vector<std::int64_t> job_ids_of_experiment(store::ResultsReader& db, std::int64_t experiment_id) {
  std::vector<std::int64_t> ids;
  for (const auto& id : query(store::sqlite_handle(db), "SELECT job_id FROM experiment_jobs WHERE experiment_id = " +
                                                            std::to_string(experiment_id) + " ORDER BY job_id"))
    ids.push_back(std::stoll(id));
  return ids;
}

inline void raw_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// One value read through a separate, raw connection.
inline std::string raw_query_one(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  const std::string value = query_one(db, sql);
  sqlite3_close(db);
  return value;
}

// Every row of every table, every column quoted, in a fixed order: equal dumps, equal contents.
inline std::string dump_tables(sqlite3* db) {
  std::string out;
  for (const std::string& table : query(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")) {
    out += "## " + table + "\n";
    const std::string columns = query_one(db, "SELECT count(*) FROM pragma_table_info('" + table + "')");
    const std::string order = columns == "2" ? " ORDER BY 1, 2" : " ORDER BY 1, 2, 3";
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, ("SELECT * FROM \"" + table + "\"" + order).c_str(), -1, &st, nullptr), SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        const auto* text = sqlite3_column_text(st, c);
        out += (c ? "|" : "") + (text ? std::string(reinterpret_cast<const char*>(text)) : std::string("NULL"));
      }
      out += "\n";
    }
    sqlite3_finalize(st);
  }
  return out;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "attnlab-store-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  static JobSpec spec(std::int64_t experiment_id, const std::string& hash, std::int64_t seed = 1) {
    JobSpec s;
    s.experiment_id = experiment_id;
    s.method = "softmax";
    s.dataset = "listops";
    s.seed = seed;
    s.config_toml = "[train]\nlr = 0.0001\n";
    s.config_hash = hash;
    s.params = {{"train.lr", "0.0001"}, {"model.layers", "2"}};
    return s;
  }

  static RunEnvironment env() {
    RunEnvironment e;
    e.host = "node7";
    e.device = "cuda:0";
    e.device_name = "NVIDIA H100 80GB HBM3";
    e.torch_version = "2.3.1";
    e.attnlab_version = "0.1.0";
    e.git_revision = "abc123";
    e.threads = 16;
    e.plugins = {{"attention", "softmax", "1.0", "/build/plugins/libsoftmax.so", std::string(64, 'a')},
                 {"dataset", "listops", "0.2", "/build/datasets/liblistops.so", std::string(64, 'b')}};
    return e;
  }

  static Claimer claimer(const std::string& worker = "test-host:1:cpu") { return {worker, "test-host", "cpu", 1}; }

  // A new attempt of `job`, as a worker and its job process make it: the claim (which must take
  // this job) and the run's environment. Returns the run id.
  static std::int64_t start_attempt(Database& db, std::int64_t job, RunEnvironment e = env(), std::int64_t pid = 1) {
    const auto lease = store::Queue(db).claim_next_job(claimer(), 600, {job});
    EXPECT_TRUE(lease.has_value()) << "job " << job << " could not be claimed";
    if (!lease) return 0;
    EXPECT_EQ(lease->job_id, job);
    e.pid = pid;
    store::RunWriter(db, lease->run_id).set_environment(e);
    return lease->run_id;
  }

  fs::path dir_;
};

}  // namespace attnlab::store::testing
