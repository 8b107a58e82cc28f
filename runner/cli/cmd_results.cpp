// attnlab results: filter the jobs, group them, aggregate metrics over seeds (store/query.hpp,
// results/aggregate.hpp).
#include <iostream>

#include "attnlab/query.hpp"
#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "results/results_query.hpp"

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

  results::ResultsQuery query;
  query.where = option_values(vm, "where");
  if (vm.count("group-by")) query.group_by = list("group-by");
  if (vm.count("metric")) query.metrics = list("metric");
  query.per_job = vm.count("jobs") > 0;
  const auto format = results::parse_format(vm["format"].as<std::string>());

  store::ResultsReader db(existing_database(vm["db"].as<std::string>()));
  const bool compact = format == results::Format::table || format == results::Format::markdown;
  const auto grid = results::results_for(db, query, compact);
  if (grid.rows.empty() && format == results::Format::table) {
    std::cout << "no jobs match\n";
    return 0;
  }
  std::cout << results::render(grid, format);
  return 0;
}

}  // namespace attnlab
