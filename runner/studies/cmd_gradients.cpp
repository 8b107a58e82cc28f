// attnlab gradients RUN_ID...: the KL-Transformer's gradient study (App. E.3, Table 14) of stored
// runs, at the checkpoints kept where validation accuracy first reached each mark ([train]
// accuracy_checkpoints): stored (table gradient_stats) and printed in Table 14's layout beside
// the paper's numbers.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "attnlab/torch_compat.hpp"
#include "attnlab/train/config.hpp"
#include "cli/provenance.hpp"
#include "cli/cli_options.hpp"
#include "plugin_host/plugin_host.hpp"
#include "cli/commands.hpp"
#include "cli/text_table.hpp"
#include "studies/study_machine.hpp"
#include "studies/gradients.hpp"
#include "studies/stored_run.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab {
namespace po = boost::program_options;
namespace {

std::string fixed(double v, const char* format = "%.6f") {
  char text[32];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

// The sparsity a run's data has (sparse_sum), else NaN: Table 14's rows.
double sparsity_of(const JobPlan& plan) {
  return plan.dataset == "sparse_sum" ? plan.dataset_params.real("sparsity") : NAN;
}

// One row per (dataset, sparsity, mark), two columns per method and statistic with the paper's
// number beside ours where Table 14 has it.
void print_table14(const std::vector<store::GradientStats>& stats, const std::map<std::int64_t, JobPlan>& plans) {
  std::vector<std::string> methods;
  std::map<std::tuple<std::string, double, double>, std::map<std::string, const store::GradientStats*>> rows;
  for (const auto& g : stats) {
    const JobPlan& plan = plans.at(g.run_id);
    if (std::find(methods.begin(), methods.end(), plan.method) == methods.end()) methods.push_back(plan.method);
    rows[{plan.dataset, sparsity_of(plan), g.mark}][plan.method] = &g;
  }
  // The paper's rows of each sparsity measured, also where ours has no checkpoint (not reached).
  std::set<std::pair<std::string, double>> sparsities;
  for (const auto& [key, by_method] : rows)
    if (!std::isnan(std::get<1>(key))) sparsities.insert({std::get<0>(key), std::get<1>(key)});
  for (const auto& [dataset, sparsity] : sparsities)
    for (const double mark : {0.2, 0.4, 0.6, 0.8})
      if (published_table14("gmm_rks", sparsity, mark)) rows[{dataset, sparsity, mark}];
  std::vector<std::string> header = {"dataset", "sparsity", "acc %"};
  for (const auto& m : methods)
    for (const char* what : {" std", " std (paper)", " |g|", " |g| (paper)"}) header.push_back(m + what);
  TextTable table(header);
  for (const auto& [key, by_method] : rows) {
    const auto& [dataset, sparsity, mark] = key;
    std::vector<std::string> row = {dataset, std::isnan(sparsity) ? "-" : fixed(sparsity, "%g"), fixed(100 * mark, "%.0f")};
    for (const auto& m : methods) {
      const auto found = by_method.find(m);
      const auto* paper = std::isnan(sparsity) ? nullptr : published_table14(m, sparsity, mark);
      const bool ours = found != by_method.end();
      row.push_back(ours ? fixed(found->second->std) : "-");
      row.push_back(paper ? fixed(paper->std) : "-");
      row.push_back(ours ? fixed(found->second->abs_mean) : "-");
      row.push_back(paper ? fixed(paper->abs_mean) : "-");
    }
    table.add(row);
  }
  std::cout << table.str();
  std::cout << "std, |g|: per neuron of the classifier's hidden layer (head_in.bias), the sample std and the mean "
               "|gradient| over the repeats, averaged over the neurons; paper: Chowdhury et al. (TMLR 2022), Table 14\n";
}

// What to measure, as the command line says.
struct GradientStudy {
  std::vector<std::int64_t> runs;
  std::int64_t examples = 50, repeats = 50;
  std::string split = "val", parameter = "head_in.bias", device;
  std::uint64_t seed = 0;  // 0: derived from each run's seed
};

// The command line's study, refused in one line where it cannot be measured.
GradientStudy study_from(const po::variables_map& vm) {
  GradientStudy s;
  if (vm.count("run")) s.runs = vm["run"].as<std::vector<std::int64_t>>();
  if (s.runs.empty() && !vm.count("show")) throw std::runtime_error("gradients: name the runs (attnlab results --jobs lists them)");
  s.examples = vm["examples"].as<std::int64_t>();
  s.repeats = vm["repeats"].as<std::int64_t>();
  if (s.examples < 1) throw std::runtime_error("gradients: --examples must be at least 1");
  if (s.repeats < 2) throw std::runtime_error("gradients: --repeats must be at least 2 (one pass has no spread)");
  s.split = vm["split"].as<std::string>();
  s.parameter = vm["parameter"].as<std::string>();
  if (s.split != "val" && s.split != "test") throw std::runtime_error("gradients: --split must be val or test");
  s.device = vm["device"].as<std::string>();
  s.seed = vm["seed"].as<std::uint64_t>();
  return s;
}

// The spread of one run's gradients at each accuracy checkpoint it kept; none (said on stderr)
// when it kept none.
std::vector<store::GradientStats> measure_run(const PluginRegistry& registry, store::ResultsReader& db, const GradientStudy& study,
                                              std::int64_t run_id, const JobPlan& plan, const std::string& cache) {
  const std::string what = "run " + std::to_string(run_id) + " (" + plan.method + "/" + plan.dataset + ")";
  const auto marks = db.curve(run_id, "val", "accuracy_mark");
  if (marks.empty()) {  // never trained with the setting, or never reached the first mark
    std::cerr << "attnlab: gradients: " << what << " kept no accuracy checkpoints ([train] accuracy_checkpoints "
              << "unset, or validation accuracy never reached its first mark): left out\n";
    return {};
  }
  const c10::Device device = compat::parse_device(study.device);
  auto dataset = registry.find(PluginKind::dataset, plan.dataset)->make_dataset({cache}, plan.dataset_params);
  const TaskInfo task = dataset->info();
  const SplitData data = load_checked(plan.dataset, *dataset, study.split == "val" ? Split::val : Split::test);
  std::vector<std::pair<std::int64_t, double>> curve;
  for (const auto& point : marks) curve.emplace_back(point.step, point.value);
  std::vector<store::GradientStats> out;
  for (const auto& [mark, step] : marks_reached(curve, plan.train.real("accuracy_checkpoints"))) {
    EncoderClassifier model = load_trained_model(registry, plan, task, locate_accuracy_mark(db, run_id, mark), device);
    AttentionDraws draws(model->attention_methods(),
                         study.seed != 0 ? study.seed : static_cast<std::uint64_t>(plan.seed) ^ kAttentionStream);
    GradientSpread spread;
    try {
      spread = measure_gradient_spread(model, data, study.examples, study.repeats, draws, study.parameter, device);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("gradients: " + what + ": " + e.what());
    }
    store::GradientStats g;
    g.run_id = run_id;
    g.mark = mark;
    g.parameter = study.parameter;
    g.step = step;
    g.split = study.split;
    g.examples = std::min(study.examples, data.size());
    g.repeats = study.repeats;
    g.neurons = spread.neurons;
    g.abs_mean = spread.abs_mean;
    g.std = spread.std;
    stamp_provenance(g, device);
    out.push_back(g);
    std::cerr << "  " << what << " at " << fixed(100 * mark, "%.0f") << "% (step " << step << "): std "
              << fixed(spread.std) << ", |g| " << fixed(spread.abs_mean) << "\n";
  }
  return out;
}

// --show: what is stored for the runs, measuring nothing.
int show_stored(const PluginRegistry& registry, store::ResultsReader& db, const std::vector<std::int64_t>& runs) {
  const auto stored = store::gradient_stats(db, runs);
  if (stored.empty()) throw std::runtime_error("gradients: nothing stored in " + db.path() + " for these runs");
  std::map<std::int64_t, JobPlan> plans;
  for (const auto& g : stored)
    if (!plans.count(g.run_id)) plans.emplace(g.run_id, stored_plan(registry, db, g.run_id));
  print_table14(stored, plans);
  return 0;
}

}  // namespace

int cmd_gradients(const Args& args) {
  po::options_description options("attnlab gradients RUN_ID... [options]");
  options.add_options()
      ("run", po::value<std::vector<std::int64_t>>()->composing(), "stored runs (ids in the database)")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("examples", po::value<std::int64_t>()->default_value(50), "validation examples per pass (the paper: the first 50)")
      ("repeats", po::value<std::int64_t>()->default_value(50), "passes, each with a fresh draw (the paper: 50)")
      ("split", po::value<std::string>()->default_value("val"), "val or test")
      ("parameter", po::value<std::string>()->default_value("head_in.bias"),
       "the parameter whose gradient is measured (default: the classifier's hidden layer, one value per neuron)")
      ("seed", po::value<std::uint64_t>()->default_value(0), "seed of the draws (0: derived from the run's seed)")
      ("show", "print what is stored for the runs (all runs when none is named), measure nothing")
      ("help,h", "this help");
  add_study_options(options);
  po::positional_options_description positional;
  positional.add("run", -1);
  const auto vm = parse_command_line("gradients", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  const GradientStudy study = study_from(vm);
  const std::string db_path = vm["db"].as<std::string>();
  existing_database(db_path);

  const PluginRegistry registry = load_plugins(plugin_folders(vm));
  store::Database db(db_path);
  if (vm.count("show")) return show_stored(registry, db, study.runs);

  const std::string cache = study_machine(vm).cache;  // a bad --device refused before any run is read
  std::map<std::int64_t, JobPlan> plans;
  std::vector<store::GradientStats> measured;
  std::size_t left_out = 0;
  for (const auto run_id : study.runs) {
    const JobPlan& plan = plans.emplace(run_id, stored_plan(registry, db, run_id)).first->second;
    const auto stats = measure_run(registry, db, study, run_id, plan, cache);
    left_out += stats.empty();
    measured.insert(measured.end(), stats.begin(), stats.end());
  }
  if (measured.empty()) throw std::runtime_error("gradients: none of the runs named has an accuracy checkpoint");
  store::set_gradient_stats(db, measured);
  print_table14(measured, plans);
  return left_out ? 3 : 0;  // as `run`: done, but not everything asked for
}

}  // namespace attnlab
