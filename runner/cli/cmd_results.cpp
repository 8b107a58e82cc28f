// attnlab results: filter the jobs, group them, aggregate metrics over seeds (store/query.hpp,
// results/aggregate.hpp).
#include <iostream>

#include "attnlab/query.hpp"
#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "results/aggregate.hpp"
#include "results/sweep.hpp"

namespace attnlab {

int cmd_results(const Args& args) {
  po::options_description options(
      "attnlab results [--db FILE] [--where EXPR]... [--group-by KEYS] [--metric NAMES] [--format F] [--jobs]\n"
      "  EXPR: key op value joined with AND / OR / NOT and parentheses; op: = != < <= > >= IN (...);\n"
      "  key: method, dataset, seed, experiment, status, job, run, or any config key (train.lr, ...).\n"
      "  e.g. --where \"dataset = listops AND (train.lr < 1e-3 OR method IN (softmax, skyformer))\"");
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("where", po::value<std::vector<std::string>>()->composing(), "filter (repeatable: all must hold)")
      ("group-by", po::value<std::vector<std::string>>()->composing(), "keys to group by (default method,dataset, and the config keys that differ within those groups: a sweep's)")
      ("metric", po::value<std::vector<std::string>>()->composing(), "result names (default test_acc)")
      ("format", po::value<std::string>()->default_value("table"), "table, csv, json or markdown")
      ("jobs", "one row per job (its counting run) instead of groups")
      ("help,h", "this help");
  const auto vm = parse_command_line("results", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  const auto list = [&](const char* name) {
    return split_list(option_values(vm, name), std::string("results: --") + name);
  };

  store::Selection selection;
  selection.where = option_values(vm, "where");
  selection.group_by = vm.count("group-by") ? list("group-by") : std::vector<std::string>{"method", "dataset"};
  selection.metrics = vm.count("metric") ? list("metric") : std::vector<std::string>{"test_acc"};
  const auto format = results::parse_format(vm["format"].as<std::string>());

  store::Database db(existing_database(vm["db"].as<std::string>()), store::Database::Open::read_only);
  // A sweep whose runs all failed, or have not finished, has no test_acc yet: the counts still
  // answer "where does it stand?" (a --metric named by hand must exist).
  if (!vm.count("metric") && store::result_names(db).empty()) selection.metrics.clear();
  auto rows = store::select_jobs(db, selection);
  if (!vm.count("group-by")) {
    // By default a sweep's keys join method and dataset (values of a swept key are not seeds), and
    // so does a precision other than fp32.
    std::vector<std::int64_t> ids;
    for (const auto& row : rows) ids.push_back(row.job_id);
    const auto swept = results::summary_keys(db, ids);
    if (!swept.empty()) {
      selection.group_by.insert(selection.group_by.end(), swept.begin(), swept.end());
      rows = store::select_jobs(db, selection);
    }
  }
  if (rows.empty() && format == results::Format::table) {
    std::cout << "no jobs match\n";
    return 0;
  }
  const bool compact = format == results::Format::table || format == results::Format::markdown;
  std::cout << results::render(results::results_grid(selection, rows, vm.count("jobs") > 0, compact), format);
  return 0;
}

}  // namespace attnlab
