#pragma once
// One grid of cells, written as a terminal table, CSV (RFC 4180), JSON (an array of objects keyed
// by the header) or Markdown. A number cell carries both the text shown in a table and the value
// written, at full precision, to CSV and JSON; a missing value is "-" in a table, empty in CSV and
// null in JSON, never zero.
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::results {

// "No value" in a cell or a curve point: tables show it as nan, CSV and JSON write it as null.
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

enum class Format { table, csv, json, markdown };

// "table" | "csv" | "json" | "markdown" (also "md"); anything else is a std::invalid_argument
// naming the word and the choices.
Format parse_format(const std::string& word);
const char* to_string(Format format);

struct Cell {
  std::string text;              // what a table or Markdown shows
  std::optional<double> number;  // set: CSV/JSON write this value (shortest_number; NaN/inf as in json_number)
  bool missing = false;          // CSV empty, JSON null

  static Cell of_text(std::string text) { return Cell{std::move(text), std::nullopt, false}; }
  // `shown` printf-formats the value for tables ("%.4f"); a non-finite value shows as "nan"/"inf".
  static Cell of_number(double value, const char* shown = "%.4f");
  static Cell of_integer(long long value);
  static Cell none() { return Cell{"-", std::nullopt, true}; }
};

struct Grid {
  std::vector<std::string> header;
  std::vector<std::vector<Cell>> rows;  // each as long as header
  std::vector<std::string> notes;       // footnotes under a table or Markdown (not in CSV/JSON)
};

std::string render(const Grid& grid, Format format);

// Helpers the renderers share, exposed for other writers (and tests).
std::string csv_field(const std::string& text);   // quoted when it holds , " CR or LF
std::string json_string(const std::string& text); // with quotes, escaped
std::string json_number(double value);            // shortest_number; NaN and inf as null (JSON has neither)
// The shortest text that reads back as exactly `value` (std::to_chars): 0.361, not
// 0.36099999999999999; 1e-08; 3. NaN and infinities as "nan", "inf", "-inf".
std::string shortest_number(double value);
// A TOML text for people: each real written as its shortest round trip (dropout = 0.1, not the
// 0.10000000000000001 the stored config_toml carries; that text is the job's identity and stays).
std::string readable_toml(const std::string& toml);

}  // namespace attnlab::results
