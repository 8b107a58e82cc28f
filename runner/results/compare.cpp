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

// The two sides selected, their groups matched, one row per group both have.
class Comparer {
 public:
  Comparer(store::ResultsReader& db, const CompareOptions& o) : db_(db), o_(o), welch_(o.interval == IntervalMethod::welch) {
    if (!(o.level > 0 && o.level < 1)) throw std::runtime_error("compare: --level must lie strictly between 0 and 1");
    if (o.resamples < 1) throw std::runtime_error("compare: --resamples must be at least 1");
  }

  Comparison run() {
    select_sides();
    const std::size_t common = jobs_in_common();
    GroupOrder order;  // the order `attnlab results` lists groups in
    for (const auto& side : sides_)
      for (const auto& job : side.jobs) order.see(job.group);
    const auto groups_a = by_group(sides_[0], o_.metric, order), groups_b = by_group(sides_[1], o_.metric, order);
    std::vector<std::string> only_a, only_b, shared;
    for (const auto& [key, g] : groups_a) (groups_b.count(key) ? shared : only_a).push_back(group_label(key));
    for (const auto& [key, g] : groups_b)
      if (!groups_a.count(key)) only_b.push_back(group_label(key));
    if (shared.empty())
      throw std::runtime_error("compare: A and B share no " + joined(by_, " / ") + " (A: " + joined(only_a) +
                               "; B: " + joined(only_b) + ")");

    header();
    for (const auto& [key, a] : groups_a)
      if (const auto b = groups_b.find(key); b != groups_b.end()) add_row(key, a, b->second);
    closing_notes(only_a, only_b, common);
    return std::move(out_);
  }

 private:
  // Each side's jobs. A sweep's keys join `by`, as in `attnlab results`: its values are not seeds.
  void select_sides() {
    by_ = o_.by;
    for (Side& side : sides_) {
      side.expression = side_expression(side.given);
      side.jobs = select(side, by_);  // a bad expression, key or metric: QueryError
      if (side.jobs.empty())
        throw std::runtime_error("compare: " + side.name + " ('" + side.given + "') selects no job in " + db_.path());
    }
    std::vector<std::int64_t> both;
    for (const Side& side : sides_)
      for (const auto& job : side.jobs) both.push_back(job.job_id);
    for (const auto& key : store::keys_varying_within_groups(db_, both))
      if (std::find(by_.begin(), by_.end(), key) == by_.end()) by_.push_back(key);
    if (by_.size() > o_.by.size())
      for (Side& side : sides_) side.jobs = select(side, by_);
  }

  std::vector<store::JobRow> select(const Side& side, const std::vector<std::string>& by) const {
    store::Selection selection{o_.where, by, {o_.metric}};
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
    for (const char* h : {"A n", "A mean", "A std", "B n", "B mean", "B std", "diff", "low", "high", "excludes 0", "se"})
      out_.grid.header.push_back(h);
    if (welch_) out_.grid.header.push_back("df");
  }

  void add_row(const GroupKey& key, const SideGroup& a, const SideGroup& b) {
    const std::string label = group_label(key);
    const SeedStats sa = seed_stats(a.values), sb = seed_stats(b.values);
    auto number_or_none = [](double v) { return std::isnan(v) ? Cell::none() : Cell::of_number(v); };
    std::vector<Cell> row;
    for (const auto& v : key) row.push_back(Cell::of_text(v.empty() ? "(none)" : v));
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
    if (!only_a.empty()) notes.push_back("only A has: " + joined(only_a));
    if (!only_b.empty()) notes.push_back("only B has: " + joined(only_b));
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
  std::vector<std::string> by_;  // --by, and a sweep's keys
  bool small_groups_ = false;    // a row with an interval from under 10 seeds a side
  Comparison out_;
};

}  // namespace

Comparison compare(store::ResultsReader& db, const CompareOptions& o) { return Comparer(db, o).run(); }

}  // namespace attnlab::results
