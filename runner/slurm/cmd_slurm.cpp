// attnlab slurm submit|collect|task: an experiment's queued jobs as a SLURM job array.
// submit (on the login node, the only writer of the main database): enqueue, write a submission
// folder with one shard per job, sbatch it, mark the jobs 'submitted'. task (inside the array):
// end what a killed earlier incarnation left running in its shard, then become a worker on that
// shard. collect: merge every shard back, one transaction each, idempotently.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "experiment/cache_dir.hpp"
#include "cli/cli_options.hpp"

#include "attnlab/store.hpp"
#include "attnlab/store/queue.hpp"
#include "cli/commands.hpp"
#include "experiment/enqueue.hpp"
#include "experiment/experiment.hpp"
#include "plugin_host/plugin_host.hpp"
#include "slurm/slurm.hpp"

namespace attnlab {
namespace po = boost::program_options;
namespace fs = std::filesystem;
namespace {

struct SlurmError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string absolute(const std::string& path) { return fs::absolute(path).lexically_normal().string(); }

// Where a database's submission folders live unless --dir says otherwise.
std::string submissions_root(const std::string& db_path, const std::string& dir) {
  return absolute(dir.empty() ? db_path + ".slurm" : dir);
}

std::string utc_now(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[64];
  std::strftime(text, sizeof text, format, &tm);
  return text;
}

// A fresh folder <root>/<UTC time>-<experiment>, never an existing one.
std::string new_submission_folder(const std::string& root, const std::string& experiment) {
  std::string name = utc_now("%Y%m%d-%H%M%S") + "-";
  for (char c : experiment) name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  fs::create_directories(root);
  for (int n = 1;; ++n) {
    const fs::path folder = fs::path(root) / (n == 1 ? name : name + "-" + std::to_string(n));
    if (fs::create_directory(folder)) return folder.string();
  }
}

std::string one_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::replace(text.begin(), text.end(), '\n', ';');
  return text.empty() ? "(no message)" : text;
}

std::string task_name(const slurm::Task& t) {
  return "job " + std::to_string(t.job_id) + " (" + t.method + "/" + t.dataset + " seed " + std::to_string(t.seed) + ")";
}

// Jobs marked 'submitted' whose array never started go back to the queue as they were.
void return_to_queue(store::Database& db, const std::vector<std::int64_t>& ids) {
  store::Queue(db).retry_jobs(ids);  // submitted -> queued, failure counts kept
}

// --- submit ----------------------------------------------------------------------------------

// slurm submit's command line, read and checked before anything is written.
struct SubmitOptions {
  std::string experiment_path, db_path, root;  // absolute; root: the folder of the submission folders
  slurm::ScriptOptions script;
  bool dry_run = false, rerun = false;
  DataCheck data;

  static po::options_description options() {
    po::options_description options("attnlab slurm submit EXPERIMENT.toml [options]");
    options.add_options()
        ("experiment", po::value<std::string>(), "the experiment file (TOML)")
        ("db", po::value<std::string>()->default_value("attnlab.db"), "main results database (written only here)")
        ("partition", po::value<std::string>()->default_value(""), "SLURM partition (default: the cluster's)")
        ("gpus-per-task", po::value<std::int64_t>()->default_value(0), "GPUs per array task (0: CPU only)")
        ("cpus-per-task", po::value<std::int64_t>()->default_value(1), "CPUs per array task, also the job's threads")
        ("max-parallel", po::value<std::int64_t>()->default_value(0), "at most K tasks at once (SLURM's %K; 0: no limit)")
        ("time", po::value<std::string>()->default_value(""), "time limit per task (sbatch --time)")
        ("sbatch-option", po::value<std::vector<std::string>>()->composing(),
         "one more #SBATCH line, e.g. --sbatch-option=--mem=8G (repeatable)")
        ("dir", po::value<std::string>()->default_value(""), "folder of the submission folders (default: <db>.slurm)")
        ("cache-dir", po::value<std::string>()->default_value(""), "dataset cache folder, on every node")
        ("plugins", po::value<std::vector<std::string>>()->composing(), "extra plugin folder (repeatable)")
        ("rerun", "submit again the jobs that are already done")
        ("dry-run", "write the submission folder and print the script, without sbatch or marking")
        ("force", "load datasets past the memory/disk bound (runner/experiment/README.md, \"Size bound\")")
        ("no-load-check", "check dataset parameters and size only (a login node without the nodes' data or cache)")
        ("help,h", "this help");
    return options;
  }

  static SubmitOptions from(const po::variables_map& vm) {
    if (!vm.count("experiment")) throw SlurmError("slurm submit: name the experiment file");
    SubmitOptions o;
    o.dry_run = vm.count("dry-run") > 0;
    o.rerun = vm.count("rerun") > 0;
    o.data = data_check(vm);
    slurm::ScriptOptions& script = o.script;
    script.partition = vm["partition"].as<std::string>();
    script.time = vm["time"].as<std::string>();
    script.gpus_per_task = vm["gpus-per-task"].as<std::int64_t>();
    script.cpus_per_task = vm["cpus-per-task"].as<std::int64_t>();
    script.max_parallel = vm["max-parallel"].as<std::int64_t>();
    script.extra = option_values(vm, "sbatch-option");
    script.cache_dir = vm["cache-dir"].as<std::string>().empty() ? "" : absolute(vm["cache-dir"].as<std::string>());
    for (const auto& d : option_values(vm, "plugins")) script.plugin_dirs.push_back(absolute(d));
    if (script.gpus_per_task < 0) throw SlurmError("slurm submit: --gpus-per-task must be 0 or more");
    if (script.cpus_per_task < 1) throw SlurmError("slurm submit: --cpus-per-task must be 1 or more");
    if (script.max_parallel < 0) throw SlurmError("slurm submit: --max-parallel must be 0 (no limit) or more");
    for (const auto& extra : script.extra)
      if (extra.find('\n') != std::string::npos || extra.rfind("-", 0) != 0)
        throw SlurmError("slurm submit: --sbatch-option '" + extra + "': one sbatch option per line, starting with -");
    for (const auto* value : {&script.partition, &script.time})
      if (value->find_first_of(" \t\n'\"") != std::string::npos)
        throw SlurmError("slurm submit: '" + *value + "': no blanks or quotes in --partition or --time");
    o.experiment_path = absolute(vm["experiment"].as<std::string>());
    o.db_path = absolute(vm["db"].as<std::string>());
    o.root = submissions_root(o.db_path, vm["dir"].as<std::string>());
    return o;
  }
};

// This experiment's jobs still waiting in the queue, in id order: each becomes one array task. A
// dry run (no database) takes every job of the file, job id 0. SlurmError when there is none.
std::vector<store::QueuedJob> jobs_to_submit(store::Database* db, const std::vector<std::int64_t>& job_ids,
                                             const Experiment& experiment, const std::map<std::string, const JobPlan*>& plan_of,
                                             const std::string& db_path) {
  std::map<std::string, std::int64_t> other_states;  // by state name
  std::vector<store::QueuedJob> chosen;
  if (!db) {
    for (const auto& plan : experiment.jobs) {
      chosen.emplace_back();
      chosen.back().job.config_hash = plan.config_hash;
    }
  } else {
    store::JobFilter of_experiment;
    of_experiment.ids = job_ids;
    for (const auto& q : db->list_jobs(of_experiment)) {
      if (q.job.state == store::JobState::queued && plan_of.count(q.job.config_hash)) chosen.push_back(q);
      else ++other_states[to_string(q.job.state)];
    }
  }
  std::stable_sort(chosen.begin(), chosen.end(), [](const auto& a, const auto& b) { return a.job.id < b.job.id; });
  if (chosen.empty()) {
    std::string states;
    for (const auto& [state, n] : other_states) states += (states.empty() ? "" : ", ") + std::to_string(n) + " " + state;
    throw SlurmError("slurm submit: nothing queued to submit for experiment '" + experiment.name + "' in " + db_path +
                     " (" + (states.empty() ? "no jobs" : states) + (other_states.count(to_string(store::JobState::done)) ? "; --rerun runs done jobs again" : "") + ")");
  }
  return chosen;
}

// Marks the chosen jobs 'submitted' before the array exists, so that a local worker on this
// database cannot claim a job the array will run; a job claimed in between is left to that worker
// (dropped from `chosen`). Returns the ids marked.
std::vector<std::int64_t> mark_submitted(store::Database& db, std::vector<store::QueuedJob>& chosen) {
  std::vector<std::int64_t> ids;
  for (const auto& q : chosen) ids.push_back(q.job.id);
  const auto marked = store::Queue(db).mark_submitted(ids);
  const std::set<std::int64_t> ours(marked.begin(), marked.end());
  chosen.erase(std::remove_if(chosen.begin(), chosen.end(), [&](const auto& q) { return !ours.count(q.job.id); }), chosen.end());
  if (chosen.empty()) throw SlurmError("slurm submit: every queued job was claimed by a worker meanwhile; nothing submitted");
  return {ours.begin(), ours.end()};
}

// The submission folder's shards (one database per task, holding its one job) and manifest.
slurm::Manifest write_shards(const std::string& folder, const SubmitOptions& o, const Experiment& experiment,
                             const std::vector<store::QueuedJob>& chosen, const std::map<std::string, const JobPlan*>& plan_of) {
  slurm::Manifest manifest;
  manifest.database = o.db_path;
  manifest.experiment = experiment.name;
  manifest.experiment_file = o.experiment_path;
  manifest.created_at = utc_now("%Y-%m-%dT%H:%M:%SZ");
  manifest.dry_run = o.dry_run;
  fs::create_directories(fs::path(folder) / "shards");
  fs::create_directories(fs::path(folder) / "logs");
  for (const auto& q : chosen) {
    const JobPlan& plan = *plan_of.at(q.job.config_hash);
    const std::int64_t index = static_cast<std::int64_t>(manifest.tasks.size());
    store::Database shard(slurm::shard_path(folder, index));
    const auto experiment_id = shard.add_experiment(experiment.name, o.experiment_path, experiment.source_text);
    shard.add_job({experiment_id, plan.method, plan.dataset, plan.seed, plan.config_toml, plan.config_hash, plan.flat,
                   q.plugin_dirs});
    manifest.tasks.push_back({index, q.job.id, plan.config_hash, plan.method, plan.dataset, plan.seed});
  }
  slurm::write_manifest(folder, manifest);
  return manifest;
}

// The array's script, executable, in the folder; returns its path.
std::string write_script(const std::string& folder, const slurm::Manifest& manifest, const slurm::ScriptOptions& script,
                         const std::string& self_exe) {
  const std::string path = (fs::path(folder) / slurm::kScriptName).string();
  {
    std::ofstream out(path);
    out << slurm::sbatch_script(folder, manifest, script, self_exe);
    if (!out.flush()) throw SlurmError("slurm submit: cannot write " + path);
  }
  fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
  return path;
}

void print_dry_run(const std::string& folder, const slurm::Manifest& manifest, const SubmitOptions& o,
                   const std::string& script_path, const std::string& self_exe) {
  std::cout << "dry run: " << manifest.tasks.size() << " job(s) of experiment '" << manifest.experiment
            << "' written to " << folder << " (nothing submitted; the database " << o.db_path
            << " not read or written; slurm collect skips this folder)\n\n"
            << slurm::sbatch_script(folder, manifest, o.script, self_exe) << "\n"
            << "would run: sbatch --parsable " << slurm::shell_quote(script_path) << "\n"
            << "(its tasks refuse to run: submit with attnlab slurm submit without --dry-run)\n";
}

// sbatch the script; the job id SLURM answers goes into the manifest.
void submit_array(const std::string& sbatch, const std::string& script_path, slurm::Manifest& manifest) {
  const auto submitted = slurm::run_captured({sbatch, "--parsable", script_path});
  const std::string job_id = submitted.out.substr(0, submitted.out.find_first_of(";\n"));
  if (submitted.status != 0 || job_id.empty() || job_id.find_first_not_of("0123456789") != std::string::npos)
    throw SlurmError("slurm submit: sbatch failed (status " + std::to_string(submitted.status) + "): " +
                     one_line(submitted.err.empty() ? submitted.out : submitted.err));
  manifest.slurm_job_id = job_id;
}

int slurm_submit(const Args& args, const std::string& self_exe) {
  po::positional_options_description positional;
  positional.add("experiment", 1);
  const auto options = SubmitOptions::options();
  const auto vm = parse_command_line("slurm submit", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  const SubmitOptions o = SubmitOptions::from(vm);

  // Before anything is written: without sbatch there is nothing to submit to.
  const std::string sbatch = o.dry_run ? "sbatch" : slurm::find_on_path("sbatch");
  if (sbatch.empty())
    throw SlurmError("slurm submit: sbatch not found on PATH (run this on a SLURM login node, or use --dry-run)");
  if (o.root.find_first_of(" \t\n'\"%\\") != std::string::npos)
    throw SlurmError("slurm submit: " + o.root + ": #SBATCH --output cannot take blanks, quotes or % in its path; use --dir");
  const std::string cache_dir = dataset_cache_dir(o.script.cache_dir);
  const PluginRegistry registry = load_plugins(o.script.plugin_dirs);

  // A dry run neither reads nor writes the database (no file created, none migrated, no job
  // queued that a local worker would then run): every job of the file becomes a task, job id 0.
  std::optional<store::Database> db;
  std::vector<std::int64_t> job_ids;
  if (!o.dry_run) {
    db.emplace(o.db_path);  // migrates: this host owns the main database
    const EnqueueReport enqueued = enqueue_experiment(o.experiment_path, registry, *db, cache_dir, o.rerun, o.data);
    std::cout << describe(enqueued) << std::endl;
    job_ids = enqueued.job_ids;
  }
  // the plans the shards get (a dry run checks the file and its datasets as enqueueing would)
  const Experiment experiment = o.dry_run ? check_experiment(o.experiment_path, registry, cache_dir, o.data)
                                          : load_experiment(o.experiment_path, registry);
  std::map<std::string, const JobPlan*> plan_of;
  for (const auto& plan : experiment.jobs) plan_of[plan.config_hash] = &plan;
  std::vector<store::QueuedJob> chosen = jobs_to_submit(db ? &*db : nullptr, job_ids, experiment, plan_of, o.db_path);
  const std::vector<std::int64_t> ids = o.dry_run ? std::vector<std::int64_t>(chosen.size(), 0) : mark_submitted(*db, chosen);

  std::string folder;
  bool accepted = false;  // sbatch took the array: from then on the jobs are SLURM's
  try {
    folder = new_submission_folder(o.root, experiment.name);
    slurm::Manifest manifest = write_shards(folder, o, experiment, chosen, plan_of);
    const std::string script_path = write_script(folder, manifest, o.script, self_exe);
    if (o.dry_run) return print_dry_run(folder, manifest, o, script_path, self_exe), 0;
    submit_array(sbatch, script_path, manifest);
    accepted = true;
    slurm::write_manifest(folder, manifest);
    std::cout << "submitted SLURM job " << manifest.slurm_job_id << ": " << manifest.tasks.size() << " array task(s) of experiment '"
              << experiment.name << "'";
    if (o.script.max_parallel > 0) std::cout << ", at most " << o.script.max_parallel << " at a time";
    std::cout << "\n  folder " << folder << "\n  then: attnlab slurm collect --db " << slurm::shell_quote(o.db_path)
              << " merges their results\n";
    return 0;
  } catch (const std::exception& e) {
    if (o.dry_run || accepted) throw;
    return_to_queue(*db, ids);
    throw SlurmError(std::string(e.what()) + "; its " + std::to_string(ids.size()) + " job(s) are queued again" +
                     (folder.empty() ? "" : ", " + folder + " kept for inspection"));
  }
}

// --- collect ---------------------------------------------------------------------------------

// Array task ids SLURM still lists (pending or running) for job `id`; an empty set once SLURM
// has forgotten the job; nullopt when squeue cannot say (not installed, no controller answering).
std::optional<std::set<std::int64_t>> tasks_in_slurm(const std::string& id) {
  if (id.empty() || slurm::find_on_path("squeue").empty()) return std::nullopt;
  try {
    const auto listed = slurm::run_captured({"squeue", "--noheader", "--array", "--jobs", id, "--format", "%K"});
    if (listed.status != 0)  // a job finished long enough ago is unknown; anything else: no answer
      return listed.err.find("Invalid job id") != std::string::npos ? std::optional(std::set<std::int64_t>{}) : std::nullopt;
    std::set<std::int64_t> tasks;
    std::istringstream lines(listed.out);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) tasks.insert(std::stoll(line));
    return tasks;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<std::string> submission_folders(const std::string& root) {
  if (fs::exists(fs::path(root) / slurm::kManifestName)) return {root};
  std::vector<std::string> folders;
  if (fs::is_directory(root))
    for (const auto& entry : fs::directory_iterator(root))
      if (entry.is_directory() && fs::exists(entry.path() / slurm::kManifestName)) folders.push_back(entry.path().string());
  std::sort(folders.begin(), folders.end());
  return folders;
}

// The folder's manifest, if it is readable and belongs to `db_path` (else one line on stderr).
std::optional<slurm::Manifest> own_manifest(const std::string& folder, const std::string& db_path) {
  slurm::Manifest manifest;
  try {
    manifest = slurm::read_manifest(folder);
  } catch (const std::exception& e) {
    std::cerr << "attnlab: slurm collect: " << e.what() << "; skipped\n";
    return std::nullopt;
  }
  if (fs::weakly_canonical(manifest.database) != fs::weakly_canonical(db_path)) {
    std::cerr << "attnlab: slurm collect: " << folder << " belongs to " << manifest.database << ", not " << db_path
              << "; skipped\n";
    return std::nullopt;
  }
  return manifest;
}

// Every task's shard merged into the main database; the tasks whose shard could not be read go in
// `unreadable` (one line each on stderr).
store::MergeReport merge_shards(store::Database& db, const std::string& folder, const slurm::Manifest& manifest,
                                std::set<std::int64_t>& unreadable) {
  store::MergeReport merged;
  for (const auto& task : manifest.tasks) {
    const std::string shard = slurm::shard_path(folder, task.index);
    try {
      if (!fs::exists(shard)) throw SlurmError(shard + ": shard missing");
      const auto report = db.merge_shard(shard);
      merged.runs_added += report.runs_added;
      merged.runs_present += report.runs_present;
      merged.runs_unfinished += report.runs_unfinished;
      merged.jobs_added += report.jobs_added;
    } catch (const std::exception& e) {
      std::cerr << "attnlab: slurm collect: task " << task.index << ", " << task_name(task) << ": " << e.what()
                << "; skipped\n";
      unreadable.insert(task.index);
    }
  }
  return merged;
}

// The submission's line: each task's outcome is its job's state in the main database now, beside
// what SLURM still lists; then a line per failed task, and per unfinished one SLURM no longer runs.
void report_submission(store::ResultsReader& db, const std::string& folder, const slurm::Manifest& manifest,
                       const store::MergeReport& merged, const std::set<std::int64_t>& unreadable) {
  store::JobFilter filter;
  for (const auto& task : manifest.tasks) filter.ids.push_back(task.job_id);
  std::map<std::int64_t, store::QueuedJob> jobs;
  for (const auto& q : db.list_jobs(filter)) jobs[q.job.id] = q;
  const auto in_slurm = tasks_in_slurm(manifest.slurm_job_id);
  int done = 0, failed = 0, unfinished = 0, still_in_slurm = 0;
  std::ostringstream details;
  for (const auto& task : manifest.tasks) {
    if (unreadable.count(task.index)) continue;
    const auto found = jobs.find(task.job_id);
    const store::QueuedJob* job = found == jobs.end() ? nullptr : &found->second;
    const std::string state = job ? to_string(job->job.state) : "missing from the database";
    if (job && job->job.state == store::JobState::done) {
      ++done;
    } else if (job && store::is_failed(job->job.state)) {
      ++failed;
      details << "  task " << task.index << ", " << task_name(task) << ": " << state << ": " << job->error << "\n";
    } else {
      ++unfinished;
      const bool listed = in_slurm && in_slurm->count(task.index);
      still_in_slurm += listed;
      if (in_slurm && !listed)
        details << "  task " << task.index << ", " << task_name(task) << ": " << state
                << ", and SLURM no longer runs it (attnlab queue cancel " << task.job_id << " then attnlab queue retry "
                << task.job_id << " queues it again)\n";
    }
  }
  std::cout << "submission " << fs::path(folder).filename().string() << " (experiment '" << manifest.experiment << "', SLURM job "
            << (manifest.slurm_job_id.empty() ? "none: not submitted" : manifest.slurm_job_id) << "): "
            << manifest.tasks.size() << " task(s): " << done << " done, " << failed << " failed, " << unfinished
            << " unfinished";
  if (in_slurm) std::cout << " (" << still_in_slurm << " still in SLURM's queue)";
  if (!unreadable.empty()) std::cout << ", " << unreadable.size() << " unreadable";
  std::cout << "; " << merged.runs_added << " run(s) merged now, " << merged.runs_present << " merged before";
  if (merged.runs_unfinished > 0) std::cout << ", " << merged.runs_unfinished << " still running (merged once finished)";
  std::cout << "\n" << details.str();
}

int slurm_collect(const Args& args) {
  po::options_description options("attnlab slurm collect [options]");
  options.add_options()
      ("db", po::value<std::string>()->default_value("attnlab.db"), "main results database")
      ("dir", po::value<std::string>()->default_value(""),
       "a submission folder, or the folder of them (default: <db>.slurm)")
      ("help,h", "this help");
  const auto vm = parse_command_line("slurm collect", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  const std::string db_path = absolute(vm["db"].as<std::string>());
  const std::string root = submissions_root(db_path, vm["dir"].as<std::string>());
  const auto folders = submission_folders(root);
  if (folders.empty()) throw SlurmError("slurm collect: no submission folder (with a " + std::string(slurm::kManifestName) + ") in " + root);
  store::Database db(db_path, store::Database::Open::existing);

  int unreadable_total = 0;
  for (const auto& folder : folders) {
    const auto manifest = own_manifest(folder, db_path);
    if (!manifest) {
      ++unreadable_total;
      continue;
    }
    if (manifest->dry_run) {  // its tasks name no job: nothing to merge, nothing to wait for
      std::cout << "submission " << fs::path(folder).filename().string() << " (experiment '" << manifest->experiment
                << "'): a dry run, never submitted; skipped\n";
      continue;
    }
    std::set<std::int64_t> unreadable;
    const store::MergeReport merged = merge_shards(db, folder, *manifest, unreadable);
    unreadable_total += static_cast<int>(unreadable.size());
    report_submission(db, folder, *manifest, merged, unreadable);
  }
  return unreadable_total == 0 ? 0 : 1;
}

// --- task (inside the array) -----------------------------------------------------------------

int slurm_task(const Args& args, const std::string& self_exe) {
  po::options_description options("attnlab slurm task --submission DIR (run by the sbatch script)");
  options.add_options()
      ("submission", po::value<std::string>(), "the submission folder")
      ("index", po::value<std::int64_t>(), "array task (default: SLURM_ARRAY_TASK_ID)")
      ("devices", po::value<std::string>()->default_value("cpu"), "the worker's --devices")
      ("threads", po::value<int>()->default_value(0), "the worker's --threads")
      ("cache-dir", po::value<std::string>()->default_value(""), "the worker's --cache-dir")
      ("plugins", po::value<std::vector<std::string>>()->composing(), "extra plugin folder (repeatable)")
      ("help,h", "this help");
  const auto vm = parse_command_line("slurm task", args, options);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("submission")) throw SlurmError("slurm task: --submission DIR is required");
  const std::string folder = absolute(vm["submission"].as<std::string>());
  std::int64_t index = -1;
  if (vm.count("index")) {
    index = vm["index"].as<std::int64_t>();
  } else if (const char* id = std::getenv("SLURM_ARRAY_TASK_ID")) {
    index = std::atoll(id);
  } else {
    throw SlurmError("slurm task: no --index and no SLURM_ARRAY_TASK_ID (this runs inside a SLURM array task)");
  }
  const auto manifest = slurm::read_manifest(folder);
  if (manifest.dry_run)  // its jobs are in no database: results made here would never be collected
    throw SlurmError("slurm task: " + folder + " was written by slurm submit --dry-run and is never collected; "
                     "submit with attnlab slurm submit (without --dry-run)");
  if (index < 0 || index >= static_cast<std::int64_t>(manifest.tasks.size()))
    throw SlurmError("slurm task: task " + std::to_string(index) + " is not in " + folder + " (" +
                     std::to_string(manifest.tasks.size()) + " tasks)");
  const std::string shard = slurm::shard_path(folder, index);

  // A task runs again only after SLURM requeued it: whatever its previous incarnation left
  // running died with that node, so its attempt ends now instead of after its lease.
  std::int64_t abandoned = 0;
  {
    store::Database db(shard, store::Database::Open::existing);
    abandoned = store::Queue(db).abandon_leases("requeued array task: the previous attempt's node is gone");
  }
  const char* restarts = std::getenv("SLURM_RESTART_COUNT");
  std::cout << "attnlab slurm task " << index << ": " << task_name(manifest.tasks[index]) << ", shard " << shard
            << ", restart " << (restarts ? restarts : "0");
  if (abandoned > 0) std::cout << "; " << abandoned << " attempt(s) of the previous incarnation ended as lost";
  std::cout << std::endl;

  std::vector<std::string> argv = {self_exe, "worker", "--db", shard, "--devices", vm["devices"].as<std::string>(),
                                   "--idle-exit", "--threads", std::to_string(vm["threads"].as<int>())};
  if (!vm["cache-dir"].as<std::string>().empty()) argv.insert(argv.end(), {"--cache-dir", vm["cache-dir"].as<std::string>()});
  for (const auto& d : option_values(vm, "plugins")) argv.insert(argv.end(), {"--plugins", d});
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  execv(self_exe.c_str(), raw.data());  // same pid: SLURM's signals reach the worker itself
  throw SlurmError("slurm task: cannot run " + self_exe + ": " + std::strerror(errno));
}

}  // namespace

int cmd_slurm(const Args& args, const std::string& self_exe) {
  const char* usage =
      "usage: attnlab slurm submit EXPERIMENT.toml [options]   write and sbatch a job array, one task per queued job\n"
      "       attnlab slurm collect [--db FILE] [--dir DIR]    merge every task's shard into the main database\n"
      "attnlab slurm submit --help lists its options.\n";
  if (args.empty()) return std::cerr << usage, 2;
  if (args[0] == "--help" || args[0] == "-h") return std::cout << usage, 0;
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "submit") return slurm_submit(rest, self_exe);
  if (args[0] == "collect") return slurm_collect(rest);
  if (args[0] == "task") return slurm_task(rest, self_exe);
  std::cerr << "attnlab: slurm: unknown subcommand '" << args[0] << "'\n" << usage;
  return 2;
}

}  // namespace attnlab
