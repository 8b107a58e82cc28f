// attnlab inspect RUN_ID: what a stored run's attention learned. For the GMM kernels (gmm_rks,
// gmm_prf) the eigenvalues of each learned covariance, per layer, head and component, as the
// KL-Transformer's Table 4 reports them (max, mean, min). A parameter named `sigma` is read as
// the mixture's scale: [H, C, d, d] a full matrix Σ with ω = Σn + μ, so Cov = ΣΣᵀ and its
// eigenvalues are Σ's squared singular values; [H, C, d] standard deviations, Cov = diag(σ²).
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "experiment/train_job.hpp"
#include "cli/cli_options.hpp"
#include "plugin_host/plugin_host.hpp"

#include <ATen/ATen.h>

#include "cli/commands.hpp"
#include "studies/stored_run.hpp"
#include "cli/text_table.hpp"

namespace attnlab {
namespace po = boost::program_options;

int cmd_inspect(const Args& args) {
  po::options_description options("attnlab inspect RUN_ID [options]");
  options.add_options()
      ("run", po::value<std::int64_t>(), "the stored run (its id in the database)")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("help,h", "this help");
  add_cache_dir_option(options);
  add_plugins_option(options);
  po::positional_options_description positional;
  positional.add("run", 1);
  const auto vm = parse_command_line("inspect", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;
  if (!vm.count("run")) throw std::runtime_error("inspect: name the run (attnlab results lists them)");
  const auto run_id = vm["run"].as<std::int64_t>();
  const std::string db_path = vm["db"].as<std::string>();
  existing_database(db_path);

  const PluginRegistry registry = load_plugins(plugin_folders(vm));
  store::ResultsReader db(db_path);
  const JobPlan plan = stored_plan(registry, db, run_id);
  const TaskInfo task = job_task(plan, registry, vm["cache-dir"].as<std::string>());
  EncoderClassifier model = load_trained_model(registry, plan, task, locate_checkpoint(db, run_id), c10::Device(c10::kCPU));

  TextTable table({"parameter", "head", "component", "eigenvalue max", "mean", "min"});
  auto cell = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4g", v);
    return std::string(text);
  };
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    if (name.size() < 6 || name.compare(name.size() - 6, 6, ".sigma") != 0) continue;
    const at::Tensor sigma = item.value().detach().to(at::kDouble);
    at::Tensor eigen;  // [H, C, d]
    if (sigma.dim() == 4) {
      eigen = at::linalg_svdvals(sigma).pow(2);
    } else if (sigma.dim() == 3) {
      eigen = sigma.pow(2);
    } else {
      continue;
    }
    for (std::int64_t h = 0; h < eigen.size(0); ++h)
      for (std::int64_t c = 0; c < eigen.size(1); ++c) {
        const auto e = eigen[h][c];
        table.add({name, std::to_string(h), std::to_string(c), cell(e.max().item<double>()), cell(e.mean().item<double>()),
                   cell(e.min().item<double>())});
      }
  }
  if (table.empty()) {
    std::cout << "run " << run_id << " (" << plan.method << "/" << plan.dataset
              << ") has no learned covariance to inspect (gmm_rks and gmm_prf have one)\n";
    return 0;
  }
  std::cout << "run " << run_id << " (" << plan.method << "/" << plan.dataset
            << "): eigenvalues of each learned covariance\n"
            << table.str();
  return 0;
}

}  // namespace attnlab
