// API keys over gRPC and on the metrics endpoint, against a RelserveServer with small models:
// every Encoder method (the EmbedStream stream included) needs "authorization: Bearer KEY";
// health checking and /healthz stay open; /metrics only with --metrics-api-key-required;
// refusals are counted; a key file holds several keys (rotation) and bad files stop the start.
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <grpcpp/generic/generic_stub.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/metrics/metrics_test_util.h"
#include "tests/server/server_test_env.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Connect;
using testing::TestServerConfig;

constexpr char kOldKey[] = "old-key-0123456789";
constexpr char kNewKey[] = "new-key-abcdefghij";
constexpr char kWrongKey[] = "wrong-key-zyxwvu";

// A scratch folder for key files, removed at the end of the test.
class KeyFiles {
 public:
  KeyFiles() {
    dir_ = std::filesystem::temp_directory_path() / ("relserve-api-key-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  ~KeyFiles() { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& contents) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << contents;
    return path;
  }

 private:
  std::filesystem::path dir_;
};

std::unique_ptr<RelserveServer> StartWithKeyFile(const std::string& path, bool metrics_key_required) {
  ServerConfig config = TestServerConfig();
  config.api_key_file = path;
  config.metrics_api_key_required = metrics_key_required;
  auto server = RelserveServer::Start(config);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

// How a call authenticates: no metadata, a key the server does not hold, or a held key.
enum class Key { kNone, kWrong, kOld, kNew };
void Authorize(grpc::ClientContext* ctx, Key key) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  switch (key) {
    case Key::kNone: break;
    case Key::kWrong: ctx->AddMetadata("authorization", std::string("Bearer ") + kWrongKey); break;
    case Key::kOld: ctx->AddMetadata("authorization", std::string("Bearer ") + kOldKey); break;
    case Key::kNew: ctx->AddMetadata("authorization", std::string("Bearer ") + kNewKey); break;
  }
}

// Each unary method of the Encoder service with a request that succeeds when authorized.
std::map<std::string, grpc::Status> CallEveryUnaryMethod(v1::Encoder::Stub& stub, Key key) {
  std::map<std::string, grpc::Status> out;
  {
    v1::EmbedRequest req;
    req.add_inputs()->set_text("hello");
    v1::EmbedResponse resp;
    grpc::ClientContext ctx;
    Authorize(&ctx, key);
    out["Embed"] = stub.Embed(&ctx, req, &resp);
  }
  {
    v1::EmbedTokensRequest req;
    req.add_inputs()->set_text("hello");
    v1::EmbedTokensResponse resp;
    grpc::ClientContext ctx;
    Authorize(&ctx, key);
    out["EmbedTokens"] = stub.EmbedTokens(&ctx, req, &resp);
  }
  {
    v1::RerankRequest req;
    req.set_model("reranker");
    req.set_query("what is relserve");
    req.add_documents("a model server");
    v1::RerankResponse resp;
    grpc::ClientContext ctx;
    Authorize(&ctx, key);
    out["Rerank"] = stub.Rerank(&ctx, req, &resp);
  }
  {
    v1::ClassifyRequest req;
    req.set_model("classifier");
    req.add_inputs()->set_text("great product");
    v1::ClassifyResponse resp;
    grpc::ClientContext ctx;
    Authorize(&ctx, key);
    out["Classify"] = stub.Classify(&ctx, req, &resp);
  }
  {
    v1::TokenizeRequest req;
    req.add_inputs()->set_text("hello");
    v1::TokenizeResponse resp;
    grpc::ClientContext ctx;
    Authorize(&ctx, key);
    out["Tokenize"] = stub.Tokenize(&ctx, req, &resp);
  }
  {
    v1::ListModelsRequest req;
    v1::ListModelsResponse resp;
    grpc::ClientContext ctx;
    Authorize(&ctx, key);
    out["ListModels"] = stub.ListModels(&ctx, req, &resp);
  }
  return out;
}

// Two messages on one EmbedStream: the status it ends with and the responses read.
grpc::Status StreamTwoMessages(v1::Encoder::Stub& stub, Key key, int* responses) {
  grpc::ClientContext ctx;
  Authorize(&ctx, key);
  auto stream = stub.EmbedStream(&ctx);
  *responses = 0;
  for (const char* text : {"first", "second"}) {
    v1::EmbedRequest req;
    req.add_inputs()->set_text(text);
    if (!stream->Write(req)) break;
    v1::EmbedResponse resp;
    if (!stream->Read(&resp)) break;
    ++*responses;
  }
  stream->WritesDone();
  return stream->Finish();
}

// grpc.health.v1.Health/Check for the whole server, without any key: the serving status byte.
std::pair<grpc::StatusCode, std::string> HealthCheck(int port) {
  std::string body;  // an empty HealthCheckRequest: the server as a whole
  const grpc::Status status = testing::RawUnary(port, "/grpc.health.v1.Health/Check", "", &body);
  return {status.error_code(), status.ok() ? body : std::string()};
}

metrics_test::Exposition Metrics(int port, const std::string& key = "") {
  const std::string head = key.empty() ? "" : "Authorization: Bearer " + key + "\r\n";
  const metrics_test::HttpResponse r =
      metrics_test::RawRequest(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n" + head + "\r\n");
  EXPECT_EQ(r.status, 200) << r.raw;
  return metrics_test::ParseExposition(r.body);
}

double Counter(const metrics_test::Exposition& e, const std::string& name,
               const std::map<std::string, std::string>& labels) {
  return e.Value(name, labels).value_or(0);
}

TEST(GrpcApiKeyTest, EveryMethodNeedsAKeyAndSaysWhetherItWasMissingOrWrong) {
  KeyFiles files;
  auto server = StartWithKeyFile(files.Write("keys", std::string(kOldKey) + "\n" + kNewKey + "\n"), false);
  ASSERT_NE(server, nullptr);
  auto stub = Connect(server->grpc_port());

  const auto missing = CallEveryUnaryMethod(*stub, Key::kNone);
  const auto wrong = CallEveryUnaryMethod(*stub, Key::kWrong);
  ASSERT_EQ(missing.size(), 6u);
  for (const auto& [method, status] : missing) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_THAT(status.error_message(), HasSubstr("missing API key")) << method;
  }
  for (const auto& [method, status] : wrong) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_EQ(status.error_message(), "invalid API key") << method;  // the key is never echoed
  }
  for (const Key key : {Key::kOld, Key::kNew}) {  // both keys of the file
    for (const auto& [method, status] : CallEveryUnaryMethod(*stub, key)) {
      EXPECT_TRUE(status.ok()) << method << ": " << status.error_message();
    }
  }

  int responses = 0;
  grpc::Status s = StreamTwoMessages(*stub, Key::kNone, &responses);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("missing API key"));
  EXPECT_EQ(responses, 0);
  s = StreamTwoMessages(*stub, Key::kWrong, &responses);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(), "invalid API key");
  EXPECT_EQ(responses, 0);
  s = StreamTwoMessages(*stub, Key::kNew, &responses);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(responses, 2);

  // Health checking needs no key.
  EXPECT_EQ(HealthCheck(server->grpc_port()), std::make_pair(grpc::StatusCode::OK, std::string("\x08\x01", 2)));

  // 6 + 6 unary refusals and 2 streams, each counted once, under the model "unknown".
  const metrics_test::Exposition e = Metrics(server->metrics_port());
  EXPECT_EQ(Counter(e, "relserve_unauthenticated_requests_total", {{"transport", "grpc"}}), 14);
  EXPECT_FALSE(e.Value("relserve_unauthenticated_requests_total", {{"transport", "http"}}).has_value());
  for (const char* rpc : {"Embed", "EmbedTokens", "Rerank", "Classify", "Tokenize", "ListModels", "EmbedStream"}) {
    EXPECT_EQ(Counter(e, "relserve_requests_total", {{"model", "unknown"}, {"rpc", rpc}, {"code", "UNAUTHENTICATED"}}),
              2)
        << rpc;
  }
  EXPECT_EQ(Counter(e, "relserve_requests_total", {{"model", "embedder"}, {"rpc", "Embed"}, {"code", "OK"}}), 2);
}

// Without keys nothing changes: calls without metadata pass.
TEST(GrpcApiKeyTest, NoKeyConfiguredMeansOpen) {
  auto server = RelserveServer::Start(TestServerConfig());
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = Connect((*server)->grpc_port());
  for (const auto& [method, status] : CallEveryUnaryMethod(*stub, Key::kNone)) {
    EXPECT_TRUE(status.ok()) << method << ": " << status.error_message();
  }
  int responses = 0;
  EXPECT_TRUE(StreamTwoMessages(*stub, Key::kWrong, &responses).ok());  // a key nobody asked for is ignored
}

// Rotation: a server given the old and the new key takes both; once the old key leaves the
// file (and the server restarts, as a rolling update does), only the new one passes.
TEST(GrpcApiKeyTest, KeyFileRotation) {
  KeyFiles files;
  auto stub_status = [](RelserveServer& server, Key key) {
    v1::ListModelsResponse resp;
    grpc::ClientContext ctx;
    Authorize(&ctx, key);
    return Connect(server.grpc_port())->ListModels(&ctx, v1::ListModelsRequest(), &resp).error_code();
  };
  auto before = StartWithKeyFile(files.Write("before", std::string(kOldKey) + "\n"), false);
  ASSERT_NE(before, nullptr);
  EXPECT_EQ(stub_status(*before, Key::kOld), grpc::StatusCode::OK);
  EXPECT_EQ(stub_status(*before, Key::kNew), grpc::StatusCode::UNAUTHENTICATED);
  before.reset();
  auto during = StartWithKeyFile(files.Write("during", std::string("\n  ") + kOldKey + "  \r\n\n" + kNewKey), false);
  ASSERT_NE(during, nullptr);
  EXPECT_EQ(stub_status(*during, Key::kOld), grpc::StatusCode::OK);
  EXPECT_EQ(stub_status(*during, Key::kNew), grpc::StatusCode::OK);
  during.reset();
  auto after = StartWithKeyFile(files.Write("after", std::string(kNewKey) + "\n"), false);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(stub_status(*after, Key::kOld), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stub_status(*after, Key::kNew), grpc::StatusCode::OK);
}

TEST(GrpcApiKeyTest, BadKeyFilesStopTheStartNamingTheFlag) {
  KeyFiles files;
  struct Case {
    std::string path;
    std::string message;
  };
  const std::vector<Case> cases = {
      {files.Write("empty", ""), "the file holds no API key"},
      {files.Write("blank", "\n \n\t\n"), "the file holds no API key"},
      {files.Write("spaces", "a-key\nkey with spaces\n"), "line 2"},
      {"/nonexistent/keys", "no such file"},
  };
  for (const Case& c : cases) {
    ServerConfig config = TestServerConfig();
    config.api_key_file = c.path;
    auto server = RelserveServer::Start(config);
    ASSERT_FALSE(server.ok()) << c.path;
    EXPECT_THAT(std::string(server.status().message()), HasSubstr("--api-key-file"));
    EXPECT_THAT(std::string(server.status().message()), HasSubstr(c.message));
    EXPECT_THAT(std::string(server.status().message()), Not(HasSubstr("with spaces")));
  }
}

// /metrics and /healthz are open with keys set, unless --metrics-api-key-required; then
// /metrics needs a key (refusals counted under transport="metrics") and /healthz stays open.
TEST(MetricsApiKeyTest, MetricsOpenUnlessRequired) {
  KeyFiles files;
  const std::string keys = files.Write("keys", std::string(kOldKey) + "\n" + kNewKey + "\n");
  {
    auto open = StartWithKeyFile(keys, false);
    ASSERT_NE(open, nullptr);
    EXPECT_EQ(metrics_test::HttpGet(open->metrics_port(), "/metrics").status, 200);
    EXPECT_EQ(metrics_test::HttpGet(open->metrics_port(), "/healthz").status, 200);
  }
  auto guarded = StartWithKeyFile(keys, true);
  ASSERT_NE(guarded, nullptr);
  const int port = guarded->metrics_port();
  metrics_test::HttpResponse r = metrics_test::HttpGet(port, "/metrics");
  EXPECT_EQ(r.status, 401) << r.raw;
  EXPECT_EQ(r.Header("www-authenticate"), "Bearer");
  EXPECT_THAT(r.body, HasSubstr("missing API key"));
  r = metrics_test::RawRequest(port, std::string("GET /metrics HTTP/1.1\r\nAuthorization: Bearer ") + kWrongKey +
                                         "\r\n\r\n");
  EXPECT_EQ(r.status, 401) << r.raw;
  EXPECT_THAT(r.body, HasSubstr("invalid API key"));
  EXPECT_THAT(r.body, Not(HasSubstr(kWrongKey)));
  r = metrics_test::HttpGet(port, "/healthz");
  EXPECT_EQ(r.status, 200) << r.raw;
  const metrics_test::Exposition e = Metrics(port, kOldKey);
  EXPECT_EQ(Counter(e, "relserve_unauthenticated_requests_total", {{"transport", "metrics"}}), 2);
  EXPECT_TRUE(Metrics(port, kNewKey).Value("relserve_unauthenticated_requests_total", {{"transport", "metrics"}}));
}

}  // namespace
}  // namespace relserve
