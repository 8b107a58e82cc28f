#include "results/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "attnlab/query.hpp"
#include "results/aggregate.hpp"

namespace attnlab::results {
namespace {

using GroupKey = std::vector<std::string>;  // the values of the --by keys

// One side of the comparison: what the user wrote, the filter it stands for, the jobs it selects.
struct Side {
  std::string name;  // "A" or "B"
  std::string given;
  std::string expression;
  std::vector<store::JobRow> jobs;
};

// What one side has for one group: the seeds that count and why the others do not.
struct SideGroup {
  std::vector<double> values;
  std::map<std::string, int> left_out;  // reason ("failed", "no test_acc", ...) -> jobs
};

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

// Every side's jobs by group, each job either a seed (done, metric present and not NaN) or a
// reason it is left out.
std::map<GroupKey, SideGroup, GroupOrder> by_group(const Side& side, const std::string& metric, const GroupOrder& order) {
  std::map<GroupKey, SideGroup, GroupOrder> groups(order);
  for (const auto& job : side.jobs) {
    SideGroup& g = groups[job.group];
    const auto& value = job.metrics.front();
    if (job.state != store::JobState::done) ++g.left_out[to_string(job.state)];
    else if (!value) ++g.left_out["no " + metric];
    else if (std::isnan(*value)) ++g.left_out[metric + " NaN"];
    else g.values.push_back(*value);
  }
  return groups;
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

}  // namespace

Comparison compare(store::Database& db, const CompareOptions& o) {
  if (!(o.level > 0 && o.level < 1)) throw std::runtime_error("compare: --level must lie strictly between 0 and 1");
  if (o.resamples < 1) throw std::runtime_error("compare: --resamples must be at least 1");
  const std::string& metric = o.metric;
  const std::vector<std::string>& where = o.where;
  Side sides[2] = {{"A", o.a, "", {}}, {"B", o.b, "", {}}};
  for (Side& side : sides) {
    side.expression = side_expression(side.given);
    store::Selection selection{where, o.by, {metric}};
    selection.where.push_back(side.expression);
    side.jobs = store::select_jobs(db, selection);  // a bad expression, key or metric: QueryError
    if (side.jobs.empty())
      throw std::runtime_error("compare: " + side.name + " ('" + side.given + "') selects no job in " + db.path());
  }
  // A sweep's keys join `by`, as in `attnlab results`: its values are not seeds.
  std::vector<std::int64_t> both;
  for (const Side& side : sides)
    for (const auto& job : side.jobs) both.push_back(job.job_id);
  std::vector<std::string> by = o.by;
  for (const auto& key : store::keys_varying_within_groups(db, both))
    if (std::find(by.begin(), by.end(), key) == by.end()) by.push_back(key);
  if (by.size() > o.by.size())
    for (Side& side : sides) {
      store::Selection selection{where, by, {metric}};
      selection.where.push_back(side.expression);
      side.jobs = store::select_jobs(db, selection);
    }
  std::set<std::int64_t> ids[2];
  for (int s = 0; s < 2; ++s)
    for (const auto& job : sides[s].jobs) ids[s].insert(job.job_id);
  if (ids[0] == ids[1])
    throw std::runtime_error("compare: A ('" + sides[0].given + "') and B ('" + sides[1].given + "') select the same " +
                             std::to_string(ids[0].size()) + " job(s)");
  std::size_t common = 0;
  for (auto id : ids[0]) common += ids[1].count(id);

  GroupOrder order;  // the order `attnlab results` lists groups in
  for (const auto& side : sides)
    for (const auto& job : side.jobs) order.see(job.group);
  const auto groups_a = by_group(sides[0], metric, order), groups_b = by_group(sides[1], metric, order);
  std::vector<std::string> only_a, only_b, shared;
  for (const auto& [key, g] : groups_a)
    (groups_b.count(key) ? shared : only_a).push_back(group_label(key));
  for (const auto& [key, g] : groups_b)
    if (!groups_a.count(key)) only_b.push_back(group_label(key));
  if (shared.empty())
    throw std::runtime_error("compare: A and B share no " + joined(by, " / ") + " (A: " + joined(only_a) +
                             "; B: " + joined(only_b) + ")");

  const bool welch = o.interval == IntervalMethod::welch;
  Comparison out;
  Grid& grid = out.grid;
  grid.header = by;
  for (const char* h : {"A n", "A mean", "A std", "B n", "B mean", "B std", "diff", "low", "high", "excludes 0", "se"})
    grid.header.push_back(h);
  if (welch) grid.header.push_back("df");
  std::vector<std::string>& notes = out.notes;
  bool small_groups = false;  // a row with an interval from under 10 seeds a side
  auto number_or_none = [](double v) { return std::isnan(v) ? Cell::none() : Cell::of_number(v); };

  for (const auto& [key, a] : groups_a) {
    const auto found = groups_b.find(key);
    if (found == groups_b.end()) continue;
    const SideGroup& b = found->second;
    const std::string label = group_label(key);
    const SeedStats sa = seed_stats(a.values), sb = seed_stats(b.values);
    std::vector<Cell> row;
    for (const auto& v : key) row.push_back(Cell::of_text(v.empty() ? "(none)" : v));
    row.push_back(Cell::of_integer(static_cast<long long>(sa.n)));
    row.push_back(number_or_none(sa.mean));
    row.push_back(number_or_none(sa.std));
    row.push_back(Cell::of_integer(static_cast<long long>(sb.n)));
    row.push_back(number_or_none(sb.mean));
    row.push_back(number_or_none(sb.std));
    row.push_back(number_or_none(sa.mean - sb.mean));  // NaN (shown "-") when a side has no seed

    // Two seeds a side for either interval: a side of one seed has no spread to estimate (Welch)
    // or to resample (the bootstrap would see none and call a single lucky seed significant).
    if (sa.n < 2 || sb.n < 2) {
      for (int i = 0; i < (welch ? 5 : 4); ++i) row.push_back(Cell::none());
      std::string why = label + ": no interval, ";
      if (sa.n < 2) why += "A has " + std::to_string(sa.n) + " seed(s)" + (sb.n < 2 ? " and " : "");
      if (sb.n < 2) why += "B has " + std::to_string(sb.n) + " seed(s)";
      notes.push_back(why + " (2 needed on each side)");
    } else {
      const DifferenceInterval ci = welch ? welch_interval(a.values, b.values, o.level)
                                          : bootstrap_interval(a.values, b.values, o.level, o.resamples, o.seed);
      row.push_back(Cell::of_number(ci.low));
      row.push_back(Cell::of_number(ci.high));
      row.push_back(Cell::of_text(ci.excludes_zero ? "yes" : "no"));
      row.push_back(Cell::of_number(ci.se));
      if (welch) row.push_back(ci.degenerate ? Cell::none() : Cell::of_number(ci.df, "%.2f"));
      small_groups |= sa.n < 10 || sb.n < 10;
      if (ci.degenerate)
        notes.push_back(label + ": every seed of each side gives the same " + metric + ": the interval is the difference itself");
    }
    for (const auto* side : {&a, &b})
      if (!side->left_out.empty())
        notes.push_back(label + ": " + (side == &a ? "A" : "B") + " jobs not counted: " + left_out_text(*side));
    grid.rows.push_back(std::move(row));
  }

  if (!only_a.empty()) notes.push_back("only A has: " + joined(only_a));
  if (!only_b.empty()) notes.push_back("only B has: " + joined(only_b));
  if (!welch && small_groups)
    notes.push_back("under 10 seeds a side the percentile bootstrap runs narrow (it cannot see the t distribution's "
                    "heavier tails): Welch's interval is the safer reading");
  if (common)
    notes.push_back("A and B share " + std::to_string(common) +
                    " job(s): the groups are not independent, so the interval is only indicative");
  notes.push_back("A = " + sides[0].expression + " (" + std::to_string(sides[0].jobs.size()) + " jobs); B = " +
                  sides[1].expression + " (" + std::to_string(sides[1].jobs.size()) + " jobs)" +
                  (where.empty() ? "" : "; both: " + joined(where, " AND ")));
  const std::string over = " interval for mean(A) - mean(B) of " + metric + " over seeds";
  notes.push_back(welch ? percent(o.level) + " Welch t" + over
                        : percent(o.level) + " percentile bootstrap" + over + " (" + std::to_string(o.resamples) +
                              " resamples, seed " + std::to_string(o.seed) + ")");

  return out;
}

}  // namespace attnlab::results
