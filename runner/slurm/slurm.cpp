#include "slurm/slurm.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <toml++/toml.h>

extern char** environ;

namespace attnlab::slurm {
namespace fs = std::filesystem;

std::string shard_path(const std::string& folder, std::int64_t index) {
  return (fs::path(folder) / "shards" / ("task-" + std::to_string(index) + ".db")).string();
}

void write_manifest(const std::string& folder, const Manifest& manifest) {
  toml::table root;
  root.insert_or_assign("format", 1);
  root.insert_or_assign("database", manifest.database);
  root.insert_or_assign("experiment", manifest.experiment);
  root.insert_or_assign("experiment_file", manifest.experiment_file);
  root.insert_or_assign("created_at", manifest.created_at);
  root.insert_or_assign("slurm_job_id", manifest.slurm_job_id);
  if (manifest.dry_run) root.insert_or_assign("dry_run", true);
  toml::array tasks;
  for (const auto& t : manifest.tasks) {
    toml::table row;
    row.insert_or_assign("index", t.index);
    row.insert_or_assign("job", t.job_id);
    row.insert_or_assign("config_hash", t.config_hash);
    row.insert_or_assign("method", t.method);
    row.insert_or_assign("dataset", t.dataset);
    row.insert_or_assign("seed", t.seed);
    tasks.push_back(std::move(row));
  }
  root.insert_or_assign("tasks", std::move(tasks));

  // Renamed into place so that a reader never sees half a manifest.
  const fs::path final_path = fs::path(folder) / kManifestName;
  const fs::path temp = final_path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp);
    out << "# attnlab slurm submission: array task i runs job tasks[i] on shards/task-<i>.db\n" << root << "\n";
    if (!out.flush()) throw std::runtime_error(temp.string() + ": cannot write the manifest");
  }
  fs::rename(temp, final_path);
}

Manifest read_manifest(const std::string& folder) {
  const std::string file = (fs::path(folder) / kManifestName).string();
  toml::table root;
  try {
    root = toml::parse_file(file);
  } catch (const toml::parse_error& e) {
    throw std::runtime_error(file + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  auto text = [&](const toml::table& t, const char* key) {
    const auto value = t[key].value<std::string>();
    if (!value) throw std::runtime_error(file + ": '" + key + "' missing or not a string");
    return *value;
  };
  auto integer = [&](const toml::table& t, const char* key) {
    const auto value = t[key].value<std::int64_t>();
    if (!value) throw std::runtime_error(file + ": '" + key + "' missing or not an integer");
    return *value;
  };
  if (root["format"].value<std::int64_t>() != 1) throw std::runtime_error(file + ": not a format 1 attnlab manifest");
  Manifest m;
  m.database = text(root, "database");
  m.experiment = text(root, "experiment");
  m.experiment_file = text(root, "experiment_file");
  m.created_at = text(root, "created_at");
  m.slurm_job_id = text(root, "slurm_job_id");
  m.dry_run = root["dry_run"].value_or(false);
  const auto* tasks = root["tasks"].as_array();
  if (!tasks) throw std::runtime_error(file + ": no [[tasks]]");
  for (const auto& node : *tasks) {
    const auto* row = node.as_table();
    if (!row) throw std::runtime_error(file + ": a [[tasks]] entry is not a table");
    Task t;
    t.index = integer(*row, "index");
    t.job_id = integer(*row, "job");
    t.config_hash = text(*row, "config_hash");
    t.method = text(*row, "method");
    t.dataset = text(*row, "dataset");
    t.seed = integer(*row, "seed");
    if (t.index != static_cast<std::int64_t>(m.tasks.size()))
      throw std::runtime_error(file + ": task " + std::to_string(t.index) + " out of order");
    m.tasks.push_back(std::move(t));
  }
  return m;
}

std::string shell_quote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string sbatch_script(const std::string& folder, const Manifest& manifest, const ScriptOptions& options,
                          const std::string& attnlab_exe) {
  // sbatch reads #SBATCH lines with its own word splitting: keep their values free of blanks.
  std::string job_name = manifest.experiment.empty() ? "attnlab" : "attnlab-";
  for (char c : manifest.experiment)
    if (job_name.size() < 48) job_name += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';

  std::string printable_name = manifest.experiment;  // for a comment line: no line breaks
  for (char& c : printable_name)
    if (std::iscntrl(static_cast<unsigned char>(c))) c = ' ';
  const auto n = static_cast<std::int64_t>(manifest.tasks.size());
  std::ostringstream s;
  s << "#!/bin/sh\n"
    << "# attnlab slurm submit: experiment '" << printable_name << "', " << n << " job(s) of " << manifest.database
    << "\n# Array task i runs one job on its own database shard, shards/task-<i>.db; `attnlab slurm collect`\n"
    << "# merges the shards into the main database. A requeued task resumes from its shard.\n"
    << "#SBATCH --job-name=" << job_name << "\n"
    << "#SBATCH --array=0-" << (n - 1);
  if (options.max_parallel > 0) s << "%" << options.max_parallel;
  s << "\n#SBATCH --requeue\n"
    << "#SBATCH --open-mode=append\n"  // a requeued task's log continues its first one
    << "#SBATCH --output=" << (fs::path(folder) / "logs" / "%A_%a.out").string() << "\n"
    << "#SBATCH --cpus-per-task=" << options.cpus_per_task << "\n";
  if (!options.partition.empty()) s << "#SBATCH --partition=" << options.partition << "\n";
  if (!options.time.empty()) s << "#SBATCH --time=" << options.time << "\n";
  if (options.gpus_per_task > 0) s << "#SBATCH --gpus-per-task=" << options.gpus_per_task << "\n";
  for (const auto& extra : options.extra) s << "#SBATCH " << extra << "\n";

  s << "exec " << shell_quote(attnlab_exe) << " slurm task --submission " << shell_quote(folder)
    << " --devices " << (options.gpus_per_task > 0 ? "all" : "cpu") << " --threads " << options.cpus_per_task;
  if (!options.cache_dir.empty()) s << " --cache-dir " << shell_quote(options.cache_dir);
  for (const auto& dir : options.plugin_dirs) s << " --plugins " << shell_quote(dir);
  s << "\n";
  return s.str();
}

std::string find_on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

Captured run_captured(const std::vector<std::string>& argv) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]), close(out_pipe[1]);
    throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (spawned != 0) {
    close(out_pipe[0]), close(err_pipe[0]);
    throw std::runtime_error("cannot run " + argv[0] + ": " + std::strerror(spawned));
  }

  // Both pipes read together, so a child filling one while we wait on the other cannot stall.
  Captured result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace attnlab::slurm
