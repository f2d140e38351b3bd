// The HTTP server alone, with no models: its drain, its own errors (no such route, a body over
// the limit, a body that is not JSON) in each API's shape, and its metrics.
#include "server/http_api/http_server.h"

#include <httplib.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/serving/encoder_serving.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RouteContext routes;
    routes.serving = &serving_;
    routes.healthy = [this] { return healthy_; };
    HttpServerConfig config;
    config.host = "127.0.0.1";
    config.port = 0;
    config.threads = 4;
    config.max_body_bytes = 1024;
    auto server = HttpServer::Start(config, routes, &registry_, &metrics_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
  }

  ModelRegistry registry_;
  ServerMetrics metrics_;
  EncoderServing serving_{&registry_, &metrics_, ServingLimits{}};
  bool healthy_ = true;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, DrainingRefusesNewCallsWith503AndCountsThem) {
  auto before = client_->Get("/v1/models");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 200);
  EXPECT_EQ(server_->in_flight(), 0);
  server_->StartDraining();
  auto openai = client_->Get("/v1/models");
  ASSERT_TRUE(openai);
  EXPECT_EQ(openai->status, 503);
  EXPECT_EQ(json::parse(openai->body)["error"]["type"], "service_unavailable");
  EXPECT_THAT(openai->body, HasSubstr("shutting down"));
  auto tei = client_->Post("/embed", R"({"inputs": "x"})", "application/json");
  ASSERT_TRUE(tei);
  EXPECT_EQ(tei->status, 503);
  EXPECT_EQ(json::parse(tei->body)["error_type"], "Unhealthy");
  EXPECT_TRUE(server_->WaitForIdle(absl::Now() + absl::Seconds(5)));
  EXPECT_THAT(metrics_.Render(),
              HasSubstr("relserve_requests_total{code=\"UNAVAILABLE\",model=\"unknown\",rpc=\"GET /v1/models\"} 1"));
  EXPECT_THAT(metrics_.Render(),
              HasSubstr("relserve_requests_total{code=\"OK\",model=\"unknown\",rpc=\"GET /v1/models\"} 1"));
}

TEST_F(HttpServerTest, HealthFollowsTheServingState) {
  auto ok = client_->Get("/health");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  healthy_ = false;
  auto down = client_->Get("/health");
  ASSERT_TRUE(down);
  EXPECT_EQ(down->status, 503);
  EXPECT_EQ(json::parse(down->body), json::parse(R"({"error": "unhealthy", "error_type": "Unhealthy"})"));
}

TEST_F(HttpServerTest, ItsOwnErrorsAreJsonInThePathsShape) {
  auto big = client_->Post("/v1/embeddings", std::string(2048, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_THAT(json::parse(big->body)["error"]["message"].get<std::string>(),
              HasSubstr("larger than the limit of 1024 bytes (--max-message-bytes 1024)"));
  auto route = client_->Get("/embedz");
  ASSERT_TRUE(route);
  EXPECT_EQ(route->status, 404);
  EXPECT_EQ(json::parse(route->body)["error"], "no route GET /embedz");
  // A route's path answers in its route's shape, whatever its prefix: /embeddings is OpenAI's.
  auto method = client_->Get("/embeddings");
  ASSERT_TRUE(method);
  EXPECT_EQ(method->status, 405);
  EXPECT_EQ(json::parse(method->body)["error"]["message"], "/embeddings takes POST, not GET");
  auto cohere = client_->Get("/v2/embed");
  ASSERT_TRUE(cohere);
  EXPECT_EQ(cohere->status, 405);
  EXPECT_EQ(json::parse(cohere->body), json::parse(R"({"message": "/v2/embed takes POST, not GET"})"));
  auto not_json = client_->Post("/embed", "inputs=x", "application/x-www-form-urlencoded");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
  EXPECT_THAT(json::parse(not_json->body)["error"].get<std::string>(), HasSubstr("not valid JSON"));
  // No models are served: a route that needs one says which model it looked for.
  auto no_model = client_->Post("/embed", R"({"inputs": "x"})", "application/json");
  ASSERT_TRUE(no_model);
  EXPECT_EQ(no_model->status, 404);
}

TEST_F(HttpServerTest, APortInUseIsUnavailableNamingTheAddress) {
  HttpServerConfig config;
  config.host = "127.0.0.1";
  config.port = server_->port();
  RouteContext routes;
  routes.serving = &serving_;
  auto second = HttpServer::Start(config, routes, &registry_, &metrics_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("HTTP: cannot listen on 127.0.0.1:" + std::to_string(server_->port())));
}

TEST_F(HttpServerTest, StopIsIdempotentAndClosesThePort) {
  const int port = server_->port();
  server_->Stop();
  server_->Stop();
  httplib::Client after("127.0.0.1", port);
  after.set_connection_timeout(1, 0);
  EXPECT_FALSE(after.Get("/health"));
}

}  // namespace
}  // namespace relserve
