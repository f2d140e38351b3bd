// sentence-transformers models served as SentenceTransformer.encode embeds: max_seq_length cuts
// (or refuses) long texts on gRPC and HTTP, prompts (prompt_name, default_prompt_name,
// include_prompt false) go before the text, do_lower_case lowers it, and ListModels and TEI's
// /info say how the embeddings compare. Every model here is a copy of the test embedder
// (same weights) with other sentence-transformers files.
#include <httplib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/util/file_util.h"
#include "tests/server/server_test_env.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;
using testing::Connect;
using testing::TestModels;
using testing::TestServerConfig;

constexpr int kMaxSeqLength = 16;

struct Reply {
  int status = 0;
  json body;
  std::string raw;
};

Reply Call(int port, const std::string& path, const json* body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  auto r = body == nullptr ? client.Get(path.c_str()) : client.Post(path.c_str(), body->dump(), "application/json");
  Reply out;
  if (!r) {
    out.raw = "transport error: " + httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.raw = r->body;
  if (!r->body.empty()) out.body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  return out;
}
Reply Post(int port, const std::string& path, const json& body) { return Call(port, path, &body); }
Reply Get(int port, const std::string& path) { return Call(port, path, nullptr); }

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// testing::MaxAbsDiff, and an empty answer never matches.
double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  return a.empty() ? testing::kNotComparable : testing::MaxAbsDiff(a, b);
}

std::vector<float> FromJson(const json& v) {
  std::vector<float> out;
  for (const json& x : v) out.push_back(x.get<float>());
  return out;
}

// The test embedder with other sentence-transformers files, made once per process:
//   st          max_seq_length 16, prompts query/document, similarity "dot" (the default model)
//   st_default  the same prompts, default_prompt_name "query"
//   st_lower    do_lower_case true
//   st_skip     prompts, Pooling include_prompt false
//   embedder    the embedder as it is: max_seq_length 512, no prompts
class StModels {
 public:
  static const StModels& Get() {
    static const StModels* models = new StModels();
    return *models;
  }
  std::string dir(const std::string& name) const { return root_ + "/" + name; }

 private:
  StModels() {
    root_ = (fs::temp_directory_path() / ("relserve-st-test-" + std::to_string(getpid()))).string();
    fs::remove_all(root_);
    fs::create_directories(root_);
    const std::string prompts = R"("prompts": {"query": "query: ", "document": "passage: "})";
    auto make = [&](const std::string& name, const std::string& bert_config, const std::string& st_config) {
      fs::copy(TestModels::Get().dir("embedder"), dir(name), fs::copy_options::recursive);
      if (!bert_config.empty()) WriteFile(dir(name) + "/sentence_bert_config.json", bert_config);
      if (!st_config.empty()) WriteFile(dir(name) + "/config_sentence_transformers.json", st_config);
    };
    make("st", R"({"max_seq_length": 16, "do_lower_case": false})",
         "{" + prompts + R"(, "default_prompt_name": null, "similarity_fn_name": "dot"})");
    make("st_default", "", "{" + prompts + R"(, "default_prompt_name": "query"})");
    make("st_lower", R"({"max_seq_length": 512, "do_lower_case": true})", "");
    make("st_skip", "", "{" + prompts + "}");
    std::ifstream in(dir("st_skip") + "/1_Pooling/config.json");
    json pooling = json::parse(in);
    pooling["include_prompt"] = false;
    WriteFile(dir("st_skip") + "/1_Pooling/config.json", pooling.dump());
    std::atexit([] { fs::remove_all(Get().root_); });
  }
  std::string root_;
};

ServerConfig StServerConfig() {
  ServerConfig config = TestServerConfig();
  config.models.clear();
  for (const char* name : {"st", "st_default", "st_lower", "st_skip"}) {
    config.models.emplace_back(name, StModels::Get().dir(name));
  }
  config.models.emplace_back("embedder", TestModels::Get().dir("embedder"));
  return config;
}

class SentenceTransformersServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = RelserveServer::Start(StServerConfig());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = Connect(server_->grpc_port());
  }
  int http() const { return server_->http_port(); }

  grpc::Status Embed(const v1::EmbedRequest& request, v1::EmbedResponse* response) {
    grpc::ClientContext ctx;
    return stub_->Embed(&ctx, request, response);
  }
  // One text's embedding (and its token count) from `model`, with a prompt_name when given.
  std::vector<float> EmbedText(const std::string& model, const std::string& text, const std::string& prompt_name = "",
                               int* tokens = nullptr, bool truncate = false) {
    v1::EmbedRequest req;
    req.set_model(model);
    req.add_inputs()->set_text(text);
    req.set_prompt_name(prompt_name);
    if (truncate) req.set_truncate(true);
    v1::EmbedResponse resp;
    grpc::Status s = Embed(req, &resp);
    EXPECT_TRUE(s.ok()) << model << " " << text << ": " << s.error_message();
    if (!s.ok() || resp.embeddings_size() != 1) return {};
    if (tokens != nullptr) *tokens = resp.embeddings(0).num_tokens();
    return {resp.embeddings(0).values().begin(), resp.embeddings(0).values().end()};
  }
  std::vector<int32_t> TokenIds(const std::string& model, const std::string& text) {
    v1::TokenizeRequest req;
    req.set_model(model);
    req.add_inputs()->set_text(text);
    req.set_truncate(false);
    v1::TokenizeResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = stub_->Tokenize(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok()) return {};
    return {resp.results(0).input_ids().begin(), resp.results(0).input_ids().end()};
  }

  std::unique_ptr<v1::Encoder::Stub> stub_;
  static RelserveServer* server_;
};
RelserveServer* SentenceTransformersServerTest::server_ = nullptr;

// A text well past 16 tokens.
std::string LongText() {
  std::string text;
  for (int i = 0; i < 12; ++i) text += "the quick brown fox jumps over the lazy dog ";
  return text;
}

TEST_F(SentenceTransformersServerTest, MaxSeqLengthIsTheModelsMaximum) {
  v1::ListModelsResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->ListModels(&ctx, v1::ListModelsRequest(), &resp).ok());
  std::map<std::string, int> lengths;
  for (const v1::ModelInfo& m : resp.models()) lengths[m.name()] = m.max_length();
  EXPECT_EQ(lengths["st"], kMaxSeqLength);
  EXPECT_EQ(lengths["embedder"], 512);
  const Reply info = Get(http(), "/info");
  ASSERT_EQ(info.status, 200) << info.raw;
  EXPECT_EQ(info.body["max_input_length"], kMaxSeqLength);
}

TEST_F(SentenceTransformersServerTest, LongTextsAreCutAtMaxSeqLengthOnGrpcAndHttp) {
  // What the text becomes cut to 16 tokens by hand: [CLS], its first 14 tokens, [SEP].
  const std::vector<int32_t> whole = TokenIds("embedder", LongText());
  ASSERT_GT(whole.size(), 40u);
  std::vector<int32_t> cut(whole.begin(), whole.begin() + kMaxSeqLength - 1);
  cut.push_back(whole.back());
  v1::EmbedRequest by_hand;
  by_hand.set_model("embedder");
  auto* tokens = by_hand.add_inputs()->mutable_tokens();
  for (int32_t id : cut) tokens->add_ids(id);
  v1::EmbedResponse want;
  ASSERT_TRUE(Embed(by_hand, &want).ok());
  const std::vector<float> expected(want.embeddings(0).values().begin(), want.embeddings(0).values().end());
  // The whole text through the limitless embedder differs: the cut matters.
  EXPECT_GT(MaxDiff(EmbedText("embedder", LongText()), expected), 1e-3);

  // gRPC with truncate: cut at 16.
  int n = 0;
  EXPECT_LT(MaxDiff(EmbedText("st", LongText(), "", &n, /*truncate=*/true), expected), 1e-5);
  EXPECT_EQ(n, kMaxSeqLength);
  // Without truncate (and --auto-truncate false, as TestServerConfig sets): refused, naming the limit.
  v1::EmbedRequest refuse;
  refuse.set_model("st");
  refuse.add_inputs()->set_text(LongText());
  v1::EmbedResponse unused;
  grpc::Status s = Embed(refuse, &unused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("16"));
  // Token ids past it too.
  refuse.clear_inputs();
  tokens = refuse.add_inputs()->mutable_tokens();
  for (int32_t id : whole) tokens->add_ids(id);
  s = Embed(refuse, &unused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("more than the maximum of 16"));

  // TEI's /embed (st is the default model): truncate true cuts, false refuses.
  Reply r = Post(http(), "/embed", {{"inputs", LongText()}, {"truncate", true}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(MaxDiff(FromJson(r.body[0]), expected), 1e-5);
  r = Post(http(), "/embed", {{"inputs", LongText()}, {"truncate", false}});
  EXPECT_EQ(r.status, 413) << r.raw;  // TEI's status for an over-long input
  EXPECT_THAT(r.raw, HasSubstr("16"));
  // OpenAI's route has no truncate: --auto-truncate false refuses, as OpenAI does (400).
  r = Post(http(), "/v1/embeddings", {{"model", "st"}, {"input", LongText()}});
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["param"], "input") << r.raw;
  EXPECT_THAT(r.raw, HasSubstr("16"));
  r = Post(http(), "/v1/embeddings", {{"model", "embedder"}, {"input", LongText()}});
  EXPECT_EQ(r.status, 200) << r.raw;

  // The server's default (--auto-truncate true, as TEI 1.9's): requests that do not say are cut
  // at max_seq_length, as SentenceTransformer.encode cuts, on every route.
  ServerConfig config = StServerConfig();
  config.auto_truncate = ServerConfig().auto_truncate;
  auto cutting = RelserveServer::Start(config);
  ASSERT_TRUE(cutting.ok()) << cutting.status();
  r = Post((*cutting)->http_port(), "/v1/embeddings", {{"model", "st"}, {"input", LongText()}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(MaxDiff(FromJson(r.body["data"][0]["embedding"]), expected), 1e-5);
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], kMaxSeqLength);
  r = Post((*cutting)->http_port(), "/embed", {{"inputs", LongText()}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(MaxDiff(FromJson(r.body[0]), expected), 1e-5);
}

TEST_F(SentenceTransformersServerTest, AServerWideMaxLengthMayLowerMaxSeqLengthButNotRaiseIt) {
  ServerConfig config = StServerConfig();
  config.models = {{"st", StModels::Get().dir("st")}};
  config.max_input_length = 32;
  auto refused = RelserveServer::Start(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("max_length 32 exceeds the model's max_seq_length 16"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("sentence_bert_config.json"));
  config.max_input_length = 8;
  auto lower = RelserveServer::Start(config);
  ASSERT_TRUE(lower.ok()) << lower.status();
  const Reply info = Get((*lower)->http_port(), "/info");
  EXPECT_EQ(info.body["max_input_length"], 8) << info.raw;
}

TEST_F(SentenceTransformersServerTest, PromptNameEmbedsThePromptBeforeTheText) {
  int with_prompt = 0, by_hand_tokens = 0, plain = 0;
  const std::vector<float> by_hand = EmbedText("st", "query: a short text", "", &by_hand_tokens);
  const std::vector<float> prompted = EmbedText("st", "a short text", "query", &with_prompt);
  EmbedText("st", "a short text", "", &plain);
  EXPECT_LT(MaxDiff(prompted, by_hand), 1e-6);
  EXPECT_GT(MaxDiff(EmbedText("st", "a short text"), by_hand), 1e-3);
  // The prompt counts toward the length.
  EXPECT_EQ(with_prompt, by_hand_tokens);
  EXPECT_GT(with_prompt, plain);
  EXPECT_LT(MaxDiff(EmbedText("st", "a short text", "document"), EmbedText("st", "passage: a short text")), 1e-6);

  // TEI's /embed and OpenAI's /v1/embeddings (an extension field) alike.
  Reply r = Post(http(), "/embed", {{"inputs", {"a short text"}}, {"prompt_name", "query"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(MaxDiff(FromJson(r.body[0]), by_hand), 1e-6);
  r = Post(http(), "/v1/embeddings", {{"model", "st"}, {"input", "a short text"}, {"prompt_name", "query"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(MaxDiff(FromJson(r.body["data"][0]["embedding"]), by_hand), 1e-6);
  EXPECT_EQ(r.body["usage"]["prompt_tokens"], with_prompt);
}

TEST_F(SentenceTransformersServerTest, AnUnknownPromptNameIsRefusedNamingTheKnownOnes) {
  const std::string message = "prompt_name \"x\" is not one of the model's prompts: document, query";
  Reply r = Post(http(), "/embed", {{"inputs", "a text"}, {"prompt_name", "x"}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("error", ""), message) << r.raw;
  r = Post(http(), "/v1/embeddings", {{"model", "st"}, {"input", "a text"}, {"prompt_name", "x"}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body["error"].value("message", ""), message) << r.raw;
  v1::EmbedRequest req;
  req.set_model("st");
  req.add_inputs()->set_text("a text");
  req.set_prompt_name("x");
  v1::EmbedResponse unused;
  grpc::Status s = Embed(req, &unused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), message);
  // A model without prompts.
  r = Post(http(), "/v1/embeddings", {{"model", "embedder"}, {"input", "a text"}, {"prompt_name", "query"}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body["error"].value("message", ""),
            "prompt_name \"query\" is not one of the model's prompts: the model has no prompts")
      << r.raw;
  // A prompt goes before texts only: token ids with a prompt_name are refused.
  req.set_prompt_name("query");
  req.clear_inputs();
  req.add_inputs()->mutable_tokens()->add_ids(1);
  s = Embed(req, &unused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("inputs[0]: prompt_name puts the prompt before texts"));
}

TEST_F(SentenceTransformersServerTest, TheDefaultPromptAppliesWhenNoneIsNamed) {
  const std::vector<float> by_hand = EmbedText("embedder", "query: a short text");
  EXPECT_LT(MaxDiff(EmbedText("st_default", "a short text"), by_hand), 1e-6);
  EXPECT_LT(MaxDiff(EmbedText("st_default", "a short text", "document"), EmbedText("embedder", "passage: a short text")),
            1e-6);
  const Reply r = Post(http(), "/v1/embeddings", {{"model", "st_default"}, {"input", "a short text"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(MaxDiff(FromJson(r.body["data"][0]["embedding"]), by_hand), 1e-6);
}

TEST_F(SentenceTransformersServerTest, DoLowerCaseLowersTheTextFirst) {
  EXPECT_GT(MaxDiff(EmbedText("embedder", "Hello WORLD"), EmbedText("embedder", "hello world")), 1e-3);
  EXPECT_LT(MaxDiff(EmbedText("st_lower", "Hello WORLD"), EmbedText("embedder", "hello world")), 1e-6);
  // Tokenize shows the lowered tokens, their offsets in the text as sent.
  EXPECT_EQ(TokenIds("st_lower", "Hello WORLD"), TokenIds("embedder", "hello world"));
}

TEST_F(SentenceTransformersServerTest, IncludePromptFalseLeavesThePromptOutOfPooling) {
  // sentence-transformers: prompt_length = len(tokenize("query: ")) - 1 ([CLS] and the prompt's
  // tokens); the mean runs over the rest, then Normalize.
  const int skip = static_cast<int>(TokenIds("st_skip", "query: ").size()) - 1;
  ASSERT_GT(skip, 1);
  v1::EmbedTokensRequest req;
  req.set_model("st_skip");
  req.add_inputs()->set_text("query: a short text");
  v1::EmbedTokensResponse states;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->EmbedTokens(&ctx, req, &states).ok());
  const v1::TokenStates& t = states.sequences(0);
  const int hidden = t.hidden_size();
  const int n = t.token_ids_size();
  std::vector<double> mean(hidden, 0.0);
  for (int i = skip; i < n; ++i) {
    for (int h = 0; h < hidden; ++h) mean[h] += t.values(i * hidden + h);
  }
  double norm = 0;
  for (double& v : mean) {
    v /= (n - skip);
    norm += v * v;
  }
  std::vector<float> want;
  for (double v : mean) want.push_back(static_cast<float>(v / std::sqrt(norm)));
  EXPECT_LT(MaxDiff(EmbedText("st_skip", "a short text", "query"), want), 1e-5);
  // The same text with the prompt written into it is pooled whole.
  EXPECT_GT(MaxDiff(EmbedText("st_skip", "query: a short text"), want), 1e-4);
  const Reply r = Post(http(), "/v1/embeddings", {{"model", "st_skip"}, {"input", "a short text"}, {"prompt_name", "query"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_LT(MaxDiff(FromJson(r.body["data"][0]["embedding"]), want), 1e-5);
}

TEST_F(SentenceTransformersServerTest, ListModelsAndInfoSayHowEmbeddingsCompare) {
  v1::ListModelsResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->ListModels(&ctx, v1::ListModelsRequest(), &resp).ok());
  std::map<std::string, v1::ModelInfo> models;
  for (const v1::ModelInfo& m : resp.models()) models[m.name()] = m;
  EXPECT_EQ(models["st"].similarity_fn_name(), "dot");
  EXPECT_TRUE(models["st"].normalized());
  EXPECT_THAT(models["st"].prompt_names(), ElementsAre("document", "query"));
  EXPECT_EQ(models["st"].default_prompt_name(), "");
  EXPECT_EQ(models["st_default"].default_prompt_name(), "query");
  EXPECT_EQ(models["st_default"].similarity_fn_name(), "cosine");  // sentence-transformers' default
  EXPECT_EQ(models["embedder"].similarity_fn_name(), "cosine");
  EXPECT_TRUE(models["embedder"].prompt_names().empty());
  const Reply info = Get(http(), "/info");
  ASSERT_EQ(info.status, 200) << info.raw;
  EXPECT_EQ(info.body["similarity_fn_name"], "dot");
  EXPECT_EQ(info.body["normalized"], true);
  // TEI's own keys stay.
  for (const char* key : {"model_id", "model_type", "max_input_length", "max_batch_tokens", "version"}) {
    EXPECT_TRUE(info.body.contains(key)) << key;
  }
}

}  // namespace
}  // namespace relserve
