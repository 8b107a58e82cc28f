#include "results/paper_data.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <toml++/toml.h>

namespace attnlab::results {
namespace {

namespace fs = std::filesystem;

// Where a node is, for messages: the file and a key path (tables[0].rows[3].values).
struct At {
  const std::string& file;
  std::string path;
  std::uint32_t line = 0;

  At key(const std::string& name, const toml::node* node) const {
    return At{file, path.empty() ? name : path + "." + name, node && node->source().begin.line ? node->source().begin.line : line};
  }
  At index(std::size_t i, const toml::node* node) const {
    return At{file, path + "[" + std::to_string(i) + "]", node && node->source().begin.line ? node->source().begin.line : line};
  }
  [[noreturn]] void fail(const std::string& problem) const {
    std::string out = file;
    if (line > 0) out += ":" + std::to_string(line);
    out += ": ";
    if (!path.empty()) out += path + ": ";
    throw PaperError(out + problem);
  }
};

std::string list_text(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : ", ") + w;
  return out;
}

// Refuses a key the format does not have, naming the ones it has (a typo would otherwise be lost).
void only_keys(const toml::table& table, const At& at, const std::vector<std::string>& known) {
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    if (std::find(known.begin(), known.end(), name) == known.end())
      at.key(name, &node).fail("unknown key (known: " + list_text(known) + ")");
  }
}

// A word of lower-case letters, digits, '_' and '-' (method and dataset names, the paper's name).
bool is_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::optional<std::string> get_string(const toml::table& t, const std::string& key, const At& at, bool required) {
  const toml::node* node = t.get(key);
  if (!node) {
    if (required) at.key(key, nullptr).fail("missing (a string)");
    return std::nullopt;
  }
  const auto* s = node->as_string();
  if (!s) at.key(key, node).fail("expected a string");
  return s->get();
}

std::optional<double> as_number(const toml::node& node) {
  if (const auto* f = node.as_floating_point()) return f->get();
  if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
  return std::nullopt;
}

std::int64_t get_seeds(const toml::table& t, const At& at) {
  const toml::node* node = t.get("seeds");
  if (!node) return 0;
  const auto* i = node->as_integer();
  if (!i || i->get() < 1) at.key("seeds", node).fail("expected a positive integer (the runs behind each number)");
  return i->get();
}

std::vector<std::string> get_names(const toml::table& t, const std::string& key, const At& at) {
  const toml::node* node = t.get(key);
  const At here = at.key(key, node);
  if (!node) here.fail("missing (an array of strings)");
  const auto* array = node->as_array();
  if (!array || array->empty()) here.fail("expected a non-empty array of strings");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const auto* s = (*array)[i].as_string();
    if (!s) here.index(i, &(*array)[i]).fail("expected a string");
    out.push_back(s->get());
  }
  return out;
}

PaperMetric parse_metric(const std::string& word, const At& at) {
  if (word == "accuracy") return PaperMetric::accuracy;
  if (word == "time") return PaperMetric::time;
  if (word == "memory") return PaperMetric::memory;
  at.fail("unknown metric '" + word + "' (accuracy, time or memory)");
}

const std::vector<std::string>& units_of(PaperMetric metric) {
  static const std::vector<std::string> accuracy = {"%", "fraction"}, time = {"hours", "seconds"},
                                        memory = {"GB", "MB"};
  return metric == PaperMetric::accuracy ? accuracy : metric == PaperMetric::time ? time : memory;
}

PaperRow parse_row(const toml::node& node, const PaperTableData& table, const At& at) {
  const auto* t = node.as_table();
  if (!t) at.fail("expected a table { label = ..., method = ..., values = [...] }");
  only_keys(*t, at, {"label", "method", "values", "average", "seeds", "note"});
  PaperRow row;
  row.line = at.line;
  row.label = *get_string(*t, "label", at, true);
  if (row.label.empty()) at.key("label", t->get("label")).fail("empty");
  row.method = get_string(*t, "method", at, false).value_or("");
  if (t->get("method") && !is_name(row.method))
    at.key("method", t->get("method")).fail("'" + row.method + "' is not a method name (lower-case letters, digits, _)");
  row.note = get_string(*t, "note", at, false).value_or("");
  row.seeds = get_seeds(*t, at);

  const toml::node* values = t->get("values");
  const At v = at.key("values", values);
  if (!values) v.fail("missing (one number per task: " + list_text(table.tasks) + ")");
  const auto* array = values->as_array();
  if (!array) v.fail("expected an array of numbers");
  if (array->size() != table.tasks.size())
    v.fail("expected " + std::to_string(table.tasks.size()) + " numbers (one per task: " + list_text(table.tasks) +
           "), got " + std::to_string(array->size()));
  for (std::size_t i = 0; i < array->size(); ++i) {
    const auto x = as_number((*array)[i]);
    if (!x) v.index(i, &(*array)[i]).fail("expected a number (nan: not printed)");
    row.values.push_back(*x);
  }

  const toml::node* average = t->get("average");
  if (table.average.empty() && average)
    at.key("average", average).fail("the table has no average column (set the table's `average` heading)");
  if (!table.average.empty()) {
    if (!average) at.key("average", nullptr).fail("missing: the table prints an average column ('" + table.average + "')");
    const auto x = as_number(*average);
    if (!x) at.key("average", average).fail("expected a number (nan: not printed)");
    row.average = *x;
  }
  return row;
}

PaperTableData parse_table(const toml::node& node, const At& at) {
  const auto* t = node.as_table();
  if (!t) at.fail("expected a table ([[tables]])");
  only_keys(*t, at, {"id", "caption", "metric", "unit", "tasks", "columns", "average", "seeds", "steps", "rows"});
  PaperTableData table;
  table.id = *get_string(*t, "id", at, true);
  table.caption = get_string(*t, "caption", at, false).value_or("");
  table.metric = parse_metric(*get_string(*t, "metric", at, true), at.key("metric", t->get("metric")));
  table.unit = *get_string(*t, "unit", at, true);
  const auto& units = units_of(table.metric);
  if (std::find(units.begin(), units.end(), table.unit) == units.end())
    at.key("unit", t->get("unit")).fail("unknown unit '" + table.unit + "' for metric " + to_string(table.metric) + " (" +
                                        list_text(units) + ")");
  table.tasks = get_names(*t, "tasks", at);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < table.tasks.size(); ++i) {
    const At task = at.key("tasks", t->get("tasks")).index(i, nullptr);
    if (!is_name(table.tasks[i])) task.fail("'" + table.tasks[i] + "' is not a dataset name (lower-case letters, digits, _)");
    if (!seen.insert(table.tasks[i]).second) task.fail("'" + table.tasks[i] + "' is named twice");
  }
  table.columns = get_names(*t, "columns", at);
  if (table.columns.size() != table.tasks.size())
    at.key("columns", t->get("columns"))
        .fail("expected " + std::to_string(table.tasks.size()) + " headings (one per task), got " +
              std::to_string(table.columns.size()));
  table.average = get_string(*t, "average", at, false).value_or("");
  if (t->get("average") && table.average.empty()) at.key("average", t->get("average")).fail("empty heading");
  table.seeds = get_seeds(*t, at);
  if (const toml::node* steps = t->get("steps")) {
    const auto x = as_number(*steps);
    if (!x || !(*x > 0)) at.key("steps", steps).fail("expected a positive number (the training steps the time is for)");
    table.steps = *x;
  }
  if (table.metric == PaperMetric::time && table.steps <= 0)
    at.key("steps", nullptr).fail("missing: a time table names the training steps its time is for");
  if (table.metric != PaperMetric::time && t->get("steps")) at.key("steps", t->get("steps")).fail("only a time table has steps");

  const toml::node* rows = t->get("rows");
  const At r = at.key("rows", rows);
  if (!rows) r.fail("missing (an array of { label, method, values } tables)");
  const auto* array = rows->as_array();
  if (!array || array->empty()) r.fail("expected a non-empty array of { label, method, values } tables");
  std::set<std::string> labels, methods;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const At here = r.index(i, &(*array)[i]);
    PaperRow row = parse_row((*array)[i], table, here);
    if (!labels.insert(row.label).second) here.key("label", nullptr).fail("'" + row.label + "' is named twice in this table");
    if (!row.method.empty() && !methods.insert(row.method).second)
      here.key("method", nullptr).fail("'" + row.method + "' is named twice in this table");
    table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace

const char* to_string(PaperMetric metric) {
  switch (metric) {
    case PaperMetric::accuracy: return "accuracy";
    case PaperMetric::time: return "time";
    case PaperMetric::memory: return "memory";
  }
  return "?";
}

std::int64_t paper_seeds(const Paper& paper, const PaperTableData& table, const PaperRow& row) {
  return row.seeds ? row.seeds : table.seeds ? table.seeds : paper.seeds;
}

double to_paper_unit(const PaperTableData& table, double stored) {
  switch (table.metric) {
    case PaperMetric::accuracy: return table.unit == "%" ? 100.0 * stored : stored;
    case PaperMetric::time: {
      const double seconds = table.steps / stored;  // stored: training steps per second
      return table.unit == "hours" ? seconds / 3600.0 : seconds;
    }
    case PaperMetric::memory: return stored / (table.unit == "GB" ? 1073741824.0 : 1048576.0);
  }
  return stored;
}

Paper parse_paper(const std::string& text, const std::string& where) {
  toml::table root;
  try {
    root = toml::parse(text, where);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    throw PaperError(where + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) +
                     ": TOML syntax: " + std::string(e.description()));
  }
  const At top{where, "", 0};
  only_keys(root, top, {"paper", "tables"});
  Paper paper;
  paper.file = where;

  const toml::node* head = root.get("paper");
  const At p = top.key("paper", head);
  if (!head) p.fail("missing: [paper] with name, title and citation");
  const auto* info = head->as_table();
  if (!info) p.fail("expected a table");
  only_keys(*info, p, {"name", "title", "citation", "url", "hardware", "seeds", "note"});
  paper.name = *get_string(*info, "name", p, true);
  if (!is_name(paper.name)) p.key("name", info->get("name")).fail("'" + paper.name + "' is not a name (lower-case letters, digits, _, -)");
  paper.title = *get_string(*info, "title", p, true);
  paper.citation = *get_string(*info, "citation", p, true);
  paper.url = get_string(*info, "url", p, false).value_or("");
  paper.hardware = get_string(*info, "hardware", p, false).value_or("");
  paper.note = get_string(*info, "note", p, false).value_or("");
  paper.seeds = get_seeds(*info, p);

  const toml::node* tables = root.get("tables");
  const At t = top.key("tables", tables);
  if (!tables) t.fail("missing: at least one [[tables]]");
  const auto* array = tables->as_array();
  if (!array || array->empty()) t.fail("expected [[tables]] (an array of tables)");
  for (std::size_t i = 0; i < array->size(); ++i) paper.tables.push_back(parse_table((*array)[i], t.index(i, &(*array)[i])));
  return paper;
}

Paper load_paper(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw PaperError(path + ": cannot read the paper file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_paper(text.str(), path);
}

std::vector<std::string> paper_names(const std::vector<std::string>& folders) {
  std::set<std::string> names;
  for (const auto& folder : folders) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) continue;
    for (const auto& entry : fs::directory_iterator(folder, ec))
      if (entry.path().extension() == ".toml" && !entry.is_directory()) names.insert(entry.path().stem().string());
  }
  return {names.begin(), names.end()};
}

std::string find_paper(const std::string& name_or_file, const std::vector<std::string>& folders) {
  const bool is_file = name_or_file.find('/') != std::string::npos ||
                       (name_or_file.size() > 5 && name_or_file.compare(name_or_file.size() - 5, 5, ".toml") == 0);
  std::error_code ec;
  if (is_file) {
    if (!fs::is_regular_file(name_or_file, ec)) throw PaperError(name_or_file + ": no such paper file");
    return name_or_file;
  }
  for (const auto& folder : folders) {
    const fs::path candidate = fs::path(folder) / (name_or_file + ".toml");
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  // A unique first word names its paper: "kl" is kl-transformer.
  const auto names = paper_names(folders);
  std::vector<std::string> starting;
  for (const auto& n : names)
    if (n.rfind(name_or_file + "-", 0) == 0) starting.push_back(n);
  if (starting.size() == 1) return find_paper(starting.front(), folders);
  if (starting.size() > 1)
    throw PaperError("--paper '" + name_or_file + "': names several papers (" + list_text(starting) + "); give one");
  throw PaperError("--paper '" + name_or_file + "': no such paper (bundled: " + (names.empty() ? "none" : list_text(names)) +
                   "; searched " + (folders.empty() ? "nothing" : list_text(folders)) + "; or give a file's path)");
}

}  // namespace attnlab::results
