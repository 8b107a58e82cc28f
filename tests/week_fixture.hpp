// A week's database of a research group's attnlab, for serve's benchmark (serve_bench --week) and
// its browser tests: 521 runs, a sweep, failed jobs and a running one.
#pragma once

#include <algorithm>
#include <cmath>

#include "attnlab/store/studies.hpp"
#include "results_support.hpp"

namespace attnlab::results::testing {

struct WeekFixture {
  std::int64_t running_job = 0, running_run = 0;  // lo-methods' softmax seed 21, at step 2,990 of 10,000
};

// What a job of `attnlab run` stores beyond the keys a fixture job names: its whole resolved
// configuration, flattened (about 60 keys a job: model.*, train.*, its method's and its dataset's
// own settings), each at one value for every job here. A real week's database has these; they
// change no answer (no value differs) but every query that reads keys pays for them.
inline void add_full_config(FakeJob& f) {
  static const char* model[] = {"layers", "dim", "ffn_dim", "heads", "head_dim", "dropout", "pooling", "norm",
                                "positions", "mask", "attention_precision", "attention_bias", "init", "pair_head",
                                "init_from", "init_from_sha256", "vocab_size", "max_len"};
  static const char* train[] = {"steps", "batch_size", "grad_accum", "lr", "weight_decay", "beta1", "beta2", "eps",
                                "warmup", "decay", "clip_norm", "clip_value", "eval_every", "eval_batches", "eval_draw",
                                "test_drop_last", "log_every", "instability_steps", "variance_passes", "variance_split",
                                "accuracy_checkpoints", "keep_best_after", "checkpoint_every", "precision", "tf32",
                                "cuda_graphs", "deterministic"};
  static const char* method[] = {"features", "kernel", "redraw", "chunk", "eps", "scale"};
  static const char* dataset[] = {"max_len", "train_examples", "val_examples", "test_examples", "vocab", "depth",
                                  "cache", "generator"};
  const auto has = [&](const std::string& key) {
    return std::any_of(f.params.begin(), f.params.end(), [&](const auto& p) { return p.first == key; });
  };
  const auto add = [&](const std::string& key, const std::string& value) {
    if (!has(key)) f.params.push_back({key, value});
  };
  for (const char* key : model) add(std::string("model.") + key, "64");
  for (const char* key : train) add(std::string("train.") + key, key == std::string("steps") ? "10000" : key == std::string("lr") ? "0.0001" : "1");
  for (const char* key : method) add("methods." + f.method + "." + key, "2");
  for (const char* key : dataset) add("datasets." + f.dataset + "." + key, "3");
}

// A week's database (--week): 520 runs. lo-methods: five methods on ListOps, 20 seeds each; a sweep:
// softmax and performer on sparse_sum at four sparsities × two learning rates, 25 seeds each; and
// boom, a method whose 20 jobs failed; and one softmax run of lo-methods still running. Each finished
// run: 1,000 training-loss points, 100 validation loss and accuracy points. Bench and approx rows
// for their pages' log axes. `full_configs`: each job with its whole configuration (add_full_config),
// as `attnlab run` stores it.
inline WeekFixture fill_week(store::Database& db, bool full_configs = false) {
  WeekFixture week;
  const auto add = [&](FakeJob f, double skill) {
    if (full_configs) add_full_config(f);
    f.results = {{"test_acc", skill}, {"best_val_acc", skill + 0.01}, {"wall_seconds", 600.0 + f.seed}, {"peak_memory_bytes", 3e8}};
    if (full_configs) f.results.push_back({"steps_per_second", 20.0 + f.seed});  // the cost table's
    f.curve = make_curve("train", "loss", 1000, 10, [&](std::int64_t s) { return 2.5 / (1.0 + 0.0005 * double(s)) + 0.05 * std::sin(double(s + f.seed)); });
    for (const auto& p : make_curve("val", "loss", 100, 100, [&](std::int64_t s) { return 2.3 / (1.0 + (skill - 0.2) * 0.001 * double(s)); }))
      f.curve.push_back(p);
    for (const auto& p : make_curve("val", "acc", 100, 100, [&](std::int64_t s) { return skill * (1.0 - std::exp(-double(s) / 2000.0)); }))
      f.curve.push_back(p);
    add_job(db, f);
  };
  const char* methods[] = {"softmax", "skyformer", "nystromformer", "performer", "linformer"};
  for (int m = 0; m < 5; ++m)
    for (int seed = 1; seed <= 20; ++seed) {
      FakeJob f;
      f.experiment = "lo-methods", f.method = methods[m], f.seed = seed;
      f.params = {{"train.lr", "0.0001"}, {"methods." + f.method + ".dropout", "0.1"}};
      add(f, 0.35 + 0.005 * m + 0.002 * (seed % 5));
    }
  for (const std::string method : {"softmax", "performer"})
    for (const std::string sparsity : {"0.1", "0.3", "0.5", "0.7"})
      for (const std::string lr : {"0.001", "0.0001"})
        for (int seed = 1; seed <= 25; ++seed) {
          FakeJob f;
          f.experiment = "sparsity-sweep", f.method = method, f.dataset = "sparse_sum", f.seed = seed;
          f.params = {{"datasets.sparse_sum.sparsity", sparsity}, {"train.lr", lr}};
          add(f, 0.4 + 0.3 * std::stod(sparsity) + (lr == "0.001" ? 0.05 : 0.0) + 0.002 * (seed % 7));
        }
  for (int seed = 1; seed <= 20; ++seed) {
    FakeJob f;
    f.experiment = "boom-fail", f.method = "boom", f.seed = seed, f.outcome = "failed";
    if (full_configs) add_full_config(f);
    add_job(db, f);
  }
  // the bench and approx pages' log axes: three methods from 512 to 8,192 tokens, d from 16 to 256
  for (int m = 0; m < 3; ++m)
    for (std::int64_t n = 512; n <= 8192; n *= 2) {
      store::BenchResult bench;
      bench.method = methods[m], bench.dataset = "listops", bench.seq_len = n, bench.batch_size = 8, bench.device = "cpu";
      bench.status = "done", bench.steps_timed = 5;
      const double quadratic = m == 0 ? double(n) * double(n) : double(n) * 256.0;
      bench.step_seconds_median = 2e-9 * quadratic + 0.003, bench.peak_memory_bytes = 40.0 * quadratic + 5e7;
      store::add_bench_result(db, bench);
    }
  std::vector<store::ApproxResult> approx;
  for (int m = 1; m < 3; ++m)
    for (std::int64_t d = 16; d <= 256; d *= 2) {
      store::ApproxResult a;
      a.method = methods[m], a.reference = "softmax", a.source = "init:listops", a.param = "landmarks", a.features = d;
      a.seq_len = 1024, a.samples = 8, a.rel_error_mean = 0.9 / std::sqrt(double(d)) / m, a.rel_error_std = 0.01;
      approx.push_back(a);
    }
  store::add_approx_results(db, approx);
  FakeJob running;
  running.experiment = "lo-methods", running.method = "softmax", running.seed = 21, running.outcome = "running";
  running.params = {{"train.lr", "0.0001"}, {"methods.softmax.dropout", "0.1"}, {"train.steps", "10000"}};
  if (full_configs) add_full_config(running);
  running.curve = make_curve("train", "loss", 300, 10, [](std::int64_t s) { return 2.5 / (1.0 + 0.0005 * double(s)); });
  week.running_job = add_job(db, running).first;
  week.running_run = db.attempts_of_job(week.running_job).back().run_id;
  return week;
}


}  // namespace attnlab::results::testing
