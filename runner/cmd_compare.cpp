// attnlab compare A B: two methods (or any two groups of jobs) on the tasks they share. Per task,
// each side's seeds (jobs that ended done with the metric), their mean and standard deviation, the
// difference of means A − B and its confidence interval (results/stats.hpp), and whether the
// interval excludes zero.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>

#include "cli_options.hpp"
#include "commands.hpp"

#include "attnlab/query.hpp"
#include "attnlab/store.hpp"
#include "results/aggregate.hpp"
#include "results/cli_common.hpp"
#include "results/formats.hpp"
#include "results/stats.hpp"

namespace attnlab {
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

// Group values in the order `attnlab results` uses: numbers by value (64 before 128), text alphabetically.
bool natural_less(const GroupKey& x, const GroupKey& y) {
  return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end(), results::value_less);
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
std::map<GroupKey, SideGroup, decltype(&natural_less)> by_group(const Side& side, const std::string& metric) {
  std::map<GroupKey, SideGroup, decltype(&natural_less)> groups(&natural_less);
  for (const auto& job : side.jobs) {
    SideGroup& g = groups[job.group];
    const auto& value = job.metrics.front();
    if (job.state != "done") ++g.left_out[job.state];
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

constexpr const char* kUsage =
    "attnlab compare A B [options]\n"
    "  A and B: a method name, or a --where expression (anything with an operator, a space or a\n"
    "  parenthesis: \"method = skyformer AND methods.skyformer.landmarks = 64\"). Per task both share,\n"
    "  the difference of mean metric A - B over seeds (jobs that ended done) with its interval";

}  // namespace

int cmd_compare(const Args& args) {
  namespace po = boost::program_options;
  po::options_description options(kUsage);
  options.add_options()
      ("a", po::value<std::string>(), "group A")
      ("b", po::value<std::string>(), "group B")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("metric", po::value<std::string>()->default_value("test_acc"), "the result compared")
      ("where", po::value<std::vector<std::string>>()->composing(), "filter applied to both sides (repeatable, all must hold)")
      ("by", po::value<std::string>()->default_value("dataset"), "what a row is: a key, or keys separated by commas")
      ("ci", po::value<std::string>()->default_value("welch"), "welch (t interval) or bootstrap (percentile)")
      ("level", po::value<double>()->default_value(0.95, "0.95"), "confidence level, in (0, 1)")
      ("resamples", po::value<int>()->default_value(10000), "bootstrap resamples")
      ("seed", po::value<std::uint64_t>()->default_value(1), "bootstrap random seed")
      ("format", po::value<std::string>()->default_value("table"), "table, csv, json or markdown")
      ("help,h", "this help");
  po::positional_options_description positional;
  positional.add("a", 1).add("b", 1);
  const auto vm = parse_command_line("compare", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("a") || !vm.count("b")) throw std::runtime_error("compare: name the two groups, A and B");

  const std::string metric = vm["metric"].as<std::string>();
  const double level = vm["level"].as<double>();
  if (!(level > 0 && level < 1)) throw std::runtime_error("compare: --level must lie strictly between 0 and 1");
  const int resamples = vm["resamples"].as<int>();
  if (resamples < 1) throw std::runtime_error("compare: --resamples must be at least 1");
  const std::uint64_t seed = vm["seed"].as<std::uint64_t>();
  std::vector<std::string> by;
  results::IntervalMethod method;
  results::Format format;
  try {
    by = results::split_list({vm["by"].as<std::string>()}, "--by");
    method = results::parse_interval_method(vm["ci"].as<std::string>());
    format = results::parse_format(vm["format"].as<std::string>());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("compare: ") + e.what());
  }
  const std::vector<std::string> where =
      vm.count("where") ? vm["where"].as<std::vector<std::string>>() : std::vector<std::string>{};

  store::Database db(results::existing_database(vm["db"].as<std::string>()), store::Database::Open::read_only);
  Side sides[2] = {{"A", vm["a"].as<std::string>(), "", {}}, {"B", vm["b"].as<std::string>(), "", {}}};
  for (Side& side : sides) {
    side.expression = side_expression(side.given);
    store::Selection selection{where, by, {metric}};
    selection.where.push_back(side.expression);
    side.jobs = store::select_jobs(db, selection);  // a bad expression, key or metric: QueryError
    if (side.jobs.empty())
      throw std::runtime_error("compare: " + side.name + " ('" + side.given + "') selects no job in " + db.path());
  }
  std::set<std::int64_t> ids[2];
  for (int s = 0; s < 2; ++s)
    for (const auto& job : sides[s].jobs) ids[s].insert(job.job_id);
  if (ids[0] == ids[1])
    throw std::runtime_error("compare: A ('" + sides[0].given + "') and B ('" + sides[1].given + "') select the same " +
                             std::to_string(ids[0].size()) + " job(s)");
  std::size_t common = 0;
  for (auto id : ids[0]) common += ids[1].count(id);

  const auto groups_a = by_group(sides[0], metric), groups_b = by_group(sides[1], metric);
  std::vector<std::string> only_a, only_b, shared;
  for (const auto& [key, g] : groups_a)
    (groups_b.count(key) ? shared : only_a).push_back(group_label(key));
  for (const auto& [key, g] : groups_b)
    if (!groups_a.count(key)) only_b.push_back(group_label(key));
  if (shared.empty())
    throw std::runtime_error("compare: A and B share no " + joined(by, " / ") + " (A: " + joined(only_a) +
                             "; B: " + joined(only_b) + ")");

  const bool welch = method == results::IntervalMethod::welch;
  results::Grid grid;
  grid.header = by;
  for (const char* h : {"A n", "A mean", "A std", "B n", "B mean", "B std", "diff", "low", "high", "excludes 0", "se"})
    grid.header.push_back(h);
  if (welch) grid.header.push_back("df");
  std::vector<std::string> notes;
  bool small_groups = false;  // a row with an interval from under 10 seeds a side
  auto number_or_none = [](double v) { return std::isnan(v) ? results::Cell::none() : results::Cell::of_number(v); };

  for (const auto& [key, a] : groups_a) {
    const auto found = groups_b.find(key);
    if (found == groups_b.end()) continue;
    const SideGroup& b = found->second;
    const std::string label = group_label(key);
    const results::SeedStats sa = results::seed_stats(a.values), sb = results::seed_stats(b.values);
    std::vector<results::Cell> row;
    for (const auto& v : key) row.push_back(results::Cell::of_text(v.empty() ? "(none)" : v));
    row.push_back(results::Cell::of_integer(static_cast<long long>(sa.n)));
    row.push_back(number_or_none(sa.mean));
    row.push_back(number_or_none(sa.std));
    row.push_back(results::Cell::of_integer(static_cast<long long>(sb.n)));
    row.push_back(number_or_none(sb.mean));
    row.push_back(number_or_none(sb.std));
    row.push_back(number_or_none(sa.mean - sb.mean));  // NaN (shown "-") when a side has no seed

    // Two seeds a side for either interval: a side of one seed has no spread to estimate (Welch)
    // or to resample (the bootstrap would see none and call a single lucky seed significant).
    if (sa.n < 2 || sb.n < 2) {
      for (int i = 0; i < (welch ? 5 : 4); ++i) row.push_back(results::Cell::none());
      std::string why = label + ": no interval, ";
      if (sa.n < 2) why += "A has " + std::to_string(sa.n) + " seed(s)" + (sb.n < 2 ? " and " : "");
      if (sb.n < 2) why += "B has " + std::to_string(sb.n) + " seed(s)";
      notes.push_back(why + " (2 needed on each side)");
    } else {
      const results::DifferenceInterval ci = welch ? results::welch_interval(a.values, b.values, level)
                                                   : results::bootstrap_interval(a.values, b.values, level, resamples, seed);
      row.push_back(results::Cell::of_number(ci.low));
      row.push_back(results::Cell::of_number(ci.high));
      row.push_back(results::Cell::of_text(ci.excludes_zero ? "yes" : "no"));
      row.push_back(results::Cell::of_number(ci.se));
      if (welch) row.push_back(ci.degenerate ? results::Cell::none() : results::Cell::of_number(ci.df, "%.2f"));
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
  notes.push_back(welch ? percent(level) + " Welch t" + over
                        : percent(level) + " percentile bootstrap" + over + " (" + std::to_string(resamples) +
                              " resamples, seed " + std::to_string(seed) + ")");

  // CSV and JSON carry no footnotes: they go to stderr there, so a pipe gets clean data.
  if (format == results::Format::table || format == results::Format::markdown) {
    grid.notes = notes;
    std::cout << results::render(grid, format);
  } else {
    std::cout << results::render(grid, format);
    for (const auto& n : notes) std::cerr << n << "\n";
  }
  return 0;
}

}  // namespace attnlab
