#include "experiment/experiment.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <toml++/toml.h>

#include "attnlab/train/config.hpp"
#include "plugin_host/hashing.hpp"

namespace attnlab {
namespace {

// Where an error points: FILE:LINE: [section] key: problem
struct Place {
  const std::string& file;
  std::string section;
};

[[noreturn]] void fail(const Place& at, std::uint32_t line, const std::string& key, const std::string& problem) {
  std::string out = at.file;
  if (line > 0) out += ":" + std::to_string(line);
  out += ": ";
  if (!at.section.empty()) out += "[" + at.section + "] ";
  if (!key.empty()) out += key + ": ";
  throw ConfigError(out + problem);
}

std::uint32_t line_of(const toml::node& node) { return node.source().begin.line; }

std::string known_keys(const ParamSpec* specs, std::size_t count, const std::vector<std::string>& extra = {}) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) out += (out.empty() ? "" : ", ") + std::string(specs[i].name);
  for (const auto& e : extra) out += (out.empty() ? "" : ", ") + e;
  return out.empty() ? "none" : out;
}

// A TOML scalar as a ParamValue; anything else (array, table, date) is refused.
bool scalar_value(const toml::node& node, ParamValue& out) {
  if (auto v = node.as_integer()) return out = v->get(), true;
  if (auto v = node.as_floating_point()) return out = v->get(), true;
  if (auto v = node.as_boolean()) return out = v->get(), true;
  if (auto v = node.as_string()) return out = v->get(), true;
  return false;
}

// A table's settings: one value per key, and the keys given as an array of values (a sweep: one
// job per value). `values` holds a swept key's first value.
struct Sweep {
  std::string key;
  std::vector<ParamValue> values;
};
struct Settings {
  ParamValues values;
  std::vector<Sweep> sweeps;

  void set(const std::string& key, const ParamValue& value) {
    values.set(key, value);
    sweeps.erase(std::remove_if(sweeps.begin(), sweeps.end(), [&](const Sweep& s) { return s.key == key; }), sweeps.end());
  }
  // The keys `over` sets (one value or a sweep) replace this one's.
  void overlay(const Settings& over) {
    for (const auto& [key, value] : over.values.all()) set(key, value);
    for (const auto& sweep : over.sweeps) sweeps.push_back(sweep);
  }
};

// Checks every key of `table` against the schema and applies it over `out`. Keys in `skip`
// are sub-tables the caller handles. An array of values is a sweep over them.
void apply_table(const toml::table& table, const ParamSpec* specs, std::size_t count, Settings& out,
                 const Place& at, const std::string& owner, const std::vector<std::string>& skip = {}) {
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    const auto line = key.source().begin.line ? key.source().begin.line : line_of(node);
    const ParamSpec* spec = find_param(specs, count, name);
    if (!spec) fail(at, line, name, "unknown key" + owner + " (known: " + known_keys(specs, count, skip) + ")");
    auto checked = [&](const toml::node& element) {
      ParamValue value;
      if (!scalar_value(element, value))
        fail(at, line, name, std::string(spec->type == ParamType::integer ? "expected an " : "expected a ") +
                                 to_string(spec->type) + " or an array of them" + owner);
      try {
        return check_param(*spec, value);
      } catch (const ParamError& e) {
        fail(at, line_of(element), "", std::string(e.what()) + owner);  // ParamError messages start with the key
      }
    };
    if (const auto* array = node.as_array()) {
      if (array->empty()) fail(at, line, name, "an empty array sweeps over nothing" + owner);
      Sweep sweep{name, {}};
      for (const auto& element : *array) {
        ParamValue value = checked(element);
        if (std::find(sweep.values.begin(), sweep.values.end(), value) != sweep.values.end())
          fail(at, line_of(element), name, to_text(value) + " is named twice");
        sweep.values.push_back(std::move(value));
      }
      out.set(name, sweep.values.front());
      out.sweeps.push_back(std::move(sweep));
    } else {
      out.set(name, checked(node));
    }
  }
}

// A resolved configuration: one value per key.
void apply_table(const toml::table& table, const ParamSpec* specs, std::size_t count, ParamValues& values,
                 const Place& at, const std::string& owner) {
  Settings settings{values, {}};
  apply_table(table, specs, count, settings, at, owner);
  if (!settings.sweeps.empty()) fail(at, 0, settings.sweeps.front().key, "a resolved configuration holds one value per key");
  values = std::move(settings.values);
}

const toml::table* sub_table(const toml::table& parent, const std::string& name, const Place& at) {
  const toml::node* node = parent.get(name);
  if (!node) return nullptr;
  if (!node->is_table()) fail(at, line_of(*node), name, "expected a table");
  return node->as_table();
}

void add_section(toml::table& root, const std::string& path, const ParamValues& values,
                 std::vector<std::pair<std::string, std::string>>& flat) {
  toml::table section;
  for (const auto& [key, value] : values.all()) {
    std::visit([&](const auto& v) { section.insert_or_assign(key, v); }, value);
    flat.push_back({path + "." + key, to_text(value)});
  }
  // "methods.softmax" -> [methods.softmax]
  auto dot = path.find('.');
  if (dot == std::string::npos) {
    root.insert_or_assign(path, std::move(section));
  } else {
    auto outer = path.substr(0, dot);
    if (!root.contains(outer)) root.insert_or_assign(outer, toml::table{});
    root.get_as<toml::table>(outer)->insert_or_assign(path.substr(dot + 1), std::move(section));
  }
}

void finish_plan(JobPlan& job) {
  toml::table root;
  root.insert_or_assign("method", job.method);
  root.insert_or_assign("dataset", job.dataset);
  root.insert_or_assign("seed", job.seed);
  job.flat = {{"method", job.method}, {"dataset", job.dataset}, {"seed", std::to_string(job.seed)}};
  add_section(root, "model", job.model, job.flat);
  add_section(root, "train", job.train, job.flat);
  add_section(root, "methods." + job.method, job.method_params, job.flat);
  add_section(root, "datasets." + job.dataset, job.dataset_params, job.flat);
  std::ostringstream text;
  text << root << "\n";
  job.config_toml = text.str();
  // The identity leaves out what changes how a job runs but never its numbers (resume is exact;
  // a CUDA graph replays the step's own kernels): a new checkpoint cadence, checkpoints kept at
  // accuracy marks, or the step as a graph, is the same job, not a new one.
  toml::table identity = root;
  auto& train = *identity.get_as<toml::table>("train");
  train.erase("checkpoint_every");
  train.erase("accuracy_checkpoints");
  train.erase("cuda_graphs");
  // Keys added after jobs were stored enter the identity only away from their defaults, which are
  // what those jobs ran with: a database's jobs keep their hashes (a re-added file adds nothing).
  for (const auto& [key, old_default] : {std::pair<const char*, std::string>{"precision", "fp32"}, {"tf32", "false"},
                                         {"deterministic", "false"}, {"clip_value", "0.0"},
                                         {"keep_best_after", "0.0"}, {"eval_draw", "first"}, {"test_drop_last", "false"}})
    if (const auto it = job.train.all().find(key); it != job.train.all().end() && to_text(it->second) == old_default)
      train.erase(key);
  for (const auto& [key, old_default] : {std::pair<const char*, const char*>{"attention_precision", "autocast"}, {"mask", "lengths"},
                                                                     {"attention_bias", "true"}, {"init", "default"},
                                                                     {"pair_head", "nli"}, {"init_from", ""},
                                                                     {"init_from_sha256", ""}})
    if (const auto it = job.model.all().find(key); it != job.model.all().end() && to_text(it->second) == old_default)
      identity.get_as<toml::table>("model")->erase(key);
  // Plugins' parameters added after their jobs were stored, likewise.
  for (const auto& [method, key, old_default] : {std::tuple<const char*, const char*, const char*>{"kernelized", "dropout", "0.0"},
                                                 {"nystromformer", "segments", "real_tokens"},
                                                 {"performer", "form", "favor"},
                                                 {"linformer", "share_e", "false"},
                                                 {"linear_elu", "form", "katharopoulos"}})
    if (const auto it = job.method_params.all().find(key);
        job.method == method && it != job.method_params.all().end() && to_text(it->second) == old_default)
      identity.get_as<toml::table>("methods")->get_as<toml::table>(job.method)->erase(key);
  for (const auto& [dataset, key, old_default] : {std::tuple<const char*, const char*, const char*>{"listops", "close_bracket", "token"}})
    if (const auto it = job.dataset_params.all().find(key);
        job.dataset == dataset && it != job.dataset_params.all().end() && to_text(it->second) == old_default)
      identity.get_as<toml::table>("datasets")->get_as<toml::table>(job.dataset)->erase(key);
  std::ostringstream identity_text;
  identity_text << identity << "\n";
  job.config_hash = sha256_of_text(identity_text.str());
}

const LoadedPlugin& plugin_or_fail(const PluginRegistry& registry, PluginKind kind, const std::string& name,
                                   const Place& at, std::uint32_t line) {
  if (const auto* plugin = registry.find(kind, name)) return *plugin;
  std::string found;
  for (const auto& n : registry.names(kind)) found += (found.empty() ? "" : ", ") + n;
  fail(at, line, "", std::string("no ") + to_string(kind) + " plugin named '" + name + "' (found: " +
                          (found.empty() ? "none" : found) + ")");
}

// Line `number` (1-based) of `text`, without surrounding blanks.
std::string line_of(const std::string& text, std::size_t number) {
  std::istringstream in(text);
  std::string line;
  for (std::size_t i = 0; i < number && std::getline(in, line); ++i) {
  }
  const auto first = line.find_first_not_of(" \t"), last = line.find_last_not_of(" \t\r");
  return first == std::string::npos ? "" : line.substr(first, last - first + 1);
}

toml::table parse_toml(const std::string& text, const std::string& where) {
  try {
    return toml::parse(text, where);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    std::string description(e.description());
    // toml++ garbles a quoted key in this one ('methods."sosoftmax"'): the header as written instead
    if (description.find("cannot redefine existing table") != std::string::npos)
      description = "table " + line_of(text, begin.line) + " is defined twice";
    throw ConfigError(where + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column) +
                      ": TOML syntax: " + description);
  }
}

// Checks that the resolved [model] and [train] sections hold together (head_dim 0 needs dim
// divisible by heads; variance_passes is not 1).
// Where the file sets `key` of [model] or [train] (`part`) for one (method, dataset): the most
// specific table, as the overlay applies them. Line 0: not set, the default.
struct Origin {
  std::string section;
  std::uint32_t line = 0;
};
Origin origin_of(const toml::table& root, const std::string& part, const std::string& method,
                 const std::string& dataset, const std::string& key) {
  if (const auto* n = root["methods"][method][part][key].node()) return {"methods." + method + "." + part, line_of(*n)};
  if (const auto* n = root["datasets"][dataset][part][key].node()) return {"datasets." + dataset + "." + part, line_of(*n)};
  if (const auto* n = root[part][key].node()) return {part, line_of(*n)};
  return {part, 0};
}

// Checks across keys, each error naming the keys the user set and their lines.
void check_model(const JobPlan& job, const toml::table& root, const Place& pair) {
  auto origin = [&](const char* part, const std::string& key) { return origin_of(root, part, job.method, job.dataset, key); };
  const auto heads = job.model.integer("heads"), dim = job.model.integer("dim");
  if (job.model.integer("head_dim") == 0 && dim % heads != 0) {
    const Origin h = origin("model", "heads"), d = origin("model", "dim");
    const Origin& blamed = h.line || !d.line ? h : d;  // the one the user set; heads when both or neither
    const Origin& other = &blamed == &h ? d : h;
    const std::string other_key = &blamed == &h ? "dim" : "heads";
    fail({pair.file, blamed.section}, blamed.line, &blamed == &h ? "heads" : "dim",
         std::to_string(heads) + " heads do not divide dim = " + std::to_string(dim) + " ([" + other.section + "] " +
             other_key + (other.line ? " at line " + std::to_string(other.line) : ": the default") +
             "); make dim a multiple of heads, or set head_dim");
  }
  for (const char* part : {"model", "train"}) {
    try {
      part == std::string("model") ? (void)model_config_from(job.model) : (void)train_config_from(job.train);
    } catch (const ParamError& e) {
      // the message starts with the key ("variance_passes: ..."): point at the line that set it
      const std::string what = e.what();
      const Origin o = origin(part, what.substr(0, what.find(':')));
      if (o.line) fail({pair.file, o.section}, o.line, "", what);
      fail(pair, 0, "", what);
    }
  }
}

// [model] init_from: the weights file, relative to the experiment file's folder, made absolute, and
// the SHA-256 of its bytes recorded in init_from_sha256 (part of the job's identity, checked again
// when the job starts); a SHA-256 the file writes itself is checked instead of recorded.
void resolve_init_from(JobPlan& job, const toml::table& root, const std::string& path) {
  const std::string given = job.model.string("init_from"), pinned = job.model.string("init_from_sha256");
  const Origin from = origin_of(root, "model", job.method, job.dataset, "init_from");
  if (given.empty()) {
    if (pinned.empty()) return;
    const Origin o = origin_of(root, "model", job.method, job.dataset, "init_from_sha256");
    fail({path, o.section}, o.line, "init_from_sha256", "is set without init_from");
  }
  namespace fs = std::filesystem;
  const fs::path file = fs::absolute(fs::path(path).parent_path() / given).lexically_normal();
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) fail({path, from.section}, from.line, "init_from", file.string() + ": no such file");
  const std::string sha256 = sha256_of_file(file.string());
  if (sha256.empty()) fail({path, from.section}, from.line, "init_from", file.string() + ": cannot be read");
  if (!pinned.empty() && pinned != sha256) {
    const Origin o = origin_of(root, "model", job.method, job.dataset, "init_from_sha256");
    fail({path, o.section}, o.line, "init_from_sha256",
         pinned + " is not the SHA-256 of " + file.string() + " (" + sha256 + ")");
  }
  job.model.set("init_from", file.string());
  job.model.set("init_from_sha256", sha256);
}

// A warm-up longer than the run: the learning rate never reaches lr. Allowed (a smoke test may
// mean it), but never silent: one warning per distinct line, at the line that set warmup, else steps.
void warn_long_warmup(const JobPlan& job, const toml::table& root, const std::string& path,
                      std::vector<std::string>& warnings) {
  const std::int64_t warmup = job.train.integer("warmup"), steps = job.train.integer("steps");
  if (warmup <= steps) return;
  Origin o = origin_of(root, "train", job.method, job.dataset, "warmup");
  if (!o.line) o = origin_of(root, "train", job.method, job.dataset, "steps");
  char peak[32];
  std::snprintf(peak, sizeof peak, "%.3g%%", 100.0 * static_cast<double>(steps) / static_cast<double>(warmup));
  const std::string warning = path + (o.line ? ":" + std::to_string(o.line) : "") + ": [" + o.section +
                              "] warmup = " + std::to_string(warmup) + " is longer than steps = " + std::to_string(steps) +
                              ": the learning rate never reaches lr (it peaks at " + peak + " of it)";
  if (std::find(warnings.begin(), warnings.end(), warning) == warnings.end()) warnings.push_back(warning);
}

// The file's text; ConfigError for a folder or an unreadable file.
std::string read_experiment_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw ConfigError(path + ": is a folder, not an experiment file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot read the experiment file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void check_sections(const toml::table& root, const std::string& path) {
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (name != "experiment" && name != "model" && name != "train" && name != "methods" && name != "datasets")
      fail({path, ""}, key.source().begin.line, name,
           "unknown section (known: experiment, model, train, methods, datasets)");
    if (!node.is_table()) fail({path, ""}, key.source().begin.line, name, "expected a table");
  }
}

// [experiment]: name (default: the file's stem), description, seeds (default: [1]).
void read_experiment_section(const toml::table& root, const std::string& path, Experiment& experiment) {
  experiment.name = std::filesystem::path(path).stem().string();
  experiment.seeds = {1};
  const auto* section = sub_table(root, "experiment", {path, ""});
  if (!section) return;
  const Place at{path, "experiment"};
  for (const auto& [key, node] : *section) {
    const std::string name(key.str());
    const auto line = key.source().begin.line;
    if (name == "name" || name == "description") {
      if (!node.is_string()) fail(at, line, name, "expected a string");
      (name == "name" ? experiment.name : experiment.description) = node.as_string()->get();
    } else if (name == "seeds") {
      const auto* seeds = node.as_array();
      if (!seeds || seeds->empty()) fail(at, line, name, "expected a non-empty array of integers");
      experiment.seeds.clear();
      for (const auto& seed : *seeds) {
        if (!seed.is_integer() || seed.as_integer()->get() < 0) fail(at, line, name, "seeds must be integers >= 0");
        const std::int64_t value = seed.as_integer()->get();
        // a repeated seed is the same job again, never a second sample
        if (std::find(experiment.seeds.begin(), experiment.seeds.end(), value) != experiment.seeds.end())
          fail(at, line_of(seed), name, std::to_string(value) + " is named twice");
        experiment.seeds.push_back(value);
      }
    } else {
      fail(at, line, name, "unknown key (known: name, description, seeds)");
    }
  }
}

// One [methods.X] or [datasets.Y] table: the plugin's parameters, its [.model]/[.train] overrides,
// and (a method) its parameters for one dataset ([methods.X.datasets.Y]).
struct PluginEntry {
  std::string name;
  Settings params, model, train;  // model/train: only the keys this table overrides
  std::vector<std::pair<std::string, Settings>> per_dataset;
};

// A [methods.NAME] table with `script = "FILE.pt"` names a TorchScript method: the file (relative
// to the experiment file's folder) is registered under the table's name, whose one parameter is
// then the file's absolute path.
void register_script(const toml::table& table, const std::string& name, const std::string& path, const std::string& where,
                     const PluginRegistry& registry) {
  const toml::node* node = table.get("script");
  if (!node) return;
  if (!node->is_string()) fail({path, where}, line_of(*node), "script", "expected the path of a TorchScript file (a string)");
  const std::filesystem::path file = std::filesystem::path(path).parent_path() / node->as_string()->get();
  try {
    registry.add_script(name, file.lexically_normal().string());
  } catch (const std::exception& e) {
    fail({path, where}, line_of(*node), "script", e.what());
  }
}

PluginEntry plugin_entry(const toml::key& key, const toml::node& node, const std::string& path, const char* kind_section,
                         PluginKind kind, const PluginRegistry& registry) {
  PluginEntry entry{std::string(key.str()), {}, {}, {}, {}};
  const std::string where = std::string(kind_section) + "." + entry.name;
  if (!node.is_table()) fail({path, ""}, key.source().begin.line, where, "expected a table");
  if (kind == PluginKind::attention) register_script(*node.as_table(), entry.name, path, where, registry);
  const auto& plugin = plugin_or_fail(registry, kind, entry.name, {path, where}, key.source().begin.line);
  entry.params.values = plugin.defaults();
  const auto& table = *node.as_table();
  const std::string owner = std::string(" (") + to_string(kind) + " plugin " + entry.name + ")";
  const bool method = kind == PluginKind::attention;
  std::vector<std::string> sub_tables = {"model", "train"};
  if (method) sub_tables.push_back("datasets");
  apply_table(table, plugin.info->params, plugin.info->param_count, entry.params, {path, where}, owner, sub_tables);
  if (plugin.scripted()) entry.params.values = plugin.defaults();  // `script` as the absolute path
  if (const auto* t = sub_table(table, "model", {path, where}))
    apply_table(*t, model_params().data(), model_params().size(), entry.model, {path, where + ".model"}, "");
  if (const auto* t = sub_table(table, "train", {path, where}))
    apply_table(*t, train_params().data(), train_params().size(), entry.train, {path, where + ".train"}, "");
  if (const auto* per = method ? sub_table(table, "datasets", {path, where}) : nullptr) {
    for (const auto& [dataset_key, dataset_node] : *per) {
      const std::string dataset(dataset_key.str()), at = where + ".datasets." + dataset;
      if (!dataset_node.is_table()) fail({path, ""}, dataset_key.source().begin.line, at, "expected a table");
      if (const auto* script = plugin.scripted() ? dataset_node.as_table()->get("script") : nullptr)
        fail({path, at}, line_of(*script), "script", "a scripted method's file is set in [" + where + "] only");
      Settings settings;
      apply_table(*dataset_node.as_table(), plugin.info->params, plugin.info->param_count, settings, {path, at}, owner);
      entry.per_dataset.push_back({dataset, std::move(settings)});
    }
  }
  return entry;
}

// Every [methods.X] (or [datasets.Y]) table, in the file's order: toml++ keeps a table's keys
// sorted by name, and the jobs follow the file (the order results tables and pictures then show).
std::vector<PluginEntry> plugin_entries(const toml::table& root, const std::string& path, const char* kind_section,
                                        PluginKind kind, const PluginRegistry& registry) {
  const auto* section = sub_table(root, kind_section, {path, ""});
  if (!section || section->empty())
    fail({path, ""}, 0, "", std::string("no [") + kind_section + ".NAME] table: name at least one " + to_string(kind) + " plugin");
  std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order;
  for (const auto& [key, node] : *section) in_file_order.push_back({&key, &node});
  std::stable_sort(in_file_order.begin(), in_file_order.end(), [](const auto& a, const auto& b) {
    return a.first->source().begin < b.first->source().begin;
  });
  std::vector<PluginEntry> out;
  for (const auto& [key, node] : in_file_order) out.push_back(plugin_entry(*key, *node, path, kind_section, kind, registry));
  return out;
}

Settings layered(Settings base, const Settings& first, const Settings* second) {
  base.overlay(first);
  if (second) base.overlay(*second);
  return base;
}

// The jobs of one method on one dataset. Precedence: [model]/[train] < [datasets.Y.model] <
// [methods.X.model]; a method's parameters < [methods.X.datasets.Y]. Then one job per combination
// of the swept values (dataset, method, model, train keys, in that order; the last fastest), and
// per seed.
void add_jobs(const PluginEntry& method, const PluginEntry& dataset, const Settings& model, const Settings& train,
              const toml::table& root, const std::string& path, Experiment& experiment) {
  const Settings* method_for_dataset = nullptr;
  for (const auto& [name, settings] : method.per_dataset)
    if (name == dataset.name) method_for_dataset = &settings;
  const std::array<Settings, 4> parts = {dataset.params, layered(method.params, {}, method_for_dataset),
                                         layered(model, dataset.model, &method.model),
                                         layered(train, dataset.train, &method.train)};
  std::vector<std::pair<std::size_t, const Sweep*>> axes;  // (part, sweep)
  for (std::size_t p = 0; p < parts.size(); ++p)
    for (const auto& sweep : parts[p].sweeps) axes.push_back({p, &sweep});
  std::vector<std::size_t> choice(axes.size(), 0);
  for (bool more = true; more;) {
    std::array<ParamValues, 4> values = {parts[0].values, parts[1].values, parts[2].values, parts[3].values};
    for (std::size_t a = 0; a < axes.size(); ++a)
      values[axes[a].first].set(axes[a].second->key, axes[a].second->values[choice[a]]);
    for (auto seed : experiment.seeds) {
      JobPlan job;
      job.method = method.name;
      job.dataset = dataset.name;
      job.seed = seed;
      job.dataset_params = values[0];
      job.method_params = values[1];
      job.model = values[2];
      job.train = values[3];
      check_model(job, root, {path, "methods." + method.name + " x datasets." + dataset.name});
      resolve_init_from(job, root, path);
      warn_long_warmup(job, root, path, experiment.warnings);
      finish_plan(job);
      experiment.jobs.push_back(std::move(job));
    }
    more = false;
    for (std::size_t a = axes.size(); a-- > 0;) {
      if (++choice[a] < axes[a].second->values.size()) {
        more = true;
        break;
      }
      choice[a] = 0;
    }
  }
}

}  // namespace

Experiment load_experiment(const std::string& path, const PluginRegistry& registry) {
  Experiment experiment;
  experiment.source_path = path;
  experiment.source_text = read_experiment_file(path);
  const toml::table root = parse_toml(experiment.source_text, path);
  check_sections(root, path);
  read_experiment_section(root, path, experiment);

  // [model], [train]: core's schemas
  Settings model{ParamValues::defaults(model_params().data(), model_params().size()), {}};
  Settings train{ParamValues::defaults(train_params().data(), train_params().size()), {}};
  if (const auto* t = sub_table(root, "model", {path, ""})) apply_table(*t, model_params().data(), model_params().size(), model, {path, "model"}, "");
  if (const auto* t = sub_table(root, "train", {path, ""})) apply_table(*t, train_params().data(), train_params().size(), train, {path, "train"}, "");

  const auto methods = plugin_entries(root, path, "methods", PluginKind::attention, registry);
  const auto datasets = plugin_entries(root, path, "datasets", PluginKind::dataset, registry);
  for (const auto& method : methods)
    for (const auto& [dataset, settings] : method.per_dataset)
      if (std::none_of(datasets.begin(), datasets.end(), [&](const PluginEntry& d) { return d.name == dataset; }))
        fail({path, "methods." + method.name + ".datasets." + dataset},
             line_of(*root["methods"][method.name]["datasets"][dataset].node()), "",
             "no [datasets." + dataset + "] in this file for these settings to apply to");
  for (const auto& method : methods)
    for (const auto& dataset : datasets) add_jobs(method, dataset, model, train, root, path, experiment);
  return experiment;
}

JobPlan parse_job_config(const std::string& config_toml, const std::string& where, const PluginRegistry& registry) {
  const toml::table root = parse_toml(config_toml, where);
  JobPlan job;
  const Place top{where, ""};
  auto text = [&](const char* key) -> std::string {
    const auto* node = root.get(key);
    if (!node || !node->is_string()) fail(top, 0, key, "missing");
    return node->as_string()->get();
  };
  job.method = text("method");
  job.dataset = text("dataset");
  const auto* seed = root.get("seed");
  if (!seed || !seed->is_integer()) fail(top, 0, "seed", "missing");
  job.seed = seed->as_integer()->get();
  job.model = ParamValues::defaults(model_params().data(), model_params().size());
  job.train = ParamValues::defaults(train_params().data(), train_params().size());
  if (const auto* t = sub_table(root, "model", top)) apply_table(*t, model_params().data(), model_params().size(), job.model, {where, "model"}, "");
  if (const auto* t = sub_table(root, "train", top)) apply_table(*t, train_params().data(), train_params().size(), job.train, {where, "train"}, "");
  if (const auto* methods = sub_table(root, "methods", top))
    if (const auto* t = sub_table(*methods, job.method, top))
      if (const auto* script = t->get_as<std::string>("script")) try {
          registry.add_script(job.method, script->get());
        } catch (const std::exception& e) {
          fail({where, "methods." + job.method}, 0, "script", e.what());
        }
  const auto& method = plugin_or_fail(registry, PluginKind::attention, job.method, top, 0);
  const auto& dataset = plugin_or_fail(registry, PluginKind::dataset, job.dataset, top, 0);
  job.method_params = method.defaults();
  job.dataset_params = dataset.defaults();
  if (const auto* methods = sub_table(root, "methods", top))
    if (const auto* t = sub_table(*methods, job.method, top))
      apply_table(*t, method.info->params, method.info->param_count, job.method_params, {where, "methods." + job.method}, "");
  if (const auto* datasets = sub_table(root, "datasets", top))
    if (const auto* t = sub_table(*datasets, job.dataset, top))
      apply_table(*t, dataset.info->params, dataset.info->param_count, job.dataset_params, {where, "datasets." + job.dataset}, "");
  finish_plan(job);
  return job;
}

}  // namespace attnlab
