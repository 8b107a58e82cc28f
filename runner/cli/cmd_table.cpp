// attnlab table accuracy|cost|variance: the papers' layouts from the database (results/paper_tables.hpp),
// with --paper beside a paper's published numbers (results/paper_data.hpp, conf/papers/).
#include <filesystem>
#include <iostream>
#include <system_error>

#include "build_info.hpp"
#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "results/paper_tables.hpp"

namespace attnlab {
namespace {

// The bundled papers: found from the executable, as the bundled plugins are (plugin_host.cpp), in
// an installed tree (<prefix>/share/attnlab/conf/papers) or the build folder (<build>/conf/papers).
std::vector<std::string> bundled_paper_dirs() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const fs::path root = exe.parent_path().parent_path();
  if (fs::is_directory(root / build_info::kInstalledPaperDir, ec)) return {(root / build_info::kInstalledPaperDir).string()};
  return {(root / build_info::kBuildPaperDir).string()};
}

}  // namespace

int cmd_table(const Args& args) {
  po::options_description options(
      "attnlab table accuracy|cost|variance [--db FILE] [--where EXPR]... [--metric NAME] [--paper NAME|FILE] [--format F]\n"
      "  accuracy: per method x task, mean ± std over seeds (n), with the average column;\n"
      "  cost: seconds per 1000 training steps and peak memory; variance: RSD, PI, AGV, VA.\n"
      "  --paper (accuracy, cost): ours beside a paper's published numbers, in its units, with the\n"
      "  difference (accuracy) or ratio (cost) per cell; NAME is a bundled paper (skyformer, kl-transformer).\n"
      "  table and markdown: the paper's layout; csv and json: one row per method, task and metric");
  options.add_options()
      ("table", po::value<std::string>(), "accuracy, cost or variance")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("where", po::value<std::vector<std::string>>()->composing(), "filter, as for attnlab results (repeatable)")
      ("metric", po::value<std::string>()->default_value("test_acc"), "the accuracy table's result (e.g. best_val_acc)")
      ("paper", po::value<std::string>(), "a bundled paper's name (conf/papers/NAME.toml) or a paper file")
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
  std::optional<results::Paper> paper;
  if (vm.count("paper")) {
    paper = results::load_paper(results::find_paper(vm["paper"].as<std::string>(), bundled_paper_dirs()));
    o.paper = &*paper;
  }
  store::ResultsReader db(existing_database(vm["db"].as<std::string>()));
  std::cout << results::render(results::paper_table(db, which, o), format);
  return 0;
}

}  // namespace attnlab
