// relserve end to end over loopback: real gRPC calls against a RelserveServer with small
// models, compared with what the engine computes offline for the same inputs.
#include <cmath>
#include <fstream>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/health_check_service_interface.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model/engine.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/server/server_test_env.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

using ::testing::HasSubstr;
using ::testing::Not;
using testing::Connect;
using testing::TestModels;
using testing::TestServerConfig;

class EncoderServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = RelserveServer::Start(TestServerConfig());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  std::unique_ptr<v1::Encoder::Stub> stub_ = Connect(server_->grpc_port());
  static RelserveServer* server_;
};
RelserveServer* EncoderServiceTest::server_ = nullptr;

// The model as the server loads it, in process: its engine and the tokenizer beside it.
std::unique_ptr<LoadedModel> Offline(const std::string& name) {
  auto loaded = LoadModel(TestModels::Get().dir(name), EngineOptions{});
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return std::make_unique<LoadedModel>(std::move(*loaded));
}

std::vector<float> OfflinePooled(LoadedModel& model, const std::string& text) {
  auto enc = model.tokenizer->Encode(text);
  auto out = model.engine->Run({{enc->input_ids, enc->token_type_ids}}, kOutputPooled);
  return (*out)[0].pooled;
}

std::string Text(int i) {
  std::string s = "request " + std::to_string(i) + ":";
  for (int k = 0; k < (i * 7) % 40; ++k) s += " word" + std::to_string(k * i % 13);
  return s;
}

// Many clients at once: each gets exactly what the engine computes offline.
TEST_F(EncoderServiceTest, ConcurrentClientsGetTheEngineResults) {
  auto engine = Offline("embedder");
  constexpr int kThreads = 8, kRequests = 6;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto stub = Connect(server_->grpc_port());
      for (int r = 0; r < kRequests; ++r) {
        v1::EmbedRequest req;
        req.set_model("embedder");
        for (int k = 0; k <= r % 3; ++k) req.add_inputs()->set_text(Text(t * 100 + r * 10 + k));
        v1::EmbedResponse resp;
        grpc::ClientContext ctx;
        grpc::Status s = stub->Embed(&ctx, req, &resp);
        if (!s.ok() || resp.embeddings_size() != req.inputs_size()) {
          ++failures;
          continue;
        }
        for (int k = 0; k < req.inputs_size(); ++k) {
          if (MaxAbsDiff(OfflinePooled(*engine, req.inputs(k).text()), resp.embeddings(k).values()) > 1e-5) ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(EncoderServiceTest, EmbedOptionsUsageAndTiming) {
  v1::EmbedRequest req;  // default model = embedder (first --model)
  req.add_inputs()->set_text("relative attention");
  req.set_dimensions(8);
  req.set_request_id("abc");
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Embed(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.model(), "embedder");
  EXPECT_EQ(resp.request_id(), "abc");
  ASSERT_EQ(resp.embeddings(0).values_size(), 8);
  double norm = 0;
  for (float v : resp.embeddings(0).values()) norm += v * v;
  EXPECT_NEAR(norm, 1.0, 1e-5);  // Matryoshka: first 8 values, renormalised
  auto engine = Offline("embedder");
  std::vector<float> full = OfflinePooled(*engine, "relative attention");
  double head = 0;
  for (int i = 0; i < 8; ++i) head += full[i] * full[i];
  EXPECT_NEAR(resp.embeddings(0).values(3), full[3] / std::sqrt(head), 1e-5);
  EXPECT_EQ(resp.usage().sequences(), 1);
  EXPECT_EQ(resp.usage().tokens(), resp.embeddings(0).num_tokens());
  EXPECT_GT(resp.timing().total_us(), 0);
  EXPECT_GE(resp.timing().total_us(), resp.timing().inference_us());
}

TEST_F(EncoderServiceTest, EmbedTokensMatchesTheEngine) {
  auto engine = Offline("t5");
  v1::EmbedTokensRequest req;
  req.set_model("t5");
  req.add_inputs()->set_text("Hello world");
  req.add_inputs()->mutable_tokens()->add_ids(5);
  v1::EmbedTokensResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->EmbedTokens(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.sequences_size(), 2);
  auto enc = engine->tokenizer->Encode("Hello world");
  auto want = engine->engine->Run({{enc->input_ids, {}}}, kOutputTokenStates);
  const v1::TokenStates& got = resp.sequences(0);
  EXPECT_EQ(std::vector<int32_t>(got.token_ids().begin(), got.token_ids().end()), enc->input_ids);
  EXPECT_EQ(got.hidden_size(), 32);
  EXPECT_LE(MaxAbsDiff((*want)[0].token_states, got.values()), 1e-5);
  EXPECT_EQ(got.offset_begin_size(), got.token_ids_size());
  EXPECT_EQ(resp.sequences(1).values_size(), 32);
}

TEST_F(EncoderServiceTest, RerankScoresAreSigmoidOfTheCrossEncoderLogit) {
  auto engine = Offline("reranker");
  v1::RerankRequest req;
  req.set_model("reranker");
  req.set_query("what is relserve?");
  for (const char* d : {"a model server", "a recipe for soup", "relative attention encoders", "x"}) req.add_documents(d);
  req.set_top_n(3);
  req.set_return_documents(true);
  v1::RerankResponse resp;
  grpc::ClientContext ctx;
  grpc::Status rs = stub_->Rerank(&ctx, req, &resp);
  ASSERT_TRUE(rs.ok()) << rs.error_code() << ": " << rs.error_message();
  ASSERT_EQ(resp.results_size(), 3);
  for (int k = 0; k < resp.results_size(); ++k) {
    const auto& r = resp.results(k);
    auto enc = engine->tokenizer->EncodePair(req.query(), req.documents(r.index()));
    auto out = engine->engine->Run({{enc->input_ids, enc->token_type_ids}}, kOutputLogits);
    EXPECT_NEAR(r.score(), 1.0 / (1.0 + std::exp(-(*out)[0].logits[0])), 1e-5);
    EXPECT_EQ(r.document(), req.documents(r.index()));
    if (k > 0) {
      EXPECT_GE(resp.results(k - 1).score(), r.score());
    }
  }
}

TEST_F(EncoderServiceTest, ClassifySoftmaxOverLabels) {
  v1::ClassifyRequest req;
  req.set_model("classifier");
  req.add_inputs()->set_text("good");
  auto* pair = req.add_inputs()->mutable_pair();
  pair->set_first("premise");
  pair->set_second("hypothesis");
  v1::ClassifyResponse resp;
  grpc::ClientContext ctx;
  grpc::Status cs = stub_->Classify(&ctx, req, &resp);
  ASSERT_TRUE(cs.ok()) << cs.error_code() << ": " << cs.error_message();
  ASSERT_EQ(resp.results_size(), 2);
  for (const auto& c : resp.results()) {
    ASSERT_EQ(c.labels_size(), 3);
    ASSERT_EQ(c.logits_size(), 3);
    double sum = 0;
    for (const auto& l : c.labels()) sum += l.score();
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_EQ(c.labels(0).label(), "LABEL_" + std::to_string(c.labels(0).index()));
    EXPECT_GE(c.labels(0).score(), c.labels(2).score());
  }
}

TEST_F(EncoderServiceTest, TokenizeAndListModels) {
  v1::TokenizeRequest req;
  req.set_model("embedder");
  req.add_inputs()->set_text("Hello world");
  v1::TokenizeResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Tokenize(&ctx, req, &resp).ok());
  const auto& ids = resp.results(0).input_ids();
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.end()), (std::vector<int32_t>{1, 5, 998, 11, 28, 339, 713, 2}));
  EXPECT_EQ(resp.results(0).pieces(0), "[CLS]");

  v1::ListModelsResponse models;
  grpc::ClientContext ctx2;
  ASSERT_TRUE(stub_->ListModels(&ctx2, v1::ListModelsRequest(), &models).ok());
  ASSERT_EQ(models.models_size(), 4);
  EXPECT_EQ(models.default_model(), "embedder");
  EXPECT_EQ(models.models(2).labels_size(), 3);
  EXPECT_EQ(models.models(3).model_type(), "t5");
}

// A text of about 600 tokens whose start and end differ.
std::string LongText() {
  std::string text;
  for (int i = 0; i < 300; ++i) text += " word" + std::to_string(i);
  return text;
}

// truncation_direction LEFT: the end of the text is kept, inside [CLS] ... [SEP], and the
// embedding is the engine's for those tokens.
TEST_F(EncoderServiceTest, LeftTruncationKeepsTheEndOfTheText) {
  auto engine = Offline("embedder");
  TokenizeOptions left;
  left.max_length = 512;
  left.direction = TruncationDirection::kLeft;
  auto want = engine->tokenizer->Encode(LongText(), left);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(want->truncated);

  v1::TokenizeRequest tokenize;
  tokenize.add_inputs()->set_text(LongText());
  tokenize.set_truncate(true);
  tokenize.set_truncation_direction(v1::TRUNCATION_DIRECTION_LEFT);
  v1::TokenizeResponse tokens;
  grpc::ClientContext tctx;
  ASSERT_TRUE(stub_->Tokenize(&tctx, tokenize, &tokens).ok());
  const auto& ids = tokens.results(0).input_ids();
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.end()), want->input_ids);
  EXPECT_EQ(tokens.results(0).pieces(0), "[CLS]");
  EXPECT_EQ(tokens.results(0).pieces(511), "[SEP]");
  EXPECT_EQ(tokens.results(0).offset_end(510), static_cast<int32_t>(LongText().size()));  // the text's end
  EXPECT_TRUE(tokens.results(0).truncated());

  v1::EmbedRequest embed;
  embed.add_inputs()->set_text(LongText());
  embed.set_truncate(true);
  embed.set_truncation_direction(v1::TRUNCATION_DIRECTION_LEFT);
  v1::EmbedResponse got;
  grpc::ClientContext ectx;
  ASSERT_TRUE(stub_->Embed(&ectx, embed, &got).ok());
  auto offline = engine->engine->Run({{want->input_ids, want->token_type_ids}}, kOutputPooled);
  ASSERT_TRUE(offline.ok()) << offline.status();
  EXPECT_LE(MaxAbsDiff((*offline)[0].pooled, got.embeddings(0).values()), 1e-5);
  EXPECT_EQ(got.embeddings(0).num_tokens(), 512);
  // RIGHT (and unset) keep the start instead: another embedding.
  embed.set_truncation_direction(v1::TRUNCATION_DIRECTION_RIGHT);
  v1::EmbedResponse right;
  grpc::ClientContext rctx;
  ASSERT_TRUE(stub_->Embed(&rctx, embed, &right).ok());
  EXPECT_GT(MaxAbsDiff((*offline)[0].pooled, right.embeddings(0).values()), 1e-3);

  // A value no TruncationDirection has (a newer client's) is refused, naming the field.
  embed.set_truncation_direction(static_cast<v1::TruncationDirection>(7));
  v1::EmbedResponse refused;
  grpc::ClientContext bctx;
  grpc::Status s = stub_->Embed(&bctx, embed, &refused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("truncation_direction 7 is not a TruncationDirection"));
  v1::RerankRequest rerank;
  rerank.set_model("reranker");
  rerank.set_query("q");
  rerank.add_documents("d");
  rerank.set_truncation_direction(static_cast<v1::TruncationDirection>(-1));
  v1::RerankResponse ranked;
  grpc::ClientContext rrctx;
  EXPECT_EQ(stub_->Rerank(&rrctx, rerank, &ranked).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  grpc::ClientContext sctx;
  auto stream = stub_->EmbedStream(&sctx);
  ASSERT_TRUE(stream->Write(embed));
  stream->WritesDone();
  while (stream->Read(&refused)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// --auto-truncate: requests that leave `truncate` unset are cut; `truncate: false` said
// explicitly is still refused.
TEST(EncoderServiceAutoTruncateTest, RequestsThatDoNotSayAreTruncated) {
  ServerConfig config = TestServerConfig();
  config.auto_truncate = true;
  auto server = RelserveServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = Connect((*server)->grpc_port());

  v1::EmbedRequest embed;
  embed.add_inputs()->set_text(LongText());
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->Embed(&ctx, embed, &resp).ok());
  EXPECT_TRUE(resp.embeddings(0).truncated());
  EXPECT_EQ(resp.embeddings(0).num_tokens(), 512);
  embed.set_truncate(false);
  grpc::ClientContext refused_ctx;
  grpc::Status refused = stub->Embed(&refused_ctx, embed, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("truncation is off"));
  // On the wire an explicit false is field 4 with 0; a client built from the earlier proto
  // (a plain bool) never sends it, and gets the server's default.
  EXPECT_NE(embed.SerializeAsString().find(std::string("\x20\x00", 2)), std::string::npos);

  v1::EmbedTokensRequest states;
  states.set_model("t5");
  states.add_inputs()->set_text(LongText());
  v1::EmbedTokensResponse states_resp;
  grpc::ClientContext sctx;
  ASSERT_TRUE(stub->EmbedTokens(&sctx, states, &states_resp).ok());
  EXPECT_TRUE(states_resp.sequences(0).truncated());
  v1::RerankRequest rerank;
  rerank.set_model("reranker");
  rerank.set_query("what");
  rerank.add_documents(LongText());
  v1::RerankResponse ranked;
  grpc::ClientContext rctx;
  ASSERT_TRUE(stub->Rerank(&rctx, rerank, &ranked).ok());
  EXPECT_EQ(ranked.usage().tokens(), 512);
  v1::ClassifyRequest classify;
  classify.set_model("classifier");
  classify.add_inputs()->set_text(LongText());
  v1::ClassifyResponse classified;
  grpc::ClientContext cctx;
  EXPECT_TRUE(stub->Classify(&cctx, classify, &classified).ok());
  v1::TokenizeRequest tokenize;
  tokenize.add_inputs()->set_text(LongText());
  v1::TokenizeResponse tokens;
  grpc::ClientContext tctx;
  ASSERT_TRUE(stub->Tokenize(&tctx, tokenize, &tokens).ok());
  EXPECT_EQ(tokens.results(0).input_ids_size(), 512);
  tokenize.set_truncate(false);
  grpc::ClientContext tctx2;
  EXPECT_EQ(stub->Tokenize(&tctx2, tokenize, &tokens).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(EncoderServiceTest, EmbedStreamAnswersEachMessageInOrder) {
  grpc::ClientContext ctx;
  auto stream = stub_->EmbedStream(&ctx);
  for (int i = 0; i < 3; ++i) {
    v1::EmbedRequest req;
    req.set_request_id(std::to_string(i));
    req.add_inputs()->set_text(Text(i));
    ASSERT_TRUE(stream->Write(req));
  }
  stream->WritesDone();
  v1::EmbedResponse resp;
  int n = 0;
  while (stream->Read(&resp)) {
    EXPECT_EQ(resp.request_id(), std::to_string(n));
    EXPECT_EQ(resp.embeddings_size(), 1);
    ++n;
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(n, 3);
}

// A client that goes away in the middle of a stream leaves the server unharmed.
TEST_F(EncoderServiceTest, ClientDisconnectMidStream) {
  for (int round = 0; round < 3; ++round) {
    grpc::ClientContext ctx;
    auto stream = stub_->EmbedStream(&ctx);
    v1::EmbedRequest req;
    for (int i = 0; i < 32; ++i) req.add_inputs()->set_text(Text(i));
    ASSERT_TRUE(stream->Write(req));
    ASSERT_TRUE(stream->Write(req));
    ctx.TryCancel();  // gone, with work queued and a response pending
    v1::EmbedResponse ignored;
    while (stream->Read(&ignored)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  v1::EmbedRequest fine;
  fine.add_inputs()->set_text("the server is still here");
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  EXPECT_TRUE(stub_->Embed(&ctx, fine, &resp).ok());
}

// Bad input: a precise status, and nothing else disturbed.
TEST_F(EncoderServiceTest, BadInputsGetPreciseStatuses) {
  auto embed = [&](const v1::EmbedRequest& req) {
    v1::EmbedResponse resp;
    grpc::ClientContext ctx;
    return stub_->Embed(&ctx, req, &resp);
  };
  v1::EmbedRequest empty;
  grpc::Status s = embed(empty);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("inputs is empty"));

  v1::EmbedRequest empty_text;
  empty_text.add_inputs()->set_text("");
  s = embed(empty_text);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("inputs[0].text is empty"));

  v1::EmbedRequest too_long;
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += " word";
  too_long.add_inputs()->set_text(long_text);
  s = embed(too_long);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  too_long.set_truncate(true);
  v1::EmbedResponse truncated;
  grpc::ClientContext tctx;
  ASSERT_TRUE(stub_->Embed(&tctx, too_long, &truncated).ok());
  EXPECT_TRUE(truncated.embeddings(0).truncated());
  EXPECT_EQ(truncated.embeddings(0).num_tokens(), 512);

  v1::EmbedRequest unknown;
  unknown.set_model("nope");
  unknown.add_inputs()->set_text("x");
  s = embed(unknown);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("\"nope\""));

  v1::EmbedRequest ids;
  ids.add_inputs()->mutable_tokens()->add_ids(999999);
  s = embed(ids);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("outside the vocabulary"));

  v1::EmbedRequest dims;
  dims.add_inputs()->set_text("x");
  dims.set_dimensions(1000);
  EXPECT_EQ(embed(dims).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::EmbedRequest many;
  for (int i = 0; i < 257; ++i) many.add_inputs()->set_text("x");
  s = embed(many);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("257"));

  v1::EmbedRequest huge;
  huge.add_inputs()->set_text(std::string(17 << 20, 'a'));
  EXPECT_EQ(embed(huge).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  v1::RerankRequest rerank;
  rerank.set_model("embedder");
  rerank.set_query("q");
  rerank.add_documents("d");
  v1::RerankResponse rr;
  grpc::ClientContext rctx;
  s = stub_->Rerank(&rctx, rerank, &rr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("no classification head"));

  v1::ClassifyRequest classify;
  classify.set_model("t5");
  classify.add_inputs()->set_text("x");
  v1::ClassifyResponse cr;
  grpc::ClientContext cctx;
  EXPECT_EQ(stub_->Classify(&cctx, classify, &cr).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  // And the server still answers normally.
  v1::EmbedRequest fine;
  fine.add_inputs()->set_text("still fine");
  EXPECT_TRUE(embed(fine).ok());
}


// Calls `method` with raw request bytes; returns the status.
TEST_F(EncoderServiceTest, DeadlineAndCancellation) {
  v1::EmbedRequest req;
  for (int i = 0; i < 200; ++i) req.add_inputs()->set_text(Text(i) + Text(i + 1));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::microseconds(500));
    v1::EmbedResponse resp;
    EXPECT_EQ(stub_->Embed(&ctx, req, &resp).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  {
    grpc::ClientContext ctx;
    v1::EmbedResponse resp;
    std::thread cancel([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ctx.TryCancel();
    });
    grpc::Status s = stub_->Embed(&ctx, req, &resp);
    cancel.join();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED);
  }
  v1::EmbedRequest fine;
  fine.add_inputs()->set_text("after the cancelled call");
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  EXPECT_TRUE(stub_->Embed(&ctx, fine, &resp).ok());
}

TEST_F(EncoderServiceTest, HealthOverallAndPerModel) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  // grpc.health.v1.HealthCheckRequest { string service = 1; } encoded by hand: field 1, length-delimited.
  auto check = [&](const std::string& service) {
    std::string wire;
    if (!service.empty()) {
      wire.push_back(0x0A);
      wire.push_back(static_cast<char>(service.size()));
      wire += service;
    }
    grpc::Slice slice(wire);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext ctx;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status status;
    generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                      [&](grpc::Status s) {
                        std::lock_guard<std::mutex> l(mu);
                        status = s;
                        done = true;
                        cv.notify_one();
                      });
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return done; });
    std::vector<grpc::Slice> slices;
    std::string body;
    if (status.ok() && response.Dump(&slices).ok()) {
      for (auto& s : slices) body.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    // HealthCheckResponse { ServingStatus status = 1; }: SERVING = 1.
    return std::make_pair(status.error_code(), body);
  };
  EXPECT_EQ(check("").second, std::string("\x08\x01", 2));
  EXPECT_EQ(check("reranker").second, std::string("\x08\x01", 2));
  EXPECT_EQ(check("no-such-model").first, grpc::StatusCode::NOT_FOUND);
}

TEST_F(EncoderServiceTest, UnknownModelNamesDoNotBecomeMetricLabels) {
  // Any string a client sends as a model name would otherwise create a new series per name.
  for (const char* name : {"no-such-model-a1", "no-such-model-b2"}) {
    v1::EmbedRequest req;
    req.set_model(name);
    req.add_inputs()->set_text("x");
    v1::EmbedResponse resp;
    grpc::ClientContext ctx;
    ASSERT_EQ(stub_->Embed(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  int code = 0;
  const std::string body = testing::HttpGet(server_->metrics_port(), "/metrics", &code);
  EXPECT_EQ(code, 200);
  EXPECT_THAT(body, Not(HasSubstr("no-such-model")));
  EXPECT_THAT(body, HasSubstr("relserve_requests_total{code=\"NOT_FOUND\",model=\"unknown\",rpc=\"Embed\"} 2"));
}

TEST_F(EncoderServiceTest, MetricsEndpointExportsTheSeries) {
  v1::EmbedRequest req;
  req.add_inputs()->set_text("count me");
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Embed(&ctx, req, &resp).ok());
  int code = 0;
  const std::string body = testing::HttpGet(server_->metrics_port(), "/metrics", &code);
  EXPECT_EQ(code, 200);
  for (const char* series :
       {"relserve_requests_total{", "rpc=\"Embed\"", "relserve_request_duration_seconds_bucket{",
        "relserve_queue_duration_seconds_bucket{", "relserve_inference_duration_seconds_bucket{",
        "relserve_tokenize_duration_seconds_bucket{", "relserve_batch_size_bucket{", "relserve_batch_tokens_bucket{",
        "relserve_padding_ratio_bucket{", "relserve_queue_depth{", "relserve_in_flight_sequences{",
        "relserve_tokens_total{", "relserve_model_info{", "relserve_model_serving{",
        "relserve_batch_stage_duration_seconds_bucket{", "stage=\"prepare\"", "stage=\"forward\"",
        "stage=\"results\""}) {
    EXPECT_THAT(body, HasSubstr(series));
  }
  EXPECT_EQ(testing::HttpGet(server_->metrics_port(), "/healthz", &code), "ok\n");
  EXPECT_EQ(code, 200);
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) GTEST_SKIP() << "promtool not installed";
  const std::string path = ::testing::TempDir() + "relserve-scrape.txt";
  std::ofstream(path) << body;
  EXPECT_EQ(std::system(("promtool check metrics < " + path).c_str()), 0) << body;
  std::remove(path.c_str());
}

// A separate server whose queue holds 4 sequences: a request of 5 can never be queued, so it
// is INVALID_ARGUMENT (not the retryable RESOURCE_EXHAUSTED of a queue that is full now, which
// tests/batching checks), counted with that code.
TEST(EncoderServiceLimitsTest, MoreInputsThanTheQueueHoldsIsInvalidArgument) {
  ServerConfig config = TestServerConfig();
  config.max_queue_sequences = 4;
  auto server = RelserveServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = Connect((*server)->grpc_port());
  v1::EmbedRequest req;
  for (int i = 0; i < 5; ++i) req.add_inputs()->set_text("x");
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub->Embed(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("max_queue_sequences=4"));
  int code = 0;
  const std::string metrics = testing::HttpGet((*server)->metrics_port(), "/metrics", &code);
  EXPECT_THAT(metrics, HasSubstr("relserve_requests_total{code=\"INVALID_ARGUMENT\",model=\"embedder\",rpc=\"Embed\"} 1"));
}

// Shutdown drains: calls already accepted finish, later ones are refused.
TEST(EncoderServiceShutdownTest, InFlightCallsFinishNewOnesAreRefused) {
  ServerConfig config = TestServerConfig();
  auto server = RelserveServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->grpc_port();
  constexpr int kCalls = 6;
  std::vector<grpc::Status> statuses(kCalls);
  std::vector<std::thread> callers;
  std::atomic<int> started{0};
  for (int i = 0; i < kCalls; ++i) {
    callers.emplace_back([&, i] {
      auto stub = Connect(port);
      v1::EmbedRequest req;
      for (int k = 0; k < 64; ++k) req.add_inputs()->set_text(Text(i * 64 + k));
      v1::EmbedResponse resp;
      grpc::ClientContext ctx;
      ++started;
      statuses[i] = stub->Embed(&ctx, req, &resp);
      if (statuses[i].ok() && resp.embeddings_size() != 64) statuses[i] = grpc::Status(grpc::StatusCode::DATA_LOSS, "short");
    });
  }
  while (started.load() < kCalls) std::this_thread::yield();
  const int metrics_port = (*server)->metrics_port();
  // The drain starts once the server has taken every call (each was tokenized and queued):
  // a caller thread slow to send on a loaded machine would otherwise arrive after it.
  const std::string tokenized = "relserve_tokenize_duration_seconds_count{model=\"embedder\"} ";
  for (int i = 0; i < 3000; ++i) {
    int code = 0;
    const std::string body = testing::HttpGet(metrics_port, "/metrics", &code);
    const size_t at = body.find(tokenized);
    if (at != std::string::npos && std::stoi(body.substr(at + tokenized.size())) >= kCalls) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::thread shutdown([&] { (*server)->Shutdown(absl::Seconds(20)); });
  // While it drains, readiness reports 503 (then the endpoint closes).
  int code = 200;
  for (int i = 0; i < 2000 && code == 200; ++i) {
    testing::HttpGet(metrics_port, "/healthz", &code);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_NE(code, 200);
  {
    // A call arriving while the others drain is refused at once.
    auto late = Connect(port);
    v1::EmbedRequest req;
    req.add_inputs()->set_text("during the drain");
    v1::EmbedResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = late->Embed(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  }
  shutdown.join();
  for (auto& c : callers) c.join();
  for (int i = 0; i < kCalls; ++i) EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i].error_message();
  auto stub = Connect(port);
  v1::EmbedRequest req;
  req.add_inputs()->set_text("too late");
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  EXPECT_FALSE(stub->Embed(&ctx, req, &resp).ok());
  (*server)->Shutdown(absl::Seconds(1));  // twice is harmless
}

}  // namespace
}  // namespace relserve
