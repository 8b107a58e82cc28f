// attnlab spectrum RUN_ID...: the singular values of a stored run's attention output at one layer
// (default the last), per test sequence, averaged over one test batch (Skyformer appendix B,
// Fig. 4). Stores each measurement (spectrum_summaries, spectrum_results), prints the decay
// summary per run, and with --plot draws one line per run. --show prints (and draws) what is stored.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros.h>

#include "attnlab/dataset.hpp"
#include "attnlab/torch_compat.hpp"
#include "attnlab/train/config.hpp"
#include "cli/provenance.hpp"
#include "cli/cli_options.hpp"
#include "plugin_host/plugin_host.hpp"
#include "cli/commands.hpp"
#include "studies/study_machine.hpp"
#include "results/plot.hpp"
#include "studies/spectrum.hpp"
#include "studies/stored_run.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab {
namespace po = boost::program_options;
namespace {

struct Target {
  std::int64_t run_id = 0;
  std::string description;  // "run 3 (softmax/listops)"
  JobPlan plan;
  std::int64_t layer = 0;  // 1-based
  SpectrumRunInfo info;
};

// Every run checked before anything is computed: it exists, it ended done, the layer is one of
// its model's. Each refusal is one line.
Target check_target(const PluginRegistry& registry, store::ResultsReader& db, std::int64_t run_id, std::int64_t layer) {
  const std::optional<store::RunSummary> run = db.run_summary(run_id);
  if (!run) throw std::runtime_error("spectrum: " + db.path() + ": no run with id " + std::to_string(run_id));
  Target t;
  t.run_id = run_id;
  t.description = "run " + std::to_string(run_id) + " (" + run->method + "/" + run->dataset + ")";
  t.info = {run_id, run->method, run->dataset};
  if (run->status != store::RunStatus::done)
    throw std::runtime_error("spectrum: " + t.description + " is " + store::to_string(run->status) +
                             ", not done: only a finished run's checkpoint is measured");
  try {
    t.plan = stored_plan(registry, db, run_id);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("spectrum: ") + e.what());
  }
  const std::int64_t layers = model_config_from(t.plan.model).layers;
  t.layer = layer == 0 ? layers : layer;
  if (t.layer < 1 || t.layer > layers)
    throw std::runtime_error("spectrum: --layer " + std::to_string(layer) + ": " + t.description + " has " + std::to_string(layers) +
                             " layer(s) (1.." + std::to_string(layers) + ")");
  return t;
}

struct Settings {
  std::int64_t batch = 0;  // 0: the run's batch_size
  std::int64_t chunk = 8;
  std::string stage = "out";
  std::string cache;  // the datasets' folder (study_machine)
  c10::Device device = c10::Device(c10::kCPU);
  std::string device_text;
};

store::SpectrumResult measure(const PluginRegistry& registry, store::ResultsReader& db, const Target& t, const Settings& s) {
  const std::string checkpoint = locate_checkpoint(db, t.run_id);
  auto dataset = registry.find(PluginKind::dataset, t.plan.dataset)->make_dataset({s.cache}, t.plan.dataset_params);
  const TaskInfo task = dataset->info();
  EncoderClassifier model = load_trained_model(registry, t.plan, task, checkpoint, s.device);
  const SplitData test = load_checked(t.plan.dataset, *dataset, Split::test);
  if (test.size() == 0) throw std::runtime_error("spectrum: " + t.description + ": the test split is empty");
  const std::int64_t wanted = s.batch > 0 ? s.batch : train_config_from(t.plan.train).batch_size;
  const std::int64_t b = std::min(wanted, test.size());
  if (b < wanted)
    std::cerr << "attnlab: spectrum: " << t.description << ": the test split has " << test.size() << " example(s), not "
              << wanted << "\n";

  at::NoGradGuard no_grad;
  model->eval();
  std::vector<at::Tensor> sigmas;  // [m, width] each, zero-padded
  std::int64_t width = 0, rows_min = -1, rows_max = 0;
  for (std::int64_t input = 0; input < task.inputs; ++input)
    for (std::int64_t begin = 0; begin < b; begin += s.chunk) {
      const std::int64_t end = std::min(b, begin + s.chunk);
      const auto tokens = test.tokens.slice(0, begin, end).select(1, input).to(at::kLong).to(s.device);
      const auto lengths = test.lengths.slice(0, begin, end).select(1, input).to(at::kLong).to(s.device);
      const auto outputs = model->layer_outputs(tokens, lengths, t.layer - 1);
      at::Tensor matrix = outputs.projected;  // [m, N, dim]
      if (s.stage == "heads") {
        const auto& h = outputs.heads;  // [m, H, N, Dh]
        matrix = h.transpose(1, 2).reshape({h.size(0), h.size(2), h.size(1) * h.size(3)});
      }
      width = matrix.size(2);
      const auto real = outputs.key_valid.sum(1).to(at::kCPU);
      for (std::int64_t i = 0; i < real.size(0); ++i) {
        const std::int64_t r = real[i].item<std::int64_t>();
        rows_min = rows_min < 0 ? r : std::min(rows_min, r);
        rows_max = std::max(rows_max, r);
      }
      const auto sv = real_row_singular_values(matrix, outputs.key_valid);
      auto padded = at::zeros({sv.size(0), width}, sv.options());
      padded.slice(1, 0, sv.size(1)).copy_(sv);
      sigmas.push_back(padded);
    }
  const auto all = at::cat(sigmas, 0).slice(1, 0, std::min(width, rows_max));
  store::SpectrumResult r;
  try {
    r = spectrum_statistics(all);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(t.description + ": " + e.what());
  }
  r.run_id = t.run_id;
  r.layer = t.layer;
  r.stage = s.stage;
  r.batch = b;
  r.split = "test";
  r.width = width;
  r.rows_min = rows_min;
  r.rows_max = rows_max;
  stamp_provenance(r, s.device);
  return r;
}

std::vector<std::int64_t> run_ids(const po::variables_map& vm) {
  std::vector<std::int64_t> ids;
  for (const auto& word : option_values(vm, "runs")) {
    std::vector<std::int64_t> some;
    try {
      some = split_positive_integers(word, "spectrum: run ids");
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(e.what());
    }
    for (auto id : some)
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

results::PictureFormat picture_format(const std::string& path) {
  const std::string extension = std::filesystem::path(path).extension().string();
  if (extension == ".png" || extension == ".svg") return results::parse_picture_format(extension.substr(1));
  throw std::runtime_error("spectrum: --plot " + path + ": the picture's name must end in .png or .svg");
}

void draw(const std::vector<store::SpectrumResult>& rows, const std::vector<SpectrumRunInfo>& runs, const po::variables_map& vm) {
  const std::string out = vm["plot"].as<std::string>();
  const results::Plot plot = spectrum_plot(rows, runs, vm.count("raw") > 0, vm["title"].as<std::string>());
  try {
    results::draw(plot, out, picture_format(out));
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    throw std::runtime_error(what.rfind("spectrum: ", 0) == 0 ? what : "spectrum: " + what);
  }
  std::cout << "wrote " << out << " (" << plot.series.size() << " line(s); data " << results::data_path_for(out) << ", script "
            << results::script_path_for(out) << ")\n";
}

}  // namespace

int cmd_spectrum(const Args& args) {
  po::options_description options(
      "attnlab spectrum RUN_ID[,RUN_ID...] [options] | attnlab spectrum --show [RUN_ID...]: singular values of a trained "
      "run's attention output over one test batch (Skyformer appendix B, Fig. 4)");
  options.add_options()
      ("runs", po::value<std::vector<std::string>>()->composing(), "stored run ids (repeatable, or comma-separated)")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("layer", po::value<std::int64_t>()->default_value(0), "layer, 1-based (0: the last; the paper: layer 2 of 2)")
      ("batch", po::value<std::int64_t>()->default_value(0), "test examples: the first N (0: the run's batch_size, one batch)")
      ("stage", po::value<std::string>()->default_value("out"),
       "out: the attention sublayer's output, after the output projection [n, dim] (Skyformer's); heads: the heads' "
       "outputs concatenated before it [n, heads*head_dim]")
      ("chunk", po::value<std::int64_t>()->default_value(8), "examples per forward pass (memory only)")
      ("show", "print the stored measurements (of the named runs, or all) instead of measuring")
      ("plot", po::value<std::string>(), "also draw the spectra, one line per run, into this .png or .svg (with .dat and .gp)")
      ("raw", "plot the mean singular values themselves (as the paper's figure) instead of σ_i / σ_1")
      ("title", po::value<std::string>()->default_value(""), "picture title (default: names the layer)")
      ("help,h", "this help");
  add_study_options(options);
  po::positional_options_description positional;
  positional.add("runs", -1);
  const auto vm = parse_command_line("spectrum", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  const std::vector<std::int64_t> ids = run_ids(vm);
  const std::string db_path = vm["db"].as<std::string>();
  if (vm.count("plot")) picture_format(vm["plot"].as<std::string>());  // a bad name is refused before any work

  if (vm.count("show")) {
    store::ResultsReader db(existing_database(db_path));
    const auto rows = store::spectrum_results(db, ids);
    if (rows.empty()) throw std::runtime_error("spectrum: " + db_path + " holds no spectrum" + (ids.empty() ? "" : " of these runs"));
    std::vector<SpectrumRunInfo> runs;
    for (const auto& r : rows)
      if (const auto summary = db.run_summary(r.run_id)) runs.push_back({r.run_id, summary->method, summary->dataset});
    std::cout << spectrum_table(rows, runs);
    if (vm.count("plot")) draw(rows, runs, vm);
    return 0;
  }

  if (ids.empty()) throw std::runtime_error("spectrum: name the runs (attnlab results lists them), or --show");
  Settings settings;
  settings.batch = vm["batch"].as<std::int64_t>();
  settings.chunk = vm["chunk"].as<std::int64_t>();
  if (settings.batch < 0) throw std::runtime_error("spectrum: --batch must be at least 1 (0: the run's batch size)");
  if (settings.chunk < 1) throw std::runtime_error("spectrum: --chunk must be at least 1");
  try {
    settings.stage = parse_spectrum_stage(vm["stage"].as<std::string>());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("spectrum: --stage: ") + e.what());
  }
  const std::int64_t layer = vm["layer"].as<std::int64_t>();
  if (layer < 0) throw std::runtime_error("spectrum: --layer must be at least 1 (0: the last)");
  existing_database(db_path);

  const PluginRegistry registry = load_plugins(plugin_folders(vm));
  const StudyMachine machine = study_machine(vm);
  settings.device_text = machine.device_text;
  settings.device = machine.device;
  settings.cache = machine.cache;
  store::Database db(db_path);
  std::vector<Target> targets;
  for (const auto id : ids) targets.push_back(check_target(registry, db, id, layer));

  std::vector<store::SpectrumResult> rows;
  std::vector<SpectrumRunInfo> runs;
  for (const auto& t : targets) {
    store::SpectrumResult r = measure(registry, db, t, settings);
    store::set_spectrum(db, r);
    rows.push_back(std::move(r));
    runs.push_back(t.info);
  }
  std::cout << spectrum_table(rows, runs) << "stored " << rows.size() << " spectrum(s) in " << db_path << "\n";
  if (vm.count("plot")) draw(rows, runs, vm);
  return 0;
}

}  // namespace attnlab
