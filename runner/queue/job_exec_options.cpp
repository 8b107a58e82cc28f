// exec-job's command line, both ends (job_exec.hpp): LibTorch-free, for the device worker that
// writes it as much as for the job process that reads it.
#include "queue/job_exec.hpp"

#include "cli/cli_options.hpp"

namespace attnlab {

po::options_description JobExecOptions::options() {
  po::options_description options("attnlab exec-job (internal: runs one claimed attempt of a job in this process)");
  add_plugins_option(options);
  options.add_options()
      ("db", po::value<std::string>()->required(), "the queue's database")
      ("job", po::value<std::int64_t>()->required(), "job id")
      ("run", po::value<std::int64_t>()->required(), "the run its lease names")
      ("checkpoint-dir", po::value<std::string>()->default_value(""), "checkpoint folder (default: DB.ckpt)");
  add_device_option(options);
  add_threads_option(options);
  add_cache_dir_option(options);
  return options;
}

JobExecOptions JobExecOptions::from(const po::variables_map& vm) {
  JobExecOptions o;
  o.db_path = vm["db"].as<std::string>();
  o.job_id = vm["job"].as<std::int64_t>();
  o.run_id = vm["run"].as<std::int64_t>();
  o.device = vm["device"].as<std::string>();
  o.threads = vm["threads"].as<int>();
  o.cache_dir = vm["cache-dir"].as<std::string>();
  o.checkpoint_dir = vm["checkpoint-dir"].as<std::string>();
  o.plugin_dirs = plugin_folders(vm);
  return o;
}

std::vector<std::string> JobExecOptions::to_args() const {
  std::vector<std::string> args = {"--db", db_path, "--job", std::to_string(job_id), "--run", std::to_string(run_id),
                                   "--device", device, "--threads", std::to_string(threads)};
  if (!cache_dir.empty()) args.insert(args.end(), {"--cache-dir", cache_dir});
  if (!checkpoint_dir.empty()) args.insert(args.end(), {"--checkpoint-dir", checkpoint_dir});
  for (const auto& folder : plugin_dirs) args.insert(args.end(), {"--plugins", folder});
  return args;
}

}  // namespace attnlab
