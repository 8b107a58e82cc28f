// Opening the database, experiments and jobs. Runs, curves and results: runs.cpp; the queue:
// queue.cpp; shards: merge.cpp.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <thread>

#include "attnlab/store.hpp"
#include "access.hpp"
#include "migrations.hpp"
#include "sqlite.hpp"

namespace attnlab::store {

std::optional<double> RunSummary::result(const std::string& name) const {
  for (const auto& [key, value] : results)
    if (key == name) return value;
  return std::nullopt;
}

namespace {

constexpr int kBusyTimeoutMs = 30'000;

// Switching a new file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY at once
// (without the busy handler) when another process is opening the same new file: retry, up to the
// busy timeout. WAL is persistent, so later openers find it set and never wait here.
void set_wal(sqlite3* db, const std::string& path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (;;) {
    try {
      sql::Statement wal(db, path, "PRAGMA journal_mode = WAL");
      wal.run();
      return;
    } catch (const sql::SqliteError& e) {
      if (e.primary_code() != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::uintmax_t size_of(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : size;
}

// The rows of PRAGMA quick_check or integrity_check (at most `limit`) but "ok", each on one line,
// then SQLite's error when the check itself stopped on a page too damaged to read: the rows it
// gave before stopping say where the damage is.
std::vector<std::string> check_rows(sqlite3* db, const std::string& path, const char* pragma, int limit) {
  std::vector<std::string> problems;
  try {
    sql::Statement st(db, path, (std::string("PRAGMA ") + pragma + "(" + std::to_string(limit) + ")").c_str());
    while (st.step()) {
      // a row may hold several problems, a line each, under SQLite's heading of the first
      std::istringstream lines(st.column_text(0));
      for (std::string line; std::getline(lines, line);)
        if (!line.empty() && line != "ok" && line != "*** in database main ***") problems.push_back(line);
    }
  } catch (const sql::SqliteError& e) {
    if (e.primary_code() != SQLITE_CORRUPT) throw;  // not SQLite at all (NOTADB): said by the caller
    problems.push_back(e.what());
  }
  return problems;
}

// A file whose pages contradict each other (bytes flipped on disk, a torn copy) is refused before
// anything reads or writes it: results from it could be silently wrong, and writes would spread
// the damage. SQLITE_CORRUPT from the check itself says the same.
void require_intact(sqlite3* db, const std::string& path) {
  const auto problems = check_rows(db, path, "quick_check", 1);
  if (problems.empty()) return;
  const std::string& problem = problems.front();
  throw sql::SqliteError(path + ": the database is damaged (quick_check: " + problem + "); nothing read or written: " +
                             "`attnlab db check --db " + path + "` lists what is wrong; restore the file from a copy",
                         SQLITE_CORRUPT);
}

// Returns the schema version the file had.
// How a connection is configured as it opens: `migrating` (the only one that may find an older
// schema, or none), a `writer` (sets WAL), checked (quick_check) at open or not.
struct Setup {
  bool migrating, writer, check_intact;
};

int configure(sqlite3* db, const std::string& path, Setup setup) {
  if (sqlite3_busy_timeout(db, kBusyTimeoutMs) != SQLITE_OK) sql::fail(db, path, "cannot set busy timeout");
  try {
    // The first statement reads the file header: a file that is not SQLite fails here. A
    // connection that must not migrate checks the version before anything is written.
    if (!setup.migrating) require_current(db, path);
    if (setup.check_intact) require_intact(db, path);
    // Only writers choose the journal mode: a reader leaves a DELETE-journal file as it is.
    if (setup.writer) set_wal(db, path);
    sql::exec(db, path, "PRAGMA foreign_keys = ON");
    return setup.migrating ? migrate(db, path) : ResultsReader::kSchemaVersion;
  } catch (const sql::SqliteError& e) {
    if (e.primary_code() == SQLITE_NOTADB)
      throw StoreError(path + ": not an attnlab database (file is not a database)");
    throw;
  }
}

Job read_job(const sql::Statement& st) {
  Job j;
  j.id = st.column_int64(0);
  j.experiment_id = st.column_int64(1);
  j.method = st.column_text(2);
  j.dataset = st.column_text(3);
  j.seed = st.column_int64(4);
  j.config_toml = st.column_text(5);
  j.config_hash = st.column_text(6);
  j.state = parse_job_state(st.column_text(7));
  return j;
}

constexpr const char* kJobColumns =
    "SELECT id, experiment_id, method, dataset, seed, config_toml, config_hash, state FROM jobs ";

}  // namespace

ResultsReader::ResultsReader(const std::string& path, Check check)
    : ResultsReader(path, check == Check::at_open ? Mode::read_only : Mode::unchecked) {}

Database::Database(const std::string& path, Open mode)
    : ResultsReader(path, mode == Open::migrate ? Mode::migrate : mode == Open::existing ? Mode::existing : Mode::supervised) {}

ResultsReader::ResultsReader(const std::string& path, Mode mode) : path_(path) {
  if (std::filesystem::is_directory(path_)) throw StoreError(path_ + ": is a folder, not a database file");
  // Nothing but `migrate` creates the file: a missing one is the user's to migrate.
  if (mode != Mode::migrate && access(path_.c_str(), F_OK) != 0)
    throw StoreError(path_ + ": no such database: run `attnlab db migrate --db " + path_ + "` (or `attnlab queue add`) first");
  try {
    open(mode, "");
  } catch (const sql::SqliteError& e) {
    // A reader of a WAL file in a folder it cannot write (an archive, a read-only mount, another
    // user's results) cannot create the -shm index SQLite wants. With no -wal holding changes the
    // file alone is the whole database: open it immutable (no locks, no -shm), which is exact as
    // long as nobody writes it meanwhile, and nobody can (a writer would have left a -shm).
    const int code = e.primary_code();
    const bool reader = mode == Mode::read_only || mode == Mode::unchecked;
    if (!reader || (code != SQLITE_READONLY && code != SQLITE_CANTOPEN)) throw;
    std::error_code ec;
    const auto wal = std::filesystem::file_size(path_ + "-wal", ec);
    if (!ec && wal > 0)
      throw StoreError(path_ + ": cannot read it here: its write-ahead log " + path_ + "-wal holds changes and this "
                       "folder cannot be written; open it once where it can be written (`attnlab db migrate --db " + path_ + "` folds the log into the file)");
    open(mode, "immutable=1");
  }
}

void ResultsReader::open(Mode mode, const std::string& uri_query) {
  // Opened as a URI (any path spelled safely) so that merge_shard can ATTACH a shard read-only.
  const bool reader = mode == Mode::read_only || mode == Mode::unchecked;
  const int flags = SQLITE_OPEN_URI | (reader ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
                    (mode == Mode::migrate ? SQLITE_OPEN_CREATE : 0);
  const int rc = sqlite3_open_v2(sql::file_uri(path_, uri_query).c_str(), &db_, flags, nullptr);
  try {
    if (rc != SQLITE_OK) sql::fail(db_, path_, "cannot open database");
    sqlite3_extended_result_codes(db_, 1);
    const bool check_intact = mode == Mode::migrate || mode == Mode::existing ||
                              (mode == Mode::read_only && size_of(path_) <= kReadersCheckBytes);
    migrated_from_ = configure(db_, path_, {mode == Mode::migrate, !reader, check_intact});
  } catch (...) {
    // The destructor does not run for a constructor that throws: release the handle here.
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw;
  }
}

ResultsReader::~ResultsReader() { sqlite3_close_v2(db_); }

int ResultsReader::schema_version() { return user_version(db_, path_); }

std::int64_t Database::add_experiment(const std::string& name, const std::string& source_path,
                                      const std::string& config_text) {
  sql::Transaction tx(db_, path_);
  sql::Statement st(db_, path_, "INSERT INTO experiments (name, source_path, config_text) VALUES (?1, ?2, ?3)");
  st.bind(1, name).bind_text_or_null(2, source_path).bind(3, config_text);
  st.run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

std::optional<std::int64_t> ResultsReader::find_experiment(const std::string& name, const std::string& config_text) {
  sql::Statement st(db_, path_, "SELECT id FROM experiments WHERE name = ?1 AND config_text = ?2 ORDER BY id LIMIT 1");
  st.bind(1, name).bind(2, config_text);
  if (!st.step()) return std::nullopt;
  return st.column_int64(0);
}

std::vector<ExperimentFile> ResultsReader::experiments() {
  sql::Statement st(db_, path_, "SELECT id, name, COALESCE(source_path, ''), config_text FROM experiments ORDER BY id");
  std::vector<ExperimentFile> out;
  while (st.step()) out.push_back({st.column_int64(0), st.column_text(1), st.column_text(2), st.column_text(3)});
  return out;
}

std::vector<ExperimentFile> ResultsReader::experiments_of_jobs(const std::vector<std::int64_t>& job_ids) {
  std::string ids = "[";  // one bound JSON array, read by json_each: no id is spliced into the SQL
  for (std::size_t i = 0; i < job_ids.size(); ++i) ids += (i ? "," : "") + std::to_string(job_ids[i]);
  ids += "]";
  sql::Statement st(db_, path_,
                    "SELECT e.id, e.name, COALESCE(e.source_path, ''), e.config_text FROM experiments AS e "
                    "WHERE e.id IN (SELECT experiment_id FROM experiment_jobs WHERE job_id IN (SELECT value FROM json_each(?1))) "
                    "ORDER BY e.id");
  st.bind(1, ids);
  std::vector<ExperimentFile> out;
  while (st.step()) out.push_back({st.column_int64(0), st.column_text(1), st.column_text(2), st.column_text(3)});
  return out;
}

AddedJob Database::add_job(const JobSpec& spec) {
  sql::Transaction tx(db_, path_);
  AddedJob added;
  {
    sql::Statement find(db_, path_, "SELECT id, state FROM jobs WHERE config_hash = ?1");
    find.bind(1, spec.config_hash);
    if (find.step()) {
      added.job_id = find.column_int64(0);
      added.existed = true;
      added.state = parse_job_state(find.column_text(1));
    }
  }
  if (added.existed) {  // reused: this experiment owns it too
    link_job(spec.experiment_id, added.job_id);
    tx.commit();
    return added;
  }
  sql::Statement insert(db_, path_,
                        "INSERT INTO jobs (experiment_id, method, dataset, seed, config_toml, config_hash, plugin_dirs) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  insert.bind(1, spec.experiment_id)
      .bind(2, spec.method)
      .bind(3, spec.dataset)
      .bind(4, spec.seed)
      .bind(5, spec.config_toml)
      .bind(6, spec.config_hash);
  if (spec.plugin_dirs.empty())
    insert.bind_null(7);
  else
    insert.bind(7, sql::json_array(spec.plugin_dirs));
  insert.run();
  added.job_id = sqlite3_last_insert_rowid(db_);
  added.state = JobState::queued;
  link_job(spec.experiment_id, added.job_id);

  sql::Statement param(db_, path_, "INSERT INTO job_params (job_id, key, value) VALUES (?1, ?2, ?3)");
  for (const auto& [key, value] : spec.params) {
    param.bind(1, added.job_id).bind(2, key).bind(3, value);
    param.run();
    param.reset();
  }
  tx.commit();
  return added;
}

void Database::link_job(std::int64_t experiment_id, std::int64_t job_id) {
  sql::Statement st(db_, path_, "INSERT OR IGNORE INTO experiment_jobs (experiment_id, job_id) VALUES (?1, ?2)");
  st.bind(1, experiment_id).bind(2, job_id);
  st.run();
}

Job ResultsReader::job(std::int64_t job_id) {
  sql::Statement st(db_, path_, (std::string(kJobColumns) + "WHERE id = ?1").c_str());
  st.bind(1, job_id);
  if (!st.step()) throw StoreError(path_ + ": no job with id " + std::to_string(job_id));
  return read_job(st);
}

std::optional<Job> ResultsReader::job_by_hash(const std::string& config_hash) {
  sql::Statement st(db_, path_, (std::string(kJobColumns) + "WHERE config_hash = ?1").c_str());
  st.bind(1, config_hash);
  if (!st.step()) return std::nullopt;
  return read_job(st);
}

std::optional<std::int64_t> ResultsReader::counting_run(std::int64_t job_id) {
  sql::Statement st(db_, path_, "SELECT run_id FROM job_outcomes WHERE job_id = ?1 AND run_id IS NOT NULL");
  st.bind(1, job_id);
  if (!st.step()) return std::nullopt;
  return st.column_int64(0);
}

ReadTransaction::ReadTransaction(ResultsReader& db) : db_(db) {
  char* error = nullptr;
  if (sqlite3_exec(sqlite_handle(db_), "BEGIN DEFERRED", nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string what = error ? error : "unknown error";
    sqlite3_free(error);
    throw StoreError(db_.path() + ": cannot begin a read transaction: " + what);
  }
}

ReadTransaction::~ReadTransaction() {
  sqlite3_exec(sqlite_handle(db_), "COMMIT", nullptr, nullptr, nullptr);  // a read: nothing to lose
}

}  // namespace attnlab::store

namespace attnlab::store {

double ResultsReader::system_unix_seconds() { return sql::unix_now(); }

void ResultsReader::require_intact() { store::require_intact(db_, path_); }

bool ResultsReader::quick_check_within(double seconds) {
  // the file as it is now, not this connection's cached pages of it (bytes changed on disk under
  // a running worker would pass a check of its cache)
  sqlite3_db_release_memory(db_);
  // The progress handler runs every 1000 virtual-machine steps; returning non-zero interrupts.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                std::chrono::duration<double>(seconds));
  auto past_deadline = [](void* at) {
    return std::chrono::steady_clock::now() > *static_cast<std::chrono::steady_clock::time_point*>(at) ? 1 : 0;
  };
  sqlite3_progress_handler(db_, 1000, past_deadline, &deadline);
  try {
    store::require_intact(db_, path_);
  } catch (const sql::SqliteError& e) {
    sqlite3_progress_handler(db_, 0, nullptr, nullptr);
    if (e.primary_code() == SQLITE_INTERRUPT) return false;
    throw;
  } catch (...) {
    sqlite3_progress_handler(db_, 0, nullptr, nullptr);
    throw;
  }
  sqlite3_progress_handler(db_, 0, nullptr, nullptr);
  return true;
}

std::vector<std::string> ResultsReader::integrity_problems(int limit) {
  try {
    return check_rows(db_, path_, "integrity_check", limit);
  } catch (const sql::SqliteError& e) {
    if (e.primary_code() != SQLITE_NOTADB) throw;
    return {e.what()};  // not even a database file
  }
}

}  // namespace attnlab::store
