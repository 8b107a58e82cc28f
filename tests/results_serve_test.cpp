// attnlab serve's JSON endpoints (runner/serve/api.hpp) against a database the test fills: the
// results equal what `attnlab results --format json` prints for the same filter, bad parameters
// are a 400 with the reason, and the queue reports every state, the running jobs and each failed
// attempt's error. Names holding markup travel as JSON strings (the page writes them as text).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include "results_support.hpp"
#include "serve/api.hpp"

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
    add_job(db, running);
    FakeJob queued;
    queued.method = "linformer", queued.outcome = "queued";
    add_job(db, queued);
  }
};

TEST_F(Serve, ResultsAreWhatTheResultsCommandPrints) {
  fill();
  store::Database db(file("s.db"), store::Database::Open::read_only);
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
  store::Database db(file("s.db"), store::Database::Open::read_only);
  const auto bad_filter = serve::results_json(db, {{"where", "dataset ="}});
  EXPECT_EQ(bad_filter.status, 400);
  EXPECT_EQ(bad_filter.body.rfind("{\"error\": \"--where 'dataset =': ", 0), 0u) << bad_filter.body;
  const auto bad_key = serve::results_json(db, {{"group_by", "no_such_key"}});
  EXPECT_EQ(bad_key.status, 400);
  EXPECT_NE(bad_key.body.find("no_such_key"), std::string::npos) << bad_key.body;
  const auto unknown = serve::results_json(db, {{"sql", "DROP TABLE jobs"}});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.body, "{\"error\": \"unknown parameter 'sql' (known: where, group_by, metric, jobs)\"}");
}

TEST_F(Serve, TheQueueHasEveryStateTheRunningJobsAndEachFailedAttemptsError) {
  fill();
  store::Database db(file("s.db"), store::Database::Open::read_only);
  const auto reply = serve::queue_json(db);
  ASSERT_EQ(reply.status, 200);
  const auto& body = reply.body;
  EXPECT_EQ(body.rfind("{\"counts\": {\"queued\": 1, ", 0), 0u) << body;
  EXPECT_NE(body.find("\"running\": 1"), std::string::npos) << body;
  EXPECT_NE(body.find("\"done\": 4"), std::string::npos) << body;
  EXPECT_NE(body.find("\"failed\": 1"), std::string::npos) << body;
  EXPECT_NE(body.find("\"running\": [{\"job\": 6, \"method\": \"skyformer\""), std::string::npos) << body;
  EXPECT_NE(body.find("\"device\": \"cpu\""), std::string::npos) << body;
  // three attempts, each with its error
  const auto failed = body.substr(body.find("\"failed\": [{"));
  EXPECT_NE(failed.find("\"method\": \"performer\""), std::string::npos) << failed;
  std::size_t errors = 0;
  for (auto at = failed.find("\"error\": \"synthetic failure\""); at != std::string::npos;
       at = failed.find("\"error\": \"synthetic failure\"", at + 1))
    ++errors;
  EXPECT_EQ(errors, 3u) << failed;
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
}

}  // namespace
}  // namespace attnlab::results::testing
