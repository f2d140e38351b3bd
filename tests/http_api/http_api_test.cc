// The HTTP/JSON API end to end over loopback: real HTTP calls against a RelserveServer with
// small models, each route's answer compared with the gRPC API's for the same inputs.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/server_test_env.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;
using testing::Connect;
using testing::TestServerConfig;

constexpr int kMaxBodyBytes = 1 << 16;

struct Reply {
  int status = 0;
  json body;
  std::string raw;
  httplib::Headers headers;
};

Reply Call(int port, const std::string& method, const std::string& path, const std::string& body = "") {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  auto r = method == "GET" ? client.Get(path.c_str()) : client.Post(path.c_str(), body, "application/json");
  Reply out;
  if (!r) {
    out.raw = "transport error: " + httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.raw = r->body;
  out.headers = r->headers;
  if (!r->body.empty()) out.body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  return out;
}

Reply Post(int port, const std::string& path, const json& body) { return Call(port, "POST", path, body.dump()); }

std::unique_ptr<RelserveServer> StartServer(const std::vector<std::string>& order, int max_body_bytes = kMaxBodyBytes) {
  ServerConfig config = TestServerConfig();
  config.max_message_bytes = max_body_bytes;
  if (!order.empty()) {
    auto models = config.models;
    config.models.clear();
    for (const std::string& name : order) {
      for (const auto& m : models) {
        if (m.first == name) config.models.push_back(m);
      }
    }
  }
  auto server = RelserveServer::Start(config);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

std::vector<float> Values(const v1::Embedding& e) { return {e.values().begin(), e.values().end()}; }

std::set<std::string> Keys(const json& object) {
  std::set<std::string> keys;
  for (auto it = object.begin(); it != object.end(); ++it) keys.insert(it.key());
  return keys;
}

class HttpApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartServer({}).release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  int http() const { return server_->http_port(); }
  v1::EmbedResponse GrpcEmbed(const v1::EmbedRequest& req) {
    v1::EmbedResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = stub_->Embed(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }
  std::unique_ptr<v1::Encoder::Stub> stub_ = Connect(server_->grpc_port());
  static RelserveServer* server_;
};
RelserveServer* HttpApiTest::server_ = nullptr;

TEST_F(HttpApiTest, OpenAIEmbeddingsEqualGrpcFieldByField) {
  const Reply r = Post(http(), "/v1/embeddings",
                       {{"input", {"Hello world", "a second, longer text"}}, {"model", "embedder"}, {"user", "u"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  v1::EmbedRequest req;
  req.set_model("embedder");
  req.set_normalize(true);
  req.add_inputs()->set_text("Hello world");
  req.add_inputs()->set_text("a second, longer text");
  const v1::EmbedResponse want = GrpcEmbed(req);

  EXPECT_EQ(Keys(r.body), (std::set<std::string>{"object", "data", "model", "usage"}));
  EXPECT_EQ(r.body["object"], "list");
  EXPECT_EQ(r.body["model"], "embedder");
  EXPECT_EQ(r.body["usage"], json({{"prompt_tokens", want.usage().tokens()}, {"total_tokens", want.usage().tokens()}}));
  ASSERT_EQ(r.body["data"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const json& d = r.body["data"][i];
    EXPECT_EQ(Keys(d), (std::set<std::string>{"object", "embedding", "index"}));
    EXPECT_EQ(d["object"], "embedding");
    EXPECT_EQ(d["index"], i);
    EXPECT_LE(MaxAbsDiff(d["embedding"].get<std::vector<float>>(), Values(want.embeddings(i))), 1e-6);
  }
}

TEST_F(HttpApiTest, OpenAIBase64TokenIdsAndDimensions) {
  const json request = {{"input", {{5, 998, 11}, {28, 339}}}, {"dimensions", 16}};
  const Reply floats = Post(http(), "/v1/embeddings", request);
  ASSERT_EQ(floats.status, 200) << floats.raw;
  json b64_request = request;
  b64_request["encoding_format"] = "base64";
  const Reply b64 = Post(http(), "/v1/embeddings", b64_request);
  ASSERT_EQ(b64.status, 200) << b64.raw;
  v1::EmbedRequest req;
  req.set_normalize(true);
  req.set_dimensions(16);
  for (const auto& ids : {std::vector<int>{5, 998, 11}, std::vector<int>{28, 339}}) {
    auto* t = req.add_inputs()->mutable_tokens();
    for (int id : ids) t->add_ids(id);
  }
  const v1::EmbedResponse want = GrpcEmbed(req);
  for (int i = 0; i < 2; ++i) {
    const std::vector<float> f = floats.body["data"][i]["embedding"].get<std::vector<float>>();
    ASSERT_EQ(f.size(), 16u);
    EXPECT_LE(MaxAbsDiff(f, Values(want.embeddings(i))), 1e-6);
    std::string bytes;
    ASSERT_TRUE(absl::Base64Unescape(b64.body["data"][i]["embedding"].get<std::string>(), &bytes));
    ASSERT_EQ(bytes.size(), 16 * sizeof(float));
    std::vector<float> decoded(16);
    std::memcpy(decoded.data(), bytes.data(), bytes.size());
    EXPECT_EQ(decoded, f);  // the same floats, bit for bit
  }
}

// Many HTTP clients at once (more than the models' workers, fewer than the HTTP threads): each
// gets the answer to its own input, as gRPC computes it.
TEST_F(HttpApiTest, ConcurrentClientsGetTheirOwnAnswers) {
  constexpr int kClients = 12, kCalls = 4;
  std::vector<std::vector<float>> got(kClients * kCalls);
  std::vector<int> statuses(kClients * kCalls);
  auto text = [](int i) {
    std::string s = "request " + std::to_string(i) + ":";
    for (int k = 0; k < (i * 7) % 40; ++k) s += " word" + std::to_string(k * i % 13);
    return s;
  };
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int k = 0; k < kCalls; ++k) {
        const int i = c * kCalls + k;
        const Reply r = Post(http(), "/embed", {{"inputs", text(i)}});
        statuses[i] = r.status;
        if (r.status == 200) got[i] = r.body[0].get<std::vector<float>>();
      }
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kClients * kCalls; ++i) {
    ASSERT_EQ(statuses[i], 200) << i;
    v1::EmbedRequest req;
    req.set_normalize(true);
    req.add_inputs()->set_text(text(i));
    EXPECT_LE(MaxAbsDiff(got[i], Values(GrpcEmbed(req).embeddings(0))), 1e-6) << i;
  }
}

TEST_F(HttpApiTest, OpenAIModels) {
  const Reply r = Call(http(), "GET", "/v1/models");
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["object"], "list");
  ASSERT_EQ(r.body["data"].size(), 4u);
  EXPECT_EQ(r.body["data"][0]["id"], "embedder");
  EXPECT_EQ(r.body["data"][3]["id"], "t5");
  EXPECT_EQ(r.body["data"][1]["object"], "model");
  EXPECT_EQ(r.body["data"][1]["owned_by"], "relserve");
  EXPECT_GT(r.body["data"][1]["created"].get<int64_t>(), 1600000000);
}

TEST_F(HttpApiTest, TeiEmbedEqualsGrpcWithTeiDefaults) {
  for (const bool normalize : {true, false}) {
    json body = {{"inputs", {"Hello world", "other"}}};
    if (!normalize) body["normalize"] = false;  // TEI normalises unless told not to
    const Reply r = Post(http(), "/embed", body);
    ASSERT_EQ(r.status, 200) << r.raw;
    v1::EmbedRequest req;
    req.set_normalize(normalize);
    req.add_inputs()->set_text("Hello world");
    req.add_inputs()->set_text("other");
    const v1::EmbedResponse want = GrpcEmbed(req);
    ASSERT_EQ(r.body.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_LE(MaxAbsDiff(r.body[i].get<std::vector<float>>(), Values(want.embeddings(i))), 1e-6) << normalize;
    }
  }
  const Reply single = Post(http(), "/embed", {{"inputs", "Hello world"}});
  ASSERT_EQ(single.status, 200);
  EXPECT_EQ(single.body.size(), 1u);
}

// TEI's /similarity: the cosine similarity of the source sentence's embedding with each
// sentence's, as /embed's normalised vectors give it.
TEST_F(HttpApiTest, TeiSimilarityIsTheCosineOfEmbedVectors) {
  const std::vector<std::string> sentences = {"Hello there world", "a different text", "Hello world"};
  const Reply r = Post(http(), "/similarity",
                       {{"inputs", {{"source_sentence", "Hello world"}, {"sentences", sentences}}},
                        {"parameters", {{"truncate", true}}}});
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body.size(), sentences.size());
  json all = sentences;
  all.insert(all.begin(), "Hello world");
  const Reply e = Post(http(), "/embed", {{"inputs", all}});
  ASSERT_EQ(e.status, 200) << e.raw;
  const std::vector<float> source = e.body[0].get<std::vector<float>>();
  for (size_t i = 0; i < sentences.size(); ++i) {
    const std::vector<float> v = e.body[i + 1].get<std::vector<float>>();
    double dot = 0;
    for (size_t k = 0; k < v.size(); ++k) dot += double(source[k]) * v[k];
    EXPECT_NEAR(r.body[i].get<double>(), dot, 1e-5) << i;
  }
  EXPECT_NEAR(r.body[2].get<double>(), 1.0, 1e-5);  // the same sentence
  const Reply bad = Post(http(), "/similarity", {{"inputs", {{"source_sentence", "x"}}}});
  EXPECT_EQ(bad.status, 422) << bad.raw;
  EXPECT_THAT(bad.raw, HasSubstr("inputs.sentences"));
  const Reply empty = Post(http(), "/similarity", {{"inputs", {{"source_sentence", "x"}, {"sentences", json::array()}}}});
  EXPECT_EQ(empty.status, 400) << empty.raw;
}

// A text of about 600 tokens whose start and end differ.
std::string LongText() {
  std::string text;
  for (int i = 0; i < 300; ++i) text += " word" + std::to_string(i);
  return text;
}

// TEI's truncation_direction "Left" is the gRPC API's TRUNCATION_DIRECTION_LEFT: the end of the
// text is kept.
TEST_F(HttpApiTest, TeiLeftTruncationEqualsGrpc) {
  const Reply left = Post(http(), "/embed", {{"inputs", LongText()}, {"truncate", true}, {"truncation_direction", "Left"}});
  ASSERT_EQ(left.status, 200) << left.raw;
  const Reply right = Post(http(), "/embed", {{"inputs", LongText()}, {"truncate", true}});
  ASSERT_EQ(right.status, 200) << right.raw;
  v1::EmbedRequest req;
  req.set_normalize(true);
  req.set_truncate(true);
  req.add_inputs()->set_text(LongText());
  req.set_truncation_direction(v1::TRUNCATION_DIRECTION_LEFT);
  const v1::EmbedResponse want_left = GrpcEmbed(req);
  req.set_truncation_direction(v1::TRUNCATION_DIRECTION_RIGHT);
  const v1::EmbedResponse want_right = GrpcEmbed(req);
  EXPECT_LE(MaxAbsDiff(left.body[0].get<std::vector<float>>(), Values(want_left.embeddings(0))), 1e-6);
  EXPECT_LE(MaxAbsDiff(right.body[0].get<std::vector<float>>(), Values(want_right.embeddings(0))), 1e-6);
  EXPECT_GT(MaxAbsDiff(left.body[0].get<std::vector<float>>(), Values(want_right.embeddings(0))), 1e-3);
  // Without truncate the direction alone cuts nothing: refused as over-long.
  const Reply refused = Post(http(), "/embed", {{"inputs", LongText()}, {"truncation_direction", "Left"}});
  EXPECT_EQ(refused.status, 413) << refused.raw;  // TEI's status for an over-long input
  EXPECT_THAT(refused.body["error"].get<std::string>(), HasSubstr("truncation is off"));
}

TEST_F(HttpApiTest, CohereRerankEqualsGrpc) {
  const std::vector<std::string> docs = {"a model server", "a recipe for soup", "relative attention encoders"};
  const Reply r = Post(http(), "/v1/rerank",
                       {{"model", "reranker"}, {"query", "what is relserve?"}, {"documents", docs}, {"top_n", 2},
                        {"return_documents", true}});
  ASSERT_EQ(r.status, 200) << r.raw;
  v1::RerankRequest req;
  req.set_model("reranker");
  req.set_query("what is relserve?");
  for (const auto& d : docs) req.add_documents(d);
  req.set_top_n(2);
  v1::RerankResponse want;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Rerank(&ctx, req, &want).ok());
  EXPECT_EQ(r.body["model"], "reranker");
  ASSERT_EQ(r.body["results"].size(), 2u);
  for (int k = 0; k < 2; ++k) {
    const json& hit = r.body["results"][k];
    EXPECT_EQ(hit["index"], want.results(k).index());
    EXPECT_NEAR(hit["relevance_score"].get<double>(), want.results(k).score(), 1e-6);
    EXPECT_EQ(hit["document"]["text"], docs[want.results(k).index()]);
  }
  EXPECT_EQ(r.body["usage"]["total_tokens"], want.usage().tokens());
}

// Chunked rerank: a document longer than the model beside the query is scored in windows of
// [CLS] query [SEP] run [SEP], each run of the room the query leaves; its score is its best
// window's, as if those windows had been sent by hand (here through gRPC Classify as token ids).
// Every rerank route takes it, and says how many windows each document took.
TEST_F(HttpApiTest, ChunkedRerankScoresTheBestWindowOfALongDocument) {
  const std::string query = "what is relserve?";
  const std::string document = LongText();
  auto ids_of = [&](const std::string& text) {
    const Reply t = Post(http(), "/tokenize", {{"inputs", text}, {"add_special_tokens", false}});
    EXPECT_EQ(t.status, 200) << t.raw;
    std::vector<int32_t> ids;
    for (const json& token : t.body[0]) ids.push_back(token["id"].get<int32_t>());
    return ids;
  };
  const std::vector<int32_t> q = ids_of(query), d = ids_of(document);
  // The template's specials and the second text's token type, read off a short pair.
  v1::TokenizeRequest treq;
  treq.set_model("reranker");
  treq.add_inputs()->mutable_pair()->set_first(query);
  treq.mutable_inputs(0)->mutable_pair()->set_second("x");
  v1::TokenizeResponse tresp;
  grpc::ClientContext tctx;
  ASSERT_TRUE(stub_->Tokenize(&tctx, treq, &tresp).ok());
  const auto& pair = tresp.results(0);
  const int32_t cls = pair.input_ids(0), sep = pair.input_ids(static_cast<int>(q.size()) + 1);
  const int32_t second_type = pair.token_type_ids(pair.token_type_ids_size() - 1);
  const size_t room = 512 - 3 - q.size();
  ASSERT_GT(d.size(), room);
  v1::ClassifyRequest creq;
  creq.set_model("reranker");
  creq.set_raw_scores(true);
  size_t windows = 0;
  for (size_t start = 0; start < d.size(); start += room, ++windows) {
    v1::TokenIds* t = creq.add_inputs()->mutable_tokens();
    std::vector<int32_t> ids = {cls};
    ids.insert(ids.end(), q.begin(), q.end());
    ids.push_back(sep);
    const size_t first_of_second = ids.size();
    ids.insert(ids.end(), d.begin() + start, d.begin() + std::min(d.size(), start + room));
    ids.push_back(sep);
    for (size_t k = 0; k < ids.size(); ++k) {
      t->add_ids(ids[k]);
      t->add_token_type_ids(k < first_of_second ? 0 : second_type);
    }
  }
  ASSERT_EQ(windows, (d.size() + room - 1) / room);
  ASSERT_GT(windows, 1u);
  v1::ClassifyResponse cresp;
  grpc::ClientContext cctx;
  ASSERT_TRUE(stub_->Classify(&cctx, creq, &cresp).ok());
  double best = -INFINITY;
  for (const auto& r : cresp.results()) best = std::max(best, static_cast<double>(r.logits(0)));
  const double want = 1 / (1 + std::exp(-best));

  const json documents = {document, "a recipe for soup"};
  for (const char* path : {"/v1/rerank", "/v2/rerank"}) {
    const Reply r = Post(http(), path, {{"model", "reranker"}, {"query", query}, {"documents", documents},
                                        {"chunk_documents", true}});
    ASSERT_EQ(r.status, 200) << path << ": " << r.raw;
    bool seen = false;
    for (const json& hit : r.body["results"]) {
      if (hit["index"] != 0) {
        EXPECT_EQ(hit["windows"], 1) << path;
        continue;
      }
      seen = true;
      EXPECT_EQ(hit["windows"], windows) << path;
      EXPECT_NEAR(hit["relevance_score"].get<double>(), want, 1e-6) << path;
    }
    EXPECT_TRUE(seen) << path;
  }
  const Reply tei = Post(http(), "/rerank", {{"model", "reranker"}, {"query", query}, {"texts", documents},
                                             {"max_chunks_per_doc", 5}});
  ASSERT_EQ(tei.status, 200) << tei.raw;
  for (const json& hit : tei.body) {
    if (hit["index"] == 0) {
      EXPECT_NEAR(hit["score"].get<double>(), want, 1e-6);
    }
    EXPECT_EQ(hit["windows"], hit["index"] == 0 ? windows : 1u);
  }
  // gRPC: the same.
  v1::RerankRequest rreq;
  rreq.set_model("reranker");
  rreq.set_query(query);
  rreq.add_documents(document);
  rreq.set_chunk_documents(true);
  v1::RerankResponse rresp;
  grpc::ClientContext rctx;
  ASSERT_TRUE(stub_->Rerank(&rctx, rreq, &rresp).ok());
  EXPECT_EQ(rresp.results(0).windows(), static_cast<int>(windows));
  EXPECT_NEAR(rresp.results(0).score(), want, 1e-6);
  // Without chunking (the server's default) the answer has no windows.
  const Reply plain = Post(http(), "/v1/rerank", {{"model", "reranker"}, {"query", query}, {"documents", {"soup"}}});
  ASSERT_EQ(plain.status, 200) << plain.raw;
  EXPECT_FALSE(plain.body["results"][0].contains("windows"));
  // Bad values name their field.
  const Reply bad = Post(http(), "/v2/rerank", {{"model", "reranker"}, {"query", query}, {"documents", documents},
                                                {"max_chunks_per_doc", 0}});
  EXPECT_EQ(bad.status, 422) << bad.raw;
  EXPECT_THAT(bad.raw, HasSubstr("max_chunks_per_doc"));
}

// Cohere v2's max_tokens_per_doc: each document is cut to its first n tokens before it is
// paired with the query (4096 when absent, which these short models never reach).
TEST_F(HttpApiTest, CohereV2MaxTokensPerDocCutsEachDocument) {
  const std::string query = "what is relserve?";
  const std::string document = LongText();
  const Reply cut = Post(http(), "/v2/rerank", {{"model", "reranker"}, {"query", query}, {"documents", {document}},
                                                {"max_tokens_per_doc", 7}});
  ASSERT_EQ(cut.status, 200) << cut.raw;
  // The same as the document's first 7 tokens sent as its text: " word0 word1 ..." ends its 7th
  // token where /tokenize says.
  const Reply t = Post(http(), "/tokenize", {{"inputs", document}, {"add_special_tokens", false}});
  ASSERT_EQ(t.status, 200) << t.raw;
  const size_t end = t.body[0][6]["stop"].get<size_t>();
  const Reply by_hand = Post(http(), "/v2/rerank", {{"model", "reranker"}, {"query", query},
                                                    {"documents", {document.substr(0, end)}}});
  ASSERT_EQ(by_hand.status, 200) << by_hand.raw;
  EXPECT_NEAR(cut.body["results"][0]["relevance_score"].get<double>(),
              by_hand.body["results"][0]["relevance_score"].get<double>(), 1e-6);
  EXPECT_EQ(cut.body["meta"]["tokens"]["input_tokens"], by_hand.body["meta"]["tokens"]["input_tokens"]);
  const Reply whole = Post(http(), "/v2/rerank", {{"model", "reranker"}, {"query", query},
                                                  {"documents", {document.substr(0, end) + " more words"}}});
  EXPECT_GT(whole.body["meta"]["tokens"]["input_tokens"].get<int>(),
            cut.body["meta"]["tokens"]["input_tokens"].get<int>());
  EXPECT_EQ(Post(http(), "/v2/rerank", {{"model", "reranker"}, {"query", query}, {"documents", {document}},
                                        {"max_tokens_per_doc", 0}}).status, 422);
}

TEST_F(HttpApiTest, TokenizeInfoHealth) {
  const Reply t = Post(http(), "/tokenize", {{"inputs", "Hello world"}});
  ASSERT_EQ(t.status, 200) << t.raw;
  v1::TokenizeRequest req;
  req.add_inputs()->set_text("Hello world");
  v1::TokenizeResponse want;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Tokenize(&ctx, req, &want).ok());
  ASSERT_EQ(t.body.size(), 1u);
  const json& tokens = t.body[0];
  ASSERT_EQ(static_cast<int>(tokens.size()), want.results(0).input_ids_size());
  std::string rebuilt;
  for (size_t k = 0; k < tokens.size(); ++k) {
    EXPECT_EQ(tokens[k]["id"], want.results(0).input_ids(k));
    if (!tokens[k]["special"].get<bool>()) rebuilt += tokens[k]["text"].get<std::string>();
  }
  EXPECT_EQ(tokens.front()["special"], true);
  EXPECT_EQ(tokens.front()["text"], "[CLS]");
  EXPECT_TRUE(tokens.front()["start"].is_null());
  EXPECT_EQ(rebuilt, "Hello world");
  const Reply plain = Post(http(), "/tokenize", {{"inputs", {"Hello world"}}, {"add_special_tokens", false}});
  ASSERT_EQ(plain.status, 200);
  EXPECT_EQ(plain.body[0].size(), tokens.size() - 2);

  const Reply info = Call(http(), "GET", "/info");
  ASSERT_EQ(info.status, 200) << info.raw;
  EXPECT_EQ(info.body["served_model_name"], "embedder");
  EXPECT_THAT(info.body["model_id"].get<std::string>(), ::testing::EndsWith("/embedder"));  // what --model gave
  EXPECT_EQ(info.body["model_type"]["embedding"]["pooling"], "mean");
  EXPECT_EQ(info.body["max_input_length"], 512);
  EXPECT_EQ(info.body["max_client_batch_size"], 256);

  const Reply health = Call(http(), "GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.raw, "");
}

TEST_F(HttpApiTest, BadInputsGetPreciseErrors) {
  struct Case {
    std::string path, body;
    int status;
    std::string message;
  };
  std::string long_text;
  for (int i = 0; i < 600; ++i) long_text += " word";
  const std::vector<Case> cases = {
      {"/embed", "{\"inputs\": ", 400, "not valid JSON"},
      {"/embed", R"({"inputs": "a", "dimensions": 1e400})", 400, "number overflow"},
      {"/embed", "{\"inputs\": \"\xff\"}", 400, "UTF-8"},
      {"/embed", R"({"inputs": []})", 400, "inputs is empty"},
      {"/embed", R"({"inputs": 3})", 422, "inputs must be a string"},
      {"/embed", json{{"inputs", long_text}}.dump(), 413, "inputs[0]"},
      {"/embed", R"({"inputs": [[999999]]})", 422, "outside the vocabulary"},
      {"/embed", R"({"inputs": "x", "dimensions": 1000})", 422, "dimensions"},
      {"/rerank", R"({"query": "q", "texts": ["d"]})", 424, "no classification head"},
      {"/predict", R"({"inputs": "x"})", 424, "no classification head"},
      {"/v1/embeddings", R"({"input": "x", "model": "nope"})", 404, "\"nope\""},
      {"/v1/embeddings", R"({"input": [1, "x"]})", 422, "input[1] must be a token id"},
      {"/v1/rerank", R"({"model": "embedder", "query": "q", "documents": ["d"]})", 424, "no classification head"},
      {"/embed", std::string(kMaxBodyBytes + 10, ' '), 413, "larger than the limit of 65536 bytes"},
  };
  for (const Case& c : cases) {
    const Reply r = Call(http(), "POST", c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body.substr(0, 80) << ": " << r.raw;
    const bool openai = c.path.rfind("/v1/", 0) == 0;
    const json& message = openai ? r.body["error"]["message"] : r.body["error"];
    ASSERT_TRUE(message.is_string()) << r.raw;
    EXPECT_THAT(message.get<std::string>(), HasSubstr(c.message)) << c.path;
    if (openai) {
      EXPECT_EQ(Keys(r.body["error"]), (std::set<std::string>{"message", "type", "param", "code"})) << r.raw;
    } else {
      EXPECT_TRUE(r.body["error_type"].is_string()) << r.raw;
    }
  }
  const Reply empty = Call(http(), "POST", "/embed", R"({"inputs": []})");
  EXPECT_EQ(empty.body["error_type"], "Empty");
  const Reply unknown_route = Call(http(), "GET", "/nope");
  EXPECT_EQ(unknown_route.status, 404);
  EXPECT_EQ(unknown_route.body["error_type"], "Validation");
  // And the server still answers normally.
  EXPECT_EQ(Post(http(), "/embed", {{"inputs", "still fine"}}).status, 200);
}

TEST_F(HttpApiTest, CallsAreCountedWithTheRouteAndTheGrpcCodeName) {
  ASSERT_EQ(Post(http(), "/v1/embeddings", {{"input", "x"}, {"model", "embedder"}}).status, 200);
  ASSERT_EQ(Post(http(), "/v1/embeddings", {{"input", "x"}, {"model", "nope"}}).status, 404);
  ASSERT_EQ(Call(http(), "POST", "/embed", "{not json").status, 400);
  int code = 0;
  const std::string metrics = testing::HttpGet(server_->metrics_port(), "/metrics", &code);
  ASSERT_EQ(code, 200);
  EXPECT_THAT(metrics, HasSubstr("relserve_requests_total{code=\"OK\",model=\"embedder\",rpc=\"POST /v1/embeddings\"}"));
  EXPECT_THAT(metrics,
              HasSubstr("relserve_requests_total{code=\"NOT_FOUND\",model=\"unknown\",rpc=\"POST /v1/embeddings\"}"));
  // A body that cannot be read names no model: not counted under the default one.
  EXPECT_THAT(metrics,
              HasSubstr("relserve_requests_total{code=\"INVALID_ARGUMENT\",model=\"unknown\",rpc=\"POST /embed\"}"));
}

// Embeddings computed through gRPC for the same texts.
std::vector<std::vector<float>> GrpcEmbeddings(v1::Encoder::Stub* stub, const std::string& model,
                                               const std::vector<std::string>& texts, bool normalize) {
  v1::EmbedRequest req;
  req.set_model(model);
  req.set_normalize(normalize);
  for (const auto& t : texts) req.add_inputs()->set_text(t);
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub->Embed(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  std::vector<std::vector<float>> out;
  for (const auto& e : resp.embeddings()) out.push_back(Values(e));
  return out;
}

// TEI's POST / and SageMaker's POST /invocations do what the model is for; TEI's health routes.
TEST_F(HttpApiTest, RootAndInvocationsFollowTheModelsType) {
  for (const char* path : {"/", "/invocations"}) {
    const Reply embed = Post(http(), path, {{"inputs", {"Hello world"}}});
    ASSERT_EQ(embed.status, 200) << path << embed.raw;
    EXPECT_EQ(embed.body, Post(http(), "/embed", {{"inputs", {"Hello world"}}}).body) << path;
    const json rerank_body = {{"model", "reranker"}, {"query", "what is relserve?"}, {"texts", {"a server", "soup"}}};
    const Reply rerank = Post(http(), path, rerank_body);
    ASSERT_EQ(rerank.status, 200) << path << rerank.raw;
    EXPECT_EQ(rerank.body, Post(http(), "/rerank", rerank_body).body) << path;
    const json predict_body = {{"model", "classifier"}, {"inputs", "good"}};
    const Reply predict = Post(http(), path, predict_body);
    ASSERT_EQ(predict.status, 200) << path << predict.raw;
    EXPECT_EQ(predict.body, Post(http(), "/predict", predict_body).body) << path;
    EXPECT_EQ(predict.body.size(), 3u);
    EXPECT_EQ(Post(http(), path, {{"model", "nope"}, {"inputs", "x"}}).status, 404);
  }
  for (const char* path : {"/", "/ping", "/health"}) {
    const Reply health = Call(http(), "GET", path);
    EXPECT_EQ(health.status, 200) << path;
    EXPECT_EQ(health.raw, "") << path;
  }
}

TEST_F(HttpApiTest, EmbeddingsWithoutV1IsOpenAIsRoute) {
  const json body = {{"input", {"Hello world", "other"}}, {"model", "embedder"}};
  const Reply r = Post(http(), "/embeddings", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body, Post(http(), "/v1/embeddings", body).body);
  const Reply bad = Post(http(), "/embeddings", {{"input", json::array()}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Keys(bad.body["error"]), (std::set<std::string>{"message", "type", "param", "code"})) << bad.raw;
  // Infinity's GET /models is OpenAI's list.
  EXPECT_EQ(Call(http(), "GET", "/models").body, Call(http(), "GET", "/v1/models").body);
}

// LangChain's OpenAIEmbeddings sends tiktoken's ids: the error says how to send text.
TEST_F(HttpApiTest, ForeignTokenIdsNameLangChainsSetting) {
  for (const char* path : {"/v1/embeddings", "/embeddings"}) {
    const Reply r = Post(http(), path, {{"input", {{9906, 1917, 100257}}}});
    EXPECT_EQ(r.status, 422) << r.raw;
    EXPECT_THAT(r.body["error"]["message"].get<std::string>(), HasSubstr("outside the vocabulary"));
    EXPECT_THAT(r.body["error"]["message"].get<std::string>(), HasSubstr("check_embedding_ctx_length=False"));
  }
  // Text that is too long is not about token ids.
  const Reply text = Post(http(), "/v1/embeddings", {{"input", LongText()}});
  EXPECT_EQ(text.status, 400);  // OpenAI's status for an over-long input
  EXPECT_THAT(text.body["error"]["message"].get<std::string>(), Not(HasSubstr("check_embedding_ctx_length")));
}

TEST_F(HttpApiTest, EmbedAllEqualsGrpcEmbedTokens) {
  const Reply r = Post(http(), "/embed_all", {{"inputs", {"Hello world", "a second text"}}, {"model", "t5"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  v1::EmbedTokensRequest req;
  req.set_model("t5");
  req.add_inputs()->set_text("Hello world");
  req.add_inputs()->set_text("a second text");
  v1::EmbedTokensResponse want;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->EmbedTokens(&ctx, req, &want).ok());
  ASSERT_EQ(r.body.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const v1::TokenStates& s = want.sequences(i);
    ASSERT_EQ(static_cast<int>(r.body[i].size()), s.token_ids_size()) << i;
    for (int k = 0; k < s.token_ids_size(); ++k) {
      const std::vector<float> row = r.body[i][k].get<std::vector<float>>();
      ASSERT_EQ(static_cast<int>(row.size()), s.hidden_size());
      const std::vector<float> expected(s.values().begin() + k * s.hidden_size(),
                                        s.values().begin() + (k + 1) * s.hidden_size());
      EXPECT_LE(MaxAbsDiff(row, expected), 1e-6) << i << " " << k;
    }
  }
  EXPECT_EQ(r.headers.count("x-compute-tokens"), 1u);
  EXPECT_EQ(Post(http(), "/embed_all", {{"inputs", json::array()}}).status, 400);
}

// /tokenize gives every token of a long text; /decode turns ids back into the text.
TEST_F(HttpApiTest, TokenizeWholeTextsAndDecode) {
  const Reply whole = Post(http(), "/tokenize", {{"inputs", LongText()}});
  ASSERT_EQ(whole.status, 200) << whole.raw.substr(0, 300);
  EXPECT_GT(whole.body[0].size(), 512u);  // past the model's maximum: neither cut nor refused
  EXPECT_EQ(whole.body[0].back()["special"], true);

  const Reply t = Post(http(), "/tokenize", {{"inputs", "Hello world"}});
  ASSERT_EQ(t.status, 200) << t.raw;
  json ids = json::array();
  for (const json& token : t.body[0]) ids.push_back(token["id"]);
  const Reply text = Post(http(), "/decode", {{"ids", ids}});
  ASSERT_EQ(text.status, 200) << text.raw;
  EXPECT_EQ(text.body, json::parse(R"(["Hello world"])"));
  const Reply with_special = Post(http(), "/decode", {{"ids", {ids, ids}}, {"skip_special_tokens", false}});
  ASSERT_EQ(with_special.status, 200) << with_special.raw;
  EXPECT_EQ(with_special.body, json::parse(R"(["[CLS] Hello world[SEP]", "[CLS] Hello world[SEP]"])"));
  // T5 (model t5): its own template, no [CLS] in front, its end of sequence at the end.
  const Reply t5 = Post(http(), "/tokenize", {{"inputs", "Hello world"}, {"model", "t5"}});
  ASSERT_EQ(t5.status, 200) << t5.raw;
  EXPECT_EQ(t5.body[0].front()["special"], false);
  EXPECT_EQ(t5.body[0].back()["special"], true);
  json t5_ids = json::array();
  for (const json& token : t5.body[0]) t5_ids.push_back(token["id"]);
  EXPECT_EQ(Post(http(), "/decode", {{"ids", t5_ids}, {"model", "t5"}}).body, json::parse(R"(["Hello world"])"));

  const Reply outside = Post(http(), "/decode", {{"ids", {{5}, {5, 999999}}}});
  EXPECT_EQ(outside.status, 422) << outside.raw;
  EXPECT_THAT(outside.body["error"].get<std::string>(), HasSubstr("ids[1][1] = 999999 is outside the vocabulary"));
  EXPECT_EQ(Post(http(), "/decode", {{"ids", {5}}, {"model", "nope"}}).status, 404);
}

TEST_F(HttpApiTest, TeiHeadersOnComputingRoutes) {
  const Reply r = Post(http(), "/embed", {{"inputs", {"Hello world", "h\xC3\xA9"}}});
  ASSERT_EQ(r.status, 200) << r.raw;
  for (const char* h : {"x-compute-time", "x-compute-characters", "x-compute-tokens", "x-total-time",
                        "x-tokenization-time", "x-queue-time", "x-inference-time"}) {
    ASSERT_EQ(r.headers.count(h), 1u) << h;
    const std::string v = r.headers.find(h)->second;
    EXPECT_FALSE(v.empty()) << h;
    EXPECT_EQ(v.find_first_not_of("0123456789"), std::string::npos) << h << ": " << v;  // whole milliseconds
  }
  EXPECT_EQ(r.headers.find("x-compute-characters")->second, "13");
  v1::TokenizeRequest req;
  req.add_inputs()->set_text("Hello world");
  req.add_inputs()->set_text("h\xC3\xA9");
  v1::TokenizeResponse tokens;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Tokenize(&ctx, req, &tokens).ok());
  EXPECT_EQ(r.headers.find("x-compute-tokens")->second,
            std::to_string(tokens.results(0).input_ids_size() + tokens.results(1).input_ids_size()));
  for (const auto& [path, body] : std::vector<std::pair<std::string, json>>{
           {"/v1/embeddings", {{"input", "x"}}},
           {"/embeddings", {{"input", "x"}}},
           {"/rerank", {{"model", "reranker"}, {"query", "q"}, {"texts", {"d"}}}},
           {"/predict", {{"model", "classifier"}, {"inputs", "x"}}}}) {
    const Reply c = Post(http(), path, body);
    ASSERT_EQ(c.status, 200) << path << c.raw;
    EXPECT_EQ(c.headers.count("x-inference-time"), 1u) << path;
  }
  EXPECT_EQ(Post(http(), "/rerank", {{"model", "reranker"}, {"query", "ab"}, {"texts", {"c", "de"}}})
                .headers.find("x-compute-characters")
                ->second,
            "7");  // the query counts once per text, as TEI counts it
}

// `dimensions` without `normalize` cuts and does not normalise (TEI); OpenAI's renormalises.
TEST_F(HttpApiTest, TeiDimensionsWithoutNormalize) {
  const Reply r = Post(http(), "/embed", {{"inputs", "Hello world"}, {"normalize", false}, {"dimensions", 8}});
  ASSERT_EQ(r.status, 200) << r.raw;
  std::vector<float> raw = GrpcEmbeddings(stub_.get(), "", {"Hello world"}, false)[0];
  raw.resize(8);
  EXPECT_LE(MaxAbsDiff(r.body[0].get<std::vector<float>>(), raw), 1e-6);
  double norm = 0;
  for (float x : raw) norm += double(x) * x;
  EXPECT_GT(std::fabs(std::sqrt(norm) - 1), 1e-3);  // not a unit vector
  const Reply unit = Post(http(), "/embed", {{"inputs", "Hello world"}, {"dimensions", 8}});
  ASSERT_EQ(unit.status, 200);
  const Reply openai = Post(http(), "/v1/embeddings", {{"input", "Hello world"}, {"dimensions", 8}});
  EXPECT_LE(MaxAbsDiff(unit.body[0].get<std::vector<float>>(), openai.body["data"][0]["embedding"].get<std::vector<float>>()),
            1e-6);
}

// TEI's routes take `model` (relserve's extension); absent, the default model.
TEST_F(HttpApiTest, TeiRoutesTakeAModel) {
  const Reply t5 = Post(http(), "/embed", {{"inputs", {"Hello world"}}, {"model", "t5"}, {"normalize", false}});
  ASSERT_EQ(t5.status, 200) << t5.raw;
  EXPECT_LE(MaxAbsDiff(t5.body[0].get<std::vector<float>>(), GrpcEmbeddings(stub_.get(), "t5", {"Hello world"}, false)[0]),
            1e-6);
  const Reply unknown = Post(http(), "/embed", {{"inputs", "x"}, {"model", "nope"}});
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.body["error_type"], "Validation");
  EXPECT_EQ(Post(http(), "/embed", {{"inputs", "x"}, {"model", 1}}).status, 422);
  const Reply rerank = Post(http(), "/rerank", {{"model", "reranker"}, {"query", "q"}, {"texts", {"a", "b"}}});
  EXPECT_EQ(rerank.status, 200) << rerank.raw;
  int code = 0;
  const std::string metrics = testing::HttpGet(server_->metrics_port(), "/metrics", &code);
  EXPECT_THAT(metrics, HasSubstr("relserve_requests_total{code=\"OK\",model=\"t5\",rpc=\"POST /embed\"}"));
}

// TEI's scores: the sigmoid of a one-label head's logit on /predict; gRPC's Classify keeps the
// problem type's (regression for an unlabelled one-label head: the logit).
TEST_F(HttpApiTest, PredictOnAOneLabelHeadIsTheSigmoid) {
  const Reply r = Post(http(), "/predict", {{"model", "reranker"}, {"inputs", {"what is relserve?", "a server"}}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const Reply raw = Post(http(), "/predict",
                         {{"model", "reranker"}, {"inputs", {"what is relserve?", "a server"}}, {"raw_scores", true}});
  ASSERT_EQ(raw.status, 200) << raw.raw;
  v1::ClassifyRequest req;
  req.set_model("reranker");
  auto* pair = req.add_inputs()->mutable_pair();
  pair->set_first("what is relserve?");
  pair->set_second("a server");
  v1::ClassifyResponse want;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->Classify(&ctx, req, &want).ok());
  const float logit = want.results(0).logits(0);
  EXPECT_NEAR(want.results(0).labels(0).score(), logit, 1e-6);  // gRPC: unchanged
  ASSERT_EQ(r.body.size(), 1u);
  EXPECT_NEAR(r.body[0]["score"].get<double>(), 1 / (1 + std::exp(-double(logit))), 1e-6);
  EXPECT_NEAR(raw.body[0]["score"].get<double>(), logit, 1e-6);
  // And the same score /rerank gives the pair.
  const Reply rerank = Post(http(), "/rerank", {{"model", "reranker"}, {"query", "what is relserve?"}, {"texts", {"a server"}}});
  EXPECT_NEAR(rerank.body[0]["score"].get<double>(), r.body[0]["score"].get<double>(), 1e-6);
}

TEST_F(HttpApiTest, MetricsAndOpenApiOnTheApiPort) {
  ASSERT_EQ(Post(http(), "/embed", {{"inputs", "x"}}).status, 200);
  const Reply m = Call(http(), "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_THAT(m.raw, HasSubstr("relserve_requests_total{code=\"OK\",model=\"embedder\",rpc=\"POST /embed\"}"));
  EXPECT_THAT(m.headers.find("Content-Type")->second, HasSubstr("text/plain"));
  const Reply doc = Call(http(), "GET", "/api-doc/openapi.json");
  ASSERT_EQ(doc.status, 200);
  EXPECT_EQ(doc.body["openapi"], "3.0.3");
  EXPECT_TRUE(doc.body["paths"].contains("/embed_all"));
}

TEST_F(HttpApiTest, CohereV2RerankAndEmbed) {
  const std::vector<std::string> docs = {"a model server", "a recipe for soup", "relative attention encoders"};
  const Reply r = Post(http(), "/v2/rerank", {{"model", "reranker"}, {"query", "what is relserve?"},
                                               {"documents", docs}, {"top_n", 2}, {"max_tokens_per_doc", 4096}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const Reply v1 = Post(http(), "/v1/rerank", {{"model", "reranker"}, {"query", "what is relserve?"},
                                               {"documents", docs}, {"top_n", 2}});
  EXPECT_EQ(r.body["results"], v1.body["results"]);
  EXPECT_EQ(r.body["id"].get<std::string>().size(), 36u);
  EXPECT_EQ(r.body["meta"]["api_version"]["version"], "2");

  const std::vector<std::string> texts = {"Hello world", "other"};
  const std::vector<std::vector<float>> want = GrpcEmbeddings(stub_.get(), "embedder", texts, true);
  const Reply e = Post(http(), "/v2/embed", {{"model", "embedder"}, {"texts", texts}, {"input_type", "search_query"},
                                             {"embedding_types", {"float", "int8", "ubinary"}}});
  ASSERT_EQ(e.status, 200) << e.raw;
  EXPECT_EQ(e.body["texts"], json(texts));
  EXPECT_EQ(e.body["response_type"], "embeddings_by_type");
  ASSERT_EQ(e.body["embeddings"]["float"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_LE(MaxAbsDiff(e.body["embeddings"]["float"][i].get<std::vector<float>>(), want[i]), 1e-6);
    const std::vector<int> int8 = e.body["embeddings"]["int8"][i].get<std::vector<int>>();
    ASSERT_EQ(int8.size(), want[i].size());
    int largest = 0;
    for (int x : int8) largest = std::max(largest, std::abs(x));
    EXPECT_EQ(largest, 127);  // scaled to the int8 range, vector by vector
    EXPECT_EQ(e.body["embeddings"]["ubinary"][i].size(), (want[i].size() + 7) / 8);
  }
  const Reply v1_embed = Post(http(), "/v1/embed", {{"texts", texts}});
  ASSERT_EQ(v1_embed.status, 200) << v1_embed.raw;
  EXPECT_EQ(v1_embed.body["response_type"], "embeddings_floats");
  EXPECT_LE(MaxAbsDiff(v1_embed.body["embeddings"][1].get<std::vector<float>>(), want[1]), 1e-6);
  const Reply bad = Post(http(), "/v2/embed", {{"texts", texts}, {"embedding_types", {"int4"}}});
  EXPECT_EQ(bad.status, 422);
  EXPECT_THAT(bad.body["message"].get<std::string>(), HasSubstr("embedding_types[0] must be one of"));
  EXPECT_EQ(Post(http(), "/v2/rerank", {{"model", "nope"}, {"query", "q"}, {"documents", {"d"}}}).body.count("message"),
            1u);
}

// Infinity's shapes: /rerank with `documents`, /classify with `input`.
TEST_F(HttpApiTest, InfinityRerankAndClassify) {
  const std::vector<std::string> docs = {"a model server", "a recipe for soup"};
  const Reply r = Post(http(), "/rerank", {{"model", "reranker"}, {"query", "what is relserve?"}, {"documents", docs},
                                           {"return_documents", true}, {"top_n", 1}});
  ASSERT_EQ(r.status, 200) << r.raw;
  const Reply tei = Post(http(), "/rerank", {{"model", "reranker"}, {"query", "what is relserve?"}, {"texts", docs}});
  EXPECT_EQ(r.body["object"], "rerank");
  ASSERT_EQ(r.body["results"].size(), 1u);
  EXPECT_EQ(r.body["results"][0]["index"], tei.body[0]["index"]);
  EXPECT_NEAR(r.body["results"][0]["relevance_score"].get<double>(), tei.body[0]["score"].get<double>(), 1e-6);
  EXPECT_EQ(r.body["results"][0]["document"], docs[tei.body[0]["index"].get<int>()]);
  EXPECT_EQ(r.body["model"], "reranker");
  EXPECT_GT(r.body["usage"]["total_tokens"].get<int>(), 0);

  const Reply c = Post(http(), "/classify", {{"model", "classifier"}, {"input", {"good", "bad"}}});
  ASSERT_EQ(c.status, 200) << c.raw;
  const Reply p = Post(http(), "/predict", {{"model", "classifier"}, {"inputs", {{"good"}, {"bad"}}}});
  EXPECT_EQ(c.body["object"], "classify");
  EXPECT_EQ(c.body["data"], p.body);
}

// TEI's /rerank and /predict name no model: they use the default one.
TEST(HttpApiDefaultModelTest, TeiRerankAndPredictUseTheDefaultModelAndEqualGrpc) {
  auto reranking = StartServer({"reranker", "embedder"});
  ASSERT_NE(reranking, nullptr);
  const std::vector<std::string> texts = {"a model server", "a recipe for soup", "x"};
  const Reply r = Post(reranking->http_port(), "/rerank",
                       {{"query", "what is relserve?"}, {"texts", texts}, {"return_text", true}});
  ASSERT_EQ(r.status, 200) << r.raw;
  auto stub = Connect(reranking->grpc_port());
  v1::RerankRequest req;
  req.set_query("what is relserve?");
  for (const auto& t : texts) req.add_documents(t);
  v1::RerankResponse want;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->Rerank(&ctx, req, &want).ok());
  ASSERT_EQ(r.body.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(r.body[k]["index"], want.results(k).index());
    EXPECT_NEAR(r.body[k]["score"].get<double>(), want.results(k).score(), 1e-6);
    EXPECT_EQ(r.body[k]["text"], texts[want.results(k).index()]);
  }
  const Reply info = Call(reranking->http_port(), "GET", "/info");
  EXPECT_TRUE(info.body["model_type"].contains("reranker")) << info.raw;
  reranking.reset();

  auto classifying = StartServer({"classifier"});
  ASSERT_NE(classifying, nullptr);
  const Reply single = Post(classifying->http_port(), "/predict", {{"inputs", "good"}});
  const Reply batch = Post(classifying->http_port(), "/predict", {{"inputs", {{"good"}, {"premise", "hypothesis"}}}});
  ASSERT_EQ(single.status, 200) << single.raw;
  ASSERT_EQ(batch.status, 200) << batch.raw;
  auto cstub = Connect(classifying->grpc_port());
  v1::ClassifyRequest creq;
  creq.add_inputs()->set_text("good");
  auto* pair = creq.add_inputs()->mutable_pair();
  pair->set_first("premise");
  pair->set_second("hypothesis");
  v1::ClassifyResponse cwant;
  grpc::ClientContext cctx;
  ASSERT_TRUE(cstub->Classify(&cctx, creq, &cwant).ok());
  ASSERT_EQ(single.body.size(), 3u);  // one input: its predictions, not a batch
  ASSERT_EQ(batch.body.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    for (int k = 0; k < 3; ++k) {
      const json& p = batch.body[i][k];
      EXPECT_EQ(p["label"], cwant.results(i).labels(k).label());
      EXPECT_NEAR(p["score"].get<double>(), cwant.results(i).labels(k).score(), 1e-6);
      if (i == 0) {
        EXPECT_EQ(single.body[k]["label"], p["label"]);
      }
    }
  }
}

// --auto-truncate on every route: requests that do not say are cut (OpenAI's and Cohere's
// have no such field); TEI's "truncate": false still refuses; /info reports it. With
// --auto-truncate false an over-long input is refused in each API's own words: OpenAI's 400
// invalid_request_error about `input`, TEI's 413 Validation.
TEST(HttpApiAutoTruncateTest, RoutesTruncateUnlessTheRequestSaysNot) {
  auto refusing = StartServer({}, 16 << 20);  // TestServerConfig: --auto-truncate false
  ASSERT_NE(refusing, nullptr);
  const Reply openai_refused = Post(refusing->http_port(), "/v1/embeddings", {{"input", LongText()}});
  EXPECT_EQ(openai_refused.status, 400) << openai_refused.raw;
  EXPECT_EQ(openai_refused.body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(openai_refused.body["error"]["param"], "input");
  EXPECT_THAT(openai_refused.body["error"]["message"].get<std::string>(), HasSubstr("max_length 512"));
  const Reply tei_refused = Post(refusing->http_port(), "/embed", {{"inputs", LongText()}});
  EXPECT_EQ(tei_refused.status, 413) << tei_refused.raw;
  EXPECT_EQ(tei_refused.body["error_type"], "Validation");
  // Other bad fields keep their status on both: 422.
  EXPECT_EQ(Post(refusing->http_port(), "/v1/embeddings", {{"input", "x"}, {"dimensions", 100000}}).status, 422);
  EXPECT_EQ(Call(refusing->http_port(), "GET", "/info").body["auto_truncate"], false);
  refusing.reset();

  // The default, as TEI 1.9's: on.
  ServerConfig config = TestServerConfig();
  config.auto_truncate = ServerConfig().auto_truncate;
  ASSERT_TRUE(config.auto_truncate);
  auto server = RelserveServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->http_port();
  const Reply openai = Post(port, "/v1/embeddings", {{"input", {LongText(), "short"}}});
  ASSERT_EQ(openai.status, 200) << openai.raw;
  EXPECT_EQ(openai.body["data"].size(), 2u);
  const Reply tei = Post(port, "/embed", {{"inputs", LongText()}});
  ASSERT_EQ(tei.status, 200) << tei.raw;
  const Reply tei_null = Post(port, "/embed", {{"inputs", LongText()}, {"truncate", nullptr}});
  EXPECT_EQ(tei_null.status, 200) << tei_null.raw;
  const Reply tei_no = Post(port, "/embed", {{"inputs", LongText()}, {"truncate", false}});
  EXPECT_EQ(tei_no.status, 413) << tei_no.raw;
  EXPECT_THAT(tei_no.body["error"].get<std::string>(), HasSubstr("inputs[0].text"));
  const Reply cohere =
      Post(port, "/v1/rerank", {{"model", "reranker"}, {"query", "what"}, {"documents", {LongText(), "short"}}});
  ASSERT_EQ(cohere.status, 200) << cohere.raw;
  EXPECT_EQ(cohere.body["results"].size(), 2u);
  EXPECT_EQ(Call(port, "GET", "/info").body["auto_truncate"], true);
  // The same embedding as gRPC's for the same request without `truncate`.
  v1::EmbedRequest req;
  req.set_normalize(true);
  req.add_inputs()->set_text(LongText());
  v1::EmbedResponse want;
  grpc::ClientContext ctx;
  ASSERT_TRUE(Connect((*server)->grpc_port())->Embed(&ctx, req, &want).ok());
  EXPECT_TRUE(want.embeddings(0).truncated());
  EXPECT_LE(MaxAbsDiff(tei.body[0].get<std::vector<float>>(), Values(want.embeddings(0))), 1e-6);
}

// Deadlines end to end: X-Request-Timeout (shorter than --http-request-timeout) and the flag
// itself. A call too large to finish in time is 504 in its route's error shape and counted as
// DEADLINE_EXCEEDED; the server goes on serving.
TEST(HttpApiDeadlineTest, ACallPastItsDeadlineIs504AndTheServerGoesOn) {
  auto server = StartServer({}, 16 << 20);
  ASSERT_NE(server, nullptr);
  const int port = server->http_port();
  json inputs = json::array();
  for (int i = 0; i < 200; ++i) inputs.push_back(LongText().substr(0, 400) + std::to_string(i));  // ~280 tokens
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  auto openai = client.Post("/v1/embeddings", {{"X-Request-Timeout", "1ms"}}, json{{"input", inputs}}.dump(),
                            "application/json");
  ASSERT_TRUE(openai);
  EXPECT_EQ(openai->status, 504) << openai->body.substr(0, 600);
  EXPECT_EQ(json::parse(openai->body)["error"]["code"], "deadline_exceeded");
  auto tei = client.Post("/embed", {{"X-Request-Timeout", "0.001"}}, json{{"inputs", inputs}}.dump(),
                         "application/json");
  ASSERT_TRUE(tei);
  EXPECT_EQ(tei->status, 504) << tei->body.substr(0, 300);
  EXPECT_EQ(json::parse(tei->body)["error_type"], "Backend");
  EXPECT_EQ(Post(port, "/embed", {{"inputs", "still served"}}).status, 200);
  auto bad = client.Post("/embed", {{"X-Request-Timeout", "later"}}, R"({"inputs": "x"})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("X-Request-Timeout"));
  int code = 0;
  const std::string metrics = testing::HttpGet(server->metrics_port(), "/metrics", &code);
  EXPECT_THAT(metrics, HasSubstr("relserve_requests_total{code=\"DEADLINE_EXCEEDED\",model=\"embedder\",rpc=\"POST "
                                 "/v1/embeddings\"} 1"));
  server.reset();

  ServerConfig config = TestServerConfig();
  config.http_request_timeout = absl::Milliseconds(1);
  auto strict = RelserveServer::Start(config);
  ASSERT_TRUE(strict.ok()) << strict.status();
  const Reply late = Post((*strict)->http_port(), "/embed", {{"inputs", inputs}});
  EXPECT_EQ(late.status, 504) << late.raw.substr(0, 300);
  EXPECT_EQ(Call((*strict)->http_port(), "GET", "/v1/models").status, 200);  // answered without waiting
}

// A client that disconnects while its call waits cancels the call: its sequences still queued
// are dropped, and the call is counted as CANCELLED.
TEST(HttpApiDisconnectTest, AClientThatGoesAwayCancelsItsQueuedSequences) {
  auto server = StartServer({}, 16 << 20);
  ASSERT_NE(server, nullptr);
  std::string long_text;
  for (int i = 0; i < 60; ++i) long_text += " word" + std::to_string(i);  // about 300 tokens
  json inputs = json::array();
  for (int i = 0; i < 250; ++i) inputs.push_back(long_text + std::to_string(i));
  const std::string body = json{{"inputs", inputs}}.dump();
  // A raw connection, closed as soon as the request has been read (tokenized and queued).
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server->http_port()));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request = "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  auto metrics = [&] {
    int code = 0;
    return testing::HttpGet(server->metrics_port(), "/metrics", &code);
  };
  for (int spin = 0; spin < 2000; ++spin) {
    if (metrics().find("relserve_tokenize_duration_seconds_count{model=\"embedder\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  close(fd);
  const std::string cancelled = "relserve_requests_total{code=\"CANCELLED\",model=\"embedder\",rpc=\"POST /embed\"} 1";
  std::string m;
  for (int spin = 0; spin < 600; ++spin) {
    m = metrics();
    if (m.find("rpc=\"POST /embed\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string requests;  // the relserve_requests_total lines, for a short failure message
  for (absl::string_view line : absl::StrSplit(m, '\n')) {
    if (absl::StartsWith(line, "relserve_requests_total")) absl::StrAppend(&requests, line, "\n");
  }
  EXPECT_THAT(requests, HasSubstr(cancelled));
  EXPECT_THAT(requests, Not(HasSubstr("relserve_requests_total{code=\"OK\",model=\"embedder\",rpc=\"POST /embed\"}")));
}

// Shutdown waits for HTTP calls as for gRPC ones: those running finish with their answer.
TEST(HttpApiShutdownTest, InFlightHttpCallsFinishBeforeTheBatchersStop) {
  auto server = StartServer({}, 16 << 20);
  ASSERT_NE(server, nullptr);
  const int port = server->http_port();
  std::string long_text;
  for (int i = 0; i < 60; ++i) long_text += " word" + std::to_string(i);  // about 300 tokens
  json inputs = json::array();
  for (int i = 0; i < 200; ++i) inputs.push_back(long_text + std::to_string(i));
  constexpr int kCalls = 6;
  std::vector<Reply> replies(kCalls);
  std::vector<std::thread> clients;
  for (int i = 0; i < kCalls; ++i) {
    clients.emplace_back([&, i] { replies[i] = Post(port, "/embed", {{"inputs", inputs}}); });
  }
  // Until the calls are under way (their batches queued or running).
  for (int spin = 0; spin < 2000; ++spin) {
    int code = 0;
    const std::string m = testing::HttpGet(server->metrics_port(), "/metrics", &code);
    if (m.find("relserve_tokenize_duration_seconds_count{model=\"embedder\"} " + std::to_string(kCalls)) !=
        std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  server->Shutdown(absl::Seconds(60));
  for (auto& t : clients) t.join();
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(replies[i].status, 200) << i << ": " << replies[i].raw.substr(0, 200);
    EXPECT_EQ(replies[i].body.size(), 200u);
  }
}

}  // namespace
}  // namespace relserve
