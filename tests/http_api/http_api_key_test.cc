// API keys on the HTTP/JSON API, against a RelserveServer with small models: every route of
// every family (OpenAI, TEI, Cohere/Jina) needs "Authorization: Bearer KEY"; a missing or
// wrong key gets 401 with WWW-Authenticate and the route's own JSON error shape; GET /health
// stays open; refusals are counted.
#include <httplib.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/metrics/metrics_test_util.h"
#include "tests/server/server_test_env.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;
using testing::TestServerConfig;

constexpr char kKey[] = "s3cret-http-key";

struct Route {
  std::string method, path;
  json body;  // POST only
  bool openai_errors;  // {"error": {...}} under /v1/, TEI's {"error", "error_type"} elsewhere
};

// A request per route that succeeds with the key. The default model is the reranker, which
// TEI's /rerank and /predict use.
const std::vector<Route>& Routes() {
  static const std::vector<Route> kRoutes = {
      {"POST", "/v1/embeddings", {{"model", "embedder"}, {"input", "hello"}}, true},
      {"GET", "/v1/models", nullptr, true},
      {"POST", "/v1/rerank", {{"model", "reranker"}, {"query", "q"}, {"documents", {"a", "b"}}}, true},
      {"POST", "/embed", {{"inputs", "hello"}}, false},
      {"POST", "/rerank", {{"query", "q"}, {"texts", {"a", "b"}}}, false},
      {"POST", "/predict", {{"inputs", "hello"}}, false},
      {"POST", "/tokenize", {{"inputs", "hello"}}, false},
      {"GET", "/info", nullptr, false},
  };
  return kRoutes;
}

struct Reply {
  int status = 0;
  json body;
  std::string raw;
  std::string www_authenticate;
};

// `authorization`: the header's value, or nullptr for none.
Reply Call(int port, const Route& route, const char* authorization, const char* header_name = "Authorization") {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  httplib::Headers headers;
  if (authorization != nullptr) headers.emplace(header_name, authorization);
  auto r = route.method == "GET" ? client.Get(route.path.c_str(), headers)
                                 : client.Post(route.path.c_str(), headers, route.body.dump(), "application/json");
  Reply out;
  if (!r) {
    out.raw = "transport error: " + httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.raw = r->body;
  out.www_authenticate = r->get_header_value("WWW-Authenticate");
  if (!r->body.empty()) out.body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  return out;
}

// The error message of a reply, in whichever shape the route answers.
std::string ErrorMessage(const Route& route, const Reply& r) {
  if (route.openai_errors) {
    if (!r.body.contains("error") || !r.body["error"].is_object()) return "not OpenAI's shape: " + r.raw;
    const json& e = r.body["error"];
    EXPECT_EQ(e["type"], "authentication_error") << r.raw;
    EXPECT_EQ(e["code"], "unauthenticated") << r.raw;
    EXPECT_TRUE(e.contains("param")) << r.raw;
    return e["message"].get<std::string>();
  }
  if (!r.body.contains("error") || !r.body["error"].is_string()) return "not TEI's shape: " + r.raw;
  EXPECT_EQ(r.body["error_type"], "Unauthorized") << r.raw;
  return r.body["error"].get<std::string>();
}

std::unique_ptr<RelserveServer> StartWithKey() {
  ServerConfig config = TestServerConfig();
  config.models = {config.models[1], config.models[0], config.models[2], config.models[3]};  // reranker first
  config.api_key = kKey;
  auto server = RelserveServer::Start(config);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

TEST(HttpApiKeyTest, EveryRouteNeedsTheKeyAndAnswersInItsOwnErrorShape) {
  auto server = StartWithKey();
  ASSERT_NE(server, nullptr);
  const int port = server->http_port();
  const std::string bearer = std::string("Bearer ") + kKey;
  int refused = 0;
  for (const Route& route : Routes()) {
    const std::string name = route.method + " " + route.path;
    Reply r = Call(port, route, nullptr);
    EXPECT_EQ(r.status, 401) << name << ": " << r.raw;
    EXPECT_EQ(r.www_authenticate, "Bearer") << name;
    EXPECT_THAT(ErrorMessage(route, r), HasSubstr("missing API key")) << name;
    ++refused;

    r = Call(port, route, "Bearer not-the-key");
    EXPECT_EQ(r.status, 401) << name << ": " << r.raw;
    EXPECT_EQ(r.www_authenticate, "Bearer") << name;
    EXPECT_EQ(ErrorMessage(route, r), "invalid API key") << name;
    EXPECT_THAT(r.raw, Not(HasSubstr("not-the-key"))) << name;
    ++refused;

    r = Call(port, route, kKey);  // the key without its scheme
    EXPECT_EQ(r.status, 401) << name << ": " << r.raw;
    EXPECT_THAT(ErrorMessage(route, r), HasSubstr("not a Bearer token")) << name;
    EXPECT_THAT(r.raw, Not(HasSubstr(kKey))) << name;
    ++refused;

    r = Call(port, route, bearer.c_str());
    EXPECT_EQ(r.status, 200) << name << ": " << r.raw;
    EXPECT_EQ(r.www_authenticate, "") << name;
    r = Call(port, route, ("bearer " + std::string(kKey)).c_str(), "authorization");  // any case
    EXPECT_EQ(r.status, 200) << name << ": " << r.raw;
  }

  // TEI's health check needs no key.
  const Route health = {"GET", "/health", nullptr, false};
  EXPECT_EQ(Call(port, health, nullptr).status, 200);
  EXPECT_EQ(Call(port, health, "Bearer not-the-key").status, 200);

  // Each refusal counted once, under transport="http" and in relserve_requests_total.
  const metrics_test::HttpResponse scrape = metrics_test::HttpGet(server->metrics_port(), "/metrics");
  ASSERT_EQ(scrape.status, 200);
  const metrics_test::Exposition e = metrics_test::ParseExposition(scrape.body);
  EXPECT_EQ(e.Value("relserve_unauthenticated_requests_total", {{"transport", "http"}}), refused);
  EXPECT_FALSE(e.Value("relserve_unauthenticated_requests_total", {{"transport", "grpc"}}).has_value());
  for (const Route& route : Routes()) {
    const std::string name = route.method + " " + route.path;
    EXPECT_EQ(e.Value("relserve_requests_total", {{"model", "unknown"}, {"rpc", name}, {"code", "UNAUTHENTICATED"}}),
              3)
        << name;
  }
}

// Without a key configured, the same requests pass without any Authorization header.
TEST(HttpApiKeyTest, NoKeyConfiguredMeansOpen) {
  ServerConfig config = TestServerConfig();
  config.models = {config.models[1], config.models[0], config.models[2], config.models[3]};
  auto server = RelserveServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  for (const Route& route : Routes()) {
    const Reply r = Call((*server)->http_port(), route, nullptr);
    EXPECT_EQ(r.status, 200) << route.path << ": " << r.raw;
  }
}

}  // namespace
}  // namespace relserve
