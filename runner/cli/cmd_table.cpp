// attnlab table accuracy|cost|variance: the papers' layouts from the database (results/paper_tables.hpp).
#include <iostream>

#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "results/paper_tables.hpp"

namespace attnlab {

int cmd_table(const Args& args) {
  po::options_description options(
      "attnlab table accuracy|cost|variance [--db FILE] [--where EXPR]... [--metric NAME] [--format F]\n"
      "  accuracy: per method x task, mean ± std over seeds (n), with the average column;\n"
      "  cost: seconds per 1000 training steps and peak memory; variance: RSD, PI, AGV, VA.\n"
      "  table and markdown: the paper's layout; csv and json: one row per method, task and metric");
  options.add_options()
      ("table", po::value<std::string>(), "accuracy, cost or variance")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("where", po::value<std::vector<std::string>>()->composing(), "filter, as for attnlab results (repeatable)")
      ("metric", po::value<std::string>()->default_value("test_acc"), "the accuracy table's result (e.g. best_val_acc)")
      ("format", po::value<std::string>()->default_value("table"), "table, csv, json or markdown")
      ("help,h", "this help");
  po::positional_options_description positional;
  positional.add("table", 1);
  const auto vm = parse_command_line("table", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("table")) throw std::runtime_error("table: name the table: accuracy, cost or variance");

  const auto which = results::parse_paper_table(vm["table"].as<std::string>());
  const auto format = results::parse_format(vm["format"].as<std::string>());
  results::PaperTableOptions o;
  o.where = vm.count("where") ? vm["where"].as<std::vector<std::string>>() : std::vector<std::string>{};
  o.accuracy_metric = vm["metric"].as<std::string>();
  o.wide = format == results::Format::table || format == results::Format::markdown;
  store::Database db(existing_database(vm["db"].as<std::string>()), store::Database::Open::read_only);
  std::cout << results::render(results::paper_table(db, which, o), format);
  return 0;
}

}  // namespace attnlab
