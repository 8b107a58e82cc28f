// serve_bench: how fast `attnlab serve` answers on a sweep of 10 methods × 6 tasks × 3 seeds with
// 100 points per curve (train and validation loss and accuracy: 400 points a run), over HTTP on
// localhost, each request opening the database read-only as the server always does. Prints, per
// endpoint the page calls, the median and the slowest of 20 requests and the reply's size. A
// benchmark command, not a test: its figures go in notes, never in assertions.
//
//   build/tests/serve_bench [DB]   (DB: where to write the fixture, kept; default a temporary file)
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "results_support.hpp"
#include "serve/server.hpp"

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

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const bool keep = argc > 1;
  const std::string path = keep ? argv[1] : (fs::temp_directory_path() / "attnlab-serve-bench.db").string();
  fs::remove(path);
  const auto t0 = std::chrono::steady_clock::now();
  fill(path);
  std::printf("fixture: 10 methods x 6 tasks x 3 seeds, 400 curve points a run, in %.1f s (%s, %.1f MiB)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), path.c_str(),
              double(fs::file_size(path)) / (1 << 20));

  serve::Server server(path, ATTNLAB_WEB_DIR);
  const int port = server.bind("127.0.0.1", 0);
  std::thread listening([&] { server.listen(); });
  httplib::Client client("127.0.0.1", port);
  const char* requests[] = {
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
  std::printf("%-66s %9s %9s %10s\n", "request", "median ms", "max ms", "bytes");
  for (const char* request : requests) {
    std::vector<double> ms;
    std::size_t bytes = 0;
    for (int i = 0; i < 20; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const auto reply = client.Get(request);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      if (!reply || reply->status != 200) {
        std::printf("%s: %s\n", request, reply ? reply->body.c_str() : "no answer");
        server.stop(), listening.join();
        return 1;
      }
      bytes = reply->body.size();
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-66s %9.1f %9.1f %10zu\n", request, ms[ms.size() / 2], ms.back(), bytes);
  }
  server.stop();
  listening.join();
  if (!keep) fs::remove(path);
  return 0;
}
