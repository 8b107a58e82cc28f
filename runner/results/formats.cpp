#include "results/formats.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace attnlab::results {
namespace {

// Display width in terminal columns: UTF-8 continuation bytes take none (± is two bytes, one column).
std::size_t display_width(const std::string& s) {
  std::size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

std::string pad(const std::string& s, std::size_t width) {
  return s + std::string(width > display_width(s) ? width - display_width(s) : 0, ' ');
}

std::string csv_value(const Cell& c) {
  if (c.missing) return "";
  if (c.number) {
    if (std::isnan(*c.number)) return "nan";
    if (std::isinf(*c.number)) return *c.number > 0 ? "inf" : "-inf";
    return shortest_number(*c.number);
  }
  return csv_field(c.text);
}

std::string render_table(const Grid& g) {
  std::vector<std::size_t> width(g.header.size(), 0);
  for (std::size_t i = 0; i < g.header.size(); ++i) width[i] = display_width(g.header[i]);
  for (const auto& row : g.rows)
    for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], display_width(row[i].text));
  auto line = [&](auto cell_text, std::size_t n) {
    std::string out;
    for (std::size_t i = 0; i < n; ++i) {
      const std::string text = cell_text(i);
      out += i + 1 < n ? pad(text, width[i]) + "  " : text;
    }
    return out + "\n";
  };
  std::string out = line([&](std::size_t i) { return g.header[i]; }, g.header.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < width.size(); ++i) total += width[i] + (i + 1 < width.size() ? 2 : 0);
  std::string rule;
  for (std::size_t i = 0; i < total; ++i) rule += "-";
  out += rule + "\n";
  for (const auto& row : g.rows) out += line([&](std::size_t i) { return row[i].text; }, row.size());
  for (const auto& n : g.notes) out += n + "\n";
  return out;
}

std::string markdown_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += "<br>";
    else out += c;
  }
  return out;
}

std::string render_markdown(const Grid& g) {
  std::string out = "|";
  for (const auto& h : g.header) out += " " + markdown_escape(h) + " |";
  out += "\n|";
  for (std::size_t i = 0; i < g.header.size(); ++i) out += i == 0 ? " --- |" : " ---: |";
  out += "\n";
  for (const auto& row : g.rows) {
    out += "|";
    for (const auto& c : row) out += " " + markdown_escape(c.text) + " |";
    out += "\n";
  }
  if (!g.notes.empty()) out += "\n";
  for (const auto& n : g.notes) out += markdown_escape(n) + "\n\n";
  return out;
}

std::string render_csv(const Grid& g) {
  std::string out;
  for (std::size_t i = 0; i < g.header.size(); ++i) out += (i ? "," : "") + csv_field(g.header[i]);
  out += "\r\n";
  for (const auto& row : g.rows) {
    for (std::size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + csv_value(row[i]);
    out += "\r\n";
  }
  return out;
}

std::string render_json(const Grid& g) {
  std::string out = "[";
  for (std::size_t r = 0; r < g.rows.size(); ++r) {
    out += r ? ",\n  {" : "\n  {";
    const auto& row = g.rows[r];
    for (std::size_t i = 0; i < row.size() && i < g.header.size(); ++i) {
      out += (i ? ", " : "") + json_string(g.header[i]) + ": ";
      const Cell& c = row[i];
      out += c.missing ? "null" : c.number ? json_number(*c.number) : json_string(c.text);
    }
    out += "}";
  }
  return out + (g.rows.empty() ? "]\n" : "\n]\n");
}

}  // namespace

Format parse_format(const std::string& word) {
  if (word == "table") return Format::table;
  if (word == "csv") return Format::csv;
  if (word == "json") return Format::json;
  if (word == "markdown" || word == "md") return Format::markdown;
  throw std::invalid_argument("unknown format '" + word + "' (table, csv, json or markdown)");
}

const char* to_string(Format format) {
  switch (format) {
    case Format::table: return "table";
    case Format::csv: return "csv";
    case Format::json: return "json";
    case Format::markdown: return "markdown";
  }
  return "?";
}

Cell Cell::of_number(double value, const char* shown) {
  if (std::isnan(value)) return Cell{"nan", value, false};
  if (std::isinf(value)) return Cell{value > 0 ? "inf" : "-inf", value, false};
  char buf[64];
  std::snprintf(buf, sizeof buf, shown, value);
  return Cell{buf, value, false};
}

Cell Cell::of_integer(long long value) { return Cell{std::to_string(value), static_cast<double>(value), false}; }

std::string render(const Grid& grid, Format format) {
  switch (format) {
    case Format::table: return render_table(grid);
    case Format::csv: return render_csv(grid);
    case Format::json: return render_json(grid);
    case Format::markdown: return render_markdown(grid);
  }
  return {};
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  return shortest_number(value);
}

std::string readable_toml(const std::string& toml) {
  std::string out;
  std::size_t start = 0;
  while (start < toml.size()) {
    std::size_t end = toml.find('\n', start);
    if (end == std::string::npos) end = toml.size();
    std::string line = toml.substr(start, end - start);
    const std::size_t eq = line.find(" = ");
    if (eq != std::string::npos && line[0] != '#' && line[0] != '[') {
      const std::string value = line.substr(eq + 3);
      double x = 0;
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
      // only a whole unquoted real (a '.' or an exponent): integers, strings and booleans stay as written
      if (ec == std::errc() && ptr == value.data() + value.size() && value.find_first_of(".eE") != std::string::npos) {
        std::string shown = shortest_number(x);
        if (shown.find_first_of(".en") == std::string::npos) shown += ".0";  // still a TOML float
        line = line.substr(0, eq + 3) + shown;
      }
    }
    out += line;
    if (end < toml.size()) out += '\n';
    start = end + 1;
  }
  return out;
}

std::string shortest_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[32];  // the longest shortest form, e.g. -2.2250738585072014e-308, is 24 characters
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, value).ptr);
}

}  // namespace attnlab::results
