// conf/kl-lra.toml as shipped, shrunk to two steps of two examples on stand-in files for its four
// tasks (CI has no LRA data) and to sequences of 40-64 tokens where the task allows (Image keeps its
// 1024): softmax and the six KL methods (the file's LRA baselines are cut: 10 more jobs a task,
// each as slow as these, and conf/skyformer-lra.toml's) train with each task's Table 6 model (6 x
// 512 for ListOps down to Image's 1 layer of 8 heads of 8) and Table 7's M, and `table accuracy
// --paper kl` lays the results beside the paper's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "test_support.hpp"

namespace attnlab {
namespace {

namespace fs = std::filesystem;

struct KlLra : testing::CliTest {
  void write(const fs::path& file, const std::string& bytes) const {
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << bytes;
  }

  // ListOps: basic_{train,val,test}.tsv, LRA's spelling, each value once.
  void listops(const fs::path& root) const {
    for (const char* split : {"train", "val", "test"}) {
      std::string text = "Source\tTarget\r\n";
      for (int v = 0; v < 10; ++v)
        text += "( ( ( [MAX " + std::to_string(v) + " ) 0 ) ] )\t" + std::to_string(v) + "\r\n";
      write(root / ("basic_" + std::string(split) + ".tsv"), text);
    }
  }

  // Text: aclImdb/{train,test}/{neg,pos}/ID_RATING.txt.
  void imdb(const fs::path& root) const {
    for (const char* split : {"train", "test"})
      for (const char* label : {"neg", "pos"})
        for (int i = 0; i < 3; ++i)
          write(root / split / label / (std::to_string(i) + "_" + std::to_string(i + 1) + ".txt"),
                std::string(label) + " review " + std::to_string(i) + " of " + split);
  }

  // Retrieval: new_aan_pairs.{train,eval,test}.tsv, label \t id \t id \t text \t text.
  void aan(const fs::path& root) const {
    for (const char* split : {"train", "eval", "test"}) {
      std::string text;
      for (int i = 0; i < 6; ++i)
        text += std::string(i % 2 ? "1.0" : "0.0") + "\tdoc" + std::to_string(i) + "\tdoc" + std::to_string(i + 100) +
                "\tfirst paper " + std::to_string(i) + "\tsecond paper " + std::to_string(i * 7) + "\n";
      write(root / ("new_aan_pairs." + std::string(split) + ".tsv"), text);
    }
  }

  // Image: CIFAR-10's binary batches, records of a label byte and 3 x 1024 pixel bytes.
  void cifar(const fs::path& root) const {
    int id = 0;
    const auto records = [&id](int n) {
      std::string bytes;
      for (int r = 0; r < n; ++r, ++id) {
        bytes += static_cast<char>(id % 10);
        for (int p = 0; p < 3072; ++p) bytes += static_cast<char>((id * 37 + p * 11) % 256);
      }
      return bytes;
    };
    for (int b = 1; b <= 5; ++b) write(root / ("data_batch_" + std::to_string(b) + ".bin"), records(4));
    write(root / "test_batch.bin", records(6));
  }
};

TEST_F(KlLra, TheShippedFileRunsShortOnStandInData) {
  listops(path("listops"));
  imdb(path("aclImdb"));
  aan(path("aan"));
  cifar(path("cifar"));

  std::ifstream in(std::string(ATTNLAB_SOURCE_DIR) + "/conf/kl-lra.toml");
  std::stringstream text;
  text << in.rdbuf();
  std::string toml = text.str();
  const auto replace_all = [&toml](const std::string& from, const std::string& to) {
    std::size_t n = 0;
    for (auto at = toml.find(from); at != std::string::npos; at = toml.find(from, at + to.size()), ++n)
      toml.replace(at, from.size(), to);
    return n;
  };
  const std::vector<std::pair<std::string, std::string>> shrink = {
      {"seeds = [1, 2, 3]", "seeds = [1]"},
      {"path = \"data/lra_release/listops-1000\"", "path = \"" + path("listops") + "\""},
      {"path = \"data/aclImdb\"", "path = \"" + path("aclImdb") + "\""},
      {"path = \"data/lra_release/tsv_data\"", "path = \"" + path("aan") + "\""},
      {"path = \"data/cifar-10-batches-bin\"", "path = \"" + path("cifar") + "\"\nval_size = 4"},
      {"max_len = 2000", "max_len = 40"},
      {"eval_every = 100", "eval_every = 1"},
      {"eval_batches = 0 ", "eval_batches = 1\nvariance_passes = 2 "}};  // 100 passes: 3/4 of the time
  for (const auto& [from, to] : shrink) ASSERT_EQ(replace_all(from, to), 1u) << "conf/kl-lra.toml has no '" << from << "'";
  ASSERT_EQ(replace_all("max_len = 4000", "max_len = 64"), 2u);  // Text and Retrieval
  const auto baselines = toml.find("[methods.synthesizer]"), kl = toml.find("# The six KL methods");
  ASSERT_TRUE(baselines != std::string::npos && kl != std::string::npos && baselines < kl);
  toml.erase(baselines, kl - baselines);
  // Every task's schedule: two steps of two examples, one warm-up step.
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"steps = ", "2"}, {"batch_size = ", "2"}, {"warmup = ", "1"}}) {
    std::size_t n = 0;
    for (auto at = toml.find("\n" + key); at != std::string::npos; at = toml.find("\n" + key, at + 1), ++n)
      toml.replace(at + 1, toml.find('\n', at + 1) - at - 1, key + value);  // the line's comment goes too
    EXPECT_EQ(n, 4u) << key;  // one per task
  }
  std::ofstream(path("kl-lra.toml")) << toml;

  const std::string db = path("kl.db");
  std::string out;
  ASSERT_EQ(attnlab("run " + path("kl-lra.toml") + " --db " + db + " --threads 1 --cache-dir " + path("cache"), out), 0)
      << out;
  EXPECT_EQ(testing::query_one(db, "SELECT count(*) FROM jobs WHERE state = 'done'"), "28");  // 7 methods x 4 tasks
  ASSERT_EQ(attnlab("table accuracy --paper kl --db " + db, out), 0) << out;
  EXPECT_NE(out.find("GMM-RKS"), std::string::npos) << out;
  EXPECT_NE(out.find("image"), std::string::npos) << out;
}

}  // namespace
}  // namespace attnlab
