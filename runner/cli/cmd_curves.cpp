// attnlab curves RUN... : training curves of stored runs (or their mean over seeds per method and
// dataset) as CSV (or another grid format) on stdout or in a file, or as a PNG/SVG picture drawn
// by gnuplot with its data file and script next to it (results/curves.hpp, results/plot.hpp).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "attnlab/store.hpp"
#include "cli/cli_options.hpp"
#include "cli/commands.hpp"
#include "results/curves.hpp"
#include "results/curves_query.hpp"
#include "results/formats.hpp"
#include "results/plot.hpp"

namespace attnlab {
namespace {

std::vector<std::int64_t> run_ids(const std::vector<std::string>& words) {
  std::vector<std::int64_t> ids;
  for (const auto& w : words) {
    std::size_t used = 0;
    long long id = 0;
    try {
      id = std::stoll(w, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != w.size() || id <= 0) throw std::runtime_error("curves: '" + w + "' is not a run id");
    ids.push_back(id);
  }
  return ids;
}

// What --format and -o ask for: a picture format, or a grid format. Without --format an -o
// ending in .png or .svg means that picture; anything else is CSV.
struct Output {
  bool picture = false;
  results::PictureFormat picture_format = results::PictureFormat::png;
  results::Format grid_format = results::Format::csv;
};

Output output_of(const po::variables_map& vm) {
  std::string word = vm.count("format") ? vm["format"].as<std::string>() : "";
  if (word.empty() && vm.count("output")) {
    const std::string extension = std::filesystem::path(vm["output"].as<std::string>()).extension().string();
    if (extension == ".png" || extension == ".svg") word = extension.substr(1);
  }
  if (word.empty()) word = "csv";
  Output out;
  if (word == "png" || word == "svg") {
    out.picture = true;
    out.picture_format = results::parse_picture_format(word);
    if (!vm.count("output")) throw std::runtime_error("curves: --format " + word + " needs -o FILE (the picture)");
    return out;
  }
  try {
    out.grid_format = results::parse_format(word);
  } catch (const std::invalid_argument&) {
    throw std::runtime_error("curves: unknown --format '" + word + "' (csv, png, svg, table, json or markdown)");
  }
  return out;
}

po::options_description curves_options() {
  po::options_description options(
      "attnlab curves RUN... [options]: training curves of runs, or their mean over seeds, as CSV or a picture");
  options.add_options()
      ("run", po::value<std::vector<std::string>>()->composing(), "run id (repeatable)")
      ("db", po::value<std::string>()->default_value("attnlab.db"), "results database")
      ("where", po::value<std::vector<std::string>>()->composing(),
       "also the counting runs of the jobs matching this filter (repeatable, all must hold; see attnlab results)")
      ("metric", po::value<std::string>()->default_value("loss"), "curve name: loss, acc, lr, ...")
      ("split", po::value<std::string>()->default_value("val"), "train, val or test")
      ("x", po::value<std::string>()->default_value("step"), "x axis: step, or time (wall-clock seconds)")
      ("mean", "the mean over seeds per method and dataset (or per --group-by group), with min, max and std (drawn as mean ± std)")
      ("group-by", po::value<std::string>(),
       "label (and with --mean, group) the runs by these keys, comma-separated: method, dataset, seed or config keys, "
       "e.g. method,datasets.sparse_sum.sparsity")
      ("format", po::value<std::string>(), "csv, png, svg, table, json or markdown (default: csv, or png/svg when -o ends so)")
      ("output,o", po::value<std::string>(), "file to write (a picture needs one; its .dat and .gp go next to it)")
      ("title", po::value<std::string>()->default_value(""), "picture title (default: names the curve)")
      ("help,h", "this help");
  return options;
}

results::CurvesQuery curves_query(const po::variables_map& vm) {
  results::CurvesQuery query;
  query.run_ids = run_ids(option_values(vm, "run"));
  query.where = option_values(vm, "where");
  if (query.run_ids.empty() && query.where.empty()) throw std::runtime_error("curves: name the runs (RUN... or --where EXPR)");
  query.split = vm["split"].as<std::string>();
  query.name = vm["metric"].as<std::string>();
  if (vm.count("group-by")) query.group_by = split_list(vm["group-by"].as<std::string>(), "--group-by");
  query.mean = vm.count("mean") > 0;
  return query;
}

int draw_curves(const po::variables_map& vm, const Output& output, const results::CurvesQuery& query,
                const results::CurvesAnswer& answer, results::CurveX x) {
  const std::string out = vm["output"].as<std::string>(), title = vm["title"].as<std::string>();
  const results::Plot plot = query.mean ? results::mean_curves_plot(answer.means, query.split, query.name, x, title)
                                        : results::run_curves_plot(answer.runs, query.split, query.name, x, title);
  try {
    results::draw(plot, out, output.picture_format);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("curves: ") + e.what());
  }
  std::cout << "wrote " << out << " (" << plot.series.size() << (query.mean ? " group(s)" : " run(s)") << "; data "
            << results::data_path_for(out) << ", script " << results::script_path_for(out) << ")\n";
  return 0;
}

int print_curves(const po::variables_map& vm, const Output& output, const results::CurvesQuery& query,
                 const results::CurvesAnswer& answer) {
  const results::Grid grid = query.mean ? results::mean_curves_grid(answer.means) : results::run_curves_grid(answer.runs);
  const std::string text = results::render(grid, output.grid_format);
  if (!vm.count("output")) return std::cout << text, 0;
  const std::string out = vm["output"].as<std::string>();
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (file) file << text;
  if (file) file.close();
  if (!file) throw std::runtime_error("curves: cannot write " + out);
  std::cout << "wrote " << out << " (" << grid.rows.size() << " rows)\n";
  return 0;
}

}  // namespace

int cmd_curves(const Args& args) {
  const auto options = curves_options();
  po::positional_options_description positional;
  positional.add("run", -1);
  const auto vm = parse_command_line("curves", args, options, positional);
  if (vm.count("help")) return std::cout << options, 0;

  const results::CurvesQuery query = curves_query(vm);
  const Output output = output_of(vm);
  results::CurveX x;
  try {
    x = results::parse_curve_x(vm["x"].as<std::string>());
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("curves: --x: ") + e.what());
  }
  store::ResultsReader db(existing_database(vm["db"].as<std::string>()));
  results::CurvesAnswer answer;
  try {
    answer = results::curves_for(db, query);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string("curves: ") + e.what());
  }
  if (answer.jobs_without_run)
    std::cerr << "attnlab: curves: " << answer.jobs_without_run << " matching job(s) with no run that counts yet left out\n";
  return output.picture ? draw_curves(vm, output, query, answer, x) : print_curves(vm, output, query, answer);
}

}  // namespace attnlab
