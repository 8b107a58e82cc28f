// attnlab serve's JSON endpoints (runner/serve/api.hpp) against a database the test fills: the
// results equal what `attnlab results --format json` prints for the same filter, bad parameters
// are a 400 with the reason, and the queue reports every state, the running jobs and each failed
// attempt's error. Names holding markup travel as JSON strings (the page writes them as text).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "results_support.hpp"
#include "week_fixture.hpp"
#include "attnlab/store/run_writer.hpp"
#include "serve/api.hpp"
#include "serve/params.hpp"
#include "../store/src/access.hpp"

namespace attnlab::results::testing {
namespace {

class Serve : public ResultsTest {
 protected:
  void fill() {
    store::Database db(file("s.db"));
    for (std::int64_t seed = 1; seed <= 2; ++seed) {
      FakeJob f;
      f.seed = seed;
      f.results = {{"test_acc", 0.3 + 0.1 * seed}};
      add_job(db, f);
      f.method = "<script>alert(1)</script>";
      f.dataset = "image";
      add_job(db, f);
    }
    FakeJob failed;
    failed.method = "performer", failed.outcome = "failed";
    add_job(db, failed);
    FakeJob running;
    running.method = "skyformer", running.outcome = "running";
    running.params = {{"train.steps", "1000"}};
    running.curve = {{100, "train", "loss", 1.5, 20.0}, {300, "train", "loss", 1.2, 60.0}, {200, "val", "acc", 0.3, 45.0}};
    add_job(db, running);
    FakeJob queued;
    queued.method = "linformer", queued.outcome = "queued";
    add_job(db, queued);
  }
};

TEST_F(Serve, ResultsAreWhatTheResultsCommandPrints) {
  fill();
  store::ResultsReader db(file("s.db"));
  for (const std::string where : {"", "dataset = listops", "method IN (softmax, performer)"}) {
    serve::Params params;
    std::vector<std::string> args = {"results", "--db", file("s.db"), "--format", "json"};
    if (!where.empty()) {
      params.emplace("where", where);
      args.insert(args.end(), {"--where", where});
    }
    const auto reply = serve::results_json(db, params);
    const auto printed = attnlab(args);
    ASSERT_EQ(printed.status, 0) << printed.err;
    EXPECT_EQ(reply.status, 200);
    EXPECT_EQ(reply.body, printed.out) << where;
  }
  serve::Params grouped = {{"group_by", "method"}, {"metric", "test_acc"}, {"jobs", "1"}};
  const auto printed = attnlab({"results", "--db", file("s.db"), "--format", "json", "--group-by", "method",
                                "--metric", "test_acc", "--jobs"});
  EXPECT_EQ(serve::results_json(db, grouped).body, printed.out);
  // the name with markup is a JSON string like any other
  EXPECT_NE(serve::results_json(db, {}).body.find("\"<script>alert(1)</script>\""), std::string::npos);
}

TEST_F(Serve, BadParametersAreA400WithTheReason) {
  fill();
  store::ResultsReader db(file("s.db"));
  const auto bad_filter = serve::results_json(db, {{"where", "dataset ="}});
  EXPECT_EQ(bad_filter.status, 400);
  EXPECT_EQ(bad_filter.body.rfind(R"({"error":"--where 'dataset =': )", 0), 0u) << bad_filter.body;
  const auto bad_key = serve::results_json(db, {{"group_by", "no_such_key"}});
  EXPECT_EQ(bad_key.status, 400);
  EXPECT_NE(bad_key.body.find("no_such_key"), std::string::npos) << bad_key.body;
  const auto unknown = serve::results_json(db, {{"sql", "DROP TABLE jobs"}});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.body, R"j({"error":"unknown parameter 'sql' (known: where, group_by, metric, jobs, experiment)"})j");
}

TEST_F(Serve, TheQueueHasEveryStateTheRunningJobsAndEachFailedAttemptsError) {
  fill();
  store::ResultsReader db(file("s.db"));
  const auto reply = serve::queue_json(db, {});
  ASSERT_EQ(reply.status, 200);
  const auto queue = nlohmann::ordered_json::parse(reply.body);
  EXPECT_EQ(queue["counts"].dump(),
            R"({"queued":1,"running":1,"submitted":0,"done":4,"failed":1,"diverged":0,"oom":0,"blocked":0,"cancelled":0})");
  ASSERT_EQ(queue["running"].size(), 1u);
  const auto& running = queue["running"][0];
  EXPECT_EQ(running["job"], 6);
  EXPECT_EQ(running["method"], "skyformer");
  EXPECT_EQ(running["device"], "cpu");
  // train.steps = 1000; logged steps 100 at 20 s and 300 at 60 s: 200 steps in 40 s, 700 to go
  EXPECT_EQ(running["step"], 300);
  EXPECT_EQ(running["steps"], 1000);
  EXPECT_DOUBLE_EQ(running["eta_seconds"].get<double>(), 140.0);
  ASSERT_EQ(queue["failed"].size(), 1u);
  const auto& failed = queue["failed"][0];
  EXPECT_EQ(failed["method"], "performer");
  ASSERT_EQ(failed["attempts"].size(), 3u);  // three attempts, each with its error
  for (const auto& attempt : failed["attempts"]) {
    EXPECT_EQ(attempt["status"], "failed");
    EXPECT_EQ(attempt["error"], "synthetic failure");
  }
  EXPECT_EQ(serve::queue_json(db, {{"x", "1"}}).status, 400);
}

// Every job that ended without a result is listed with its state, not the failed ones alone.
TEST_F(Serve, TheQueueListsEveryJobThatEndedWithoutAResult) {
  {
    store::Database db(file("s.db"));
    for (const std::string outcome : {"failed", "diverged", "oom", "done"}) {
      FakeJob f;
      f.method = outcome + "_method", f.outcome = outcome;
      add_job(db, f);
    }
  }
  store::ResultsReader db(file("s.db"));
  const auto queue = nlohmann::ordered_json::parse(serve::queue_json(db, {}).body);
  std::vector<std::pair<std::string, std::string>> listed;
  for (const auto& job : queue["failed"]) listed.emplace_back(job["method"], job["state"]);
  EXPECT_EQ(listed, (std::vector<std::pair<std::string, std::string>>{
                        {"failed_method", "failed"}, {"diverged_method", "diverged"}, {"oom_method", "oom"}}));
}

// After the last training step the ETA is the variance passes', at the rate of those done (schema
// 14's run_phases, which the job process writes as they go); while the test split is evaluated
// (no pass reported yet) it is unknown, not 0. The phase goes when the attempt ends.
TEST_F(Serve, TheQueuesEtaCountsTheVariancePasses) {
  std::int64_t run = 0;
  {
    store::Database db(file("p.db"));
    FakeJob running;
    running.outcome = "running";
    running.params = {{"train.steps", "1000"}};
    running.curve = {{500, "train", "loss", 1.5, 20.0}, {1000, "train", "loss", 1.2, 60.0}};
    const auto job = add_job(db, running).first;
    run = db.attempts_of_job(job).back().run_id;
  }
  const auto progress = [&] {
    store::ResultsReader db(file("p.db"));
    const auto reply = serve::queue_json(db, {});
    EXPECT_EQ(reply.status, 200);
    return nlohmann::ordered_json::parse(reply.body)["running"][0];
  };
  const auto testing = progress();
  EXPECT_EQ(testing["step"], 1000);
  EXPECT_TRUE(testing["phase"].is_null());
  EXPECT_TRUE(testing["eta_seconds"].is_null()) << testing.dump();

  store::Database db(file("p.db"));
  store::RunWriter(db, run).set_phase({"variance passes", 5, 100, 40.0});
  const auto passes = progress();
  EXPECT_EQ(passes["phase"].dump(), R"({"name":"variance passes","done":5,"total":100})");
  EXPECT_DOUBLE_EQ(passes["eta_seconds"].get<double>(), 95 * 8.0);  // 8 s a pass, 95 to go

  store::RunWriter(db, run).finish(store::RunStatus::done, {}, "", "");
  EXPECT_FALSE(db.run_phase(run).has_value());
  // the lease is gone: a late write from the attempt is refused, nothing written
  EXPECT_THROW(store::RunWriter(db, run).set_phase({"variance passes", 6, 100, 48.0}), store::LeaseLost);
  EXPECT_FALSE(db.run_phase(run).has_value());
}

// /api/runs' default columns are the config keys whose values differ among the runs returned, with
// each run's values exactly as columns=THOSE gives them (the older path, a statement per key, took
// ten times the rest of the answer on a week's 500 runs with their whole configurations): a swept
// key, a method's own setting across methods, a key some jobs lack, an empty value; the ones every
// job shares (most of a real configuration) are no column; a filter that leaves one value, none.
TEST_F(Serve, DefaultRunColumnsAreTheKeysThatDifferWithTheirValues) {
  using json = nlohmann::ordered_json;
  {
    store::Database db(file("s.db"));
    int seed = 0;
    for (const std::string method : {"softmax", "skyformer", "nystromformer"})
      for (const std::string lr : {"0.001", "0.0001"}) {
        FakeJob f;
        f.experiment = "columns", f.method = method, f.seed = ++seed, f.results = {{"test_acc", 0.3}};
        f.params = {{"train.lr", lr}};
        if (method != "softmax") f.params.push_back({"methods." + method + ".landmarks", method == "skyformer" ? "32" : "64"});
        if (method == "skyformer") f.params.push_back({"train.note", seed == 3 ? "" : "x"});
        add_full_config(f);  // ~60 keys a job, all the same
        add_job(db, f);
      }
  }
  store::ResultsReader db(file("s.db"));
  const auto params_of = [&](const serve::Params& params) {
    const auto reply = serve::runs_json(db, params);
    EXPECT_EQ(reply.status, 200) << reply.body;
    std::vector<json> out;
    for (const auto& run : json::parse(reply.body)) out.push_back(run["params"]);
    return out;
  };
  const auto shown = params_of({});
  ASSERT_EQ(shown.size(), 6u);
  std::vector<std::string> keys;
  for (const auto& [key, value] : shown[0].items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"methods.*.landmarks", "train.lr", "train.note"}));
  EXPECT_EQ(shown, params_of({{"columns", "methods.*.landmarks,train.lr,train.note"}}));
  EXPECT_EQ(shown[0], json({{"methods.*.landmarks", ""}, {"train.lr", "0.001"}, {"train.note", ""}}));  // softmax: none
  EXPECT_EQ(shown[2], json({{"methods.*.landmarks", "32"}, {"train.lr", "0.001"}, {"train.note", ""}}));  // "" as stored
  EXPECT_EQ(shown[3], json({{"methods.*.landmarks", "32"}, {"train.lr", "0.0001"}, {"train.note", "x"}}));
  EXPECT_EQ(shown[5], json({{"methods.*.landmarks", "64"}, {"train.lr", "0.0001"}, {"train.note", ""}}));
  const auto skyformer = params_of({{"where", "method = skyformer"}});
  ASSERT_EQ(skyformer.size(), 2u);
  EXPECT_EQ(skyformer[0], json({{"train.lr", "0.001"}, {"train.note", ""}}));
  EXPECT_EQ(skyformer, params_of({{"where", "method = skyformer"}, {"columns", "train.lr,train.note"}}));
  EXPECT_EQ(params_of({{"where", "method = softmax and train.lr = 0.001"}}), std::vector<json>{json::object()});
}

// A curves answer is written piece by piece (its points never a tree of JSON values: issue 58's
// memory), and reads exactly as one dump() of it would: the same bytes again after a parse; a NaN
// (a diverged loss) is null; runs held whole or up to a step, and means, keep their fields.
TEST_F(Serve, CurvesAreTheJsonOneDumpWouldWrite) {
  using json = nlohmann::ordered_json;
  {
    store::Database db(file("s.db"));
    for (std::int64_t seed = 1; seed <= 3; ++seed) {
      FakeJob f;
      f.seed = seed, f.results = {{"test_acc", 0.3}};
      f.curve = make_curve("val", "loss", 6, 100, [&](std::int64_t s) {
        return s == 300 && seed == 2 ? std::nan("") : 1.0 / double(s + seed) + 1e-300 * double(s);
      });
      add_job(db, f);
    }
  }
  store::ResultsReader db(file("s.db"));
  for (const serve::Params& params : std::vector<serve::Params>{
           {{"where", "seed > 0"}, {"metric", "loss"}},
           {{"where", "seed > 0"}, {"metric", "loss"}, {"mean", "1"}},
           {{"run", "1,2,3"}, {"metric", "loss"}, {"held", "1,2:200"}}}) {
    const auto reply = serve::curves_json(db, params);
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json answer = json::parse(reply.body);
    EXPECT_EQ(reply.body, serve::dump(answer));
    EXPECT_EQ(answer["runs"].size(), 3u);
  }
  const json whole = json::parse(serve::curves_json(db, {{"where", "seed > 0"}, {"metric", "loss"}, {"mean", "1"}}).body);
  EXPECT_TRUE(whole["runs"][1]["points"][3][2].is_null()) << whole["runs"][1]["points"][3];
  EXPECT_EQ(whole["runs"][0]["points"][1], json({100, 50.0, 1.0 / 101.0 + 1e-300 * 100.0}));  // every digit
  EXPECT_TRUE(whole["means"][0]["points"][3][2].is_null());  // a NaN seed: the mean there is NaN too
  EXPECT_EQ(whole["means"][0]["points"][0].size(), 7u);
  const json held = json::parse(serve::curves_json(db, {{"run", "1,2,3"}, {"metric", "loss"}, {"held", "1,2:200"}}).body);
  EXPECT_EQ(held["runs"][0]["unchanged"], true);
  EXPECT_EQ(held["runs"][1]["after_step"], 200);
  EXPECT_EQ(held["runs"][1]["points"].size(), 3u);
  EXPECT_FALSE(held["runs"][2].contains("after_step"));
}

// `attnlab serve --port 0` as a child process: the port it printed, killed at the end.
class Server {
 public:
  explicit Server(const std::string& db) {
    int out[2];
    EXPECT_EQ(pipe(out), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      execl(ATTNLAB_BINARY, ATTNLAB_BINARY, "serve", "--db", db.c_str(), "--port", "0", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    std::string line;
    for (char c; read(out[0], &c, 1) == 1 && c != '\n';) line += c;
    close(out[0]);
    const auto colon = line.rfind(':', line.find("/ ("));  // "serve: http://127.0.0.1:PORT/ (database ..."
    if (line.rfind("serve: http://127.0.0.1:", 0) == 0 && colon != std::string::npos) port_ = std::stoi(line.substr(colon + 1));
    EXPECT_GT(port_, 0) << "attnlab serve printed: " << line;
  }
  ~Server() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// Over HTTP: the endpoints, the page and Chart.js from attnlab's own folder, nothing outside it,
// nothing but GET, and a database that is not there is a message, not a crash.
TEST_F(Serve, OverHttpThePageTheEndpointsAndNothingElse) {
  fill();
  Server server(file("s.db"));
  httplib::Client client("127.0.0.1", server.port());
  const auto results = client.Get("/api/results?where=dataset%20%3D%20listops");
  ASSERT_TRUE(results);
  EXPECT_EQ(results->status, 200);
  EXPECT_EQ(results->body, attnlab({"results", "--db", file("s.db"), "--format", "json", "--where", "dataset = listops"}).out);
  EXPECT_EQ(client.Get("/api/results?where=dataset%20%3D")->status, 400);
  // a where typed into the address bar as written: the pair splits at its first '=', not its last
  const auto typed = client.Get("/api/results?where=dataset=listops");
  ASSERT_TRUE(typed);
  EXPECT_EQ(typed->body, results->body);
  const auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<script src=\"app.js\"></script>"), std::string::npos);
  const auto chart = client.Get("/chart.min.js");
  ASSERT_TRUE(chart);
  EXPECT_EQ(chart->status, 200);
  EXPECT_GT(chart->body.size(), 100000u);  // Chart.js itself, served locally
  for (const char* outside : {"/../CMakeCache.txt", "/%2e%2e/CMakeCache.txt", "/web/../../CMakeCache.txt"}) {
    const auto refused = client.Get(outside);
    ASSERT_TRUE(refused) << outside;
    EXPECT_NE(refused->status, 200) << outside;
    EXPECT_EQ(refused->body.find("CMAKE"), std::string::npos) << outside;
  }
  const auto post = client.Post("/api/results", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_NE(post->status, 200);
  fs::rename(file("s.db"), file("moved.db"));
  const auto missing = client.Get("/api/queue");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 503);
  EXPECT_NE(missing->body.find("no such database"), std::string::npos) << missing->body;
  {
    store::Database newer(file("s.db"));  // a database a later attnlab wrote
    ASSERT_EQ(sqlite3_exec(store::sqlite_handle(newer), "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  }
  const auto refused = client.Get("/api/queue");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_NE(refused->body.find("is newer than this attnlab knows"), std::string::npos) << refused->body;
}

}  // namespace
}  // namespace attnlab::results::testing
