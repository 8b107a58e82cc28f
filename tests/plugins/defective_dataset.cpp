// Generated datasets with one defect each, which exactly one dataset check must catch
// (conformance_test.cpp):
//   DEFECT=1 defect_unseeded: the data ignores its seed (std::random_device): "seeded reproducibility"
//   DEFECT=2 defect_path:     a `path` that does not exist escapes as std::filesystem_error, not a
//                             one-line DataError: "bad parameters refused"
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <torch/version.h>  // TORCH_VERSION_MAJOR/MINOR for ATTNLAB_PLUGIN_INFO

#include "attnlab/dataset.hpp"
#include "attnlab/params.hpp"
#include "attnlab/plugin.hpp"

namespace defective_data {
using namespace attnlab;

const ParamSpec kParams[] = {
    {"path", ParamType::string, "", 0, 0, nullptr, "(defect_path) a file whose size seeds the data; empty: none"},
};

class Defective final : public Dataset {
 public:
  explicit Defective(std::string path) : path_(std::move(path)) {}
  TaskInfo info() const override {
    TaskInfo t;
    t.vocab_size = 2;
    t.num_classes = 2;
    t.max_len = 16;
    return t;
  }
  SplitData load(Split split) override {
#if DEFECT == 1
    (void)split;
    std::random_device device;  // the defect: not the configuration's seed
    std::mt19937_64 rng(device());
#else
    // the defect: file_size throws std::filesystem::filesystem_error for a missing file
    const auto bytes = path_.empty() ? 0 : std::filesystem::file_size(path_);
    std::mt19937_64 rng(static_cast<std::uint64_t>(split) * 1000 + bytes);
#endif
    std::vector<std::uint8_t> tokens(64 * 16);
    std::vector<std::int64_t> labels(64);
    for (auto& t : tokens) t = rng() & 1;
    for (auto& l : labels) l = static_cast<std::int64_t>(rng() & 1);
    return full_length_split(std::move(tokens), std::move(labels), 16);
  }

 private:
  std::string path_;
};

std::shared_ptr<Dataset> create(const DatasetContext&, const ParamValues& params) {
  return std::make_shared<Defective>(params.string("path"));
}

}  // namespace defective_data

ATTNLAB_PLUGIN_INFO(dataset, DEFECT_NAME, "1.0", "a generated dataset with one defect (tests only)",
                    defective_data::kParams);
ATTNLAB_DATASET_FACTORY(defective_data::create)
