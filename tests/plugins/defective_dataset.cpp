// A generated dataset whose data ignores its seed (drawn from std::random_device): the dataset
// check "seeded reproducibility" must catch it, and only it (conformance_test.cpp).
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "attnlab/dataset.hpp"

namespace defective_data {
using namespace attnlab;

class Unseeded final : public Dataset {
 public:
  TaskInfo info() const override {
    TaskInfo t;
    t.vocab_size = 2;
    t.num_classes = 2;
    t.max_len = 16;
    return t;
  }
  SplitData load(Split) override {
    std::random_device device;  // the defect: not the configuration's seed
    std::mt19937_64 rng(device());
    std::vector<std::uint8_t> tokens(64 * 16);
    std::vector<std::int64_t> labels(64);
    for (auto& t : tokens) t = rng() & 1;
    for (auto& l : labels) l = static_cast<std::int64_t>(rng() & 1);
    return full_length_split(std::move(tokens), std::move(labels), 16);
  }
};

std::shared_ptr<Dataset> create(const DatasetContext&, const ParamValues&) { return std::make_shared<Unseeded>(); }

}  // namespace defective_data

ATTNLAB_PLUGIN_INFO(dataset, "defect_unseeded", "1.0", "random bits from std::random_device (tests only)", nullptr);
ATTNLAB_DATASET_FACTORY(defective_data::create)
