// attnlab serve's page in a real browser: Debian's chromium, headless, loads it from a server
// running in this process (serve::Server, as `attnlab serve` runs it) on a database the test
// fills, and the DOM it dumps after the page's scripts ran must hold the queue's counts, a results
// row, a name with markup as text, and the curves' canvases drawn by Chart.js; a job that finishes
// while the page is open shows there without a reload. Chromium runs on virtual time
// (--virtual-time-budget): the page's 2-second polls pass without the test waiting for them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <cstdio>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "results_support.hpp"
#include "attnlab/store/run_writer.hpp"
#include "serve/server.hpp"
#include "attnlab/store/studies.hpp"
#include "week_fixture.hpp"

namespace attnlab::results::testing {
namespace {

class Browser : public ResultsTest {
 protected:
  void SetUp() override {
    ResultsTest::SetUp();
    if (std::string(CHROMIUM).empty())
      GTEST_SKIP() << "chromium was not found when the build was configured (apt-get install chromium)";
    store::Database db(file("s.db"));
    fill(db);
  }

  // Two methods of two seeds with validation accuracy (one named with markup), a failed job, a
  // running one, and bench rows.
  virtual void fill(store::Database& db) {
    for (const std::string method : {"softmax", "<script>alert(1)</script>"})
      for (std::int64_t seed = 1; seed <= 2; ++seed) {
        FakeJob f;
        f.method = method, f.seed = seed;
        f.results = {{"test_acc", 0.3 + 0.1 * static_cast<double>(seed)}};
        f.curve = make_curve("val", "acc", 5, 100, [&](std::int64_t s) { return 0.001 * static_cast<double>(s * seed); });
        add_job(db, f);
      }
    FakeJob failed;  // three attempts, each failed with the same error before any curve point
    failed.method = "performer", failed.outcome = "failed";
    failed_run_ = db.attempts_of_job(add_job(db, failed).first).back().run_id;
    FakeJob running;
    running.method = "skyformer", running.outcome = "running", running.params = {{"train.steps", "1000"}};
    running.curve = make_curve("train", "loss", 3, 100, [](std::int64_t s) { return 2.0 - 0.001 * static_cast<double>(s); });
    running_job_ = add_job(db, running).first;
    running_run_ = db.attempts_of_job(running_job_).back().run_id;
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

  // `reader`: a script run after the page's own, acting as a reader would (clicks, scrolls, drags:
  // DOM events at virtual times it sets) and leaving what it saw in document.body.dataset.reader.
  void start_server(const std::string& reader = "") {
    std::string web = ATTNLAB_WEB_DIR;
    if (!reader.empty()) {  // a copy of the page that loads it
      web = file("web");
      fs::copy(ATTNLAB_WEB_DIR, web, fs::copy_options::recursive);
      std::string index = slurp(web + "/index.html");
      index.replace(index.find("</body>"), 7, "<script src=\"reader.js\"></script>\n</body>");
      std::ofstream(web + "/index.html") << index;
      std::ofstream(web + "/reader.js") << reader;
    }
    server_ = std::make_unique<serve::Server>(file("s.db"), web);
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

  // What the reader script saw (its JSON in data-reader), {} when it left nothing.
  static nlohmann::json reader_saw(const std::string& dom) {
    std::smatch m;
    if (!std::regex_search(dom, m, std::regex("data-reader=\"([^\"]*)\""))) return nlohmann::json::object();
    std::string text = std::regex_replace(m[1].str(), std::regex("&quot;"), "\"");
    text = std::regex_replace(text, std::regex("&lt;"), "<");
    text = std::regex_replace(text, std::regex("&gt;"), ">");
    return nlohmann::json::parse(std::regex_replace(text, std::regex("&amp;"), "&"));
  }

  // The texts of the elements matched by `pattern`'s one group, in order.
  static std::vector<std::string> all_of(const std::string& dom, const std::string& pattern) {
    std::vector<std::string> out;
    const std::regex re(pattern);
    for (auto it = std::sregex_iterator(dom.begin(), dom.end(), re); it != std::sregex_iterator(); ++it)
      out.push_back(std::regex_replace((*it)[1].str(), std::regex("<[^>]*>"), ""));
    return out;
  }

  std::unique_ptr<serve::Server> server_;
  std::thread listening_;
  int port_ = 0;
  std::int64_t running_job_ = 0, running_run_ = 0, failed_run_ = 0;
};

TEST_F(Browser, TheFrontPageShowsTheQueueTheResultsAndNamesAsText) {
  start_server();
  const std::string page = dom("#/", 3000);
  ASSERT_NE(page.find("data-view=\"\""), std::string::npos) << page;
  // the counts: header then values, every state in order
  const std::string counts = std::regex_replace(text_of(page, "counts"), std::regex("\\s+"), " ");
  EXPECT_NE(counts.find("queued running submitted done failed diverged oom blocked cancelled 0 1 0 4 1 0 0 0 0"),
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
  // the failed job: its error once, with its three attempts
  const std::string failed = std::regex_replace(text_of(page, "failed"), std::regex("\\s+"), " ");
  EXPECT_TRUE(std::regex_search(failed, std::regex("performer listops 1 failed 3 3 attempts \\( run [0-9]+ , run [0-9]+ , run [0-9]+ \\) "
                                                  "failed: synthetic failure")))
      << failed;
  EXPECT_EQ(failed.find("synthetic failure"), failed.rfind("synthetic failure")) << failed;
  // past its last step, in its variance passes: the step column says which pass
  {
    store::Database db(file("s.db"));
    store::RunWriter(db, running_run_).set_phase({"variance passes", 5, 100, 40.0});
  }
  const std::string passes = std::regex_replace(text_of(dom("#/", 3000), "running"), std::regex("\\s+"), " ");
  EXPECT_NE(passes.find("variance passes 5 / 100"), std::string::npos) << passes;
}

// A failed run: its page says so, a chart it is selected into leaves it out and names it, and an
// empty study page says what to run.
TEST_F(Browser, AFailedRunIsSaidAndNeverBlocksAChart) {
  start_server();
  const std::string run = dom("#/run/" + std::to_string(failed_run_), 2000);
  EXPECT_NE(run.find("this run ended failed before it wrote a curve point: synthetic failure"), std::string::npos) << run;
  const std::string curves = dom("#/curves?run=1," + std::to_string(failed_run_) + "&metric=acc", 2000);
  EXPECT_EQ(curves.find("id=\"error\""), std::string::npos) << curves;
  EXPECT_TRUE(std::regex_search(curves, std::regex("<canvas [^>]*width=\"[1-9]"))) << curves;
  EXPECT_NE(curves.find("left out: run " + std::to_string(failed_run_) + " (performer/listops seed 1, failed): no val/acc points"),
            std::string::npos)
      << curves;
  const std::string approx = dom("#/approx", 2000);
  EXPECT_NE(approx.find("No approximation results in this database yet."), std::string::npos) << approx;
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

// The page stays open while the running job finishes (its job process would call RunWriter::finish): after the
// page's second poll of the queue, the test finishes it; the dumped DOM, polled on without any
// reload, shows it done.
TEST_F(Browser, AJobThatFinishesWhileThePageIsOpenShowsWithoutAReload) {
  start_server();
  std::atomic<int> polls{0};
  server_->on_answer([&](const std::string& path) {
    if (path != "/api/queue" || ++polls != 2) return;
    store::Database db(file("s.db"));
    store::RunWriter(db, running_run_).finish(store::RunStatus::done, {{"test_acc", 0.55}}, "", "");
  });
  const std::string page = dom("#/", 12000);
  EXPECT_GT(polls.load(), 2);
  const std::string counts = std::regex_replace(text_of(page, "counts"), std::regex("\\s+"), " ");
  EXPECT_NE(counts.find(" 0 0 0 5 1 0 0 0 0"), std::string::npos) << counts;  // running 0, done 5
  EXPECT_EQ(text_of(page, "running").find("skyformer"), std::string::npos);
  EXPECT_NE(text_of(page, "results").find("skyformer"), std::string::npos);  // its result is in the table
  std::smatch updates;
  ASSERT_TRUE(std::regex_search(page, updates, std::regex("data-updates=\"([0-9]+)\""))) << page;
  EXPECT_GT(std::stoi(updates[1]), 2);
}

// The page after a week: three experiments (the latest a learning-rate sweep with a failed run),
// shown one at a time with its description, runs labelled and given columns by what differs, and
// times and sizes in their units.
class BrowserWeek : public Browser {
 protected:
  void fill(store::Database& db) override {
    auto described = [](const std::string& name, const std::string& what) {
      FakeJob f;
      f.experiment = name;
      f.experiment_text = "[experiment]\nname = \"" + name + "\"\ndescription = \"" + what + "\"\n";
      return f;
    };
    for (std::int64_t seed = 1; seed <= 2; ++seed) {
      FakeJob quick = described("quickstart", "softmax on shallow ListOps");
      quick.seed = seed, quick.results = {{"test_acc", 0.33}, {"peak_memory_bytes", 3.0 * (1 << 20)}};
      add_job(db, quick);
    }
    FakeJob kl = described("kl-small", "GMM-RKS beside softmax");
    kl.method = "gmm_rks", kl.results = {{"test_acc", 0.31}};
    add_job(db, kl);
    for (const std::string lr : {"0.001", "0.0001"})
      for (std::int64_t seed = 1; seed <= 2; ++seed) {
        FakeJob sweep = described("lr-sweep", "Performer at two learning rates");
        sweep.method = "performer", sweep.seed = seed, sweep.params = {{"train.lr", lr}};
        sweep.results = {{"test_acc", lr == "0.001" ? 0.36 : 0.30}, {"peak_memory_bytes", 5.5 * (1 << 20)}};
        sweep.curve = make_curve("val", "loss", 4, 100, [&](std::int64_t s) { return 2.0 - 0.001 * static_cast<double>(s * seed); });
        sweep.curve.push_back({300, "val", "acc", 0.3, 150.0});
        add_job(db, sweep);
      }
    FakeJob failed = described("lr-sweep", "Performer at two learning rates");
    failed.method = "performer", failed.seed = 3, failed.params = {{"train.lr", "0.01"}}, failed.outcome = "failed";
    add_job(db, failed);
  }
};

TEST_F(BrowserWeek, TheFrontPageShowsTheLatestExperimentWithItsDescription) {
  start_server();
  const std::string page = dom("#/", 3000);
  EXPECT_NE(page.find("Performer at two learning rates"), std::string::npos) << page;
  const std::string picker = page.substr(page.find("id=\"experiment\""), 600);
  for (const char* name : {"lr-sweep (5 jobs)", "kl-small (1 job)", "quickstart (2 jobs)", "(every experiment)"})
    EXPECT_NE(picker.find(name), std::string::npos) << name << ": " << picker;
  const std::string results = text_of(page, "results");
  EXPECT_NE(results.find("performer"), std::string::npos) << results;
  EXPECT_EQ(results.find("gmm_rks"), std::string::npos) << results;  // another experiment's
  const std::string every = dom("#/?experiment=*&metric=test_acc,peak_memory_bytes", 3000);
  const std::string all = text_of(every, "results");
  EXPECT_NE(all.find("gmm_rks"), std::string::npos) << all;
  EXPECT_NE(all.find("3.0 MiB"), std::string::npos) << all;  // bytes in their unit, never raw
  EXPECT_EQ(all.find("3145728"), std::string::npos) << all;
}

TEST_F(BrowserWeek, RunsShowTheKeysThatDifferAndCurvesDrawSideBySideSmoothed) {
  start_server();
  const std::string runs = dom("#/runs?where=experiment%20%3D%20lr-sweep", 3000);
  const std::string table = std::regex_replace(text_of(runs, "runs"), std::regex("\\s+"), " ");
  EXPECT_NE(table.find(" lr "), std::string::npos) << table;  // the sweep's key as a column
  EXPECT_NE(table.find("0.0001"), std::string::npos) << table;
  const std::regex canvas("<canvas [^>]*width=\"[1-9]");
  const std::string curves = dom("#/curves?where=experiment%20%3D%20lr-sweep&metric=loss,acc&smooth=0.6&y=log", 3000);
  EXPECT_EQ(curves.find("id=\"error\""), std::string::npos) << curves;
  const auto drawn = std::distance(std::sregex_iterator(curves.begin(), curves.end(), canvas), std::sregex_iterator());
  EXPECT_EQ(drawn, 2) << curves;  // loss and accuracy, side by side
  EXPECT_NE(curves.find("left out: run "), std::string::npos) << curves;  // the failed run, named
  EXPECT_NE(curves.find(">CSV<"), std::string::npos);
  EXPECT_NE(curves.find(">JSON<"), std::string::npos);
}

// A week's database at scale: 500 runs of 1,000 validation-loss points each.
class BrowserCrowd : public Browser {
 protected:
  void fill(store::Database& db) override {
    for (std::int64_t seed = 1; seed <= 500; ++seed) {
      FakeJob f;
      f.experiment = "crowd", f.seed = seed, f.results = {{"test_acc", 0.3}};
      f.curve = make_curve("val", "loss", 1000, 10, [&](std::int64_t s) { return 2.0 - 1e-4 * double(s) - 1e-3 * double(seed); });
      add_job(db, f);
    }
  }
};

// The curves page draws them all, smoothed (1,000,000 points with the raw lines behind). c797cb7
// spread every x into Math.min and stopped at "Maximum call stack size exceeded" past ~130 runs.
TEST_F(BrowserCrowd, FiveHundredRunsOfAThousandPointsDrawSmoothed) {
  start_server();
  const std::string curves = dom("#/curves?where=experiment%20%3D%20crowd&metric=loss&smooth=0.6", 3000);
  EXPECT_EQ(curves.find("id=\"error\""), std::string::npos) << curves.substr(0, 4000);
  EXPECT_EQ(curves.find("call stack"), std::string::npos);
  const std::regex canvas("<canvas [^>]*width=\"[1-9]");
  EXPECT_EQ(std::distance(std::sregex_iterator(curves.begin(), curves.end(), canvas), std::sregex_iterator()), 1)
      << curves.substr(0, 4000);
}

// A week's database: 521 runs (five methods of 20 seeds, a sparsity × learning-rate sweep of 400
// runs, 20 failed jobs, one running), bench and approx rows (week_fixture.hpp).
class BrowserWeekOf500 : public Browser {
 protected:
  void fill(store::Database& db) override { week_ = fill_week(db); }
  WeekFixture week_;
};

const std::string kSweepOfSoftmax =
    "#/curves?where=experiment%20%3D%20sparsity-sweep%20AND%20method%20%3D%20softmax%20AND%20seed%20%3C%3D%202&metric=loss";

// Item 3: a label holds what differs among the lines, whole; what they share is said once above;
// sixteen lines, sixteen colours; a run of another dataset is never "sparsity=-" (c797cb7 said so).
TEST_F(BrowserWeekOf500, LegendsSayWhatDiffersWholeInColoursThatDoNotRepeat) {
  start_server();
  const std::string page = dom(kSweepOfSoftmax, 3000);
  EXPECT_EQ(page.find("id=\"error\""), std::string::npos) << page.substr(0, 3000);
  EXPECT_EQ(all_of(page, "<p class=\"shared\">([^<]*)</p>"), std::vector<std::string>{"every line: softmax sparse_sum"});
  const auto labels = all_of(page, "<li data-line=\"[0-9]+\">(.*?)</li>");
  ASSERT_EQ(labels.size(), 16u) << page.substr(0, 3000);
  EXPECT_EQ(labels[0], "sparsity=0.1 lr=0.001 seed 1");
  EXPECT_EQ(labels[15], "sparsity=0.7 lr=0.0001 seed 2");
  EXPECT_EQ(std::set<std::string>(labels.begin(), labels.end()).size(), 16u);
  const auto colours = all_of(page, "<span class=\"swatch\" style=\"background:(#[0-9a-f]{6})\">");
  ASSERT_EQ(colours.size(), 16u);
  EXPECT_EQ(std::set<std::string>(colours.begin(), colours.end()).size(), 16u);  // c797cb7: ten, then again

  const std::string mixed = dom("#/curves?where=seed%20%3D%201%20AND%20method%20%3D%20softmax%20AND%20"
                                "(experiment%20%3D%20lo-methods%20OR%20datasets.sparse_sum.sparsity%20%3D%200.1)&metric=loss", 3000);
  EXPECT_EQ(all_of(mixed, "<p class=\"shared\">([^<]*)</p>"), std::vector<std::string>{"every line: softmax"});
  const auto mixed_labels = all_of(mixed, "<li data-line=\"[0-9]+\">(.*?)</li>");
  EXPECT_EQ(mixed_labels, (std::vector<std::string>{"listops lr=0.0001", "sparse_sum lr=0.001", "sparse_sum lr=0.0001"}))
      << mixed.substr(0, 3000);
  EXPECT_EQ(mixed.find("=-"), std::string::npos);
}

// Item 8: on the live runs table, a reader sorts by test_acc (descending: two clicks), checks two
// runs and scrolls down; the running job then finishes (with the best accuracy) and the table is
// drawn again: the sort holds (and is in the address), the two stay checked, the page has not moved.
// Item 9: identity, status and the headline results lead; times are the browser's.
TEST_F(BrowserWeekOf500, TheLiveRunsTableKeepsTheReadersSortChecksAndScroll) {
  start_server(R"js(
    const saw = {polls: []};
    const whole = window.fetch;
    window.fetch = async (url, options) => {
      const reply = await whole(url, options);
      if (String(url).startsWith("api/runs")) saw.polls.push([String(url), (await reply.clone().text()).length]);
      return reply;
    };
    setTimeout(() => {
      const header = [...document.querySelectorAll("#runs th")].find(th => th.textContent === "test_acc");
      header.click(), header.click();
      const boxes = document.querySelectorAll("#runs tbody input[type=checkbox]");
      boxes[1].click(), boxes[4].click();
      saw.checked = [boxes[1].value, boxes[4].value];
      window.scrollTo(0, 1500);
      saw.scrolled = window.scrollY;
      saw.updates_before = Number(document.body.dataset.updates);
    }, 2500);
    setTimeout(() => {
      saw.updates = Number(document.body.dataset.updates);
      saw.still_checked = [...document.querySelectorAll("#runs tbody input[type=checkbox]")].filter(b => b.checked).map(b => b.value);
      saw.scroll = window.scrollY;
      saw.first = document.querySelector("#runs tbody tr td:nth-child(2)").textContent;
      saw.hash = location.hash;
      document.body.dataset.reader = JSON.stringify(saw);
    }, 9500);
  )js");
  std::atomic<int> polls{0};
  server_->on_answer([&](const std::string& path) {
    if (path != "/api/runs" || ++polls != 3) return;  // after the reader's actions
    store::Database db(file("s.db"));
    store::RunWriter(db, week_.running_run).finish(store::RunStatus::done, {{"test_acc", 0.99}}, "", "");
  });
  const std::string page = dom("#/runs?where=experiment%20%3D%20lo-methods", 10000);
  const auto saw = reader_saw(page);
  ASSERT_TRUE(saw.contains("first")) << page.substr(0, 3000);
  EXPECT_GT(saw["updates"].get<int>(), saw["updates_before"].get<int>());  // drawn again after the finish
  EXPECT_EQ(saw["first"], "run " + std::to_string(week_.running_run));      // its 0.99 sorted first
  EXPECT_NE(saw["hash"].get<std::string>().find("sort_runs=-test_acc"), std::string::npos) << saw;
  EXPECT_EQ(saw["still_checked"], saw["checked"]);
  EXPECT_EQ(saw["scroll"], 1500);
  EXPECT_EQ(saw["scrolled"], 1500);
  // Item 7: after the first answer (40 KB), each poll names the 100 ended runs it holds, which come
  // back as their ids: a few KB, the running run whole
  ASSERT_GE(saw["polls"].size(), 3u) << saw;
  for (const auto& poll : saw["polls"]) {
    EXPECT_NE(poll[0].get<std::string>().find("held=1-100"), std::string::npos) << poll;
    EXPECT_LT(poll[1].get<int>(), 6000) << poll;
  }

  const auto header = all_of(page, "<th class=\"sortable\">([^<]*)</th>");
  const auto at = [&](const std::string& name) { return std::find(header.begin(), header.end(), name) - header.begin(); };
  ASSERT_FALSE(header.empty());
  EXPECT_LE(at("status"), 7) << page.substr(0, 3000);
  EXPECT_EQ(at("test_acc"), at("status") + 1);
  EXPECT_LT(at("seed"), at("status"));
  EXPECT_EQ(at("error"), static_cast<long>(header.size()));   // no failed run shown: no error column
  EXPECT_EQ(at("attempt"), static_cast<long>(header.size()));  // behind the column chooser
  EXPECT_TRUE(std::regex_search(page, std::regex("<time datetime=\"20[0-9-]+T[0-9:.]+Z\" data-sort=\"[^\"]+\">[^<T]+</time>")));

  const std::string failed = dom("#/runs?where=experiment%20%3D%20boom-fail&show=attempt", 3000);
  const auto failed_header = all_of(failed, "<th class=\"sortable\">([^<]*)</th>");
  EXPECT_NE(std::find(failed_header.begin(), failed_header.end(), "error"), failed_header.end());
  EXPECT_NE(std::find(failed_header.begin(), failed_header.end(), "attempt"), failed_header.end());
  EXPECT_NE(failed.find("<span class=\"error\">synthetic failure</span>"), std::string::npos);
}

// Item 12: a zoom in the address shows that range; hovering a legend entry brings its line forward
// (the others dimmed); a drag zooms to it and writes the address; a double click resets.
TEST_F(BrowserWeekOf500, CurvesZoomByDraggingAndHoverBringsALineForward) {
  start_server(R"js(
    const saw = {};
    if (!location.hash.includes("xmin")) setTimeout(() => {  // the zoomed link below is only looked at
      const entry = document.querySelectorAll(".legend li")[2];
      entry.dispatchEvent(new MouseEvent("mouseenter"));
      const chart = Chart.getChart(document.querySelector("canvas"));
      saw.highlighted = [...document.querySelectorAll(".legend li.highlighted")].map(li => li.textContent);
      saw.dimmed = chart.data.datasets.filter(d => d.borderColor.endsWith("14")).length;
      saw.widest = chart.data.datasets.filter(d => d.borderWidth === 3).map(d => d.label);
      entry.dispatchEvent(new MouseEvent("mouseleave"));
      saw.dimmed_after = chart.data.datasets.filter(d => d.borderColor.endsWith("14")).length;
      const plot = document.querySelector(".plot"), box = plot.getBoundingClientRect();
      const x = chart.scales.x, y = (chart.scales.y.top + chart.scales.y.bottom) / 2;
      const at = (type, px, target) => target.dispatchEvent(new MouseEvent(type, {clientX: box.left + px, clientY: box.top + y, button: 0, bubbles: true}));
      at("mousedown", x.getPixelForValue(2000), plot);
      at("mousemove", x.getPixelForValue(5000), plot);
      at("mouseup", x.getPixelForValue(5000), window);
      saw.zoomed = [chart.options.scales.x.min, chart.options.scales.x.max];
      saw.zoomed_hash = location.hash;
      plot.dispatchEvent(new MouseEvent("dblclick", {bubbles: true}));
      saw.reset = [chart.options.scales.x.min, chart.options.scales.x.max];
      saw.reset_hash = location.hash;
      document.body.dataset.reader = JSON.stringify(saw);
    }, 2500);
  )js");
  const std::string page = dom(kSweepOfSoftmax, 4000);
  const auto saw = reader_saw(page);
  ASSERT_TRUE(saw.contains("reset")) << page.substr(0, 3000);
  EXPECT_EQ(saw["highlighted"], nlohmann::json::array({"sparsity=0.1 lr=0.0001 seed 1"}));
  EXPECT_EQ(saw["dimmed"], 15);
  EXPECT_EQ(saw["widest"], nlohmann::json::array({"sparsity=0.1 lr=0.0001 seed 1"}));
  EXPECT_EQ(saw["dimmed_after"], 0);
  EXPECT_NEAR(saw["zoomed"][0].get<double>(), 2000, 30);
  EXPECT_NEAR(saw["zoomed"][1].get<double>(), 5000, 30);
  EXPECT_TRUE(std::regex_search(saw["zoomed_hash"].get<std::string>(), std::regex("xmin=19[0-9.]+|xmin=20[0-9.]+"))) << saw;
  EXPECT_EQ(saw["reset"], nlohmann::json::array({0, 9900}));
  EXPECT_EQ(saw["reset_hash"].get<std::string>().find("xmin"), std::string::npos) << saw;

  // a zoomed link: the x axis is that range
  const std::string zoomed = dom(kSweepOfSoftmax + "&xmin=2000&xmax=4000", 3000);
  std::smatch ticks;
  ASSERT_TRUE(std::regex_search(zoomed, ticks, std::regex("data-x-ticks=\"([^\"]*)\""))) << zoomed.substr(0, 3000);
  EXPECT_EQ(ticks[1].str(), "2,000 2,200 2,400 2,600 2,800 3,000 3,200 3,400 3,600 3,800 4,000");
}

// Item 7: a curves page with a running run polls for what it lacks: after the first answer, each
// poll names the runs it holds and gets back the running run's new points only (a few hundred bytes
// where the first answer had every point); the chart has them all.
TEST_F(BrowserWeekOf500, CurvesPollOnlyForWhatChanged) {
  start_server(R"js(
    const polls = [];
    const whole = window.fetch;
    window.fetch = async (url, options) => {
      const reply = await whole(url, options);
      if (String(url).startsWith("api/curves")) polls.push([String(url), (await reply.clone().text()).length]);
      return reply;
    };
    setTimeout(async () => {
      const chart = Chart.getChart(document.querySelector("canvas"));
      const first = (await (await whole(polls[0][0].replace(/&held=[^&]*/, ""))).text()).length;  // as the page's first
      document.body.dataset.reader = JSON.stringify({polls, first, points: chart.data.datasets.map(d => d.data.length)});
    }, 9500);
  )js");
  std::atomic<int> answers{0};
  server_->on_answer([&](const std::string& path) {
    if (path != "/api/curves" || ++answers != 2) return;
    std::vector<store::CurvePoint> next;  // the run's steps 3,000 to 3,090, after its 0 to 2,990
    for (std::int64_t step = 3000; step < 3100; step += 10) next.push_back({step, "train", "loss", 0.5, 1500.0});
    store::Database db(file("s.db"));
    store::RunWriter(db, week_.running_run).append_curve(next);
  });
  const std::string route = "#/curves?run=1,2," + std::to_string(week_.running_run) + "&metric=loss&split=train";
  const auto saw = reader_saw(dom(route, 10000));
  ASSERT_TRUE(saw.contains("polls")) << saw;
  const auto& polls = saw["polls"];
  ASSERT_GE(polls.size(), 3u) << saw;  // the polls after the page's first request (made before this script ran)
  EXPECT_GT(saw["first"].get<int>(), 50000) << saw;  // 2,300 points
  const std::string held = "held=1-2," + std::to_string(week_.running_run) + ":";
  for (std::size_t i = 0; i < polls.size(); ++i) {
    EXPECT_NE(polls[i][0].get<std::string>().find(held), std::string::npos) << polls[i];
    EXPECT_LT(polls[i][1].get<int>(), 2000) << polls[i];
  }
  EXPECT_EQ(saw["points"], nlohmann::json::array({1000, 1000, 310}));
}

// Issue 58, item 1: the week's 501 runs (its sweep's 400, lo-methods' 100 and the queue's running
// one, which logs ten steps at every poll), smoothed with the raw lines behind. Each poll's points are drawn into the chart in place (one
// Chart from the first draw to the last, the new points in it), every line drawn decimated to the
// chart's budget of points, and 40 hovers (as Chart.js handles a mouse move: hit test, the line
// brought forward, a draw) timed: chromium's virtual time stands still within a task, so each
// hover is bracketed by two synchronous requests whose arrival the test times on its own clock.
// The times are printed (a figure, not an assertion).
TEST_F(BrowserWeekOf500, FiveHundredRunsWithAQueueRunningAreUpdatedInPlaceAndDrawnDecimated) {
  start_server(R"js(
    const saw = {};
    const heldPoints = chart => chart.data.datasets.reduce((n, d) => n + (d._data || d.data).length, 0);
    const mark = () => { const r = new XMLHttpRequest(); r.open("GET", "api/experiments", false); r.send(); };
    setTimeout(() => {
      const chart = Chart.getChart(document.querySelector("canvas"));
      saw.first_chart = chart.id, saw.first_held = heldPoints(chart), saw.first_updates = Number(document.body.dataset.updates);
    }, 2500);
    setTimeout(() => {
      const chart = Chart.getChart(document.querySelector("canvas"));
      saw.last_chart = chart.id, saw.last_held = heldPoints(chart), saw.updates = Number(document.body.dataset.updates);
      saw.datasets = chart.data.datasets.length;
      saw.drawn = chart.data.datasets.reduce((n, d, i) => n + chart.getDatasetMeta(i).data.length, 0);
      const {left, right, top, bottom} = chart.chartArea;
      mark(), mark();  // two marks alone: what a mark costs
      for (let i = 0; i < 40; ++i) {
        const x = left + (right - left) * (i + 0.5) / 40, y = top + (bottom - top) * ((i * 7) % 40 + 0.5) / 40;
        chart._eventHandler({type: "mousemove", x, y, native: new MouseEvent("mousemove")});
        mark();
      }
      saw.lit = document.querySelectorAll(".legend li.highlighted").length;
      document.body.dataset.reader = JSON.stringify(saw);
    }, 11500);
  )js");
  std::atomic<std::int64_t> step{3000};
  std::mutex marking;
  std::vector<std::chrono::steady_clock::time_point> marks;
  server_->on_answer([&](const std::string& path) {
    if (path == "/api/experiments") {
      std::lock_guard<std::mutex> lock(marking);
      marks.push_back(std::chrono::steady_clock::now());
    }
    if (path != "/api/curves") return;
    std::vector<store::CurvePoint> next;
    for (int i = 0; i < 10; ++i, step += 10) next.push_back({step, "train", "loss", 0.5, 1500.0 + double(step) / 10});
    store::Database db(file("s.db"));
    store::RunWriter(db, week_.running_run).append_curve(next);
  });
  const auto saw = reader_saw(dom("#/curves?where=experiment%20%3D%20sparsity-sweep%20OR%20experiment%20%3D%20lo-methods"
                                  "&metric=loss&split=train&smooth=0.6", 12000));
  ASSERT_TRUE(saw.contains("lit")) << saw;
  EXPECT_EQ(saw["datasets"], 1002);  // 501 runs, each smoothed with its raw line behind
  EXPECT_EQ(saw["first_chart"], saw["last_chart"]) << "the chart was made anew at a poll";
  EXPECT_GE(saw["updates"].get<int>() - saw["first_updates"].get<int>(), 3) << saw;
  EXPECT_GT(saw["last_held"].get<int>(), saw["first_held"].get<int>()) << "the polls' points are not in the chart";
  EXPECT_LE(saw["drawn"].get<int>(), 1002 * 50);  // 50 a line, of about 1,000,000 held
  EXPECT_GT(saw["last_held"].get<int>(), 900000);
  EXPECT_EQ(saw["lit"], 1);  // the last hover brought a line forward
  ASSERT_EQ(marks.size(), 42u);
  const auto ms = [&](std::size_t i) { return std::chrono::duration<double, std::milli>(marks[i + 1] - marks[i]).count(); };
  std::vector<double> hovers;
  for (std::size_t i = 1; i + 1 < marks.size(); ++i) hovers.push_back(std::max(0.0, ms(i) - ms(0)));
  std::sort(hovers.begin(), hovers.end());
  std::printf("[ figure ] 501 runs smoothed, %d of %d points drawn: a hover %.1f ms median, %.1f ms at most (40 hovers; "
              "a mark alone %.1f ms)\n", saw["drawn"].get<int>(), saw["last_held"].get<int>(), hovers[hovers.size() / 2],
              hovers.back(), ms(0));
}

// Item 2: a reader types a filter into "results where" while the queue runs (the running run logs
// a step at every poll of the queue, which the page redraws): the field keeps the focus and every
// character, the experiment picker is the element it was, and the queue did change meanwhile.
TEST_F(BrowserWeekOf500, TypingWhileTheQueueRunsKeepsTheFocusAndThePicker) {
  start_server(R"js(
    const saw = {focused: []};
    const text = "method = softmax";
    setTimeout(() => {
      const input = document.querySelector("input[name=where]"), picker = document.getElementById("experiment");
      picker.dataset.mark = "the first";
      input.focus();
      saw.updates_before = Number(document.body.dataset.updates);
      saw.running_before = document.getElementById("running").textContent;
      [...text].forEach((c, i) => setTimeout(() => {
        const field = document.activeElement;  // typed where the focus is, as a keyboard types
        if (field && field.name === "where") field.value += c, field.dispatchEvent(new Event("input", {bubbles: true}));
        saw.focused.push(document.activeElement === input);
      }, 500 * (i + 1)));
      setTimeout(() => {
        saw.value = input.value;
        saw.picker = document.getElementById("experiment").dataset.mark || "";
        saw.updates = Number(document.body.dataset.updates);
        saw.running_after = document.getElementById("running").textContent;
        document.body.dataset.reader = JSON.stringify(saw);
      }, 500 * (text.length + 1));
    }, 2500);
  )js");
  std::atomic<std::int64_t> step{3000};
  server_->on_answer([&](const std::string& path) {
    if (path != "/api/queue") return;
    store::Database db(file("s.db"));
    store::RunWriter(db, week_.running_run).append_curve({{step += 10, "train", "loss", 0.5, 1500.0 + double(step) / 10}});
  });
  const auto saw = reader_saw(dom("#/", 12000));
  ASSERT_TRUE(saw.contains("value")) << saw;
  EXPECT_EQ(saw["value"], "method = softmax");
  EXPECT_EQ(saw["focused"], nlohmann::json(std::vector<bool>(16, true)));
  EXPECT_EQ(saw["picker"], "the first");
  EXPECT_GE(saw["updates"].get<int>() - saw["updates_before"].get<int>(), 3) << saw;
  EXPECT_NE(saw["running_before"], saw["running_after"]);  // the queue was redrawn meanwhile
}

// Item 2: the runs table's "more columns" panel, once opened, stays open when the table is drawn
// again (the running run finishes meanwhile); a legend entry clicked keeps its line forward while
// the queue's run adds points to the chart.
TEST_F(BrowserWeekOf500, AnOpenPanelAndAPinnedLineStayThroughTheRedraws) {
  start_server(R"js(
    const saw = {};
    const running = () => document.querySelectorAll("#runs .state-running").length;
    setTimeout(() => {
      if (location.hash.startsWith("#/runs")) document.querySelector("#column-chooser summary").click(), saw.running_before = running();
      else document.querySelectorAll(".legend li")[3].click(), saw.points_before = Chart.getChart(document.querySelector("canvas")).data.datasets.map(d => d.data.length);
    }, 2500);
    setTimeout(() => {
      const panel = document.getElementById("column-chooser");
      if (panel) saw.open = panel.open, saw.running_after = running();
      else saw.points_after = Chart.getChart(document.querySelector("canvas")).data.datasets.map(d => d.data.length);
      saw.pinned = [...document.querySelectorAll(".legend li.highlighted")].map(li => li.textContent);
      document.body.dataset.reader = JSON.stringify(saw);
    }, 9500);
  )js");
  std::atomic<int> polls{0};
  std::atomic<std::int64_t> step{3000};
  server_->on_answer([&](const std::string& path) {
    store::Database db(file("s.db"));
    if (path == "/api/runs" && ++polls == 3)
      store::RunWriter(db, week_.running_run).finish(store::RunStatus::done, {{"test_acc", 0.99}}, "", "");
    if (path == "/api/curves")
      store::RunWriter(db, week_.running_run).append_curve({{step += 10, "train", "loss", 0.5, 1500.0 + double(step) / 10}});
  });
  const auto curves = reader_saw(dom("#/curves?where=experiment%20%3D%20lo-methods%20AND%20method%20%3D%20softmax%20AND%20"
                                     "seed%20%3E%3D%2018&metric=loss&split=train", 10000));
  ASSERT_TRUE(curves.contains("pinned")) << curves;
  EXPECT_EQ(curves["pinned"].size(), 1u) << curves;
  EXPECT_NE(curves["points_before"], curves["points_after"]) << curves;  // the running run's points came in
  // then the runs table, whose running run finishes at its third poll
  const auto runs = reader_saw(dom("#/runs?where=experiment%20%3D%20lo-methods", 10000));
  ASSERT_TRUE(runs.contains("open")) << runs;
  EXPECT_TRUE(runs["open"].get<bool>());
  EXPECT_EQ(runs["running_before"], 1);
  EXPECT_EQ(runs["running_after"], 0);  // drawn again, finished
}

// Item 4: the sweep's 400 runs coloured by lr: the legend under one heading per value (its
// entries say only the rest), a heading's box hides its lines, a search keeps the lines it finds;
// and the sweep view: test accuracy against the first numeric swept key, a line per value of the
// others, and every configuration across the swept keys (parallel coordinates).
TEST_F(BrowserWeekOf500, ASweepIsColouredByAKeyFoundBySearchAndDrawnAgainstItsKeys) {
  start_server(R"js(
    const saw = {};
    if (location.hash.startsWith("#/curves")) setTimeout(() => {
      const chart = Chart.getChart(document.querySelector("canvas"));
      const shown = () => chart.data.datasets.filter((d, i) => chart.isDatasetVisible(i)).length;
      saw.groups = [...document.querySelectorAll(".legend li.group")].map(li => li.textContent);
      saw.first_entry = document.querySelector(".legend li[data-line]").textContent;
      saw.colours = [...document.querySelectorAll(".legend li.group .swatch")].map(s => s.style.background);
      const box = document.querySelector(".legend li.group input");
      box.click();
      saw.after_hiding = shown();
      box.click();
      const search = document.querySelector(".legend-search");
      search.value = "sparsity=0.7 seed 25";
      search.dispatchEvent(new Event("input"));
      saw.found = shown();
      saw.listed = [...document.querySelectorAll(".legend li[data-line]")].filter(li => !li.hidden).map(li => li.textContent);
      document.body.dataset.reader = JSON.stringify(saw);
    }, 2500);
  )js");
  const auto curves = reader_saw(dom("#/curves?where=experiment%20%3D%20sparsity-sweep&metric=loss&split=train&color_by=lr", 4000));
  ASSERT_TRUE(curves.contains("groups")) << curves;
  EXPECT_EQ(curves["groups"], nlohmann::json::array({"lr=0.001 (200)", "lr=0.0001 (200)"}));
  EXPECT_EQ(curves["first_entry"], "softmax sparsity=0.1 seed 1");  // lr=0.001 said once, in its heading
  EXPECT_NE(curves["colours"][0], curves["colours"][1]);
  EXPECT_EQ(curves["after_hiding"], 200);
  EXPECT_EQ(curves["found"], 4);  // softmax and performer at either lr
  EXPECT_EQ(curves["listed"].size(), 4u) << curves;

  const std::string sweep = dom("#/sweep?where=experiment%20%3D%20sparsity-sweep", 3000);
  EXPECT_EQ(sweep.find("id=\"error\""), std::string::npos) << sweep.substr(0, 3000);
  EXPECT_NE(sweep.find("16 configurations; test_acc: mean ± std over each one's seeds; swept: method, "
                       "datasets.sparse_sum.sparsity, train.lr"), std::string::npos) << sweep.substr(0, 3000);
  EXPECT_NE(sweep.find("data-title=\"test_acc against datasets.sparse_sum.sparsity\""), std::string::npos);
  EXPECT_EQ(all_of(sweep, "data-axes=\"([^\"]*)\""), std::vector<std::string>{"method sparsity lr test_acc"});
  EXPECT_EQ(all_of(sweep, "<li data-line=\"[0-9]+\">(.*?)</li>"),
            (std::vector<std::string>{"softmax lr=0.0001", "softmax lr=0.001", "performer lr=0.0001", "performer lr=0.001"}));
  EXPECT_EQ(all_of(sweep, "data-x-ticks=\"([^\"]*)\""), std::vector<std::string>{"0.1 0.3 0.5 0.7"});
}

// Item 3: compare on the week's database, where both methods swept lr on four sparsities: it
// answers, a row per task, each side's configuration said in a line where it had a choice.
TEST_F(BrowserWeekOf500, CompareAnswersOnASweepSayingWhichConfigurationEachSideTook) {
  start_server();
  const std::string page = dom("#/compare?a=softmax&b=performer", 3000);
  EXPECT_EQ(page.find("id=\"error\""), std::string::npos) << page.substr(0, 3000);
  const std::string rows = std::regex_replace(text_of(page, "compare"), std::regex("\\s+"), " ");
  EXPECT_NE(rows.find("sparse_sum 0.7 lr=0.001 lr=0.001 25 0.6658"), std::string::npos) << rows;
  EXPECT_NE(rows.find("listops"), std::string::npos) << rows;
  EXPECT_NE(page.find("sparse_sum / 0.7: B takes performer lr=0.001 of 2 configurations: best mean best_val_acc 0.6758 (25 seeds)"),
            std::string::npos)
      << page.substr(0, 3000);
}

// Item 11: log axes label 1, 2 and 5 of each decade; approx marks the d it measured.
TEST_F(BrowserWeekOf500, LogAxesReadOneTwoFive) {
  start_server();
  const std::string bench = dom("#/bench", 3000);
  EXPECT_EQ(all_of(bench, "data-y-ticks=\"([^\"]*)\""),
            (std::vector<std::string>{"0.001 0.002 0.005 0.01 0.02 0.05 0.1 0.2", "10 20 50 100 200 500 1000 2000"}))
      << bench.substr(0, 3000);
  EXPECT_EQ(all_of(bench, "data-x-ticks=\"([^\"]*)\""), (std::vector<std::string>{"512 1024 2048 4096 8192", "512 1024 2048 4096 8192"}));
  const std::string approx = dom("#/approx", 3000);
  EXPECT_EQ(all_of(approx, "data-x-ticks=\"([^\"]*)\""), std::vector<std::string>{"16 32 64 128 256"});
  EXPECT_EQ(all_of(approx, "data-y-ticks=\"([^\"]*)\""), std::vector<std::string>{"0.01 0.02 0.05 0.1 0.2"});
}

}  // namespace
}  // namespace attnlab::results::testing
