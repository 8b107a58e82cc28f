// Experiment files: expansion into jobs, override precedence, and one-line errors that name the
// file, the line and the key.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "experiment/experiment.hpp"
#include "plugin_host/hashing.hpp"

namespace attnlab {
namespace {
namespace fs = std::filesystem;

const PluginRegistry& registry() { return testing::built_plugins(); }

std::string write_file(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / ("attnlab-exp-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const auto path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::string& text) {
  const auto path = write_file("bad.toml", text);
  try {
    load_experiment(path, registry());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

const char* kGood = R"(
[experiment]
name = "two-seeds"
seeds = [1, 2]

[model]
layers = 1

[train]
steps = 30
lr = 0.001

[datasets.listops]
max_len = 64
[datasets.listops.train]
lr = 0.002
batch_size = 4

[methods.softmax]
dropout = 0.1
[methods.softmax.train]
lr = 0.003
)";

TEST(Experiment, ExpandsMethodsDatasetsSeedsWithOverrides) {
  const auto e = load_experiment(write_file("good.toml", kGood), registry());
  EXPECT_EQ(e.name, "two-seeds");
  ASSERT_EQ(e.jobs.size(), 2u);
  const auto& job = e.jobs[0];
  EXPECT_EQ(job.method, "softmax");
  EXPECT_EQ(job.dataset, "listops");
  EXPECT_EQ(job.seed, 1);
  EXPECT_EQ(job.model.integer("layers"), 1);
  EXPECT_EQ(job.model.integer("dim"), 64);              // default
  EXPECT_EQ(job.train.integer("steps"), 30);
  EXPECT_DOUBLE_EQ(job.train.real("lr"), 0.003);        // method beats dataset beats [train]
  EXPECT_EQ(job.train.integer("batch_size"), 4);        // from the dataset's override
  EXPECT_DOUBLE_EQ(job.method_params.real("dropout"), 0.1);
  EXPECT_EQ(job.dataset_params.integer("max_len"), 64);
  EXPECT_NE(e.jobs[0].config_hash, e.jobs[1].config_hash);  // the seed is part of the identity
  EXPECT_EQ(job.config_hash.size(), 64u);
  bool found = false;
  for (const auto& [k, v] : job.flat) found |= k == "methods.softmax.dropout" && v == "0.1";
  EXPECT_TRUE(found);
}

// A warm-up longer than the run is allowed, but said: one line per distinct case, at the line that
// set warmup (else steps: here the default warmup of 100 against steps = 30 on line 10).
TEST(Experiment, WarmupLongerThanStepsIsOneWarningLine) {
  const auto good_path = write_file("good.toml", kGood);
  EXPECT_EQ(load_experiment(good_path, registry()).warnings,
            std::vector<std::string>{good_path + ":10: [train] warmup = 100 is longer than steps = 30: the learning "
                                                 "rate never reaches lr (it peaks at 30% of it)"});
  const auto path = write_file("warmup.toml",
                               "[train]\nsteps = 50\nwarmup = 10\n[datasets.listops]\n[methods.softmax]\n"
                               "[methods.softmax.train]\nwarmup = 80\n");
  EXPECT_EQ(load_experiment(path, registry()).warnings,
            std::vector<std::string>{path + ":7: [methods.softmax.train] warmup = 80 is longer than steps = 50: the "
                                            "learning rate never reaches lr (it peaks at 62.5% of it)"});
  EXPECT_TRUE(load_experiment(write_file("equal.toml", "[train]\nsteps = 50\nwarmup = 50\n[datasets.listops]\n"
                                                      "[methods.softmax]\n"),
                              registry()).warnings.empty());
}

TEST(Experiment, ResolvedConfigRoundTripsToTheSameJob) {
  const auto e = load_experiment(write_file("good.toml", kGood), registry());
  const auto back = parse_job_config(e.jobs[1].config_toml, "job 2", registry());
  EXPECT_EQ(back.config_toml, e.jobs[1].config_toml);
  EXPECT_EQ(back.config_hash, e.jobs[1].config_hash);
  EXPECT_EQ(back.seed, 2);
  EXPECT_DOUBLE_EQ(back.train.real("lr"), 0.003);
}

// checkpoint_every changes how a job runs, never its numbers: it stays in the stored config but
// not in the identity, so a new cadence finds the same job; a real change (lr) makes a new one.
TEST(Experiment, CheckpointCadenceIsNotPartOfTheJobIdentity) {
  const std::string base = kGood;
  const auto plain = load_experiment(write_file("plain.toml", base), registry());
  std::string cadence = base, other_lr = base;
  cadence.replace(cadence.find("steps = 30"), 10, "steps = 30\ncheckpoint_every = 7");
  other_lr.replace(other_lr.find("lr = 0.001"), 10, "lr = 0.0011");
  const auto with_cadence = load_experiment(write_file("cadence.toml", cadence), registry());
  EXPECT_EQ(with_cadence.jobs[0].train.integer("checkpoint_every"), 7);
  EXPECT_NE(with_cadence.jobs[0].config_toml, plain.jobs[0].config_toml);
  EXPECT_EQ(with_cadence.jobs[0].config_hash, plain.jobs[0].config_hash);
  std::string graphs_off = base;  // the step replayed as a CUDA graph or not: the same kernels, the same job
  graphs_off.replace(graphs_off.find("steps = 30"), 10, "steps = 30\ncuda_graphs = \"off\"");
  const auto without_graphs = load_experiment(write_file("graphs.toml", graphs_off), registry());
  EXPECT_EQ(without_graphs.jobs[0].train.string("cuda_graphs"), "off");
  EXPECT_EQ(without_graphs.jobs[0].config_hash, plain.jobs[0].config_hash);
  // the method's own override (lr = 0.003) wins over [train]; change the dataset-free default instead
  const auto changed = load_experiment(write_file("lr.toml", other_lr), registry());
  EXPECT_EQ(changed.jobs[0].train.real("lr"), plain.jobs[0].train.real("lr"));  // overridden: same job
  EXPECT_EQ(changed.jobs[0].config_hash, plain.jobs[0].config_hash);
  std::string steps = base;
  steps.replace(steps.find("steps = 30"), 10, "steps = 31");
  EXPECT_NE(load_experiment(write_file("steps.toml", steps), registry()).jobs[0].config_hash, plain.jobs[0].config_hash);
}

// A job's configuration as a build before the later [train] keys wrote it: without them (and
// without the cadence keys and cuda_graphs, never part of the identity).
std::string without_later_train_keys(const std::string& config_toml) {
  std::string before;
  std::istringstream lines(config_toml);
  std::string section;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind('[', 0) == 0) section = line;
    bool later = false;
    for (const char* key : {"precision = ", "tf32 = ", "deterministic = ", "checkpoint_every = ", "accuracy_checkpoints = ",
                            "cuda_graphs = ", "clip_value = ", "keep_best_after = ", "attention_precision = ",
                            "eval_draw = ", "test_drop_last = ", "mask = ", "attention_bias = ", "init = ", "pair_head = ",
                            "init_from = ", "init_from_sha256 = "})
      later |= (section == "[model]" || section == "[train]") && line.rfind(key, 0) == 0;
    later |= section == "[datasets.listops]" && line.rfind("close_bracket = ", 0) == 0;
    if (!later) before += line + "\n";
  }
  return before;
}

// [train] precision, tf32, deterministic, clip_value, keep_best_after, eval_draw, test_drop_last,
// [model] attention_precision, mask, attention_bias, init, pair_head, init_from and init_from_sha256, and
// listops' close_bracket came after jobs were stored: at their
// defaults they stay out of the identity, which is then the hash of the configuration without them
// (and without the cadence keys and cuda_graphs), as before they existed; away from their defaults
// each makes another job.
TEST(Experiment, PrecisionKeysAtTheirDefaultsKeepTheIdentityJobsHadBeforeThem) {
  const std::string base = kGood;
  const auto plain = load_experiment(write_file("plain.toml", base), registry());
  const auto& job = plain.jobs[0];
  const std::string before = without_later_train_keys(job.config_toml);
  ASSERT_NE(before, job.config_toml + "\n");
  EXPECT_EQ(job.config_hash, sha256_of_text(before));

  // the job of kGood with `setting` added after its `after` line ([train]'s steps by default)
  auto with = [&](const std::string& name, const std::string& setting, const std::string& after = "steps = 30") {
    std::string text = base;
    text.replace(text.find(after), after.size(), after + "\n" + setting);
    return load_experiment(write_file(name, text), registry()).jobs[0];
  };
  EXPECT_EQ(with("explicit.toml", "precision = \"fp32\"\ntf32 = false\ndeterministic = false").config_hash, job.config_hash);
  const auto bf16 = with("bf16.toml", "precision = \"bf16\"");
  EXPECT_NE(bf16.config_hash, job.config_hash);
  EXPECT_EQ(bf16.train.string("precision"), "bf16");
  EXPECT_NE(with("tf32.toml", "tf32 = true").config_hash, job.config_hash);
  EXPECT_NE(with("det.toml", "deterministic = true").config_hash, job.config_hash);
  EXPECT_EQ(with("clip0.toml", "clip_value = 0.0").config_hash, job.config_hash);
  EXPECT_NE(with("clip1.toml", "clip_value = 1.0").config_hash, job.config_hash);
  EXPECT_EQ(with("keep0.toml", "keep_best_after = 0.0").config_hash, job.config_hash);
  EXPECT_NE(with("keep2.toml", "keep_best_after = 0.2").config_hash, job.config_hash);
  EXPECT_EQ(with("first.toml", "eval_draw = \"first\"\ntest_drop_last = false").config_hash, job.config_hash);
  EXPECT_NE(with("stream.toml", "eval_draw = \"stream\"\neval_batches = 2").config_hash, job.config_hash);
  EXPECT_NE(with("droplast.toml", "test_drop_last = true").config_hash, job.config_hash);
  EXPECT_EQ(with("lengths.toml", "mask = \"lengths\"", "layers = 1").config_hash, job.config_hash);
  EXPECT_NE(with("nonzero.toml", "mask = \"nonzero_tokens\"", "layers = 1").config_hash, job.config_hash);
  EXPECT_EQ(with("autocast.toml", "attention_precision = \"autocast\"", "layers = 1").config_hash, job.config_hash);
  EXPECT_EQ(with("kl-defaults.toml", "attention_bias = true\ninit = \"default\"\npair_head = \"nli\"", "layers = 1").config_hash,
            job.config_hash);
  EXPECT_NE(with("no-bias.toml", "attention_bias = false", "layers = 1").config_hash, job.config_hash);
  EXPECT_NE(with("kl-init.toml", "init = \"kl_authors\"", "layers = 1").config_hash, job.config_hash);
  EXPECT_NE(with("concat.toml", "pair_head = \"concat\"", "layers = 1").config_hash, job.config_hash);
  EXPECT_EQ(with("no-init-file.toml", "init_from = \"\"", "layers = 1").config_hash, job.config_hash);
  EXPECT_EQ(with("brackets.toml", "close_bracket = \"token\"", "max_len = 64").config_hash, job.config_hash);
  EXPECT_NE(with("no-brackets.toml", "close_bracket = \"drop\"", "max_len = 64").config_hash, job.config_hash);
  const auto fp32 = with("attention32.toml", "attention_precision = \"fp32\"", "layers = 1");
  EXPECT_NE(fp32.config_hash, job.config_hash);
  EXPECT_EQ(model_config_from(fp32.model).attention_precision, AttentionPrecision::fp32);
  const std::string endless = error_of("[train]\neval_draw = \"stream\"\n[methods.softmax]\n[datasets.listops]\n");
  EXPECT_NE(endless.find("eval_draw: \"stream\" draws eval_batches batches an evaluation; set eval_batches"), std::string::npos)
      << endless;
  const std::string refused = error_of("[train]\nprecision = \"fp8\"\n[methods.softmax]\n[datasets.listops]\n");
  EXPECT_EQ(refused.substr(refused.find(":2:")), ":2: [train] precision: 'fp8' is not one of fp32|bf16|fp16");
}

// [model] init_from: the file relative to the experiment file, made absolute, its SHA-256 recorded
// (part of the identity: other bytes, another job); a missing file, a SHA-256 the file does not
// have, or a SHA-256 without a file, one line at the line that set it.
TEST(Experiment, InitFromIsResolvedNextToTheFileAndItsBytesAreTheIdentity) {
  const std::string weights = write_file("start.safetensors", "some bytes");
  std::string text = kGood;
  text.replace(text.find("layers = 1"), 10, "layers = 1\ninit_from = \"start.safetensors\"");
  const auto job = load_experiment(write_file("init.toml", text), registry()).jobs[0];
  EXPECT_EQ(job.model.string("init_from"), weights);
  EXPECT_EQ(job.model.string("init_from_sha256"), sha256_of_text("some bytes"));
  const auto plain = load_experiment(write_file("plain.toml", kGood), registry()).jobs[0];
  EXPECT_NE(job.config_hash, plain.config_hash);
  write_file("start.safetensors", "other bytes");
  EXPECT_NE(load_experiment(write_file("init.toml", text), registry()).jobs[0].config_hash, job.config_hash);
  // the stored job's configuration reads back as itself, the path and its SHA-256 as recorded
  EXPECT_EQ(parse_job_config(job.config_toml, "job 1", registry()).config_hash, job.config_hash);

  std::string missing = kGood;
  missing.replace(missing.find("layers = 1"), 10, "layers = 1\ninit_from = \"nowhere.safetensors\"");
  const std::string gone = error_of(missing);
  EXPECT_NE(gone.find(":8: [model] init_from: "), std::string::npos) << gone;
  EXPECT_NE(gone.find("nowhere.safetensors: no such file"), std::string::npos) << gone;
  std::string pinned = text;
  pinned.replace(pinned.find("layers = 1"), 10, "layers = 1\ninit_from_sha256 = \"" + std::string(64, '0') + "\"");
  const std::string wrong = error_of(pinned);
  EXPECT_NE(wrong.find(":8: [model] init_from_sha256: 0000"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("is not the SHA-256 of " + weights + " (" + sha256_of_text("other bytes") + ")"), std::string::npos)
      << wrong;
  std::string alone = kGood;
  alone.replace(alone.find("layers = 1"), 10, "layers = 1\ninit_from_sha256 = \"abc\"");
  EXPECT_NE(error_of(alone).find(":8: [model] init_from_sha256: is set without init_from"), std::string::npos)
      << error_of(alone);
}

// Methods' parameters that came after their jobs were stored (kernelized attention's dropout,
// Nystromformer's segments, Performer's form, Linformer's share_e, linear_elu's form): at their defaults they stay out
// of the identity (the hash of the configuration without them); away from them, another job.
TEST(Experiment, LaterMethodParametersAtTheirDefaultsKeepTheIdentityJobsHadBeforeThem) {
  for (const auto& [method, key, away] : {std::tuple<std::string, std::string, std::string>{"kernelized", "dropout", "0.1"},
                                          {"nystromformer", "segments", "\"padded\""},
                                          {"performer", "form", "\"performer_pytorch\""},
                                          {"linformer", "share_e", "true"},
                                          {"linear_elu", "form", "\"nystromformer_lra\""}}) {
    SCOPED_TRACE(method);
    std::string base = kGood;
    base.replace(base.find("[methods.softmax]"), std::string::npos, "[methods." + method + "]\n");
    const auto job = load_experiment(write_file(method + ".toml", base), registry()).jobs[0];
    // as a build without the key wrote it: its line out of the method's section, less the later [train] keys
    std::string before = job.config_toml;
    const auto line = before.find("\n" + key + " = ", before.find("[methods." + method + "]"));
    ASSERT_NE(line, std::string::npos) << job.config_toml;
    before.erase(line + 1, before.find('\n', line + 1) - line);
    EXPECT_EQ(job.config_hash, sha256_of_text(without_later_train_keys(before)));
    const auto changed = load_experiment(write_file(method + "-changed.toml", base + key + " = " + away + "\n"), registry()).jobs[0];
    EXPECT_NE(changed.config_hash, job.config_hash);
  }
}

// toml++ sorts a table's keys by name; the jobs keep the file's order (methods, then datasets,
// then seeds), which the results tables and pictures show. A sub-table written before its parent's
// sibling ([methods.softmax.model] before [methods.performer]) counts where its method first appears.
TEST(Experiment, JobsFollowTheFilesOrderOfMethodsAndDatasets) {
  const auto e = load_experiment(write_file("order.toml", R"(
[experiment]
seeds = [2, 1]
[datasets.sparse_sum]
[datasets.listops]
max_len = 64
[methods.softmax.model]
layers = 1
[methods.skyformer]
[methods.performer]
[methods.softmax]
dropout = 0.1
)"), registry());
  std::vector<std::string> order;
  for (const auto& job : e.jobs) order.push_back(job.method + "/" + job.dataset + "/" + std::to_string(job.seed));
  const std::vector<std::string> expected = {
      "softmax/sparse_sum/2",   "softmax/sparse_sum/1",   "softmax/listops/2",   "softmax/listops/1",
      "skyformer/sparse_sum/2", "skyformer/sparse_sum/1", "skyformer/listops/2", "skyformer/listops/1",
      "performer/sparse_sum/2", "performer/sparse_sum/1", "performer/listops/2", "performer/listops/1"};
  EXPECT_EQ(order, expected);
}

TEST(Experiment, ErrorsNameFileLineAndKey) {
  const auto file = (fs::temp_directory_path() / ("attnlab-exp-" + std::to_string(getpid())) / "bad.toml").string();
  EXPECT_EQ(error_of("[train]\nsteps = 10\nlrr = 0.1\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":3: [train] lrr: unknown key (known: steps, batch_size, grad_accum, lr, weight_decay, beta1, beta2, "
                   "eps, warmup, decay, clip_norm, clip_value, eval_every, eval_batches, eval_draw, test_drop_last, log_every, "
                   "instability_steps, "
                   "variance_passes, variance_split, accuracy_checkpoints, keep_best_after, checkpoint_every, precision, "
                   "tf32, cuda_graphs, deterministic)");
  EXPECT_EQ(error_of("[train]\nsteps = \"ten\"\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":2: [train] steps: expected an integer, got a string");
  EXPECT_EQ(error_of("[model]\npooling = \"max\"\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":2: [model] pooling: 'max' is not one of mean|mean_with_padding|cls|first");
  EXPECT_EQ(error_of("[methods.softmax]\ndropout = 2.0\n[datasets.listops]\n"),
            file + ":2: [methods.softmax] dropout: 2 is out of range [0, 0.99] (attention plugin softmax)");
  EXPECT_EQ(error_of("[methods.softmax]\nlandmarks = 3\n[datasets.listops]\n"),
            file + ":2: [methods.softmax] landmarks: unknown key (attention plugin softmax) (known: dropout, model, train, datasets)");
  const auto unknown = error_of("[methods.softmax]\n[methods.nope]\n[datasets.listops]\n");
  EXPECT_EQ(unknown.rfind(file + ":2: [methods.nope] no attention plugin named 'nope' (found: ", 0), 0u) << unknown;
  EXPECT_NE(unknown.find("softmax"), std::string::npos);
  EXPECT_EQ(error_of("[methods.softmax]\n[datasets.listops]\n[trainn]\n"),
            file + ":3: trainn: unknown section (known: experiment, model, train, methods, datasets)");
  EXPECT_EQ(error_of("[experiment]\nseeds = []\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":2: [experiment] seeds: expected a non-empty array of integers");
  EXPECT_EQ(error_of("[datasets.listops]\n"), file + ": no [methods.NAME] table: name at least one attention plugin");
  // cross-key checks name the keys the user set, where they set them
  EXPECT_EQ(error_of("[model]\ndim = 10\nheads = 3\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":3: [model] heads: 3 heads do not divide dim = 10 ([model] dim at line 2); make dim a multiple of "
                   "heads, or set head_dim");
  EXPECT_EQ(error_of("[model]\ndim = 32\n[methods.softmax]\n[datasets.listops]\n[datasets.listops.model]\nheads = 3\n"),
            file + ":6: [datasets.listops.model] heads: 3 heads do not divide dim = 32 ([model] dim at line 2); make dim a "
                   "multiple of heads, or set head_dim");
  EXPECT_EQ(error_of("[model]\nheads = 3\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":2: [model] heads: 3 heads do not divide dim = 64 ([model] dim: the default); make dim a multiple of "
                   "heads, or set head_dim");
  EXPECT_EQ(error_of("[methods.softmax]\n[datasets.listops]\n[methods.softmax.train]\nvariance_passes = 1\n"),
            file + ":4: [methods.softmax.train] variance_passes: one pass has no variance; 0 turns the passes off, else at least 2");
  EXPECT_EQ(error_of("[experiment]\nseeds = [5,\n 5, 6]\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":3: [experiment] seeds: 5 is named twice");
  const auto syntax = error_of("[train\nsteps = 1\n");
  EXPECT_EQ(syntax.rfind(file + ":1:", 0), 0u) << syntax;
  EXPECT_NE(syntax.find("TOML syntax"), std::string::npos);
  EXPECT_EQ(error_of("[train]\nsteps = 0\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":2: [train] steps: 0 is out of range [1, 2147483647]");
}

// An array of values is a sweep: one job per value, datasets' sweeps outermost, then the method's,
// [model]'s and [train]'s, seeds innermost; a more specific table's single value ends a sweep.
TEST(Experiment, ArraysSweepOneJobPerValue) {
  const auto e = load_experiment(write_file("sweep.toml", R"(
[experiment]
seeds = [1, 2]
[train]
lr = [0.001, 0.002]
[datasets.sparse_sum]
sparsity = [0.1, 0.9]
[methods.softmax]
[methods.performer]
[methods.performer.train]
lr = 0.005
)"), registry());
  std::vector<std::string> order;
  for (const auto& job : e.jobs)
    order.push_back(job.method + " p=" + to_text(ParamValue(job.dataset_params.real("sparsity"))) + " lr=" +
                    to_text(ParamValue(job.train.real("lr"))) + " s" + std::to_string(job.seed));
  const std::vector<std::string> expected = {
      "softmax p=0.1 lr=0.001 s1", "softmax p=0.1 lr=0.001 s2", "softmax p=0.1 lr=0.002 s1", "softmax p=0.1 lr=0.002 s2",
      "softmax p=0.9 lr=0.001 s1", "softmax p=0.9 lr=0.001 s2", "softmax p=0.9 lr=0.002 s1", "softmax p=0.9 lr=0.002 s2",
      "performer p=0.1 lr=0.005 s1", "performer p=0.1 lr=0.005 s2", "performer p=0.9 lr=0.005 s1",
      "performer p=0.9 lr=0.005 s2"};
  EXPECT_EQ(order, expected);
  std::set<std::string> hashes;
  for (const auto& job : e.jobs) hashes.insert(job.config_hash);
  EXPECT_EQ(hashes.size(), e.jobs.size());  // every swept value is part of the identity
  // a swept job's resolved configuration holds its one value, and round-trips
  const auto back = parse_job_config(e.jobs[5].config_toml, "job 6", registry());
  EXPECT_EQ(back.config_hash, e.jobs[5].config_hash);
  EXPECT_DOUBLE_EQ(back.dataset_params.real("sparsity"), 0.9);
}

// [methods.X.datasets.Y]: a method's parameters for one dataset (the KL-Transformer's Table 7 sets
// the number of features per method and task), over the method's own table.
TEST(Experiment, MethodParametersPerDataset) {
  const auto e = load_experiment(write_file("per-dataset.toml", R"(
[datasets.listops]
max_len = 64
[datasets.sparse_sum]
[methods.performer]
features = 32
[methods.performer.datasets.sparse_sum]
features = [16, 8]
[methods.softmax]
)"), registry());
  std::vector<std::string> got;
  for (const auto& job : e.jobs)
    got.push_back(job.method + "/" + job.dataset + (job.method == "performer" ? " " + std::to_string(job.method_params.integer("features")) : ""));
  EXPECT_EQ(got, (std::vector<std::string>{"performer/listops 32", "performer/sparse_sum 16", "performer/sparse_sum 8",
                                           "softmax/listops", "softmax/sparse_sum"}));
}

TEST(Experiment, SweepAndPerDatasetErrors) {
  const auto file = (fs::temp_directory_path() / ("attnlab-exp-" + std::to_string(getpid())) / "bad.toml").string();
  EXPECT_EQ(error_of("[train]\nlr = []\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":2: [train] lr: an empty array sweeps over nothing");
  EXPECT_EQ(error_of("[train]\nlr = [0.1,\n 0.1]\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":3: [train] lr: 0.1 is named twice");
  EXPECT_EQ(error_of("[train]\nsteps = [10, \"x\"]\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":2: [train] steps: expected an integer, got a string");
  EXPECT_EQ(error_of("[train]\nsteps = [[10]]\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":2: [train] steps: expected an integer or an array of them");
  EXPECT_EQ(error_of("[train]\nsteps = [10,\n 0]\n[methods.softmax]\n[datasets.listops]\n"),
            file + ":3: [train] steps: 0 is out of range [1, 2147483647]");
  EXPECT_EQ(error_of("[methods.softmax]\n[methods.softmax.datasets.text]\ndropout = 0.2\n[datasets.listops]\n"),
            file + ":2: [methods.softmax.datasets.text] no [datasets.text] in this file for these settings to apply to");
  EXPECT_EQ(error_of("[methods.softmax]\n[methods.softmax.datasets.listops]\nfeatures = 2\n[datasets.listops]\n"),
            file + ":3: [methods.softmax.datasets.listops] features: unknown key (attention plugin softmax) (known: dropout)");
}

// Every experiment file shipped in conf/ validates against the built plugins (no data is read).
TEST(Experiment, EveryShippedExperimentFileValidates) {
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(std::string(ATTNLAB_SOURCE_DIR) + "/conf")) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    try {
      const auto e = load_experiment(entry.path().string(), registry());
      EXPECT_FALSE(e.jobs.empty()) << entry.path();
    } catch (const std::exception& error) {
      ADD_FAILURE() << error.what();
    }
  }
  EXPECT_GE(files, 10u);
}

TEST(Experiment, MissingFileIsOneLine) {
  try {
    load_experiment("/nonexistent/x.toml", registry());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/x.toml: cannot read the experiment file");
  }
}

}  // namespace
}  // namespace attnlab
