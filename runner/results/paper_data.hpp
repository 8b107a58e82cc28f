#pragma once
// A paper's published numbers as data (conf/papers/*.toml, format in conf/papers/README.md): which
// attnlab method each printed row is, which attnlab dataset each printed column is, the metric and
// its unit, the seeds behind each number. `attnlab table accuracy|cost --paper NAME|FILE` puts them
// beside the database's cells (paper_tables.hpp).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnlab::results {

// A malformed paper file: one line, "FILE:LINE: key: problem" (key as a path, e.g.
// tables[0].rows[3].values).
struct PaperError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a printed table measures, and so which of our results it is compared with.
enum class PaperMetric {
  accuracy,  // the accuracy result (test_acc by default); unit "%" or "fraction"
  time,      // training time for `steps` steps from steps_per_second; unit "hours" or "seconds"
  memory,    // peak_memory_bytes; unit "GB" (2^30 bytes) or "MB" (2^20 bytes)
};
const char* to_string(PaperMetric metric);

struct PaperRow {
  std::string label;   // as printed
  std::string method;  // the attnlab method; "" for a row that is no method (a random predictor)
  std::vector<double> values;      // one per task, in the table's unit; NaN: not printed
  std::optional<double> average;   // the printed average column, when the table has one
  std::int64_t seeds = 0;          // runs behind each number; 0: the table's (or the paper's)
  std::string note;
  std::uint32_t line = 0;          // where in the file (for messages)
};

struct PaperTableData {
  std::string id;       // "Table 1"
  std::string caption;
  PaperMetric metric = PaperMetric::accuracy;
  std::string unit;     // see PaperMetric
  std::vector<std::string> tasks;    // attnlab datasets, in the printed column order
  std::vector<std::string> columns;  // the printed column headings, one per task
  std::string average;               // the printed average column's heading; "" when none
  std::int64_t seeds = 0;            // runs behind each number; 0: the paper's
  double steps = 0;                  // time tables: the training steps the time is for
  std::vector<PaperRow> rows;
};

struct Paper {
  std::string file;  // where it was read from
  std::string name, title, citation, url, hardware, note;
  std::int64_t seeds = 0;  // runs behind each number unless a table or row says otherwise; 0: not stated
  std::vector<PaperTableData> tables;
};

// The seeds behind a row's numbers: the row's, else its table's, else the paper's; 0 when none says.
std::int64_t paper_seeds(const Paper& paper, const PaperTableData& table, const PaperRow& row);

// Our value in the table's unit from a stored result of one run: test_acc (a fraction),
// steps_per_second or peak_memory_bytes.
double to_paper_unit(const PaperTableData& table, double stored);

// Parses a paper file's text (`where` names it in messages). Every problem is a PaperError.
Paper parse_paper(const std::string& text, const std::string& where);
Paper load_paper(const std::string& path);

// `--paper` takes a file (a word holding '/' or ending in .toml) or a name looked up as NAME.toml
// in `folders` in order (the bundled conf/papers of an installed or build tree), else the one
// paper whose name starts with NAME- ("kl": kl-transformer). An unknown name is a PaperError
// naming the papers found and the folders searched.
std::string find_paper(const std::string& name_or_file, const std::vector<std::string>& folders);
// The names (file stems) of the papers in `folders`, sorted, each once.
std::vector<std::string> paper_names(const std::vector<std::string>& folders);

}  // namespace attnlab::results
