// attnlab variance RUN_ID: the KL-Transformer's variance metrics (§4.1) of a stored run of a
// stochastic method, from its best checkpoint: R passes over a split, each with a fresh draw of
// the attention's randomness. Prints RSD, PI, VA, AGV and stores them with the run's results
// (replacing those measured at the end of training); with --per-example, each example's too.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "studies/study_machine.hpp"
#include "cli/cli_options.hpp"
#include "plugin_host/plugin_host.hpp"

#include "attnlab/torch_compat.hpp"
#include "attnlab/train/trainer.hpp"
#include "cli/commands.hpp"
#include "studies/stored_run.hpp"
#include "cli/text_table.hpp"

namespace attnlab {
namespace po = boost::program_options;

int cmd_variance(const Args& args) {
  po::options_description options("attnlab variance RUN_ID [options]");
  options.add_options()
      ("run", po::value<std::int64_t>(), "the stored run (its id in the database)")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("passes", po::value<std::int64_t>()->default_value(100), "inference passes, each with a fresh draw (R; the paper: 100)")
      ("split", po::value<std::string>()->default_value("test"), "val or test")
      ("per-example", "also store each example's RSD, PI, vote and label (table variance_examples)")
      ("batch-size", po::value<std::int64_t>()->default_value(0), "examples per forward pass (0: the run's batch_size)")
      ("seed", po::value<std::uint64_t>()->default_value(0), "seed of the draws (0: derived from the run's seed)")
      ("help,h", "this help");
  add_study_options(options);
  po::positional_options_description positional;
  positional.add("run", 1);
  const auto vm = parse_command_line("variance", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("run")) throw std::runtime_error("variance: name the run (attnlab results lists them)");
  const auto run_id = vm["run"].as<std::int64_t>();
  const auto passes = vm["passes"].as<std::int64_t>();
  const std::string split_name = vm["split"].as<std::string>();
  if (passes < 2) throw std::runtime_error("variance: --passes must be at least 2");
  if (split_name != "val" && split_name != "test") throw std::runtime_error("variance: --split must be val or test");
  const std::string db_path = vm["db"].as<std::string>();
  existing_database(db_path);

  const PluginRegistry registry = load_plugins(plugin_folders(vm));
  const StudyMachine machine = study_machine(vm);
  const c10::Device device = machine.device;
  store::Database db(db_path);
  const JobPlan plan = stored_plan(registry, db, run_id);
  const std::string checkpoint = locate_checkpoint(db, run_id);
  const std::string& cache = machine.cache;
  auto dataset = registry.find(PluginKind::dataset, plan.dataset)->make_dataset({cache}, plan.dataset_params);
  const TaskInfo task = dataset->info();
  EncoderClassifier model = load_trained_model(registry, plan, task, checkpoint, device);

  const std::uint64_t seed = vm["seed"].as<std::uint64_t>() != 0 ? vm["seed"].as<std::uint64_t>()
                                                                  : static_cast<std::uint64_t>(plan.seed) ^ kAttentionStream;
  AttentionDraws draws(model->attention_methods(), seed);
  if (!draws.any())
    throw std::runtime_error("variance: run " + std::to_string(run_id) + " (" + plan.method +
                             ") has no stochastic attention: every pass would give the same outputs");
  const Split split = split_name == "val" ? Split::val : Split::test;
  const SplitData data = load_checked(plan.dataset, *dataset, split);
  const std::int64_t batch = vm["batch-size"].as<std::int64_t>() > 0 ? vm["batch-size"].as<std::int64_t>()
                                                                       : train_config_from(plan.train).batch_size;
  // at the run's precision: the metrics describe the model as it was trained and evaluated
  const VarianceMetrics m = measure_variance(model, data, batch, device, passes, draws, {},
                                             parse_precision(train_config_from(plan.train).precision));
  db.set_results(run_id, {{"variance_passes", static_cast<double>(m.passes)},
                          {"rsd", m.rsd},
                          {"pi", m.pi},
                          {"va", m.va},
                          {"agv", m.agv},
                          {"mean_pass_acc", m.mean_acc}});
  if (vm.count("per-example")) {
    const auto labels = data.labels.contiguous();
    const std::vector<std::int64_t> label(labels.data_ptr<std::int64_t>(), labels.data_ptr<std::int64_t>() + labels.numel());
    db.set_variance_examples(run_id, split_name, m.passes, m.example_rsd, m.example_pi, m.example_vote, label);
  }

  TextTable table({"run", "method", "dataset", "split", "passes", "examples", "RSD", "PI", "VA", "mean acc", "AGV"});
  auto cell = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4f", v);
    return std::string(text);
  };
  table.add({std::to_string(run_id), plan.method, plan.dataset, split_name, std::to_string(m.passes),
             std::to_string(m.examples), cell(m.rsd), cell(m.pi), cell(m.va), cell(m.mean_acc), cell(m.agv)});
  std::cout << table.str();
  return 0;
}

}  // namespace attnlab
