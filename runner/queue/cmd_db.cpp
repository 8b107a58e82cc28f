// attnlab db migrate: brings a results database to this build's schema. The only commands that
// migrate are this one, `attnlab queue add` and `attnlab run`; workers and job processes open
// the file as it is and refuse an older one (store/README.md, "Migrations").
// attnlab db gc: removes the checkpoint files nothing can use any more (checkpoint_sweep.hpp).
// attnlab db check: SQLite's full integrity check of the file.
#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli/cli_options.hpp"

#include "attnlab/store.hpp"
#include "queue/checkpoint_sweep.hpp"
#include "cli/commands.hpp"

namespace attnlab {
namespace po = boost::program_options;

namespace {

std::string mebibytes(std::uintmax_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

int cmd_db_gc(const Args& args) {
  po::options_description options("attnlab db gc [--db FILE] [--dir DIR] [--dry-run]");
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("dir", po::value<std::string>(), "checkpoint folder (default: DB.ckpt)")
      ("dry-run", "count what would be removed; remove nothing")
      ("help,h", "this help");
  const auto vm = parse_command_line("db gc", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  store::ResultsReader db(vm["db"].as<std::string>());
  const std::string dir = vm.count("dir") ? vm["dir"].as<std::string>() : checkpoint_dir_of(db.path());
  const bool dry_run = vm.count("dry-run") > 0;
  const CheckpointSweep sweep = sweep_checkpoints(db, dir, std::nullopt, dry_run);
  std::cout << dir << ": " << (dry_run ? "would remove " : "removed ") << sweep.removed << " file(s), "
            << mebibytes(sweep.bytes) << (dry_run ? "" : " freed") << "; kept " << sweep.kept
            << " (checkpoints of done, diverged or oom runs, resume points, running jobs)";
  if (sweep.unknown) std::cout << "; left alone " << sweep.unknown << " naming runs this database does not have";
  std::cout << "\n";
  return 0;
}

// Exit 0 when the file is intact, 1 (each problem on a line of its own) when it is not.
int cmd_db_check(const Args& args) {
  po::options_description options("attnlab db check [--db FILE]");
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("help,h", "this help");
  const auto vm = parse_command_line("db check", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  store::ResultsReader db(vm["db"].as<std::string>(), store::ResultsReader::Check::none);
  const auto start = std::chrono::steady_clock::now();
  const auto problems = db.integrity_problems(100);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.2f s", seconds);
  if (problems.empty()) return std::cout << db.path() << ": ok (PRAGMA integrity_check, " << took << ")\n", 0;
  std::cout << db.path() << ": damaged: " << problems.size() << (problems.size() == 100 ? "+" : "")
            << " problem(s) (PRAGMA integrity_check, " << took << "); restore the file from a copy\n";
  for (const auto& problem : problems) std::cout << "  " << problem << "\n";
  return 1;
}

}  // namespace

int cmd_db(const Args& args) {
  const char* usage =
      "usage: attnlab db migrate [--db FILE]   bring the database to this attnlab's schema version\n"
      "       attnlab db gc [--db FILE] [--dry-run]   remove checkpoint files no job can use any more\n"
      "       attnlab db check [--db FILE]   SQLite's full integrity check (exit 1 when the file is damaged)\n";
  if (args.empty()) return std::cerr << usage, 2;
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") return std::cout << usage, 0;
  if (args[0] == "gc") return cmd_db_gc(Args(args.begin() + 1, args.end()));
  if (args[0] == "check") return cmd_db_check(Args(args.begin() + 1, args.end()));
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
