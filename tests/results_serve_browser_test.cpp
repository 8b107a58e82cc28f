// attnlab serve's page in a real browser: Debian's chromium, headless, loads it from a server
// running in this process (serve::Server, as `attnlab serve` runs it) on a database the test
// fills, and the DOM it dumps after the page's scripts ran must hold the queue's counts, a results
// row, a name with markup as text, and the curves' canvases drawn by Chart.js; a job that finishes
// while the page is open shows there without a reload. Chromium runs on virtual time
// (--virtual-time-budget): the page's 2-second polls pass without the test waiting for them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <regex>
#include <thread>

#include "results_support.hpp"
#include "serve/server.hpp"
#include "attnlab/store/studies.hpp"

namespace attnlab::results::testing {
namespace {

class Browser : public ResultsTest {
 protected:
  void SetUp() override {
    ResultsTest::SetUp();
    if (std::string(CHROMIUM).empty())
      GTEST_SKIP() << "chromium was not found when the build was configured (apt-get install chromium)";
    store::Database db(file("s.db"));
    for (const std::string method : {"softmax", "<script>alert(1)</script>"})
      for (std::int64_t seed = 1; seed <= 2; ++seed) {
        FakeJob f;
        f.method = method, f.seed = seed;
        f.results = {{"test_acc", 0.3 + 0.1 * static_cast<double>(seed)}};
        f.curve = make_curve("val", "acc", 5, 100, [&](std::int64_t s) { return 0.001 * static_cast<double>(s * seed); });
        add_job(db, f);
      }
    FakeJob running;
    running.method = "skyformer", running.outcome = "running", running.params = {{"train.steps", "1000"}};
    running.curve = make_curve("train", "loss", 3, 100, [](std::int64_t s) { return 2.0 - 0.001 * static_cast<double>(s); });
    running_job_ = add_job(db, running).first;
    running_run_ = *db.latest_run_of_job(running_job_);
    store::BenchResult bench;
    bench.method = "softmax", bench.dataset = "listops", bench.batch_size = 8, bench.device = "cpu", bench.status = "done";
    for (const std::int64_t n : {512, 1024, 2048}) {
      bench.seq_len = n, bench.step_seconds_median = 1e-7 * static_cast<double>(n * n), bench.peak_memory_bytes = 1e3 * static_cast<double>(n * n);
      store::add_bench_result(db, bench);
    }
  }

  void TearDown() override {
    if (server_) {
      server_->stop();
      listening_.join();
    }
    ResultsTest::TearDown();
  }

  void start_server() {
    server_ = std::make_unique<serve::Server>(file("s.db"), ATTNLAB_WEB_DIR);
    port_ = server_->bind("127.0.0.1", 0);
    listening_ = std::thread([this] { server_->listen(); });
  }

  // The page at `route` (#/...) after `budget_ms` of the page's virtual time, as chromium dumps it.
  std::string dom(const std::string& route, int budget_ms) {
    const std::string command = std::string("timeout 120 '") + CHROMIUM + "' --headless --no-sandbox --disable-gpu " +
                                "--user-data-dir='" + file("chromium") + "' --virtual-time-budget=" +
                                std::to_string(budget_ms) + " --dump-dom 'http://127.0.0.1:" + std::to_string(port_) +
                                "/" + route + "' 2>/dev/null";
    std::string out;
    FILE* pipe = popen(command.c_str(), "r");
    EXPECT_NE(pipe, nullptr);
    if (!pipe) return out;
    char buffer[4096];
    for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
    EXPECT_EQ(pclose(pipe), 0) << command;
    return out;
  }

  // The text of the element with this id (its tags stripped), "" when it is not there.
  static std::string text_of(const std::string& dom, const std::string& id) {
    const auto at = dom.find("id=\"" + id + "\"");
    if (at == std::string::npos) return "";
    const auto start = dom.find('>', at) + 1;
    const auto end = dom.find("</table>", start);
    return std::regex_replace(dom.substr(start, end - start), std::regex("<[^>]*>"), " ");
  }

  std::unique_ptr<serve::Server> server_;
  std::thread listening_;
  int port_ = 0;
  std::int64_t running_job_ = 0, running_run_ = 0;
};

TEST_F(Browser, TheFrontPageShowsTheQueueTheResultsAndNamesAsText) {
  start_server();
  const std::string page = dom("#/", 3000);
  ASSERT_NE(page.find("data-view=\"\""), std::string::npos) << page;
  // the counts: header then values, every state in order
  const std::string counts = std::regex_replace(text_of(page, "counts"), std::regex("\\s+"), " ");
  EXPECT_NE(counts.find("queued running submitted done failed diverged oom blocked cancelled 0 1 0 4 0 0 0 0 0"),
            std::string::npos)
      << counts;
  // the running job with its step of train.steps
  const std::string running = text_of(page, "running");
  EXPECT_NE(running.find("skyformer"), std::string::npos) << running;
  EXPECT_NE(running.find("200 / 1000"), std::string::npos) << running;
  // a results row, and the name with markup as text: escaped in the DOM, never an element
  const std::string results = text_of(page, "results");
  EXPECT_NE(results.find("softmax"), std::string::npos) << results;
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_EQ(page.find("<script>alert(1)"), std::string::npos);
}

TEST_F(Browser, TheRunCurvesAndBenchPagesDrawTheirCharts) {
  start_server();
  // Chart.js sizes each canvas it draws on (width and height attributes and a style)
  const std::regex drawn("<canvas [^>]*width=\"[1-9][0-9]*\"[^>]*height=\"[1-9][0-9]*\"");
  const std::string run = dom("#/run/1", 2000);
  EXPECT_NE(run.find("run 1: softmax on listops, seed 1"), std::string::npos) << run;
  EXPECT_TRUE(std::regex_search(run, drawn)) << run;
  EXPECT_NE(run.find("validation accuracy"), std::string::npos);
  const std::string curves = dom("#/curves?where=method%20%3D%20softmax&metric=acc&mean=1", 2000);
  EXPECT_EQ(curves.find("id=\"error\""), std::string::npos) << curves;
  EXPECT_TRUE(std::regex_search(curves, drawn)) << curves;
  const std::string bench = dom("#/bench", 2000);
  EXPECT_TRUE(std::regex_search(bench, drawn)) << bench;
  EXPECT_NE(text_of(bench, "bench").find("2048"), std::string::npos);
  const std::string bad = dom("#/runs?where=seed%20%3E", 2000);  // a malformed filter: said on the page
  EXPECT_NE(bad.find("id=\"error\""), std::string::npos) << bad;
  EXPECT_NE(bad.find("--where 'seed &gt;'"), std::string::npos) << bad;
}

// The page stays open while the running job finishes (a worker would call finish_run): after the
// page's second poll of the queue, the test finishes it; the dumped DOM, polled on without any
// reload, shows it done.
TEST_F(Browser, AJobThatFinishesWhileThePageIsOpenShowsWithoutAReload) {
  start_server();
  std::atomic<int> polls{0};
  server_->on_answer([&](const std::string& path) {
    if (path != "/api/queue" || ++polls != 2) return;
    store::Database db(file("s.db"));
    db.finish_run(running_run_, store::RunStatus::done, {{"test_acc", 0.55}}, "", "");
  });
  const std::string page = dom("#/", 12000);
  EXPECT_GT(polls.load(), 2);
  const std::string counts = std::regex_replace(text_of(page, "counts"), std::regex("\\s+"), " ");
  EXPECT_NE(counts.find(" 0 0 0 5 0 0 0 0 0"), std::string::npos) << counts;  // running 0, done 5
  EXPECT_EQ(text_of(page, "running").find("skyformer"), std::string::npos);
  EXPECT_NE(text_of(page, "results").find("skyformer"), std::string::npos);  // its result is in the table
  std::smatch updates;
  ASSERT_TRUE(std::regex_search(page, updates, std::regex("data-updates=\"([0-9]+)\""))) << page;
  EXPECT_GT(std::stoi(updates[1]), 2);
}

}  // namespace
}  // namespace attnlab::results::testing
