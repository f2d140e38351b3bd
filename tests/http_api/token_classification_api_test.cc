// The Inference API's token-classification request, as @huggingface/inference and huggingface_hub
// send it, and the pipeline's answer (server/http_api/token_classification_api.h).
#include "server/http_api/token_classification_api.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/http_api/http_status.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

TEST(TokenClassificationApiTest, RequestShapes) {
  // What the client sends: inputs alone; the Inference API's default is simple, ["O"] ignored.
  auto r = ParseTokenClassification(json::parse(R"({"inputs": "Marie Curie"})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->batch);
  EXPECT_EQ(r->request.texts, std::vector<std::string>{"Marie Curie"});
  EXPECT_EQ(r->request.aggregation_strategy, AggregationStrategy::kSimple);
  EXPECT_FALSE(r->request.ignore_labels.has_value());
  EXPECT_FALSE(r->request.stride.has_value());

  r = ParseTokenClassification(json::parse(R"({"inputs": ["a", ""], "model": "ner", "parameters":
      {"aggregation_strategy": "NONE", "ignore_labels": [], "stride": 16, "top_k": 3}})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->batch);
  EXPECT_EQ(r->request.model, "ner");
  EXPECT_EQ(r->request.texts, (std::vector<std::string>{"a", ""}));  // an empty text: no entities, as the pipeline
  EXPECT_EQ(r->request.aggregation_strategy, AggregationStrategy::kNone);
  EXPECT_EQ(r->request.ignore_labels, std::vector<std::string>{});
  EXPECT_EQ(r->request.stride, 16);

  auto bad = [](const char* body, int status, const std::string& says) {
    auto p = ParseTokenClassification(json::parse(body));
    ASSERT_FALSE(p.ok()) << body;
    EXPECT_EQ(HttpStatusOf(p.status()), status) << body << ": " << p.status();
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(says)) << body;
  };
  bad(R"({"parameters": {}})", 422, "inputs");
  bad(R"({"inputs": []})", 400, "inputs is empty");
  bad(R"({"inputs": 3})", 422, "inputs must be a string or an array");
  bad(R"({"inputs": ["x", 2]})", 422, "inputs[1] must be a string");
  bad(R"({"inputs": "x", "parameters": []})", 422, "parameters must be an object");
  bad(R"({"inputs": "x", "parameters": {"aggregation_strategy": "mean"}})", 422,
      "parameters.aggregation_strategy \"mean\" is not one of none, simple, first, average, max");
  bad(R"({"inputs": "x", "parameters": {"aggregation_strategy": 1}})", 422, "aggregation_strategy must be a string");
  bad(R"({"inputs": "x", "parameters": {"ignore_labels": "O"}})", 422, "ignore_labels must be an array");
  bad(R"({"inputs": "x", "parameters": {"ignore_labels": ["O", 1]}})", 422, "ignore_labels[1] must be a string");
  bad(R"({"inputs": "x", "parameters": {"stride": -1}})", 422, "stride must be an integer");
}

TEST(TokenClassificationApiTest, ThePipelinesAnswer) {
  TokenClassifyResult result;
  TokenEntity e;
  e.entity = "PER";
  e.score = 0.5;
  e.word = "Marie";
  e.start = 0;
  e.end = 5;
  e.index = 3;
  result.results = {{e}, {}};
  EXPECT_EQ(TokenClassificationJson(result, AggregationStrategy::kSimple, true), json::parse(R"([
      [{"entity_group": "PER", "score": 0.5, "word": "Marie", "start": 0, "end": 5}], []])"));
  e.entity = "B-PER";
  result.results = {{e}};
  EXPECT_EQ(TokenClassificationJson(result, AggregationStrategy::kNone, false), json::parse(R"(
      [{"entity": "B-PER", "score": 0.5, "index": 3, "word": "Marie", "start": 0, "end": 5}])"));
}

}  // namespace
}  // namespace relserve
