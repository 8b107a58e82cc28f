// attnlab estimate's arithmetic on bench rows made here: which row a job's figure comes from, the
// log-log line between two measured lengths, jobs a device takes at once, and the jobs placed on
// the devices' slots longest first. (The CLI against a real bench and run: bench_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>

#include "studies/estimate.hpp"

namespace {

using attnlab::JobWork;
using attnlab::store::BenchResult;

const std::string kModel = "[model]\ndim = 64\n";

BenchResult row(std::int64_t id, std::int64_t length, double seconds, double bytes, const std::string& precision = "fp32") {
  BenchResult r;
  r.id = id;
  r.method = "softmax";
  r.dataset = "listops";
  r.seq_len = length;
  r.batch_size = 32;
  r.device = "cuda:0";
  r.status = "done";
  r.concurrent = 1;
  r.step_seconds_median = seconds;
  r.peak_memory_bytes = bytes;
  r.config_toml = "method = 'softmax'\n[train]\nprecision = '" + precision + "'\n" + kModel;
  return r;
}

JobWork job(std::int64_t length, std::int64_t steps = 100, std::int64_t forward_batches = 0) {
  JobWork w;
  w.label = "softmax x listops, seed 1";
  w.method = "softmax";
  w.dataset = "listops";
  w.precision = "fp32";
  w.model = "dim = 64";
  w.length = length;
  w.batch = 32;
  w.steps = steps;
  w.forward_batches = forward_batches;
  return w;
}

TEST(Estimate, AMeasuredLengthIsTakenAsItIsTheNewestRowWinning) {
  const std::vector<BenchResult> rows = {row(1, 1024, 0.5, 1e9), row(2, 1024, 0.2, 2e9), row(3, 2048, 0.9, 3e9)};
  const auto f = attnlab::step_figure(rows, job(1024), "cuda:0", 1);
  ASSERT_TRUE(f.found);
  EXPECT_DOUBLE_EQ(f.seconds, 0.2);
  EXPECT_DOUBLE_EQ(f.peak_bytes, 2e9);
  EXPECT_EQ(f.source, "1024 tokens");
}

TEST(Estimate, BetweenAndBeyondMeasuredLengthsOnTheLogLogLineThroughTheNearestTwo) {
  // time n^2 between 1024 and 4096 (0.1 -> 1.6 s), memory n^1 (1 -> 4 GB); 512 is not nearest
  const std::vector<BenchResult> rows = {row(1, 512, 1.0, 1e9), row(2, 1024, 0.1, 1e9), row(3, 4096, 1.6, 4e9)};
  const auto between = attnlab::step_figure(rows, job(2048), "cuda:0", 1);
  ASSERT_TRUE(between.found);
  EXPECT_NEAR(between.seconds, 0.4, 1e-12);
  EXPECT_NEAR(between.peak_bytes, 2e9, 1e-3);
  EXPECT_EQ(between.source, "scaled from 1024 and 4096 tokens as n^2.00");
  const auto beyond = attnlab::step_figure(rows, job(8192), "cuda:0", 1);
  EXPECT_NEAR(beyond.seconds, 6.4, 1e-12);
  EXPECT_EQ(beyond.source, "scaled from 1024 and 4096 tokens as n^2.00");
  const auto one = attnlab::step_figure({row(1, 1024, 0.1, 1e9)}, job(4096), "cuda:0", 1);
  EXPECT_NEAR(one.seconds, 0.4, 1e-12);
  EXPECT_EQ(one.source, "from 1024 tokens in proportion (one length measured)");
}

TEST(Estimate, RowsOfAnotherPrecisionDeviceConcurrencyOrStatusAreNotItsFigure) {
  auto bf16 = row(1, 1024, 0.1, 1e9, "bf16");
  auto cpu = row(2, 1024, 0.1, 1e9);
  cpu.device = "cpu";
  auto packed = row(3, 1024, 0.1, 1e9);
  packed.concurrent = 4;
  auto failed = row(4, 1024, 0.1, 1e9);
  failed.status = "oom";
  auto other_model = row(5, 1024, 0.1, 1e9);
  other_model.config_toml = "method = 'softmax'\n[model]\ndim = 128\n";
  const std::vector<BenchResult> rows = {bf16, cpu, packed, failed, other_model};
  const auto f = attnlab::step_figure(rows, job(2048), "cuda:0", 1);
  EXPECT_FALSE(f.found);
  EXPECT_EQ(f.missing, "softmax on listops at 2048 tokens, batch 32, fp32, on cuda:0");
  EXPECT_TRUE(attnlab::step_figure(rows, job(2048), "cuda:0", 4).found);  // the packed row, for 4 at once
  EXPECT_EQ(attnlab::step_figure(rows, job(2048), "cuda:0", 2).missing,
            "softmax on listops at 2048 tokens, batch 32, fp32, on cuda:0, 2 at once");
}

TEST(Estimate, OneBenchCommandPerDatasetLengthBatchAndPrecisionNamingItsMethods) {
  auto other = [](const std::string& method, const std::string& dataset, std::int64_t length) {
    auto w = job(length);
    w.method = method;
    w.dataset = dataset;
    return w;
  };
  const std::vector<JobWork> jobs = {other("softmax", "listops", 2000), other("skyformer", "listops", 2000),
                                     other("softmax", "listops", 2000), other("softmax", "text", 4000)};
  EXPECT_EQ(attnlab::bench_commands_for(jobs, "cuda:0", 4, "attnlab bench --config x.toml --db b.db"),
            (std::vector<std::string>{
                "attnlab bench --config x.toml --db b.db --methods softmax,skyformer --dataset listops --lengths 2000 "
                "--batch-size 32 --precision fp32 --device cuda:0 --concurrent 4",
                "attnlab bench --config x.toml --db b.db --methods softmax --dataset text --lengths 4000 --batch-size 32 "
                "--precision fp32 --device cuda:0 --concurrent 4"}));
}

TEST(Estimate, JobsPerDeviceByMemoryCoresAndAtMostEight) {
  std::string why;
  EXPECT_EQ(attnlab::jobs_per_device_for({10e9, 4e9}, 80e9, 16, 1, &why), 7);  // floor(72 / 10)
  EXPECT_EQ(why.rfind("90% of ", 0), 0u) << why;
  EXPECT_EQ(attnlab::jobs_per_device_for({1e9}, 80e9, 16, 4, &why), 4);  // 16 cores among 4 devices
  EXPECT_EQ(why, "4 host core(s) for the device");
  EXPECT_EQ(attnlab::jobs_per_device_for({1e9}, 80e9, 64, 1, &why), 8);
  EXPECT_EQ(why, "at most 8");
  EXPECT_EQ(attnlab::jobs_per_device_for({1e9, 0}, 80e9, 64, 1, &why), 1);
  EXPECT_EQ(why, "a job's peak memory is not measured");
  EXPECT_EQ(attnlab::jobs_per_device_for({100e9}, 80e9, 64, 1, &why), 1);  // one even where it does not fit
}

TEST(Estimate, JobsPlacedLongestFirstOnTheSlotThatFreesFirst) {
  // step 0.01 s, measured two at once; jobs of 300, 300, 200, 200, 200 s (one of them 15,000 steps
  // and 15,000 forward-only batches)
  std::vector<BenchResult> rows = {row(1, 1024, 0.01, 1e9)};
  rows[0].concurrent = 2;
  const std::vector<JobWork> jobs = {job(1024, 20000), job(1024, 30000), job(1024, 15000, 15000), job(1024, 30000),
                                     job(1024, 20000)};
  const auto e = attnlab::estimate_experiment(jobs, rows, "cuda:0", 1, 2, "b");
  ASSERT_TRUE(e.missing.empty());
  EXPECT_NEAR(e.jobs[2].seconds, 200, 1e-9);  // 0.01 x (15000 + 15000 / 3)
  // slots: 300 | 300, then 200 each on whichever frees first: 500 | 500, 700
  EXPECT_NEAR(e.wall_seconds, 700, 1e-9);
  EXPECT_NEAR(e.job_hours, 1200.0 / 3600, 1e-12);
  EXPECT_NEAR(e.device_hours, 700.0 / 3600, 1e-12);
  const auto two = attnlab::estimate_experiment(jobs, rows, "cuda:0", 2, 2, "b");  // four slots
  EXPECT_NEAR(two.wall_seconds, 400, 1e-9);  // 300, 300, 200, 200 | +200 on a 200 slot
  EXPECT_NEAR(two.device_hours, 2 * 400.0 / 3600, 1e-12);

  // alone, the figure measured two at once is not theirs
  const auto missing = attnlab::estimate_experiment({job(1024), job(1024)}, rows, "cuda:0", 1, 1, "b");
  EXPECT_EQ(missing.missing.size(), 2u);
  EXPECT_TRUE(std::isnan(missing.wall_seconds));
  EXPECT_EQ(missing.bench_commands, std::vector<std::string>{"b --methods softmax --dataset listops --lengths 1024 "
                                                             "--batch-size 32 --precision fp32 --device cuda:0"});
  EXPECT_NE(attnlab::estimate_report(missing, "cuda:0").find("no total, 2 job(s) without a bench figure; measure them "
                                                             "with:\n  b --methods softmax"),
            std::string::npos);
}

}  // namespace
