// HTTP deadlines: the HTTP server over the real serving layer and batchers, with a backend
// that can be held inside a batch. A call that outlives its deadline is answered 504 at the
// deadline (not when its batch ends), its queued sequences are never computed, and the server
// goes on serving other calls meanwhile.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/batching/model_batcher.h"
#include "server/http_api/http_server.h"
#include "server/http_api/http_status.h"
#include "server/http_api/request_deadline.h"
#include "server/serving/metrics_batch_observer.h"
#include "server/serving/encoder_serving.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

constexpr absl::Duration kServerTimeout = absl::Milliseconds(300);

// Pooled output {first id, length}; Run waits while the gate is closed.
class GatedBackend : public InferenceBackend {
 public:
  GatedBackend() {
    info_.architecture = "GatedModel";
    info_.model_type = "fake";
    info_.hidden_size = 2;
    info_.num_layers = 1;
    info_.vocab_size = 1000;
    info_.max_length = 16;
    info_.embedding_dim = 2;
    info_.pooling.modes = {PoolingMode::kMean};
    info_.dtype = DType::kFloat32;
    info_.device = "cpu";
  }
  const ModelInfo& info() const override { return info_; }
  absl::Status Validate(const SequenceInput&) const override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<SequenceOutput>> Run(const std::vector<SequenceInput>& batch, uint32_t) override {
    absl::MutexLock lock(&mu_);
    runs_ += static_cast<int>(batch.size());
    mu_.Await(absl::Condition(+[](bool* closed) { return !*closed; }, &closed_));
    std::vector<SequenceOutput> out;
    for (const SequenceInput& s : batch) {
      SequenceOutput o;
      o.num_tokens = static_cast<int32_t>(s.input_ids.size());
      o.pooled = {static_cast<float>(s.input_ids[0]), static_cast<float>(s.input_ids.size())};
      out.push_back(std::move(o));
    }
    return out;
  }
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    closed_ = false;
  }
  int runs() {
    absl::MutexLock lock(&mu_);
    return runs_;
  }

 private:
  ModelInfo info_;
  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int runs_ ABSL_GUARDED_BY(mu_) = 0;  // sequences that reached the backend
};

struct Reply {
  int status = 0;
  json body;
  std::string raw;
  absl::Duration took;
};

// A server on loopback (any free port) with `threads` handler threads and calls given `timeout`.
HttpServerConfig LoopbackConfig(int threads, absl::Duration timeout) {
  HttpServerConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.threads = threads;
  config.request_timeout = timeout;
  return config;
}

class HttpDeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // "slow" (the default model, one worker, one sequence per batch) and "fast".
    for (const char* name : {"slow", "fast"}) {
      auto backend = std::make_unique<GatedBackend>();
      auto observer = std::make_unique<MetricsBatchObserver>(&metrics_, name);
      BatcherConfig config;
      config.policy.max_queue_delay = absl::ZeroDuration();
      config.policy.max_batch_size = 1;
      auto batcher = ModelBatcher::Create(backend.get(), config, observer.get());
      ASSERT_TRUE(batcher.ok()) << batcher.status();
      ServedModel m;
      m.name = name;
      m.backend = backend.get();
      m.batcher = batcher->get();
      m.max_length = 16;
      registry_.Add(m);
      backends_.push_back(std::move(backend));
      observers_.push_back(std::move(observer));
      batchers_.push_back(std::move(*batcher));
    }
    serving_ = std::make_unique<EncoderServing>(&registry_, &metrics_, ServingLimits{});
    RouteContext routes;
    routes.serving = serving_.get();
    HttpServerConfig config = LoopbackConfig(4, kServerTimeout);
    auto server = HttpServer::Start(config, routes, &registry_, &metrics_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void TearDown() override {
    slow().Open();
    server_->Stop();
    for (auto& b : batchers_) b->Stop(absl::Seconds(5));
  }

  GatedBackend& slow() { return *backends_[0]; }
  GatedBackend& fast() { return *backends_[1]; }

  Reply Post(const std::string& path, const json& body, const httplib::Headers& headers = {}) {
    httplib::Client client("127.0.0.1", server_->port());
    // Far past every deadline here: a call that is not answered at its deadline fails the
    // test instead of hanging it.
    client.set_read_timeout(10, 0);
    const absl::Time start = absl::Now();
    auto r = client.Post(path.c_str(), headers, body.dump(), "application/json");
    Reply out;
    out.took = absl::Now() - start;
    if (!r) {
      out.raw = "transport error: " + httplib::to_string(r.error());
      return out;
    }
    out.status = r->status;
    out.raw = r->body;
    out.body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    return out;
  }

  // Waits (up to 20 s) until `condition` holds.
  static bool Eventually(const std::function<bool()>& condition) {
    for (int i = 0; i < 2000; ++i) {
      if (condition()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return condition();
  }

  ModelRegistry registry_;
  ServerMetrics metrics_;
  std::vector<std::unique_ptr<GatedBackend>> backends_;
  std::vector<std::unique_ptr<MetricsBatchObserver>> observers_;
  std::vector<std::unique_ptr<ModelBatcher>> batchers_;
  std::unique_ptr<EncoderServing> serving_;
  std::unique_ptr<HttpServer> server_;
};

// A call waiting for its batch holds no thread: with more calls stuck on "slow" than the
// server has threads (4), a call to "fast" is still answered at once, long before theirs end
// at their deadline.
TEST_F(HttpDeadlineTest, CallsWaitingForABatchHoldNoThread) {
  // This test's server gives calls 3 s, so that the check below never races their deadline.
  server_->Stop();
  RouteContext routes;
  routes.serving = serving_.get();
  HttpServerConfig config = LoopbackConfig(4, absl::Seconds(3));
  auto server = HttpServer::Start(config, routes, &registry_, &metrics_);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = std::move(*server);
  slow().Close();
  std::vector<Reply> stuck(8);
  std::vector<std::thread> callers;
  for (size_t i = 0; i < stuck.size(); ++i) {
    callers.emplace_back([&, i] { stuck[i] = Post("/v1/embeddings", {{"model", "slow"}, {"input", {{5}}}}); });
  }
  ASSERT_TRUE(Eventually([&] { return server_->in_flight() == 8; }));
  const Reply other = Post("/v1/embeddings", {{"model", "fast"}, {"input", {{9}, {10}}}});
  EXPECT_EQ(other.status, 200) << other.raw;
  // Answered while all 8 still wait: a thread held by each would have left none for it.
  EXPECT_EQ(server_->in_flight(), 8);
  for (std::thread& t : callers) t.join();
  for (const Reply& r : stuck) EXPECT_EQ(r.status, 504) << r.raw;
}

TEST_F(HttpDeadlineTest, ASlowCallIs504AtItsDeadlineItsQueuedWorkDroppedAndOthersAreServed) {
  slow().Close();
  // Three sequences, one per batch: the first holds the only worker, the others queue.
  Reply openai;
  std::thread caller([&] { openai = Post("/v1/embeddings", {{"model", "slow"}, {"input", {{5}, {6}, {7}}}}); });
  ASSERT_TRUE(Eventually([&] { return slow().runs() == 1; }));

  // While that batch is stuck, another model is served.
  const Reply other = Post("/v1/embeddings", {{"model", "fast"}, {"input", {{9}, {10}}}});
  EXPECT_EQ(other.status, 200) << other.raw;
  EXPECT_EQ(other.body["data"].size(), 2u);

  caller.join();
  EXPECT_EQ(openai.status, 504) << openai.raw;
  EXPECT_GE(openai.took, kServerTimeout);
  EXPECT_EQ(openai.body["error"]["type"], "server_error");
  EXPECT_EQ(openai.body["error"]["code"], "deadline_exceeded");
  EXPECT_THAT(openai.body["error"]["message"].get<std::string>(),
              HasSubstr("did not finish within its timeout of 300ms (--http-request-timeout"));

  // TEI's shape (/embed serves the default model, "slow"): its only sequence waits behind
  // the stuck batch and expires in the queue.
  const Reply tei = Post("/embed", {{"inputs", {{8}}}});
  EXPECT_EQ(tei.status, 504) << tei.raw;
  EXPECT_EQ(tei.body["error_type"], "Backend");
  EXPECT_THAT(tei.body["error"].get<std::string>(), HasSubstr("timeout of 300ms"));

  // Once the batch ends, the expired sequences are dropped, never computed.
  slow().Open();
  ASSERT_TRUE(Eventually([&] {
    return metrics_.Render().find("relserve_rejections_total{model=\"slow\",reason=\"deadline_exceeded\"} 3") !=
           std::string::npos;
  })) << metrics_.Render();
  EXPECT_EQ(slow().runs(), 1);
  EXPECT_EQ(batchers_[0]->queue_depth(), 0u);
  const std::string m = metrics_.Render();
  EXPECT_THAT(m, HasSubstr("relserve_requests_total{code=\"DEADLINE_EXCEEDED\",model=\"slow\",rpc=\"POST "
                           "/v1/embeddings\"} 1"));
  EXPECT_THAT(m, HasSubstr("relserve_requests_total{code=\"DEADLINE_EXCEEDED\",model=\"slow\",rpc=\"POST /embed\"} 1"));

  // And the model serves again.
  const Reply after = Post("/v1/embeddings", {{"model", "slow"}, {"input", {{5}}}});
  EXPECT_EQ(after.status, 200) << after.raw;
  EXPECT_EQ(slow().runs(), 2);
  EXPECT_EQ(server_->in_flight(), 0);
}

TEST_F(HttpDeadlineTest, TheHeaderMayAskForLessTimeNotMore) {
  slow().Close();
  const Reply shorter = Post("/embed", {{"inputs", {{5}}}}, {{kRequestTimeoutHeader, "100ms"}});
  EXPECT_EQ(shorter.status, 504) << shorter.raw;
  EXPECT_THAT(shorter.body["error"].get<std::string>(), HasSubstr("timeout of 100ms"));
  EXPECT_LT(shorter.took, kServerTimeout + absl::Seconds(5));  // not the batch's end: it is still stuck
  const Reply longer = Post("/embed", {{"inputs", {{5}}}}, {{kRequestTimeoutHeader, "7"}});  // seconds
  EXPECT_EQ(longer.status, 504) << longer.raw;
  EXPECT_THAT(longer.body["error"].get<std::string>(), HasSubstr("timeout of 300ms"));  // the server's cap

  for (const char* bad : {"soon", "0", "-1s", "1e999"}) {
    const Reply r = Post("/v1/embeddings", {{"input", {{5}}}}, {{kRequestTimeoutHeader, bad}});
    EXPECT_EQ(r.status, 400) << bad << ": " << r.raw;
    EXPECT_THAT(r.body["error"]["message"].get<std::string>(), HasSubstr(kRequestTimeoutHeader)) << bad;
  }
  slow().Open();
}

// Health, metrics and the other GET routes are answered on the event loop: with every handler
// thread held by a stuck call, /health still answers at once, and the stuck calls are still
// in flight when it does.
TEST_F(HttpDeadlineTest, HealthAnswersWhileEveryHandlerThreadIsBusy) {
  RouteContext routes;
  routes.serving = serving_.get();
  routes.healthy = [] { return true; };
  routes.metrics_text = [] { return std::string("# metrics\n"); };
  HttpServerConfig config = LoopbackConfig(2, absl::Seconds(60));
  auto busy = HttpServer::Start(config, routes, &registry_, &metrics_);
  ASSERT_TRUE(busy.ok()) << busy.status();
  slow().Close();
  std::atomic<int> answered{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < 2; ++i) {
    callers.emplace_back([&, port = (*busy)->port()] {
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(30, 0);
      client.Post("/embed", json{{"inputs", {{5}}}}.dump(), "application/json");
      ++answered;
    });
  }
  // Both handler threads are held: one call's batch is stuck, the other waits behind it.
  ASSERT_TRUE(Eventually([&] { return (*busy)->in_flight() == 2; }));
  httplib::Client probe("127.0.0.1", (*busy)->port());
  probe.set_read_timeout(5, 0);
  for (const char* path : {"/health", "/metrics", "/info", "/v1/models"}) {
    auto r = probe.Get(path);
    ASSERT_TRUE(r) << path << ": " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200) << path;
  }
  EXPECT_EQ(answered.load(), 0);
  EXPECT_EQ((*busy)->in_flight(), 2);
  slow().Open();
  for (auto& t : callers) t.join();
  EXPECT_EQ(answered.load(), 2);
  (*busy)->Stop();
}

// --max-response-bytes counts what HTTP sends: JSON floats are text, several times the bytes
// the serving layer's estimate counts.
TEST_F(HttpDeadlineTest, AnswersLargerThanTheLimitAreRefusedNamingIt) {
  RouteContext routes;
  routes.serving = serving_.get();
  HttpServerConfig config = LoopbackConfig(2, absl::Seconds(60));
  config.max_response_bytes = 300;
  auto small = HttpServer::Start(config, routes, &registry_, &metrics_);
  ASSERT_TRUE(small.ok()) << small.status();
  httplib::Client client("127.0.0.1", (*small)->port());
  json inputs = json::array();
  for (int i = 0; i < 3; ++i) inputs.push_back({i + 1});
  auto fits = client.Post("/embed", json{{"model", "fast"}, {"inputs", inputs}}.dump(), "application/json");
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 200) << fits->body;
  for (int i = 3; i < 60; ++i) inputs.push_back({i + 1});
  auto over = client.Post("/embed", json{{"model", "fast"}, {"inputs", inputs}}.dump(), "application/json");
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 422) << over->body;
  EXPECT_THAT(over->body, HasSubstr("more than the largest response of 300 bytes (--max-response-bytes)"));
  // A compressed body is refused, not parsed as garbage.
  httplib::Headers gzip = {{"Content-Encoding", "gzip"}};
  auto compressed = client.Post("/embed", gzip, json{{"inputs", {{5}}}}.dump(), "application/json");
  ASSERT_TRUE(compressed);
  EXPECT_EQ(compressed->status, 415) << compressed->body;
  EXPECT_THAT(compressed->body, HasSubstr("Content-Encoding gzip is not supported"));
  (*small)->Stop();
}

TEST(RequestDeadlineTest, ParsesSecondsAndDurations) {
  EXPECT_EQ(*ParseTimeout("30", "t"), absl::Seconds(30));
  EXPECT_EQ(*ParseTimeout("2.5", "t"), absl::Milliseconds(2500));
  EXPECT_EQ(*ParseTimeout("500ms", "t"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseTimeout("1m", "t"), absl::Seconds(60));
  EXPECT_EQ(*ParseTimeout("0", "t"), absl::ZeroDuration());
  for (const char* bad : {"", "ms", "-3", "-3s", "inf", "nan", "3 parsecs", "1e999"}) {
    auto d = ParseTimeout(bad, "--http-request-timeout");
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(d.status().message()), HasSubstr("--http-request-timeout")) << bad;
  }
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(*RequestDeadline(t0, absl::Seconds(60), std::nullopt), t0 + absl::Seconds(60));
  EXPECT_EQ(*RequestDeadline(t0, absl::ZeroDuration(), std::nullopt), absl::InfiniteFuture());
  EXPECT_EQ(*RequestDeadline(t0, absl::ZeroDuration(), "90"), t0 + absl::Seconds(90));
  EXPECT_EQ(*RequestDeadline(t0, absl::Seconds(60), "250ms"), t0 + absl::Milliseconds(250));
  EXPECT_EQ(*RequestDeadline(t0, absl::Seconds(60), "120"), t0 + absl::Seconds(60));
  EXPECT_EQ(HttpStatusOf(RequestDeadline(t0, absl::Seconds(60), "0").status()), 400);
}

}  // namespace
}  // namespace relserve
