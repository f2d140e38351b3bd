// Requests a hostile or careless client sends: bytes that are not a message, text that is not
// UTF-8, huge names, answers too large to send, more inputs than the queue holds, and a model
// whose outputs are not finite. Each gets a precise status, counted in the metrics with the
// code the client really receives, and nothing else is disturbed.
#include <cmath>
#include <filesystem>

#include <grpcpp/generic/generic_stub.h>
#include <regex>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/safetensors/safetensors_file.h"
#include "server/safetensors/safetensors_writer.h"
#include "tests/server/server_test_env.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using testing::Connect;
using testing::RawUnary;
using testing::TestModels;
using testing::TestServerConfig;

class HostileRequestsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerConfig config = TestServerConfig();
    config.max_response_bytes = 40000;  // small, so that EmbedTokens can exceed it
    auto server = RelserveServer::Start(config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static int port() { return server_->grpc_port(); }
  // The value of a series in /metrics, 0 when absent.
  static double Metric(const std::string& series) {
    int code = 0;
    const std::string body = testing::HttpGet(server_->metrics_port(), "/metrics", &code);
    const size_t at = body.find(series + " ");
    return at == std::string::npos ? 0 : std::stod(body.substr(at + series.size() + 1));
  }
  static RelserveServer* server_;
};
RelserveServer* HostileRequestsTest::server_ = nullptr;

// A serialized message with `placeholder` (which must occur once) replaced by `bytes` of the
// same length: how a client that bypasses its protobuf library puts bad UTF-8 on the wire.
std::string WithBytes(const google::protobuf::Message& m, const std::string& placeholder, const std::string& bytes) {
  std::string wire = m.SerializeAsString();
  const size_t at = wire.find(placeholder);
  EXPECT_NE(at, std::string::npos);
  EXPECT_EQ(placeholder.size(), bytes.size());
  return wire.replace(at, placeholder.size(), bytes);
}

TEST_F(HostileRequestsTest, InvalidUtf8IsInvalidArgumentNamingTheField) {
  const double before = Metric(R"(relserve_requests_total{code="INVALID_ARGUMENT",model="unknown",rpc="Embed"})");
  v1::EmbedRequest embed;
  embed.add_inputs()->set_text("fine");
  embed.add_inputs()->mutable_pair()->set_first("also fine");
  embed.mutable_inputs(1)->mutable_pair()->set_second("bad ZZ here");
  grpc::Status s = RawUnary(port(), "/relserve.v1.Encoder/Embed", WithBytes(embed, "ZZ", "\xC3\x28"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("inputs[1].pair.second is not valid UTF-8 (byte offset 4"));
  EXPECT_EQ(Metric(R"(relserve_requests_total{code="INVALID_ARGUMENT",model="unknown",rpc="Embed"})"), before + 1);

  v1::RerankRequest rerank;
  rerank.set_query("q");
  rerank.add_documents("a");
  rerank.add_documents("\xff-free ZZZ");
  s = RawUnary(port(), "/relserve.v1.Encoder/Rerank", WithBytes(rerank, "ZZZ", "a\xFE" "b"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("documents[1] is not valid UTF-8"));

  v1::EmbedRequest named;
  named.set_model("embZZder");
  named.add_inputs()->set_text("x");
  s = RawUnary(port(), "/relserve.v1.Encoder/Embed", WithBytes(named, "ZZ", "\x80\x80"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("model is not valid UTF-8 (byte offset 3"));

  // The same path with valid bytes succeeds.
  std::string response;
  ASSERT_TRUE(RawUnary(port(), "/relserve.v1.Encoder/Embed", WithBytes(embed, "ZZ", "ok"), &response).ok());
  v1::EmbedResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(response));
  EXPECT_EQ(parsed.embeddings_size(), 2);
}

// protobuf logs an ERROR line for every string it finds not UTF-8 while parsing, which let any
// client write to the server's log at will. Those lines are dropped; relserve's log says at most
// once a minute how many such requests came.
TEST_F(HostileRequestsTest, InvalidUtf8RequestsDoNotFloodTheLog) {
  v1::EmbedRequest embed;
  embed.add_inputs()->set_text("bad ZZ here");
  const std::string wire = WithBytes(embed, "ZZ", "\xC3\x28");
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 10; ++i) {
    const grpc::Status s = RawUnary(port(), "/relserve.v1.Encoder/Embed", wire);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("inputs[0].text is not valid UTF-8"));
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(testing::CountOccurrences(log, "invalid UTF-8 data"), 0) << log;  // protobuf's
  EXPECT_EQ(testing::CountOccurrences(log, "libprotobuf"), 0) << log;
  EXPECT_LE(testing::CountOccurrences(log, "held a string that is not valid UTF-8"), 1) << log;
}

TEST_F(HostileRequestsTest, BytesThatAreNoMessageAreInvalidArgumentAndCounted) {
  const std::string series = R"(relserve_requests_total{code="INVALID_ARGUMENT",model="unknown",rpc="Classify"})";
  const double before = Metric(series);
  // A field header announcing 100 bytes that never come; then a group end tag with no start.
  for (const std::string& garbage : {std::string("\x12\x64" "abc"), std::string("\x0c"), std::string(64, '\xff')}) {
    grpc::Status s = RawUnary(port(), "/relserve.v1.Encoder/Classify", garbage);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("not a valid relserve.v1.ClassifyRequest message"));
  }
  EXPECT_EQ(Metric(series), before + 3);
  // The server is fine afterwards.
  auto stub = Connect(port());
  v1::EmbedRequest req;
  req.add_inputs()->set_text("still serving");
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  EXPECT_TRUE(stub->Embed(&ctx, req, &resp).ok());
}

TEST_F(HostileRequestsTest, AStreamMessageThatIsNoMessageEndsTheStreamWithInvalidArgument) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port()), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  auto call = generic.PrepareCall(&ctx, "/relserve.v1.Encoder/EmbedStream", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::Slice slice(std::string("\x12\x64" "abc"));
  grpc::ByteBuffer bad(&slice, 1);
  call->Write(bad, reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  call->WritesDone(reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("not a valid relserve.v1.EmbedRequest message"));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

TEST_F(HostileRequestsTest, AHugeModelNameIsQuotedShortAndStaysNotFound) {
  auto stub = Connect(port());
  v1::EmbedRequest req;
  req.set_model(std::string(9000, 'm'));
  req.add_inputs()->set_text("x");
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub->Embed(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("...\" (9000 bytes) is not served here"));
  EXPECT_LT(s.error_message().size(), 300u);
}

TEST_F(HostileRequestsTest, EmbedTokensTooLargeToAnswerIsRefusedBeforeComputing) {
  const std::string tokens_series = R"(relserve_tokens_total{model="embedder"})";
  const std::string refused = R"(relserve_requests_total{code="INVALID_ARGUMENT",model="embedder",rpc="EmbedTokens"})";
  const double tokens_before = Metric(tokens_series);
  const double refused_before = Metric(refused);
  auto stub = Connect(port());
  v1::EmbedTokensRequest req;
  // Hidden size 32: 128 bytes of floats per token; 40000 bytes hold about 300 tokens.
  for (int i = 0; i < 8; ++i) {
    v1::TokenIds* t = req.add_inputs()->mutable_tokens();
    for (int k = 0; k < 60; ++k) t->add_ids(5 + k);
  }
  v1::EmbedTokensResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub->EmbedTokens(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("480 tokens x 32 values"));
  EXPECT_THAT(s.error_message(), HasSubstr("more than the largest response of 40000 bytes"));
  EXPECT_THAT(s.error_message(), HasSubstr("split the inputs"));
  EXPECT_EQ(Metric(refused), refused_before + 1);
  EXPECT_EQ(Metric(tokens_series), tokens_before);  // nothing was computed
  // Half of it fits and is answered.
  req.mutable_inputs()->DeleteSubrange(4, 4);
  grpc::ClientContext ctx2;
  EXPECT_TRUE(stub->EmbedTokens(&ctx2, req, &resp).ok());
  EXPECT_EQ(resp.sequences_size(), 4);
}

// A model whose activations overflow: finite weights, so it loads, but every output is NaN. Layer
// 1's feed-forward output weights are all 3e38, so its matmul overflows to infinity, which the
// LayerNorm after it turns into NaN. (A huge bias alone does not do it: LayerNorm takes a common
// offset out exactly, as transformers' does.)
std::string OverflowingModel() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(TestModels::Get().dir("classifier")).parent_path() / "overflowing";
  if (fs::exists(dir)) return dir.string();
  fs::copy(TestModels::Get().dir("classifier"), dir, fs::copy_options::recursive);
  const std::string path = (dir / "model.safetensors").string();
  auto file = SafetensorsFile::Open(TestModels::Get().dir("classifier") + "/model.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  SafetensorsWriter writer;
  writer.SetMetadata({{"format", "pt"}});
  for (const TensorView& t : (*file)->tensors()) {
    std::string bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
    if (t.name == "deberta.encoder.layer.1.output.dense.weight" || t.name == "encoder.layer.1.output.dense.weight") {
      std::vector<float> huge(t.numel(), 3e38f);
      bytes.assign(reinterpret_cast<const char*>(huge.data()), huge.size() * sizeof(float));
    }
    EXPECT_TRUE(writer.Add(t.name, t.dtype, t.shape, bytes.data(), bytes.size()).ok());
  }
  EXPECT_TRUE(writer.WriteFile(path).ok());
  return dir.string();
}

TEST(NonFiniteOutputsTest, AreInternalNamingTheModelAndCounted) {
  ServerConfig config = TestServerConfig();
  config.models = {{"overflowing", OverflowingModel()}, {"classifier", TestModels::Get().dir("classifier")}};
  auto server = RelserveServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = Connect((*server)->grpc_port());
  v1::ClassifyRequest req;
  req.set_model("overflowing");
  req.add_inputs()->set_text("numbers out of range");
  v1::ClassifyResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub->Classify(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(s.error_message(), HasSubstr("model overflowing produced non-finite values"));
  // The same input on the healthy model is answered.
  req.set_model("classifier");
  grpc::ClientContext ctx2;
  ASSERT_TRUE(stub->Classify(&ctx2, req, &resp).ok());
  for (float l : resp.results(0).logits()) EXPECT_TRUE(std::isfinite(l));
  int code = 0;
  const std::string metrics = testing::HttpGet((*server)->metrics_port(), "/metrics", &code);
  EXPECT_THAT(metrics, HasSubstr("relserve_nonfinite_outputs_total{model=\"overflowing\"} 1"));
  EXPECT_THAT(metrics, HasSubstr(R"(relserve_requests_total{code="INTERNAL",model="overflowing",rpc="Classify"} 1)"));
}

// A model whose layer 1 feed-forward output weights are NaN: it loads, and computes NaN for any
// input.
std::string NanModel() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(TestModels::Get().dir("classifier")).parent_path() / "nan";
  if (fs::exists(dir)) return dir.string();
  fs::copy(TestModels::Get().dir("classifier"), dir, fs::copy_options::recursive);
  auto file = SafetensorsFile::Open(TestModels::Get().dir("classifier") + "/model.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  SafetensorsWriter writer;
  writer.SetMetadata({{"format", "pt"}});
  for (const TensorView& t : (*file)->tensors()) {
    std::string bytes(reinterpret_cast<const char*>(t.data), t.nbytes);
    if (t.name == "deberta.encoder.layer.1.output.dense.weight" || t.name == "encoder.layer.1.output.dense.weight") {
      std::vector<float> nan(t.numel(), std::nanf(""));
      bytes.assign(reinterpret_cast<const char*>(nan.data()), nan.size() * sizeof(float));
    }
    EXPECT_TRUE(writer.Add(t.name, t.dtype, t.shape, bytes.data(), bytes.size()).ok());
  }
  EXPECT_TRUE(writer.WriteFile((dir / "model.safetensors").string()).ok());
  return dir.string();
}

// With the warm-up on (the default), a model that computes NaN does not start: it would report
// SERVING and fail every request. The error names the model, the length and what was not
// finite. (The warm-up sees only its own inputs: the overflowing model above computes finite
// numbers for them, and starts.)
TEST(NonFiniteOutputsTest, FailTheWarmUp) {
  ServerConfig config = TestServerConfig();
  config.models = {{"classifier", TestModels::Get().dir("classifier")}, {"nan", NanModel()}};
  config.warmup = true;
  config.max_input_length = 32;
  auto server = RelserveServer::Start(config);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(server.status().message(),
            "model nan: warm-up at 16 tokens gave NaN (32 of 32 values) in the pooled output: its weights hold NaN "
            "or infinity, or its activations overflow; every request would fail (--warmup false skips this check)");
}

}  // namespace
}  // namespace relserve
