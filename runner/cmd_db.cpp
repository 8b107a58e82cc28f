// attnlab db migrate: brings a results database to this build's schema. The only commands that
// migrate are this one, `attnlab queue add` and `attnlab run`; workers and job processes open
// the file as it is and refuse an older one (store/README.md, "Migrations").
#include <iostream>

#include "cli_options.hpp"

#include "attnlab/store.hpp"
#include "commands.hpp"

namespace attnlab {
namespace po = boost::program_options;

int cmd_db(const Args& args) {
  const char* usage =
      "usage: attnlab db migrate [--db FILE]   bring the database to this attnlab's schema version\n";
  if (args.empty()) return std::cerr << usage, 2;
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") return std::cout << usage, 0;
  if (args[0] != "migrate") {
    std::cerr << "attnlab db: unknown command '" << args[0] << "'\n" << usage;
    return 2;
  }
  po::options_description options("attnlab db migrate [--db FILE]");
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database (created if missing)")
      ("help,h", "this help");
  const auto vm = parse_command_line("db migrate", Args(args.begin() + 1, args.end()), options);
  if (vm.count("help")) return std::cout << options, 0;

  store::Database db(vm["db"].as<std::string>(), store::Database::Open::migrate);
  const int from = db.migrated_from(), to = db.schema_version();
  std::cout << db.path() << ": schema version " << from << " -> " << to;
  if (from == to) std::cout << " (up to date)";
  if (from == 0) std::cout << " (new database)";
  std::cout << "\n";
  return 0;
}

}  // namespace attnlab
