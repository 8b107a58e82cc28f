// serve_bench: how fast `attnlab serve` answers on a sweep of 10 methods × 6 tasks × 3 seeds with
// 100 points per curve (train and validation loss and accuracy: 400 points a run), over HTTP on
// localhost, each request opening the database read-only as the server always does. Prints, per
// endpoint the page calls, the median and the slowest of 20 requests and the reply's size. A
// benchmark command, not a test: its figures go in notes, never in assertions.
//
// With --week, a week's database instead (521 runs of 1,200 points, a sweep, failed jobs, each job
// with its whole flattened configuration as `attnlab run` stores it: week_fixture.hpp), and after
// the endpoints (the page's static files among them, fetched as a browser fetches them: Accept-
// Encoding: gzip, deflate, br, and again with the validator they came with, as a reload asks):
// the heaviest request (every run's training loss), then a burst of 300 requests 50 at a time
// (each of 50 clients asks for 6 of the page's requests in turn, as a browser would, with that
// Accept-Encoding), with its median and 99th percentile; and the process's resident memory (the
// server runs in it: /proc/self/status) idle before, after the heaviest request, at its peak and
// after the burst.
//
//   [SERVE_BENCH_STAY=SECONDS] build/tests/serve_bench [--week] [DB]   (DB: the fixture's file, kept and reused when it exists;
//                                            default a temporary file)
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "results_support.hpp"
#include "serve/server.hpp"
#include "week_fixture.hpp"

using namespace attnlab;
using namespace attnlab::results::testing;

namespace {

void fill(const std::string& path) {
  store::Database db(path);
  for (int m = 0; m < 10; ++m)
    for (int t = 0; t < 6; ++t)
      for (int seed = 1; seed <= 3; ++seed) {
        FakeJob f;
        f.method = "method" + std::to_string(m), f.dataset = "task" + std::to_string(t), f.seed = seed;
        f.params = {{"train.steps", "5000"}};
        const double skill = 0.3 + 0.02 * m + 0.01 * t + 0.003 * seed;
        f.results = {{"test_acc", skill}, {"best_val_acc", skill + 0.01}, {"rsd", 0.01 * seed}, {"pi", 0.9}, {"agv", 0.002}, {"va", 0.5}, {"variance_passes", 100}};
        for (const char* split : {"train", "val"}) {
          for (const auto& p : make_curve(split, "loss", 100, 50, [&](std::int64_t s) { return 2.0 / (1.0 + 0.001 * double(s)); }))
            f.curve.push_back(p);
          // seeds apart by a few points, as real ones are: the mean's band has a width
          for (const auto& p : make_curve(split, "acc", 100, 50, [&](std::int64_t s) {
                 return skill * double(s) / 4950.0 + 0.02 * std::sin(double(s) / 400.0 + 2.0 * seed);
               }))
            f.curve.push_back(p);
        }
        add_job(db, f);
      }
}

// The process's resident memory and its peak, MiB (VmRSS, VmHWM).
std::pair<double, double> resident_mib() {
  std::ifstream status("/proc/self/status");
  double rss = 0, peak = 0;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) rss = std::atof(line.c_str() + 6) / 1024;
    if (line.rfind("VmHWM:", 0) == 0) peak = std::atof(line.c_str() + 6) / 1024;
  }
  return {rss, peak};
}

void print_memory(const char* when) {
  const auto [rss, peak] = resident_mib();
  std::printf("memory %-44s %7.1f MiB resident (peak so far %.1f MiB)\n", when, rss, peak);
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<std::size_t>(p * double(values.size())))];
}

const httplib::Headers kBrowser = {{"Accept-Encoding", "gzip, deflate, br"}};

// 300 requests, 50 clients at once, each asking for 6 of `mix` in turn (client i from mix[i]):
// every latency in ms, and how many were not a 200.
std::pair<std::vector<double>, int> burst(int port, const std::vector<std::string>& mix) {
  constexpr int kClients = 50, kEach = 6;
  std::vector<double> ms(kClients * kEach);
  std::atomic<int> failed{0}, ready{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", port);
      client.set_decompress(false);
      client.set_read_timeout(120, 0);
      ++ready;
      while (ready < kClients) std::this_thread::yield();
      for (int k = 0; k < kEach; ++k) {
        const auto start = std::chrono::steady_clock::now();
        const auto reply = client.Get(mix[(c + k) % mix.size()].c_str(), kBrowser);
        ms[c * kEach + k] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        if (!reply || reply->status != 200) ++failed;
      }
    });
  for (auto& c : clients) c.join();
  return {ms, failed.load()};
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const bool week = argc > 1 && std::string(argv[1]) == "--week";
  const bool keep = argc > 1 + week;
  const std::string path = keep ? argv[1 + week] : (fs::temp_directory_path() / "attnlab-serve-bench.db").string();
  if (!keep || !fs::exists(path)) {  // a kept fixture is measured as it is (the same bytes for two builds)
    fs::remove(path);
    const auto t0 = std::chrono::steady_clock::now();
    if (week) {
      store::Database db(path);
      fill_week(db, /*full_configs=*/true);
    } else {
      fill(path);
    }
    std::printf("fixture: %s, in %.1f s\n",
                week ? "a week (521 runs: 5 methods x 20 seeds, a 2 x 4 x 2 sweep x 25 seeds, 20 failed, 1 running; 1,200 points "
                            "a run; ~60 config keys a job)"
                     : "10 methods x 6 tasks x 3 seeds, 400 curve points a run",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("%s: %.1f MiB\n", path.c_str(), double(fs::file_size(path)) / (1 << 20));

  serve::Server server(path, ATTNLAB_WEB_DIR);
  const int port = server.bind("127.0.0.1", 0);
  std::thread listening([&] { server.listen(); });
  std::ofstream("/proc/self/clear_refs") << "5";  // the peak from here (the fixture's filling aside)
  if (week) print_memory("idle, before any request");
  httplib::Client client("127.0.0.1", port), compressed("127.0.0.1", port);
  compressed.set_decompress(false);  // the bytes a browser receives
  const std::vector<const char*> week_requests = {
      "/api/queue",
      "/api/experiments",
      "/api/results?experiment=latest",
      "/api/results?experiment=*",
      "/api/runs",
      "/api/runs?columns=",  // without the default key columns
      "/api/runs?where=experiment%20%3D%20sparsity-sweep",
      "/api/table?table=accuracy",
      "/api/table?table=cost",
      "/api/table?table=variance",
      "/api/curves?where=experiment%20%3D%20sparsity-sweep&metric=loss",
      "/api/curves?where=experiment%20%3D%20sparsity-sweep&metric=loss&held=101-500",  // the page's polls after its first
      "/api/curves?where=experiment%20%3D%20sparsity-sweep&metric=loss&mean=1",
      "/api/curves?where=seed%20%3E%200&metric=loss&split=train",
  };
  const std::vector<const char*> sweep_requests = {
      "/api/queue",
      "/api/results",
      "/api/results?group_by=method&metric=test_acc,best_val_acc",
      "/api/table?table=accuracy",
      "/api/table?table=variance",
      "/api/runs",
      "/api/run?id=90",
      "/api/curves?where=dataset%20%3D%20task0&metric=acc",
      "/api/curves?where=dataset%20%3D%20task0&metric=acc&mean=1",
      "/api/curves?where=seed%20%3E%200&metric=loss&split=train&mean=1",
      "/api/compare?a=method0&b=method1",
      "/api/compare?a=method0&b=method1&ci=bootstrap",
  };
  const int repeats = week ? 5 : 20;
  bool failed = false;
  std::printf("%-72s %9s %9s %10s %10s\n", "request", "median ms", "max ms", "bytes", "gzipped");
  for (const char* request : week ? week_requests : sweep_requests) {
    std::vector<double> ms;
    std::size_t bytes = 0, gzipped = 0;
    bool answered = true;
    if (auto reply = compressed.Get(request, {{"Accept-Encoding", "gzip"}}))
      gzipped = reply->get_header_value("Content-Encoding") == "gzip" ? reply->body.size() : 0;
    for (int i = 0; i < repeats; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const auto reply = client.Get(request);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      if (!reply || reply->status != 200) {  // said, and the next request measured
        std::printf("%s: %s\n", request, reply ? reply->body.c_str() : "no answer");
        failed = true, answered = false;
        break;
      }
      bytes = reply->body.size();
    }
    if (!answered) continue;
    std::sort(ms.begin(), ms.end());
    std::printf("%-72s %9.1f %9.1f %10zu %10zu\n", request, ms[ms.size() / 2], ms.back(), bytes, gzipped);
  }
  if (week) {
    // the page's files as a browser fetches them, and again with the validator they came with (a reload)
    std::printf("\n%-28s %9s %9s %10s %-8s %s\n", "static file (browser)", "median ms", "max ms", "bytes", "encoding", "reload (conditional)");
    for (const char* file : {"/", "/app.js", "/chart.min.js"}) {
      std::vector<double> ms;
      int status = 0;
      httplib::Response last;
      for (int i = 0; i < repeats && (i == 0 || status == 200); ++i) {
        const auto start = std::chrono::steady_clock::now();
        const auto reply = compressed.Get(file, kBrowser);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        status = reply ? reply->status : 0;
        if (reply) last = *reply;
      }
      if (status != 200) {
        std::printf("%s: %d\n", file, status);
        failed = true;
        continue;
      }
      std::string reload = "no validator";
      httplib::Headers conditional = kBrowser;
      if (last.has_header("ETag")) conditional.emplace("If-None-Match", last.get_header_value("ETag"));
      else if (last.has_header("Last-Modified")) conditional.emplace("If-Modified-Since", last.get_header_value("Last-Modified"));
      if (conditional.size() > kBrowser.size()) {
        const auto start = std::chrono::steady_clock::now();
        const auto again = compressed.Get(file, conditional);
        const double took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        char line[128];
        std::snprintf(line, sizeof line, "%d, %zu bytes, %.1f ms", again ? again->status : 0, again ? again->body.size() : 0, took);
        reload = line;
      }
      std::sort(ms.begin(), ms.end());
      const std::string encoding = last.get_header_value("Content-Encoding");
      std::printf("%-28s %9.1f %9.1f %10zu %-8s %s\n", file, ms[ms.size() / 2], ms.back(), last.body.size(),
                  encoding.empty() ? "-" : encoding.c_str(), reload.c_str());
    }
    // the heaviest request the page makes: every run's training loss
    const char* heaviest = "/api/curves?where=seed%20%3E%200&metric=loss&split=train";
    {
      const auto start = std::chrono::steady_clock::now();
      const auto reply = compressed.Get(heaviest, kBrowser);
      std::printf("\nheaviest: %s: %.1f ms, %zu bytes sent\n", heaviest,
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
                  reply ? reply->body.size() : 0);
    }
    print_memory("after it");
    std::this_thread::sleep_for(std::chrono::seconds(1));
    print_memory("1 s after it");
    // the burst: the page's requests, a browser's Accept-Encoding
    const std::vector<std::string> mix = {"/", "/app.js", "/chart.min.js", "/api/queue", "/api/experiments",
                                          "/api/results?experiment=latest", "/api/runs", "/api/table?table=accuracy",
                                          "/api/curves?where=experiment%20%3D%20sparsity-sweep&metric=loss"};
    const auto start = std::chrono::steady_clock::now();
    const auto [ms, refused] = burst(port, mix);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("\nburst: 300 requests, 50 at a time (the page's %zu requests in turn): %.1f s in all; p50 %.0f ms, "
                "p99 %.0f ms, max %.0f ms; %d not 200\n",
                mix.size(), took, percentile(ms, 0.5), percentile(ms, 0.99), percentile(ms, 1.0), refused);
    failed = failed || refused > 0;
    print_memory("after the burst");
    std::this_thread::sleep_for(std::chrono::seconds(1));
    print_memory("1 s after the burst");
    std::printf("memory peak (VmHWM) since the server started: %.1f MiB\n", resident_mib().second);
  }
  if (const char* stay = std::getenv("SERVE_BENCH_STAY")) {  // seconds to go on serving, for a browser's figures
    std::printf("serving http://127.0.0.1:%d/ for %s s\n", port, stay);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(std::atoi(stay)));
  }
  server.stop();
  listening.join();
  if (!keep) fs::remove(path);
  return failed ? 1 : 0;
}
