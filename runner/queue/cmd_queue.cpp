// attnlab queue add|list|show|cancel|retry: the job queue in the results database, seen and
// steered from the command line. Workers (attnlab worker) take the jobs; semantics of states,
// attempts and leases: store/README.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/cli_options.hpp"

#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "cli/commands.hpp"
#include "experiment/enqueue.hpp"
#include "plugin_host/plugin_host.hpp"
#include "results/formats.hpp"
#include "cli/text_table.hpp"

namespace attnlab {
namespace po = boost::program_options;
namespace {

constexpr const char* kUsage =
    "usage: attnlab queue <command> [options]\n"
    "  add EXPERIMENT.toml   expand the experiment and queue its jobs (again: adds nothing queued or done)\n"
    "  list                  the jobs, filtered by --state, --method, --dataset\n"
    "  show JOB              one job: its config and every attempt\n"
    "  cancel JOB...         queued, running or submitted jobs -> cancelled\n"
    "  retry JOB...          failed, cancelled, diverged, oom or blocked jobs -> queued, failure counts reset\n"
    "attnlab queue <command> --help shows its options.\n";

void add_db_option(po::options_description& options) {
  options.add_options()("db", po::value<std::string>()->default_value("attnlab.db"), "results database");
}

// The --state values: "queue: unknown job state 'x' (one of queued, running, ...)" for a typo.
std::vector<store::JobState> checked_states(const std::vector<std::string>& names) {
  std::vector<store::JobState> states;
  for (const auto& name : names) {
    try {
      states.push_back(store::parse_job_state(name));
    } catch (const store::StoreError& e) {
      throw std::runtime_error(std::string("queue: ") + e.what());
    }
  }
  return states;
}

std::vector<std::int64_t> job_ids(const std::string& command, const std::vector<std::string>& texts) {
  std::vector<std::int64_t> ids;
  for (const auto& t : texts) {
    std::size_t used = 0;
    long long id = 0;
    try {
      id = std::stoll(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != t.size() || id <= 0) throw std::runtime_error("queue " + command + ": '" + t + "' is not a job id");
    ids.push_back(id);
  }
  return ids;
}

double now_unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string seconds_from_now(double unix_seconds) {
  const double now = now_unix_seconds();
  char buf[48];
  const double left = unix_seconds - now;
  if (left >= 0)
    std::snprintf(buf, sizeof buf, "expires in %.0f s", left);
  else if (-left < 86400)
    std::snprintf(buf, sizeof buf, "expired %.0f s ago", -left);
  else
    return "expired";  // e.g. a run that was 'running' when the database was migrated
  return buf;
}

std::string failures_cell(const store::QueuedJob& q) {
  std::string cell = std::to_string(q.failures) + "/" + std::to_string(q.max_attempts);
  if (q.infra_failures > 0)  // attempts ended from outside: counted apart; in a row without progress: capped
    cell += ", lost " + std::to_string(q.infra_failures) + " (" + std::to_string(q.lost_in_a_row) + "/" +
            std::to_string(q.max_infra_failures) + " in a row)";
  return cell;
}

// A table cell of one line: the first line of the text, cut to `width` characters.
std::string short_cell(const std::string& text, std::size_t width = 60) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() <= width ? line : line.substr(0, width - 3) + "...";
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// "3 queued, 1 running": the states that have jobs.
std::string counts_line(const std::vector<std::pair<store::JobState, std::int64_t>>& counts) {
  std::string line;
  for (const auto& [state, n] : counts)
    if (n) line += (line.empty() ? "" : ", ") + std::to_string(n) + " " + to_string(state);
  return line.empty() ? "no jobs" : line;
}

int queue_add(const Args& args) {
  po::options_description options("attnlab queue add EXPERIMENT.toml [options]");
  add_db_option(options);
  options.add_options()
      ("experiment", po::value<std::string>(), "the experiment file (TOML)")
      ("rerun", "queue again the jobs that ended (done, failed, diverged, oom, cancelled)")
      ("force", "load datasets past the memory/disk bound (runner/experiment/README.md, \"Size bound\")")
      ("no-load-check", "check dataset parameters and size only; leave loading the splits to the jobs")
      ("help,h", "this help");
  add_cache_dir_option(options);
  add_plugins_option(options);
  po::positional_options_description positional;
  positional.add("experiment", 1);
  const auto vm = parse_command_line("queue add", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("experiment")) throw std::runtime_error("queue add: name the experiment file");

  const PluginRegistry registry = load_plugins(plugin_folders(vm));
  const Experiment experiment =
      check_experiment(vm["experiment"].as<std::string>(), registry, vm["cache-dir"].as<std::string>(), data_check(vm));
  const std::string db_path = vm["db"].as<std::string>();
  store::Database db(db_path);  // migrates, as run and db migrate do (workers never do)
  const EnqueueReport report = enqueue_checked(experiment, registry, db, vm.count("rerun") > 0);
  std::cout << describe(report) << "\n" << db_path << ": " << counts_line(db.queue_counts()) << "\n";
  return 0;
}

int queue_list(const Args& args) {
  po::options_description options("attnlab queue list [options]");
  add_db_option(options);
  options.add_options()
      ("state", po::value<std::vector<std::string>>()->composing(), "only jobs in this state (repeatable, or a comma list)")
      ("method", po::value<std::vector<std::string>>()->composing(), "only this attention method (repeatable)")
      ("dataset", po::value<std::vector<std::string>>()->composing(), "only this dataset (repeatable)")
      ("format", po::value<std::string>()->default_value("table"), "table or csv")
      ("help,h", "this help");
  const auto vm = parse_command_line("queue list", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  const std::string format = vm["format"].as<std::string>();
  if (format != "table" && format != "csv") throw std::runtime_error("queue list: --format is table or csv, not '" + format + "'");

  store::ResultsReader db(vm["db"].as<std::string>());
  store::JobFilter filter;
  filter.states = checked_states(split_list(option_values(vm, "state"), "queue list: --state"));
  filter.methods = split_list(option_values(vm, "method"), "queue list: --method");
  filter.datasets = split_list(option_values(vm, "dataset"), "queue list: --dataset");
  const auto jobs = db.list_jobs(filter);

  if (format == "csv") {
    std::cout << "job,experiment,method,dataset,seed,state,attempts,failures,max_attempts,lease_run,lease_owner,"
                 "lease_expires_at,error,infra_failures,max_infra_failures\n";
    for (const auto& q : jobs) {
      char expires[32] = "";
      if (q.lease_run_id) std::snprintf(expires, sizeof expires, "%.3f", q.lease_expires_at);
      std::cout << q.job.id << "," << csv_field(q.experiment) << "," << csv_field(q.job.method) << ","
                << csv_field(q.job.dataset) << "," << q.job.seed << "," << q.job.state << "," << q.attempts << ","
                << q.failures << "," << q.max_attempts << "," << (q.lease_run_id ? std::to_string(q.lease_run_id) : "")
                << "," << csv_field(q.lease_owner) << "," << expires << "," << csv_field(q.error) << ","
                << q.infra_failures << "," << q.max_infra_failures << "\n";
    }
    return 0;
  }
  TextTable table({"job", "method", "dataset", "seed", "state", "attempts", "failures", "lease", "error"});
  std::vector<std::pair<store::JobState, std::int64_t>> counts = db.queue_counts();
  for (auto& [state, n] : counts) n = 0;
  for (const auto& q : jobs) {
    const std::string lease =
        q.lease_run_id ? "run " + std::to_string(q.lease_run_id) + (q.lease_owner.empty() ? "" : " " + q.lease_owner) + ", " +
                             seconds_from_now(q.lease_expires_at)
                       : "";
    table.add({std::to_string(q.job.id), q.job.method, q.job.dataset, std::to_string(q.job.seed), to_string(q.job.state),
               std::to_string(q.attempts), failures_cell(q), lease, short_cell(q.error)});
    for (auto& [state, n] : counts) n += state == q.job.state;
  }
  if (!table.empty()) std::cout << table.str();
  std::cout << jobs.size() << " job(s): " << counts_line(counts) << "\n";
  return 0;
}

int queue_show(const Args& args) {
  po::options_description options("attnlab queue show JOB [options]");
  add_db_option(options);
  options.add_options()("job", po::value<std::string>(), "job id")("help,h", "this help");
  po::positional_options_description positional;
  positional.add("job", 1);
  const auto vm = parse_command_line("queue show", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("job")) throw std::runtime_error("queue show: name the job");
  const std::int64_t id = job_ids("show", {vm["job"].as<std::string>()}).front();

  store::ResultsReader db(vm["db"].as<std::string>());
  const auto rows = db.list_jobs({{}, {}, {}, {id}});
  if (rows.empty()) throw std::runtime_error("queue show: no job " + std::to_string(id) + " in " + db.path());
  const store::QueuedJob& q = rows.front();
  std::cout << "job " << q.job.id << ": " << q.job.method << " on " << q.job.dataset << ", seed " << q.job.seed
            << ", experiment '" << q.experiment << "' (" << q.job.experiment_id << "), created " << q.created_at << "\n"
            << "state: " << q.job.state << " (" << q.attempts << " attempt(s); " << q.failures << " failure(s) of "
            << q.max_attempts << " allowed; " << q.infra_failures << " ended from outside, " << q.lost_in_a_row
            << " of them in a row before a checkpoint of their own, of " << q.max_infra_failures << " allowed)\n";
  if (q.job.state == store::JobState::queued && q.retry_after > now_unix_seconds())
    std::cout << "back-off: not claimed again for " << std::fixed << std::setprecision(1)
              << q.retry_after - now_unix_seconds() << std::defaultfloat << " s (after an attempt ended from outside)\n";
  for (std::size_t i = 0; i < q.plugin_dirs.size(); ++i)
    std::cout << (i ? ", " : "plugin folders: ") << q.plugin_dirs[i] << (i + 1 == q.plugin_dirs.size() ? "\n" : "");
  if (q.lease_run_id)
    std::cout << "lease: run " << q.lease_run_id << ", worker " << q.lease_owner << ", "
              << seconds_from_now(q.lease_expires_at) << "\n";
  if (!q.error.empty()) std::cout << "error: " << q.error << "\n";
  std::cout << "config (" << q.job.config_hash << "):\n" << results::readable_toml(q.job.config_toml);
  if (!q.job.config_toml.empty() && q.job.config_toml.back() != '\n') std::cout << "\n";

  const auto attempts = db.attempts_of_job(id);
  if (attempts.empty()) return std::cout << "attempts: none yet\n", 0;
  TextTable table({"run", "attempt", "status", "worker", "host", "device", "pid", "started", "finished", "resume step",
                   "error"});
  for (const auto& a : attempts)
    table.add({std::to_string(a.run_id), std::to_string(a.attempt), to_string(a.status), a.worker, a.host, a.device,
               a.pid ? std::to_string(a.pid) : "", a.started_at, a.finished_at,
               a.resume_checkpoint.empty() ? "" : std::to_string(a.resume_step), a.error});
  std::cout << "attempts:\n" << table.str();
  return 0;
}

// cancel and retry: the jobs named, and/or every job in the --state given.
int queue_change(const std::string& command, const Args& args) {
  const bool cancel = command == "cancel";
  po::options_description options("attnlab queue " + command + " JOB... [options]");
  add_db_option(options);
  options.add_options()
      ("job", po::value<std::vector<std::string>>()->composing(), "job id (repeatable)")
      ("state", po::value<std::vector<std::string>>()->composing(), "also every job in this state (repeatable, or a comma list)")
      ("help,h", "this help");
  po::positional_options_description positional;
  positional.add("job", -1);
  const auto vm = parse_command_line("queue " + command, args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;

  store::Database db(vm["db"].as<std::string>(), store::Database::Open::existing);
  std::vector<std::int64_t> ids = job_ids(command, option_values(vm, "job"));
  const auto states = checked_states(split_list(option_values(vm, "state"), "queue " + command + ": --state"));
  if (ids.empty() && states.empty()) throw std::runtime_error("queue " + command + ": name the jobs (or --state)");
  // Every named job must exist before anything changes.
  if (!ids.empty()) {
    const auto found = db.list_jobs({{}, {}, {}, ids});
    for (const auto id : ids) {
      bool present = false;
      for (const auto& q : found) present |= q.job.id == id;
      if (!present) throw std::runtime_error("queue " + command + ": no job " + std::to_string(id) + " in " + db.path());
    }
  }
  if (!states.empty())
    for (const auto& q : db.list_jobs({states, {}, {}, {}})) ids.push_back(q.job.id);

  store::Queue queue(db);
  const auto changed = cancel ? queue.cancel_jobs(ids) : queue.retry_jobs(ids);
  std::cout << (cancel ? "cancelled " : "queued again ") << changed.size() << " job(s)";
  for (std::size_t i = 0; i < changed.size(); ++i) std::cout << (i ? ", " : ": ") << changed[i];
  std::cout << "\n";
  // The others, and why: their state does not allow it.
  std::vector<std::int64_t> unchanged;
  for (const auto id : ids)
    if (std::find(changed.begin(), changed.end(), id) == changed.end() &&
        std::find(unchanged.begin(), unchanged.end(), id) == unchanged.end())
      unchanged.push_back(id);
  if (!unchanged.empty()) {
    for (const auto& q : db.list_jobs({{}, {}, {}, unchanged}))
      std::cout << "job " << q.job.id << " is " << q.job.state << ": left as it is\n";
  }
  return 0;
}

}  // namespace

int cmd_queue(const Args& args) {
  if (args.empty()) return std::cerr << kUsage, 2;
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") return std::cout << kUsage, 0;
  const std::string command = args[0];
  const Args rest(args.begin() + 1, args.end());
  if (command == "add") return queue_add(rest);
  if (command == "list") return queue_list(rest);
  if (command == "show") return queue_show(rest);
  if (command == "cancel" || command == "retry") return queue_change(command, rest);
  std::cerr << "attnlab queue: unknown command '" << command << "'\n" << kUsage;
  return 2;
}

}  // namespace attnlab
