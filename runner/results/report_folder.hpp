#pragma once
// `attnlab report -o DIR`: one folder with everything the database can show. The three tables in
// Markdown and CSV, the training curves of every (method, task) group (each seed, and the methods
// of a task side by side as mean ± std bands against training time: Skyformer Fig. 2 and 3), and
// when the database has them, the bench pictures (step time and peak memory against sequence
// length) and the approximation study's (error against the number of landmarks or features d).
// DIR/README.md links them all.
#include <string>
#include <vector>

#include "attnlab/store.hpp"
#include "results/plot.hpp"

namespace attnlab::results {

struct ReportOptions {
  std::string out_dir;
  std::vector<std::string> where;  // --where filters for the tables and curves
  PictureFormat pictures = PictureFormat::svg;
};

struct ReportSummary {
  std::vector<std::string> files;    // written, relative to out_dir (pictures' .dat/.gp not listed)
  std::vector<std::string> skipped;  // one line per thing not drawn, and why
};

ReportSummary write_report(store::ResultsReader& db, const ReportOptions& options);

// A method, dataset or device name as a file name: letters, digits, '.', '_' and '-' kept, the
// rest '_' ("gmm_rks[features=64]" -> "gmm_rks_features_64_").
std::string file_safe(const std::string& name);

}  // namespace attnlab::results
