// Token classification end to end over loopback against a RelserveServer: POST
// /token-classification and POST / for a token classifier, against transformers'
// TokenClassificationPipeline's answers (tests/data/ner/ner_deberta), gRPC ClassifyTokens,
// ListModels and /info, and the refusals (424 for a model without the head, 422 for a text
// longer than the model without a stride).
#include <httplib.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/server_test_env.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::Connect;
using testing::TestServerConfig;

const std::string kNer = std::string(RELSERVE_TEST_DATA_DIR) + "/ner";

struct Reply {
  int status = 0;
  json body;
};

Reply Post(int port, const std::string& path, const json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  auto r = client.Post(path.c_str(), body.dump(), "application/json");
  Reply out;
  if (!r) return out;
  out.status = r->status;
  if (!r->body.empty()) out.body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  return out;
}

const json& Expected() {
  static const json* j = [] {
    std::ifstream in(kNer + "/ner_expected.json");
    return new json(json::parse(in));
  }();
  return *j;
}

void ExpectEntities(const json& got, const json& want, const std::string& what) {
  ASSERT_TRUE(got.is_array()) << what << ": " << got.dump();
  ASSERT_EQ(got.size(), want.size()) << what << ": " << got.dump();
  for (size_t i = 0; i < got.size(); ++i) {
    for (const char* key : {"entity_group", "entity", "index", "word", "start", "end"}) {
      EXPECT_EQ(got[i].contains(key), want[i].contains(key)) << what << " [" << i << "]." << key;
      if (want[i].contains(key)) {
        EXPECT_EQ(got[i][key], want[i][key]) << what << " [" << i << "]." << key;
      }
    }
    EXPECT_NEAR(got[i]["score"].get<double>(), want[i]["score"].get<double>(), 1e-5) << what << " [" << i << "]";
  }
}

class HttpTokenClassificationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerConfig config = TestServerConfig();
    // The token classifier first: the routes without a model name go to it.
    config.models.insert(config.models.begin(), {"ner", kNer + "/ner_deberta"});
    auto server = RelserveServer::Start(config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  int http() const { return server_->http_port(); }

  std::unique_ptr<v1::Encoder::Stub> stub_ = Connect(server_->grpc_port());
  static RelserveServer* server_;
};
RelserveServer* HttpTokenClassificationTest::server_ = nullptr;

TEST_F(HttpTokenClassificationTest, RoutesAnswerAsThePipeline) {
  const json& texts = Expected()["models"]["ner_deberta"]["texts"];
  for (const json& t : texts) {
    const std::string text = t["text"].get<std::string>();
    // The root, as @huggingface/inference sends it: simple by default.
    Reply r = Post(http(), "/", {{"inputs", text}});
    ASSERT_EQ(r.status, 200) << r.body.dump();
    ExpectEntities(r.body, t["expected"]["simple"], "POST / " + text);
    for (const json& c : Expected()["cases"]) {
      r = Post(http(), "/token-classification", {{"inputs", text}, {"parameters", c["parameters"]}});
      ASSERT_EQ(r.status, 200) << r.body.dump();
      ExpectEntities(r.body, t["expected"][c["name"].get<std::string>()], c["name"].get<std::string>() + " " + text);
    }
  }
  // A list of texts: a list of lists, in order.
  Reply r = Post(http(), "/token-classification",
                 {{"inputs", {texts[0]["text"], texts[7]["text"]}}, {"parameters", {{"aggregation_strategy", "max"}}}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_EQ(r.body.size(), 2u);
  ExpectEntities(r.body[0], texts[0]["expected"]["max"], "batch 0");
  ExpectEntities(r.body[1], texts[7]["expected"]["max"], "batch 1");
}

TEST_F(HttpTokenClassificationTest, GrpcAndModelDescriptions) {
  const json& t = Expected()["models"]["ner_deberta"]["texts"][1];
  v1::ClassifyTokensRequest req;
  req.add_texts(t["text"].get<std::string>());
  req.set_aggregation_strategy("first");
  v1::ClassifyTokensResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub_->ClassifyTokens(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.model(), "ner");
  ASSERT_EQ(resp.results_size(), 1);
  json got = json::array();
  for (const v1::TokenEntity& e : resp.results(0).entities()) {
    got.push_back({{"entity_group", e.entity()}, {"score", e.score()}, {"word", e.word()}, {"start", e.start()},
                   {"end", e.end()}});
  }
  ExpectEntities(got, t["expected"]["first"], "gRPC ClassifyTokens");
  EXPECT_GT(resp.usage().tokens(), 0);

  v1::ListModelsResponse models;
  grpc::ClientContext ctx2;
  ASSERT_TRUE(stub_->ListModels(&ctx2, v1::ListModelsRequest(), &models).ok());
  ASSERT_EQ(models.models(0).name(), "ner");
  EXPECT_EQ(models.models(0).architecture(), "DebertaV2ForTokenClassification");
  EXPECT_EQ(models.models(0).token_labels_size(), 9);
  EXPECT_EQ(models.models(0).token_labels(1), "B-PER");
  EXPECT_EQ(models.models(0).labels_size(), 0);

  httplib::Client client("127.0.0.1", http());
  auto info = client.Get("/info");
  ASSERT_TRUE(info);
  const json i = json::parse(info->body);
  EXPECT_EQ(i["model_type"]["token_classifier"]["id2label"]["1"], "B-PER");
  EXPECT_EQ(i["model_type"]["token_classifier"]["label2id"]["I-MISC"], 8);
}

TEST_F(HttpTokenClassificationTest, Refusals) {
  // A model without a token-classification head: 424, as TEI answers a missing head.
  Reply r = Post(http(), "/token-classification", {{"inputs", "Marie Curie"}, {"model", "embedder"}});
  EXPECT_EQ(r.status, 424) << r.body.dump();
  EXPECT_THAT(r.body["error"].get<std::string>(), HasSubstr("no token-classification head"));
  // Longer than the model's 512 tokens: 413 (the status TEI gives an over-long input) naming the limit and stride, unless a stride is given.
  std::string text;
  for (int i = 0; i < 200; ++i) text += "Marie Curie met Pierre in Paris. ";
  r = Post(http(), "/token-classification", {{"inputs", text}});
  EXPECT_EQ(r.status, 413) << r.body.dump();
  EXPECT_THAT(r.body["error"].get<std::string>(), HasSubstr("more than the model's maximum of 512"));
  EXPECT_THAT(r.body["error"].get<std::string>(), HasSubstr("stride"));
  r = Post(http(), "/token-classification", {{"inputs", text}, {"parameters", {{"stride", 32}}}});
  ASSERT_EQ(r.status, 200) << r.body.dump();
  ASSERT_TRUE(r.body.is_array());
  for (const json& e : r.body) {
    EXPECT_LE(e["end"].get<int64_t>(), static_cast<int64_t>(text.size()));
    EXPECT_EQ(text.substr(e["start"].get<size_t>(), e["end"].get<size_t>() - e["start"].get<size_t>()).empty(), false);
  }
  // With stride, aggregation none is the pipeline's refusal.
  r = Post(http(), "/token-classification",
           {{"inputs", "Marie"}, {"parameters", {{"stride", 2}, {"aggregation_strategy", "none"}}}});
  EXPECT_EQ(r.status, 422) << r.body.dump();
  EXPECT_THAT(r.body["error"].get<std::string>(), HasSubstr("aggregation_strategy"));
}

}  // namespace
}  // namespace relserve
