// attnlab compare A B: two methods (or any two groups of jobs) on the tasks they share; the
// comparison itself is results/compare.hpp (attnlab report shows the same one per method).
#include <iostream>
#include <stdexcept>

#include "cli/cli_options.hpp"
#include "cli/commands.hpp"

#include "attnlab/store.hpp"
#include "results/compare.hpp"
#include "results/formats.hpp"

namespace attnlab {
namespace {

constexpr const char* kUsage =
    "attnlab compare A B [options]\n"
    "  A and B: a method name, or a --where expression (anything with an operator, a space or a\n"
    "  parenthesis: \"method = skyformer AND methods.skyformer.landmarks = 64\"). Per task both share,\n"
    "  the difference of mean metric A - B over seeds (jobs that ended done) with its interval.\n"
    "  A side with several configurations on a task (a sweep's features, learning rates) takes the\n"
    "  one with the best mean best_val_acc, and a note says which; name one in the side's expression\n"
    "  (\"method = performer AND methods.performer.features = 256\") to take it instead";

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
      ("pick", po::value<std::string>()->default_value("best-val"),
       "a side with several configurations on a task: best-val (the best mean best_val_acc) or all (a row per pair)")
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

  results::CompareOptions o;
  o.a = vm["a"].as<std::string>();
  o.b = vm["b"].as<std::string>();
  o.metric = vm["metric"].as<std::string>();
  o.level = vm["level"].as<double>();
  o.resamples = vm["resamples"].as<int>();
  o.seed = vm["seed"].as<std::uint64_t>();
  results::Format format;
  try {
    o.by = split_list(vm["by"].as<std::string>(), "compare: --by");
    o.interval = results::parse_interval_method(vm["ci"].as<std::string>());
    o.pick = results::parse_pick(vm["pick"].as<std::string>());
    format = results::parse_format(vm["format"].as<std::string>());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("compare: ") + e.what());
  }
  if (vm.count("where")) o.where = vm["where"].as<std::vector<std::string>>();

  store::ResultsReader db(existing_database(vm["db"].as<std::string>()));
  results::Comparison comparison = results::compare(db, o);
  results::Grid& grid = comparison.grid;
  const std::vector<std::string>& notes = comparison.notes;

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
