#include "results/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "attnlab/query.hpp"
#include "results/aggregate.hpp"
#include "results/sweep.hpp"

namespace attnlab::results {
namespace {

using GroupKey = std::vector<std::string>;   // the values of the --by keys (and of a dataset's swept keys)
using ConfigKey = std::vector<std::string>;  // the values of the configuration keys ("" where a job lacks one)

// One side of the comparison: what the user wrote, the filter it stands for, the jobs it selects.
struct Side {
  std::string name;  // "A" or "B"
  std::string given;
  std::string expression;
  std::vector<store::JobRow> jobs;
};

// What one side has in one configuration on one group: the seeds that count and why the others do
// not, and the validation results that pick it.
struct SideGroup {
  std::string label;              // "features=256 lr=0.001"; "" when its jobs lack every configuration key
  std::set<std::string> methods;  // of its jobs
  std::vector<double> values;
  std::map<std::string, int> left_out;  // reason ("failed", "no test_acc", ...) -> jobs
  std::vector<double> validation;       // kPickMetric of its done jobs, where they have it
};

// A side's configurations on one group, in GroupOrder (numbers by value: features=64 before 128).
using Configurations = std::map<ConfigKey, SideGroup, GroupOrder>;
using SideGroups = std::map<GroupKey, Configurations, GroupOrder>;

// A side is an expression when it holds an operator, a space or a parenthesis; otherwise it is a
// method name, quoted here (a quote doubled) so that no name can change the expression's meaning.
std::string side_expression(const std::string& side) {
  if (side.find_first_of("=!<> \t()") != std::string::npos) return side;
  std::string quoted = "'";
  for (char c : side) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return "method = " + quoted + "'";
}

std::string group_label(const GroupKey& key) {
  std::string label;
  for (const auto& v : key) label += (label.empty() ? "" : " / ") + (v.empty() ? std::string("(none)") : v);
  return label;
}

std::string joined(const std::vector<std::string>& words, const char* separator = ", ") {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : separator) + w;
  return out;
}

// A dataset's settings (datasets.sparse_sum.sparsity) make the task; every other swept key (a
// method's features, train.lr) makes a side's configuration.
bool is_task_key(const std::string& key) { return key.rfind("datasets.", 0) == 0; }

// "features=256 lr=0.001": the configuration keys a job has, as results/sweep.hpp labels them.
std::string configuration_label(const std::vector<std::string>& keys, const ConfigKey& values) {
  std::string label;
  for (std::size_t k = 0; k < keys.size(); ++k)
    if (!values[k].empty()) label += (label.empty() ? "" : " ") + key_value_label(keys[k], values[k]);
  return label;
}

// "performer features=256": the configuration with its method(s), for a note.
std::string configuration_name(const SideGroup& g) {
  std::string name;
  for (const auto& m : g.methods) name += (name.empty() ? "" : "+") + m;
  return g.label.empty() ? name : name + " " + g.label;
}

// At most three labels, each cut to 40 characters, and how many more: a message stays one line.
std::string few(const std::vector<std::string>& labels) {
  constexpr std::size_t kShown = 3, kWidth = 40;
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < labels.size() && i < kShown; ++i)
    shown.push_back(labels[i].size() > kWidth ? labels[i].substr(0, kWidth - 3) + "..." : labels[i]);
  std::string out = joined(shown);
  if (labels.size() > kShown) out += " and " + std::to_string(labels.size() - kShown) + " more";
  return out;
}

std::string fixed4(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

// One job counted in its configuration: a seed (done, metric present and not NaN) or a reason it is
// left out; its validation result (at `validation_at` among its metrics) where it has one.
void count_job(SideGroup& g, const store::JobRow& job, const std::string& metric, std::optional<std::size_t> validation_at) {
  const auto& value = job.metrics.front();
  if (job.state != store::JobState::done) ++g.left_out[to_string(job.state)];
  else if (!value) ++g.left_out["no " + metric];
  else if (std::isnan(*value)) ++g.left_out[metric + " NaN"];
  else g.values.push_back(*value);
  if (job.state != store::JobState::done || !validation_at) return;
  const auto& validation = job.metrics[*validation_at];
  if (validation && !std::isnan(*validation)) g.validation.push_back(*validation);
}

// Every side's jobs by group, then by configuration (JobRow::group: the `task_keys` group values,
// then the configuration keys' values).
SideGroups by_group(const Side& side, std::size_t task_keys, const std::vector<std::string>& config_keys,
                    const std::string& metric, std::optional<std::size_t> validation_at, const GroupOrder& tasks,
                    const GroupOrder& configs) {
  SideGroups groups(tasks);
  for (const auto& job : side.jobs) {
    const auto split = job.group.begin() + static_cast<std::ptrdiff_t>(task_keys);
    Configurations& configurations = groups.try_emplace(GroupKey(job.group.begin(), split), configs).first->second;
    const ConfigKey config(split, job.group.end());
    SideGroup& g = configurations[config];
    if (g.methods.empty()) g.label = configuration_label(config_keys, config);
    g.methods.insert(job.method);
    count_job(g, job, metric, validation_at);
  }
  return groups;
}

// A configuration as Pick::best_validation ranks it.
struct Ranked {
  const SideGroup* group = nullptr;
  double validation = kNaN;  // mean kPickMetric over its done seeds; NaN when none has it
  std::size_t seeds = 0;     // of the compared metric
  std::size_t listed = 0;    // its place in GroupOrder
};

// A mean validation before none, the higher first; then more seeds of the compared metric; then the
// one listed first. Never a tie: the pick is the same on every run.
bool ranks_before(const Ranked& x, const Ranked& y) {
  const bool vx = !std::isnan(x.validation), vy = !std::isnan(y.validation);
  if (vx != vy) return vx;
  if (vx && x.validation != y.validation) return x.validation > y.validation;
  if (x.seeds != y.seeds) return x.seeds > y.seeds;
  return x.listed < y.listed;
}

std::vector<Ranked> ranked(const Configurations& configurations) {
  std::vector<Ranked> out;
  for (const auto& [key, g] : configurations)
    out.push_back({&g, seed_stats(g.validation).mean, g.values.size(), out.size()});
  std::sort(out.begin(), out.end(), ranks_before);
  return out;
}

// What decided between the first two of `r` (ranked), once both tie or lack the validation.
std::string tie_break(const Ranked& best, const Ranked& next, const std::string& metric) {
  return best.seeds != next.seeds ? "for more " + metric + " seeds" : "as listed first";
}

// "listops: A takes performer features=256 of 3 configurations: best mean best_val_acc 0.5300 (2
// seeds)": one line, what each side used on the task and why.
std::string pick_line(const std::string& task, const std::string& side, const std::vector<Ranked>& r,
                      const std::string& metric) {
  const Ranked &best = r[0], &next = r[1];
  std::string line = task + ": " + side + " takes " + configuration_name(*best.group) + " of " + std::to_string(r.size()) +
                     " configurations: ";
  if (std::isnan(best.validation))
    return line + "none has " + kPickMetric + ", taken " + tie_break(best, next, metric);
  line += "best mean " + std::string(kPickMetric) + " " + fixed4(best.validation) + " (" +
          std::to_string(best.group->validation.size()) + " seeds)";
  if (next.validation == best.validation)
    line += ", tied with " + (next.group->label.empty() ? configuration_name(*next.group) : next.group->label) +
            ", taken " + tie_break(best, next, metric);
  return line;
}

std::string left_out_text(const SideGroup& g) {
  std::vector<std::string> parts;
  for (const auto& [reason, n] : g.left_out) parts.push_back(std::to_string(n) + " " + reason);
  return joined(parts);
}

std::string percent(double level) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%%", level * 100);
  return buf;
}

// The two sides selected, their groups matched, each side made one configuration per group (or
// every pair of them under Pick::all), one row per group both have.
class Comparer {
 public:
  Comparer(store::ResultsReader& db, const CompareOptions& o) : db_(db), o_(o), welch_(o.interval == IntervalMethod::welch) {
    if (!(o.level > 0 && o.level < 1)) throw std::runtime_error("compare: --level must lie strictly between 0 and 1");
    if (o.resamples < 1) throw std::runtime_error("compare: --resamples must be at least 1");
  }

  Comparison run() {
    select_sides();
    const std::size_t common = jobs_in_common();
    GroupOrder tasks, configs;  // the order `attnlab results` lists groups in
    for (const auto& side : sides_)
      for (const auto& job : side.jobs) {
        const auto split = job.group.begin() + static_cast<std::ptrdiff_t>(by_.size());
        tasks.see(GroupKey(job.group.begin(), split));
        configs.see(ConfigKey(split, job.group.end()));
      }
    const auto groups_a = side_groups(sides_[0], tasks, configs), groups_b = side_groups(sides_[1], tasks, configs);
    std::vector<std::string> only_a, only_b, shared;
    for (const auto& [key, g] : groups_a) (groups_b.count(key) ? shared : only_a).push_back(group_label(key));
    for (const auto& [key, g] : groups_b)
      if (!groups_a.count(key)) only_b.push_back(group_label(key));
    if (shared.empty()) throw no_shared_group(only_a, only_b);

    header();
    for (const auto& [key, a] : groups_a)
      if (const auto b = groups_b.find(key); b != groups_b.end()) add_rows(key, a, b->second);
    closing_notes(only_a, only_b, common);
    return std::move(out_);
  }

 private:
  // Each side's jobs. A sweep's keys are never averaged over as seeds: a dataset's join `by`, as in
  // `attnlab results`; the others tell a side's configurations apart (config_keys_).
  void select_sides() {
    by_ = o_.by;
    for (Side& side : sides_) {
      side.expression = side_expression(side.given);
      side.jobs = select(side, by_, {o_.metric});  // a bad expression, key or metric: QueryError
      if (side.jobs.empty())
        throw std::runtime_error("compare: " + side.name + " ('" + side.given + "') selects no job in " + db_.path());
    }
    std::vector<std::int64_t> both;
    for (const Side& side : sides_)
      for (const auto& job : side.jobs) both.push_back(job.job_id);
    std::vector<std::string> task_keys;
    for (const auto& key : store::keys_varying_within_groups(db_, both))
      if (std::find(by_.begin(), by_.end(), key) == by_.end()) (is_task_key(key) ? task_keys : config_keys_).push_back(key);
    if (o_.metric == kPickMetric) validation_at_ = 0;
    if (task_keys.empty() && config_keys_.empty()) return;
    by_.insert(by_.end(), task_keys.begin(), task_keys.end());
    std::vector<std::string> group_by = by_, metrics = {o_.metric};
    group_by.insert(group_by.end(), config_keys_.begin(), config_keys_.end());
    if (!config_keys_.empty() && o_.pick == Pick::best_validation && !validation_at_ && has_result(kPickMetric)) {
      metrics.push_back(kPickMetric);
      validation_at_ = 1;
    }
    for (Side& side : sides_) side.jobs = select(side, group_by, metrics);
  }

  bool has_result(const std::string& name) const {
    const auto names = store::result_names(db_);
    return std::binary_search(names.begin(), names.end(), name);
  }

  SideGroups side_groups(const Side& side, const GroupOrder& tasks, const GroupOrder& configs) const {
    return by_group(side, by_.size(), config_keys_, o_.metric, validation_at_, tasks, configs);
  }

  // "compare: A and B share no dataset: A has 1 (text), B has 2 (image, listops)": counts and the
  // first few, never the whole list.
  std::runtime_error no_shared_group(const std::vector<std::string>& only_a, const std::vector<std::string>& only_b) const {
    std::vector<std::string> keys;
    for (const auto& key : by_) keys.push_back(key.substr(key.rfind('.') + 1));
    return std::runtime_error("compare: A and B share no " + joined(keys, " / ") + ": A has " +
                              std::to_string(only_a.size()) + " (" + few(only_a) + "), B has " +
                              std::to_string(only_b.size()) + " (" + few(only_b) + ")");
  }

  std::vector<store::JobRow> select(const Side& side, const std::vector<std::string>& by,
                                    const std::vector<std::string>& metrics) const {
    store::Selection selection{o_.where, by, metrics};
    selection.where.push_back(side.expression);
    return store::select_jobs(db_, selection);
  }

  // How many jobs both sides select; the same jobs on both sides are no comparison.
  std::size_t jobs_in_common() const {
    std::set<std::int64_t> ids[2];
    for (int s = 0; s < 2; ++s)
      for (const auto& job : sides_[s].jobs) ids[s].insert(job.job_id);
    if (ids[0] == ids[1])
      throw std::runtime_error("compare: A ('" + sides_[0].given + "') and B ('" + sides_[1].given + "') select the same " +
                               std::to_string(ids[0].size()) + " job(s)");
    std::size_t common = 0;
    for (auto id : ids[0]) common += ids[1].count(id);
    return common;
  }

  void header() {
    out_.grid.header = by_;
    if (!config_keys_.empty())
      for (const char* h : {"A config", "B config"}) out_.grid.header.push_back(h);
    for (const char* h : {"A n", "A mean", "A std", "B n", "B mean", "B std", "diff", "low", "high", "excludes 0", "se"})
      out_.grid.header.push_back(h);
    if (welch_) out_.grid.header.push_back("df");
  }

  // One group: each side's configurations made one (a line saying which where there was a choice),
  // or, under Pick::all, a row for each pair.
  void add_rows(const GroupKey& key, const Configurations& a, const Configurations& b) {
    const std::string task = group_label(key);
    const auto chosen_a = choose(task, sides_[0], a), chosen_b = choose(task, sides_[1], b);
    for (const SideGroup* x : chosen_a)
      for (const SideGroup* y : chosen_b) add_row(key, *x, *y);
  }

  std::vector<const SideGroup*> choose(const std::string& task, const Side& side, const Configurations& configurations) {
    std::vector<const SideGroup*> all;
    for (const auto& [config, g] : configurations) all.push_back(&g);
    if (o_.pick == Pick::all || all.size() == 1) return all;
    const auto r = ranked(configurations);
    out_.notes.push_back(pick_line(task, side.name, r, o_.metric));
    return {r.front().group};
  }

  // How a row is named in a note: its group, and under Pick::all which pair of configurations.
  std::string row_label(const GroupKey& key, const SideGroup& a, const SideGroup& b) const {
    const std::string task = group_label(key);
    if (o_.pick != Pick::all || config_keys_.empty()) return task;
    auto shown = [](const SideGroup& g) { return g.label.empty() ? std::string("-") : g.label; };
    return task + " (A " + shown(a) + ", B " + shown(b) + ")";
  }

  void add_row(const GroupKey& key, const SideGroup& a, const SideGroup& b) {
    const std::string label = row_label(key, a, b);
    const SeedStats sa = seed_stats(a.values), sb = seed_stats(b.values);
    auto number_or_none = [](double v) { return std::isnan(v) ? Cell::none() : Cell::of_number(v); };
    std::vector<Cell> row;
    for (const auto& v : key) row.push_back(Cell::of_text(v.empty() ? "(none)" : v));
    if (!config_keys_.empty())
      for (const SideGroup* g : {&a, &b}) row.push_back(Cell::of_text(g->label));
    for (const SeedStats* st : {&sa, &sb}) {
      row.push_back(Cell::of_integer(static_cast<long long>(st->n)));
      row.push_back(number_or_none(st->mean));
      row.push_back(number_or_none(st->std));
    }
    row.push_back(number_or_none(sa.mean - sb.mean));  // NaN (shown "-") when a side has no seed
    add_interval(row, label, a, b, sa, sb);
    for (const auto* side : {&a, &b})
      if (!side->left_out.empty())
        out_.notes.push_back(label + ": " + (side == &a ? "A" : "B") + " jobs not counted: " + left_out_text(*side));
    out_.grid.rows.push_back(std::move(row));
  }

  // Two seeds a side for either interval: a side of one seed has no spread to estimate (Welch) or
  // to resample (the bootstrap would see none and call a single lucky seed significant).
  void add_interval(std::vector<Cell>& row, const std::string& label, const SideGroup& a, const SideGroup& b,
                    const SeedStats& sa, const SeedStats& sb) {
    if (sa.n < 2 || sb.n < 2) {
      for (int i = 0; i < (welch_ ? 5 : 4); ++i) row.push_back(Cell::none());
      std::string why = label + ": no interval, ";
      if (sa.n < 2) why += "A has " + std::to_string(sa.n) + " seed(s)" + (sb.n < 2 ? " and " : "");
      if (sb.n < 2) why += "B has " + std::to_string(sb.n) + " seed(s)";
      out_.notes.push_back(why + " (2 needed on each side)");
      return;
    }
    const DifferenceInterval ci = welch_ ? welch_interval(a.values, b.values, o_.level)
                                         : bootstrap_interval(a.values, b.values, o_.level, o_.resamples, o_.seed);
    row.push_back(Cell::of_number(ci.low));
    row.push_back(Cell::of_number(ci.high));
    row.push_back(Cell::of_text(ci.excludes_zero ? "yes" : "no"));
    row.push_back(Cell::of_number(ci.se));
    if (welch_) row.push_back(ci.degenerate ? Cell::none() : Cell::of_number(ci.df, "%.2f"));
    small_groups_ |= sa.n < 10 || sb.n < 10;
    if (ci.degenerate)
      out_.notes.push_back(label + ": every seed of each side gives the same " + o_.metric +
                           ": the interval is the difference itself");
  }

  void closing_notes(const std::vector<std::string>& only_a, const std::vector<std::string>& only_b, std::size_t common) {
    auto& notes = out_.notes;
    if (!only_a.empty()) notes.push_back("only A has: " + few(only_a));
    if (!only_b.empty()) notes.push_back("only B has: " + few(only_b));
    if (!config_keys_.empty())
      notes.push_back("configurations (a sweep's values, never pooled as seeds) differ in " + few(config_keys_) +
                      (o_.pick == Pick::all ? ": a row for each pair of A's and B's (--pick all)"
                                            : ": per task, each side's with the best mean " +
                                                  std::string(kPickMetric) + " (--pick all: every pair)"));
    if (!welch_ && small_groups_)
      notes.push_back("under 10 seeds a side the percentile bootstrap runs narrow (it cannot see the t distribution's "
                      "heavier tails): Welch's interval is the safer reading");
    if (common)
      notes.push_back("A and B share " + std::to_string(common) +
                      " job(s): the groups are not independent, so the interval is only indicative");
    notes.push_back("A = " + sides_[0].expression + " (" + std::to_string(sides_[0].jobs.size()) + " jobs); B = " +
                    sides_[1].expression + " (" + std::to_string(sides_[1].jobs.size()) + " jobs)" +
                    (o_.where.empty() ? "" : "; both: " + joined(o_.where, " AND ")));
    const std::string over = " interval for mean(A) - mean(B) of " + o_.metric + " over seeds";
    notes.push_back(welch_ ? percent(o_.level) + " Welch t" + over
                           : percent(o_.level) + " percentile bootstrap" + over + " (" + std::to_string(o_.resamples) +
                                 " resamples, seed " + std::to_string(o_.seed) + ")");
  }

  store::ResultsReader& db_;
  const CompareOptions& o_;
  const bool welch_;
  Side sides_[2] = {{"A", o_.a, "", {}}, {"B", o_.b, "", {}}};
  std::vector<std::string> by_;           // --by, and a dataset's swept keys
  std::vector<std::string> config_keys_;  // the other swept keys: what tells a side's configurations apart
  std::optional<std::size_t> validation_at_;  // kPickMetric's place among a JobRow's metrics, when asked for
  bool small_groups_ = false;    // a row with an interval from under 10 seeds a side
  Comparison out_;
};

}  // namespace

Pick parse_pick(const std::string& word) {
  if (word == "best-val") return Pick::best_validation;
  if (word == "all") return Pick::all;
  throw std::invalid_argument("unknown pick rule '" + word + "' (best-val or all)");
}

const char* to_string(Pick pick) { return pick == Pick::best_validation ? "best-val" : "all"; }

Comparison compare(store::ResultsReader& db, const CompareOptions& o) { return Comparer(db, o).run(); }

}  // namespace attnlab::results
