// attnlab report -o DIR: the tables, curves and study pictures of a database in one folder
// (results/report_folder.hpp).
#include <iostream>

#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "results/report_folder.hpp"

namespace attnlab {

int cmd_report(const Args& args) {
  po::options_description options("attnlab report [--db FILE] -o DIR [--where EXPR]... [--format svg|png]");
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("output,o", po::value<std::string>(), "the folder to write (created; files in it are replaced)")
      ("where", po::value<std::vector<std::string>>()->composing(), "filter, as for attnlab results (repeatable)")
      ("format", po::value<std::string>()->default_value("svg"), "pictures: svg or png")
      ("help,h", "this help");
  const auto vm = parse_command_line("report", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("output")) throw std::runtime_error("report: name the folder to write with -o DIR");

  results::ReportOptions o;
  o.out_dir = vm["output"].as<std::string>();
  o.where = vm.count("where") ? vm["where"].as<std::vector<std::string>>() : std::vector<std::string>{};
  o.pictures = results::parse_picture_format(vm["format"].as<std::string>());
  store::ResultsReader db(existing_database(vm["db"].as<std::string>()));
  const auto summary = results::write_report(db, o);
  std::size_t pictures = 0;
  for (const auto& f : summary.files) pictures += f.size() > 4 && (f.substr(f.size() - 4) == ".svg" || f.substr(f.size() - 4) == ".png");
  std::cout << o.out_dir << ": " << summary.files.size() << " files (" << pictures << " pictures), index "
            << o.out_dir << "/README.md\n";
  for (const auto& s : summary.skipped) std::cout << "  not drawn: " << s << "\n";
  return 0;
}

}  // namespace attnlab
