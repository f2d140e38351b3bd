#include "client/response_json.h"

#include "gtest/gtest.h"

namespace relserve::client {
namespace {

TEST(ResponseJsonTest, EmbedResponseUsesProtoFieldNamesAndShortFloats) {
  v1::EmbedResponse r;
  r.set_model("embedder");
  auto* e = r.add_embeddings();
  e->add_values(0.1f);
  e->add_values(-2.5f);
  e->set_num_tokens(7);
  r.mutable_usage()->set_tokens(7);
  r.mutable_usage()->set_sequences(1);
  r.mutable_timing()->set_total_us(1234);
  r.set_request_id("r1");
  EXPECT_EQ(ToJson(r).dump(),
            R"({"model":"embedder","embeddings":[{"values":[0.1,-2.5],"num_tokens":7,"truncated":false}],)"
            R"("usage":{"tokens":7,"sequences":1},)"
            R"("timing":{"tokenize_us":0,"queue_us":0,"inference_us":0,"total_us":1234},"request_id":"r1"})");
}

TEST(ResponseJsonTest, RerankClassifyTokenizeModels) {
  v1::RerankResponse rerank;
  auto* result = rerank.add_results();
  result->set_index(2);
  result->set_score(0.75f);
  result->set_document("d");
  EXPECT_EQ(ToJson(rerank)["results"][0].dump(), R"({"index":2,"score":0.75,"document":"d"})");

  v1::ClassifyResponse classify;
  auto* c = classify.add_results();
  auto* label = c->add_labels();
  label->set_label("positive");
  label->set_index(1);
  label->set_score(0.5f);
  c->add_logits(-1.0f);
  c->add_logits(1.0f);
  EXPECT_EQ(ToJson(classify)["results"][0].dump(),
            R"({"labels":[{"label":"positive","index":1,"score":0.5}],"logits":[-1.0,1.0]})");

  v1::TokenizeResponse tokenize;
  auto* t = tokenize.add_results();
  t->add_input_ids(1);
  t->add_input_ids(2);
  t->add_pieces("[CLS]");
  t->add_pieces("[SEP]");
  EXPECT_EQ(ToJson(tokenize)["results"][0]["input_ids"].dump(), "[1,2]");
  EXPECT_EQ(ToJson(tokenize)["results"][0]["pieces"].dump(), R"(["[CLS]","[SEP]"])");

  v1::ListModelsResponse models;
  models.set_default_model("a");
  models.add_models()->set_name("a");
  models.mutable_models(0)->add_labels("x");
  const auto j = ToJson(models);
  EXPECT_EQ(j["default_model"], "a");
  EXPECT_EQ(j["models"][0]["name"], "a");
  EXPECT_EQ(j["models"][0]["labels"].dump(), R"(["x"])");
}

TEST(ResponseJsonTest, EmbedTokensValues) {
  v1::EmbedTokensResponse r;
  auto* s = r.add_sequences();
  s->add_token_ids(1);
  s->set_hidden_size(2);
  s->add_values(0.25f);
  s->add_values(3.0f);
  EXPECT_EQ(ToJson(r)["sequences"][0]["values"].dump(), "[0.25,3.0]");
  EXPECT_EQ(ToJson(r)["sequences"][0]["hidden_size"], 2);
}

TEST(ResponseJsonTest, StatusCodeNamesAndErrors) {
  EXPECT_EQ(StatusCodeName(0), "OK");
  EXPECT_EQ(StatusCodeName(3), "INVALID_ARGUMENT");
  EXPECT_EQ(StatusCodeName(4), "DEADLINE_EXCEEDED");
  EXPECT_EQ(StatusCodeName(5), "NOT_FOUND");
  EXPECT_EQ(StatusCodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(14), "UNAVAILABLE");
  EXPECT_EQ(StatusCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(99), "UNKNOWN");
  EXPECT_EQ(ErrorJson("NOT_FOUND", "no model").dump(), R"({"error":{"code":"NOT_FOUND","message":"no model"}})");
}

}  // namespace
}  // namespace relserve::client
