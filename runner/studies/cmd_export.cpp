// attnlab export RUN_ID: a stored run's weights as a safetensors file under the names the papers'
// authors' PyTorch modules give them (train/include/attnlab/train/weights.hpp), for their code to
// load with `model.load_state_dict(safetensors.torch.load_file(FILE))`; `[model] init_from = FILE`
// starts a run of attnlab from one. --weights: best (the weights the run tested), last (its last
// training step's), initial (what its first step started from: its seed's, or its init_from file's).
#include <filesystem>
#include <iostream>

#include "attnlab/train/trainer.hpp"
#include "attnlab/train/weights.hpp"
#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "experiment/train_job.hpp"
#include "plugin_host/hashing.hpp"
#include "plugin_host/plugin_host.hpp"
#include "studies/stored_run.hpp"

namespace attnlab {
namespace po = boost::program_options;

namespace {

// The weights the run's first step started from, made again as its job process made them.
EncoderClassifier initial_weights(const PluginRegistry& registry, const JobPlan& plan, const TaskInfo& task) {
  const TrainJob job = make_train_job(plan, registry, task, c10::Device(c10::kCPU));
  if (const std::string& file = job.model.init_from; !file.empty() && sha256_of_file(file) != job.model.init_from_sha256)
    throw std::runtime_error("the run started from [model] init_from " + file + ", whose bytes changed since (sha256 " +
                             job.model.init_from_sha256.substr(0, 16) + " then)");
  return initial_model(job);
}

}  // namespace

int cmd_export(const Args& args) {
  po::options_description options("attnlab export RUN_ID [options]");
  options.add_options()
      ("run", po::value<std::int64_t>(), "the stored run (its id in the database)")
      ("weights", po::value<std::string>()->default_value("best"),
       "best (the weights the run tested), last (its last step's) or initial (its first step's)")
      ("output,o", po::value<std::string>(), "the file to write (default: run-RUN_ID-WEIGHTS.safetensors)")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("help,h", "this help");
  add_cache_dir_option(options);
  add_plugins_option(options);
  po::positional_options_description positional;
  positional.add("run", 1);
  const auto vm = parse_command_line("export", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("run")) throw std::runtime_error("export: name the run (attnlab results lists them)");
  const auto run_id = vm["run"].as<std::int64_t>();
  const std::string which = vm["weights"].as<std::string>();
  if (which != "best" && which != "last" && which != "initial")
    throw std::runtime_error("export: --weights " + which + ": expected best, last or initial");
  const std::string output = vm.count("output") ? vm["output"].as<std::string>()
                                                : "run-" + std::to_string(run_id) + "-" + which + ".safetensors";
  const std::string db_path = vm["db"].as<std::string>();
  existing_database(db_path);

  const PluginRegistry registry = load_plugins(plugin_folders(vm));
  store::ResultsReader db(db_path);
  const JobPlan plan = stored_plan(registry, db, run_id);
  const TaskInfo task = job_task(plan, registry, vm["cache-dir"].as<std::string>());
  EncoderClassifier model = which == "initial"
                                ? initial_weights(registry, plan, task)
                                : load_trained_model(registry, plan, task,
                                                     which == "best" ? locate_checkpoint(db, run_id) : locate_last_weights(db, run_id),
                                                     c10::Device(c10::kCPU));
  save_weights(model, output,
               {{"attnlab.run", std::to_string(run_id)}, {"attnlab.weights", which}, {"attnlab.method", plan.method},
                {"attnlab.dataset", plan.dataset}, {"attnlab.seed", std::to_string(plan.seed)},
                {"attnlab.config", plan.config_toml}});
  const auto count = named_weights(model).size();
  std::cout << "run " << run_id << " (" << plan.method << "/" << plan.dataset << " seed " << plan.seed << "): " << which
            << " weights, " << count << " tensors, " << model->parameter_count() << " parameters, "
            << word(weight_naming(model->config())) << " names -> " << output << " ("
            << std::filesystem::file_size(output) << " bytes)\n";
  return 0;
}

}  // namespace attnlab
