// The JSON conversions of the HTTP routes, with no server: requests parsed into the serving
// layer's types (every default, every bad input named), results into the originals' shapes.
#include <cctype>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/http_api/cohere_api.h"
#include "server/http_api/hf_inference_api.h"
#include "server/http_api/http_routes.h"
#include "server/http_api/http_status.h"
#include "server/http_api/infinity_api.h"
#include "server/http_api/json_fields.h"
#include "server/http_api/openai_api.h"
#include "server/http_api/openapi_document.h"
#include "server/http_api/tei_api.h"
#include "server/serving/encoder_serving.h"
#include "server/util/field_error.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

json Body(const std::string& text) {
  auto j = ParseJsonObject(text);
  EXPECT_TRUE(j.ok()) << j.status();
  return j.ok() ? *j : json::object();
}

TEST(ParseJsonObjectTest, RefusesWhatIsNotAJsonObjectPrecisely) {
  auto huge = ParseJsonObject(R"({"dimensions": 1e400})");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(HttpStatusOf(huge.status()), 400);
  EXPECT_THAT(huge.status().message(), HasSubstr("number overflow"));
  auto utf8 = ParseJsonObject("{\"input\": \"\xff\xfe\"}");
  ASSERT_FALSE(utf8.ok());
  EXPECT_EQ(HttpStatusOf(utf8.status()), 400);
  EXPECT_THAT(utf8.status().message(), HasSubstr("UTF-8"));
  auto syntax = ParseJsonObject("{\"input\": ");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(HttpStatusOf(syntax.status()), 400);
  auto array = ParseJsonObject("[1, 2]");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(HttpStatusOf(array.status()), 422);
  EXPECT_THAT(array.status().message(), HasSubstr("must be a JSON object, not an array"));
  EXPECT_FALSE(ParseJsonObject("").ok());
}

TEST(OpenAIEmbeddingsTest, EveryInputShape) {
  auto one = ParseOpenAIEmbeddings(Body(R"({"input": "hello", "model": "m"})"));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->embed.inputs.size(), 1u);
  EXPECT_EQ(one->embed.inputs[0].kind, Input::Kind::kText);
  EXPECT_EQ(one->embed.inputs[0].text, "hello");
  EXPECT_EQ(one->embed.model, "m");
  EXPECT_TRUE(one->embed.normalize);
  EXPECT_FALSE(one->base64);
  EXPECT_EQ(one->embed.dimensions, 0);

  auto texts = ParseOpenAIEmbeddings(Body(R"({"input": ["a", "b", "c"], "user": "u1"})"));
  ASSERT_TRUE(texts.ok()) << texts.status();
  ASSERT_EQ(texts->embed.inputs.size(), 3u);
  EXPECT_EQ(texts->embed.inputs[2].text, "c");
  EXPECT_EQ(texts->embed.model, "");
  EXPECT_EQ(texts->embed.prompt_name, "");
  // relserve's extension: the model's sentence-transformers prompt.
  auto prompted = ParseOpenAIEmbeddings(Body(R"({"input": "a", "prompt_name": "query"})"));
  ASSERT_TRUE(prompted.ok()) << prompted.status();
  EXPECT_EQ(prompted->embed.prompt_name, "query");
  EXPECT_FALSE(ParseOpenAIEmbeddings(Body(R"({"input": "a", "prompt_name": ["query"]})")).ok());

  auto ids = ParseOpenAIEmbeddings(Body(R"({"input": [5, 6, 7]})"));
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->embed.inputs.size(), 1u);
  EXPECT_EQ(ids->embed.inputs[0].kind, Input::Kind::kTokens);
  EXPECT_EQ(ids->embed.inputs[0].ids, (std::vector<int32_t>{5, 6, 7}));

  auto lists = ParseOpenAIEmbeddings(Body(R"({"input": [[5, 6], [7]], "encoding_format": "base64",
                                               "dimensions": 16})"));
  ASSERT_TRUE(lists.ok()) << lists.status();
  ASSERT_EQ(lists->embed.inputs.size(), 2u);
  EXPECT_EQ(lists->embed.inputs[1].ids, (std::vector<int32_t>{7}));
  EXPECT_TRUE(lists->base64);
  EXPECT_EQ(lists->embed.dimensions, 16);
}

TEST(OpenAIEmbeddingsTest, BadInputsNameTheField) {
  struct Case {
    const char* body;
    int http;
    const char* message;
  };
  for (const Case& c : {
           Case{R"({})", 422, "input is required"},
           Case{R"({"input": null})", 422, "input is required"},
           Case{R"({"input": ""})", 400, "input is empty"},
           Case{R"({"input": []})", 400, "input is empty"},
           Case{R"({"input": ["a", ""]})", 400, "input[1] is empty"},
           Case{R"({"input": ["a", [1, 2], 3]})", 422, "input[2] must be a string or an array of token ids"},
           Case{R"({"input": [1, "a"]})", 422, "input[1] must be a token id"},
           Case{R"({"input": [-1]})", 422, "input[0] must be a token id (an integer in [0, 2147483647]), not -1"},
           Case{R"({"input": [4294967296]})", 422, "input[0] must be a token id"},
           Case{R"({"input": [1.5]})", 422, "input[0] must be a token id"},
           Case{R"({"input": [[]]})", 400, "input[0] is empty"},
           Case{R"({"input": 7})", 422, "input must be a string, an array of strings"},
           Case{R"({"input": {"a": 1}})", 422, "not an object"},
           Case{R"({"input": "a", "model": 3})", 422, "model must be a string, not an integer"},
           Case{R"({"input": "a", "encoding_format": "int8"})", 422, "encoding_format must be \"float\" or \"base64\""},
           Case{R"({"input": "a", "dimensions": 0})", 422, "dimensions must be an integer in [1, 1048576], not 0"},
           Case{R"({"input": "a", "dimensions": -5})", 422, "dimensions must be an integer in [1, 1048576]"},
           Case{R"({"input": "a", "dimensions": 1e20})", 422, "dimensions must be an integer, not a number"},
           Case{R"({"input": "a", "dimensions": 18446744073709551615})", 422, "dimensions must be an integer in"},
           Case{R"({"input": "a", "dimensions": "8"})", 422, "dimensions must be an integer, not a string"},
           Case{R"({"input": "a", "user": 1})", 422, "user must be a string"},
       }) {
    auto r = ParseOpenAIEmbeddings(Body(c.body));
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(HttpStatusOf(r.status()), c.http) << c.body << ": " << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message)) << c.body;
  }
}

TEST(OpenAIEmbeddingsTest, ResponseShapeAndBase64) {
  EmbedResult result;
  result.model = "embedder";
  result.embeddings.resize(2);
  result.embeddings[0].values = {1.0f, -0.5f, 0.25f};
  result.embeddings[1].values = {3.5f, 1e-7f, -2.0f};
  result.usage.tokens = 11;
  const json floats = OpenAIEmbeddingsJson(result, false);
  EXPECT_EQ(floats["object"], "list");
  EXPECT_EQ(floats["model"], "embedder");
  EXPECT_EQ(floats["usage"], json({{"prompt_tokens", 11}, {"total_tokens", 11}}));
  ASSERT_EQ(floats["data"].size(), 2u);
  EXPECT_EQ(floats["data"][1]["object"], "embedding");
  EXPECT_EQ(floats["data"][1]["index"], 1);
  EXPECT_EQ(floats["data"][1]["embedding"].get<std::vector<float>>(), result.embeddings[1].values);
  EXPECT_EQ(floats.size(), 4u);
  EXPECT_EQ(floats["data"][0].size(), 3u);

  const json b64 = OpenAIEmbeddingsJson(result, true);
  for (int i = 0; i < 2; ++i) {
    std::string bytes;
    ASSERT_TRUE(absl::Base64Unescape(b64["data"][i]["embedding"].get<std::string>(), &bytes));
    ASSERT_EQ(bytes.size(), 12u);
    // Little-endian float32, byte by byte.
    for (int k = 0; k < 3; ++k) {
      uint32_t bits = 0;
      for (int b = 0; b < 4; ++b) bits |= uint32_t(uint8_t(bytes[4 * k + b])) << (8 * b);
      float f;
      std::memcpy(&f, &bits, 4);
      EXPECT_EQ(f, result.embeddings[i].values[k]);
    }
  }
  EXPECT_EQ(Base64Floats({1.0f}), "AACAPw==");  // 0x3f800000, little-endian
}

TEST(OpenAIEmbeddingsTest, ModelsAndErrorShape) {
  ModelDescription a, b;
  a.name = "embedder";
  b.name = "reranker";
  const json models = OpenAIModelsJson({a, b}, 1700000000);
  EXPECT_EQ(models, json::parse(R"({"object": "list", "data": [
      {"id": "embedder", "object": "model", "created": 1700000000, "owned_by": "relserve"},
      {"id": "reranker", "object": "model", "created": 1700000000, "owned_by": "relserve"}]})"));
  const json e =
      OpenAIErrorJson(FieldError(FieldErrorKind::kEmpty, "inputs[3].text", "inputs[3].text is empty"), 422);
  EXPECT_EQ(e, json::parse(R"({"error": {"message": "inputs[3].text is empty", "type": "invalid_request_error",
                                          "param": "input", "code": "invalid_argument"}})"));
  EXPECT_EQ(OpenAIErrorJson(absl::NotFoundError("model \"x\" is not served here"), 404)["error"]["param"], "model");
  EXPECT_EQ(OpenAIErrorJson(FieldError(FieldErrorKind::kInvalid, "dimensions", "dimensions must be"), 422)["error"]
                                                                                                          ["param"],
            "dimensions");
  EXPECT_TRUE(OpenAIErrorJson(absl::UnavailableError("shutting down"), 503)["error"]["param"].is_null());
  // The param comes from the status's field, never from its wording: a message that starts with
  // another word, or names a field without saying so structurally, changes nothing.
  EXPECT_EQ(OpenAIErrorJson(FieldError(FieldErrorKind::kTooMany, "documents", "too many: 300 documents"), 422)
                ["error"]["param"],
            "documents");
  EXPECT_TRUE(OpenAIErrorJson(absl::InvalidArgumentError("dimensions must be"), 422)["error"]["param"].is_null());
  // Fields OpenAI's requests do not have are no param.
  EXPECT_TRUE(OpenAIErrorJson(FieldError(FieldErrorKind::kInvalid, "prompt_name", "x"), 422)["error"]["param"].is_null());
}

TEST(TeiTest, EmbedDefaultsAndOptions) {
  auto r = ParseTeiEmbed(Body(R"({"inputs": "hello"})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->normalize);  // TEI's default
  EXPECT_FALSE(r->truncation.truncate.has_value());  // absent: the server's --auto-truncate decides
  EXPECT_EQ(r->truncation.direction, TruncationDirection::kRight);
  EXPECT_EQ(r->model, "");
  auto o = ParseTeiEmbed(
      Body(R"({"inputs": ["a", [1, 2]], "normalize": false, "truncate": true, "truncation_direction": "Right",
               "dimensions": 8})"));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->normalize);
  EXPECT_EQ(o->truncation.truncate, std::optional<bool>(true));
  EXPECT_EQ(o->truncation.direction, TruncationDirection::kRight);
  EXPECT_EQ(o->dimensions, 8);
  for (const char* left : {R"({"inputs": "a", "truncate": false, "truncation_direction": "Left"})",
                           R"({"inputs": "a", "truncate": false, "truncation_direction": "left"})"}) {
    auto l = ParseTeiEmbed(Body(left));
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_EQ(l->truncation.truncate, std::optional<bool>(false)) << left;
    EXPECT_EQ(l->truncation.direction, TruncationDirection::kLeft) << left;
  }
  auto null_truncate = ParseTeiEmbed(Body(R"({"inputs": "a", "truncate": null})"));
  ASSERT_TRUE(null_truncate.ok());
  EXPECT_FALSE(null_truncate->truncation.truncate.has_value());
  auto rerank = ParseTeiRerank(Body(R"({"query": "q", "texts": ["a"], "truncation_direction": "Left"})"));
  ASSERT_TRUE(rerank.ok()) << rerank.status();
  EXPECT_EQ(rerank->truncation.direction, TruncationDirection::kLeft);
  auto predict = ParseTeiPredict(Body(R"({"inputs": "a", "truncate": true, "truncation_direction": "Left"})"));
  ASSERT_TRUE(predict.ok()) << predict.status();
  EXPECT_EQ(predict->classify.truncation.direction, TruncationDirection::kLeft);
  EXPECT_EQ(predict->classify.truncation.truncate, std::optional<bool>(true));
  ASSERT_EQ(o->inputs.size(), 2u);
  EXPECT_EQ(o->inputs[1].kind, Input::Kind::kTokens);
  for (const char* bad : {R"({"inputs": "a", "normalize": "yes"})", R"({"inputs": "a", "truncate": 1})",
                          R"({"inputs": "a", "truncation_direction": 1})",
                          R"({"inputs": "a", "truncation_direction": "up"})", R"({"inputs": "a", "prompt_name": 1})",
                          R"({"input": "a"})"}) {
    auto b = ParseTeiEmbed(Body(bad));
    EXPECT_FALSE(b.ok()) << bad;
    EXPECT_EQ(HttpStatusOf(b.status()), 422) << bad;
  }
  EXPECT_THAT(std::string(ParseTeiEmbed(Body(R"({"inputs": "a", "normalize": "yes"})")).status().message()),
              HasSubstr("normalize must be true or false, not a string"));
  EXPECT_EQ(ParseTeiEmbed(Body(R"({"inputs": "a", "truncation_direction": "up"})")).status().message(),
            "truncation_direction must be \"Right\" or \"Left\", not \"up\"");
  // prompt_name is the serving layer's to check against the model's prompts.
  auto prompted = ParseTeiEmbed(Body(R"({"inputs": "a", "prompt_name": "query"})"));
  ASSERT_TRUE(prompted.ok()) << prompted.status();
  EXPECT_EQ(prompted->prompt_name, "query");
  EmbedResult result;
  result.embeddings.resize(2);
  result.embeddings[0].values = {1, 2};
  result.embeddings[1].values = {3, 4};
  EXPECT_EQ(TeiEmbedJson(result), json::parse("[[1.0, 2.0], [3.0, 4.0]]"));
}

TEST(TeiTest, RerankRequestAndResponse) {
  auto r = ParseTeiRerank(Body(R"({"query": "q", "texts": ["a", "b"], "return_text": true, "raw_scores": true})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->query, "q");
  EXPECT_EQ(r->documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r->return_documents);
  EXPECT_TRUE(r->raw_scores);
  EXPECT_EQ(r->top_n, 0);
  auto d = ParseTeiRerank(Body(R"({"query": "q", "texts": ["a"]})"));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->return_documents);
  EXPECT_FALSE(d->raw_scores);
  EXPECT_EQ(HttpStatusOf(ParseTeiRerank(Body(R"({"query": "q", "texts": []})")).status()), 400);
  EXPECT_EQ(HttpStatusOf(ParseTeiRerank(Body(R"({"query": "", "texts": ["a"]})")).status()), 400);
  EXPECT_THAT(std::string(ParseTeiRerank(Body(R"({"query": "q", "texts": ["a", 2]})")).status().message()),
              HasSubstr("texts[1] must be a string"));
  EXPECT_THAT(std::string(ParseTeiRerank(Body(R"({"texts": ["a"]})")).status().message()), HasSubstr("query is required"));

  RerankResult result;
  result.results = {{1, 0.9f, "b"}, {0, 0.1f, "a"}};
  EXPECT_EQ(TeiRerankJson(result),
            json::parse(R"([{"index": 1, "score": 0.8999999761581421, "text": "b"},
                            {"index": 0, "score": 0.10000000149011612, "text": "a"}])"));
  result.results = {{0, 0.5f, ""}};
  EXPECT_EQ(TeiRerankJson(result), json::parse(R"([{"index": 0, "score": 0.5}])"));
}

TEST(TeiTest, PredictSingleInputsPairsAndBatches) {
  auto single = ParseTeiPredict(Body(R"({"inputs": "good"})"));
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_FALSE(single->batch);
  ASSERT_EQ(single->classify.inputs.size(), 1u);
  EXPECT_EQ(single->classify.inputs[0].kind, Input::Kind::kText);

  auto pair = ParseTeiPredict(Body(R"({"inputs": ["premise", "hypothesis"], "raw_scores": true})"));
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_FALSE(pair->batch);
  ASSERT_EQ(pair->classify.inputs.size(), 1u);
  EXPECT_EQ(pair->classify.inputs[0].kind, Input::Kind::kPair);
  EXPECT_EQ(pair->classify.inputs[0].second, "hypothesis");
  EXPECT_TRUE(pair->classify.raw_scores);

  auto batch = ParseTeiPredict(Body(R"({"inputs": [["a"], ["b", "c"]]})"));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_TRUE(batch->batch);
  ASSERT_EQ(batch->classify.inputs.size(), 2u);
  EXPECT_EQ(batch->classify.inputs[0].kind, Input::Kind::kText);
  EXPECT_EQ(batch->classify.inputs[1].kind, Input::Kind::kPair);

  EXPECT_THAT(std::string(ParseTeiPredict(Body(R"({"inputs": ["a", "b", "c"]})")).status().message()),
              HasSubstr("inputs must be [text] or a pair [text, text], not an array of 3"));
  EXPECT_THAT(std::string(ParseTeiPredict(Body(R"({"inputs": [["a"], []]})")).status().message()),
              HasSubstr("inputs[1] must be [text] or a pair"));
  EXPECT_EQ(HttpStatusOf(ParseTeiPredict(Body(R"({"inputs": []})")).status()), 400);
  EXPECT_EQ(HttpStatusOf(ParseTeiPredict(Body(R"({"inputs": 5})")).status()), 422);

  ClassifyResult result;
  result.results.resize(1);
  result.results[0].labels = {{"POS", 1, 0.75f}, {"NEG", 0, 0.25f}};
  EXPECT_EQ(TeiPredictJson(result, false),
            json::parse(R"([{"score": 0.75, "label": "POS"}, {"score": 0.25, "label": "NEG"}])"));
  EXPECT_EQ(TeiPredictJson(result, true),
            json::parse(R"([[{"score": 0.75, "label": "POS"}, {"score": 0.25, "label": "NEG"}]])"));
}

TEST(TeiTest, TokenizeMarksSpecialTokensAndSlicesTheInput) {
  auto r = ParseTeiTokenize(Body(R"({"inputs": "Hello world"})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->add_special_tokens);
  TokenizeResult result;
  Tokenized t;
  t.input_ids = {1, 50, 60, 2};
  t.offsets = {{0, 0}, {0, 5}, {5, 11}, {0, 0}};
  t.pieces = {"[CLS]", "\u2581Hello", "\u2581world", "[SEP]"};
  t.special = {true, false, false, true};
  result.results.push_back(t);
  EXPECT_EQ(json::parse(TeiTokenizeText(r->tokenize, result, true)), json::parse(R"([[
      {"id": 1, "text": "[CLS]", "special": true, "start": null, "stop": null},
      {"id": 50, "text": "Hello", "special": false, "start": 0, "stop": 5},
      {"id": 60, "text": " world", "special": false, "start": 5, "stop": 11},
      {"id": 2, "text": "[SEP]", "special": true, "start": null, "stop": null}]])"));
  EXPECT_EQ(json::parse(TeiTokenizeText(r->tokenize, result, false))[0].size(), 2u);
  // A piece that covers no bytes ("▁" before a word) is not special.
  result.results[0].input_ids = {1, 5, 50, 2};
  result.results[0].offsets = {{0, 0}, {0, 0}, {0, 5}, {0, 0}};
  result.results[0].pieces = {"[CLS]", "\u2581", "Hello", "[SEP]"};
  result.results[0].special = {true, false, false, true};
  const json plain = json::parse(TeiTokenizeText(r->tokenize, result, false))[0];
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[0], json::parse(R"({"id": 5, "text": "", "special": false, "start": 0, "stop": 0})"));
  EXPECT_THAT(std::string(ParseTeiTokenize(Body(R"({"inputs": ["a", 1]})")).status().message()),
              HasSubstr("inputs[1] must be a string"));
  EXPECT_THAT(std::string(ParseTeiTokenize(Body(R"({"inputs": "a", "add_special_tokens": 1})")).status().message()),
              HasSubstr("add_special_tokens must be true or false"));
}

TEST(TeiTest, InfoAndErrorShape) {
  ModelDescription m;
  m.name = "reranker";
  m.info.labels = {"LABEL_0"};  // a classifier (has_classifier())
  m.info.dtype = DType::kFloat32;
  ServerLimitsInfo limits;
  limits.max_input_length = 512;
  limits.max_batch_tokens = 16384;
  limits.max_batch_requests = 64;
  limits.max_client_batch_size = 256;
  limits.max_concurrent_requests = 64;
  limits.version = "0.1.0";
  const json info = TeiInfoJson(m, limits);
  EXPECT_EQ(info["model_id"], "reranker");
  EXPECT_EQ(info["model_dtype"], "float32");
  EXPECT_EQ(info["model_type"], json::parse(R"({"reranker": {"id2label": {"0": "LABEL_0"},
                                                              "label2id": {"LABEL_0": 0}}})"));
  EXPECT_EQ(info["max_input_length"], 512);
  EXPECT_EQ(info["max_client_batch_size"], 256);
  EXPECT_EQ(info["auto_truncate"], true);  // --auto-truncate's default, as TEI 1.9's
  limits.auto_truncate = false;           // --auto-truncate false
  EXPECT_EQ(TeiInfoJson(m, limits)["auto_truncate"], false);
  EXPECT_TRUE(info["model_sha"].is_null());
  m.info.labels.clear();  // no classifier
  m.info.pooling.modes = {PoolingMode::kMean};
  m.info.pooling.normalize = true;
  EXPECT_EQ(TeiInfoJson(m, limits)["model_type"], json::parse(R"({"embedding": {"pooling": "mean"}})"));
  // relserve's keys: sentence-transformers' similarity (cosine unless the model says) and Normalize.
  EXPECT_EQ(info["similarity_fn_name"], "cosine");
  EXPECT_EQ(info["normalized"], false);
  m.info.similarity_fn_name = "dot";
  m.info.pooling.normalize = true;  // a Normalize module
  EXPECT_EQ(TeiInfoJson(m, limits)["similarity_fn_name"], "dot");
  EXPECT_EQ(TeiInfoJson(m, limits)["normalized"], true);
  EXPECT_EQ(TeiErrorJson(EmptyField("inputs"), 400),
            json::parse(R"({"error": "inputs is empty", "error_type": "Empty"})"));
  EXPECT_EQ(TeiErrorJson(absl::ResourceExhaustedError("queue full"), 429),
            json::parse(R"({"error": "queue full", "error_type": "Overloaded"})"));
}

TEST(CohereRerankTest, RequestAndResponse) {
  auto r = ParseCohereRerank(Body(R"({"model": "reranker", "query": "q",
                                      "documents": ["a", {"text": "b"}], "top_n": 1, "return_documents": true})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "reranker");
  EXPECT_EQ(r->documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->top_n, 1);
  EXPECT_TRUE(r->return_documents);
  auto d = ParseCohereRerank(Body(R"({"query": "q", "documents": ["a"]})"));
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->return_documents);
  EXPECT_EQ(d->top_n, 0);
  EXPECT_THAT(std::string(ParseCohereRerank(Body(R"({"query": "q", "documents": [{"title": "x"}]})")).status().message()),
              HasSubstr("documents[0] is an object without \"text\""));
  EXPECT_THAT(std::string(ParseCohereRerank(Body(R"({"query": "q", "documents": ["a"], "top_n": 0})")).status().message()),
              HasSubstr("top_n must be an integer in [1, "));
  EXPECT_EQ(HttpStatusOf(ParseCohereRerank(Body(R"({"query": "q", "documents": []})")).status()), 400);

  RerankResult result;
  result.model = "reranker";
  result.results = {{1, 0.5f, "b"}};
  result.usage.tokens = 9;
  EXPECT_EQ(CohereRerankJson(result), json::parse(R"({"model": "reranker",
      "results": [{"index": 1, "relevance_score": 0.5, "document": {"text": "b"}}], "usage": {"total_tokens": 9}})"));
}

// TEI's scores: the sigmoid of one logit, the softmax of several, whatever the problem type
// (gRPC's Classify keeps scoring by the problem type).
TEST(TeiTest, PredictScoresAsTeiDoes) {
  auto r = ParseTeiPredict(Body(R"({"inputs": "a"})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->classify.score_rule, ScoreRule::kLogitCount);
  EXPECT_EQ(ClassifyRequest().score_rule, ScoreRule::kProblemType);
  const std::vector<float> one = TeiScoresFromLogits({2.0f});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_NEAR(one[0], 1.0 / (1.0 + std::exp(-2.0)), 1e-6);
  const std::vector<float> three = TeiScoresFromLogits({1.0f, 2.0f, 3.0f});
  const double sum = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_NEAR(three[2], std::exp(3.0) / sum, 1e-6);
  EXPECT_NEAR(three[0] + three[1] + three[2], 1.0, 1e-6);
  // A single logit as regression would leave it as it is; as a one-label softmax it is 1.
  EXPECT_EQ(ScoresFromLogits({2.0f}, ProblemType::kRegression), std::vector<float>{2.0f});
}

TEST(TeiTest, TokenizeKeepsEveryTokenAndDimensionsDoNotNormalise) {
  auto t = ParseTeiTokenize(Body(R"({"inputs": "a"})"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->tokenize.whole_text);  // no truncation, no refusal past the model's maximum
  auto e = ParseTeiEmbed(Body(R"({"inputs": "a", "normalize": false, "dimensions": 4})"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->normalize);
  EXPECT_FALSE(e->dimensions_renormalize);  // TEI cuts and normalises only when asked
  auto o = ParseOpenAIEmbeddings(Body(R"({"input": "a", "dimensions": 4})"));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->embed.dimensions_renormalize);
}

TEST(TeiTest, ModelExtensionEmbedAllAndDecode) {
  std::string model = "kept";
  ASSERT_TRUE(ReadTeiModel(Body(R"({"inputs": "a"})"), &model).ok());
  EXPECT_EQ(model, "kept");  // absent: the default model (the caller's "")
  ASSERT_TRUE(ReadTeiModel(Body(R"({"model": "org/repo"})"), &model).ok());
  EXPECT_EQ(model, "org/repo");
  EXPECT_THAT(std::string(ReadTeiModel(Body(R"({"model": 3})"), &model).message()),
              HasSubstr("model must be a string"));

  auto all = ParseTeiEmbedAll(Body(R"({"inputs": ["a", [5, 6]], "truncate": true, "truncation_direction": "Left",
                                       "model": "t5"})"));
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->inputs.size(), 2u);
  EXPECT_EQ(all->inputs[1].kind, Input::Kind::kTokens);
  EXPECT_EQ(all->truncation.truncate, std::optional<bool>(true));
  EXPECT_EQ(all->truncation.direction, TruncationDirection::kLeft);
  EXPECT_EQ(all->model, "t5");
  EXPECT_EQ(HttpStatusOf(ParseTeiEmbedAll(Body(R"({"inputs": []})")).status()), 400);
  EXPECT_EQ(HttpStatusOf(ParseTeiEmbedAll(Body(R"({"input": "a"})")).status()), 422);
  EmbedTokensResult states;
  states.sequences.resize(2);
  states.sequences[0].hidden_size = 2;
  states.sequences[0].values = {1, 2, 3, 4, 5, 6};
  states.sequences[1].hidden_size = 2;
  states.sequences[1].values = {7, 8};
  EXPECT_EQ(TeiEmbedAllJson(states), json::parse("[[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[7.0, 8.0]]]"));

  auto one = ParseTeiDecode(Body(R"({"ids": [1, 2, 3]})"));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->ids, (std::vector<std::vector<int32_t>>{{1, 2, 3}}));
  EXPECT_TRUE(one->skip_special_tokens);  // TEI's default
  auto batch = ParseTeiDecode(Body(R"({"ids": [[1], [2, 3]], "skip_special_tokens": false, "model": "m"})"));
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->ids, (std::vector<std::vector<int32_t>>{{1}, {2, 3}}));
  EXPECT_FALSE(batch->skip_special_tokens);
  EXPECT_EQ(batch->model, "m");
  EXPECT_EQ(HttpStatusOf(ParseTeiDecode(Body(R"({"ids": []})")).status()), 400);
  EXPECT_THAT(std::string(ParseTeiDecode(Body(R"({"ids": [1, -2]})")).status().message()),
              HasSubstr("ids[1] must be a token id"));
  EXPECT_THAT(std::string(ParseTeiDecode(Body(R"({"ids": [[1], "x"]})")).status().message()),
              HasSubstr("ids[1] must be an array of token ids"));
  EXPECT_THAT(std::string(ParseTeiDecode(Body(R"({"ids": "1 2"})")).status().message()),
              HasSubstr("ids must be an array"));
  EXPECT_THAT(std::string(ParseTeiDecode(Body(R"({"tokens": [1]})")).status().message()), HasSubstr("ids is required"));
}

TEST(TeiTest, ComputeHeadersInWholeMilliseconds) {
  EXPECT_EQ(CountCharacters(Input::Text("h\xC3\xA9llo")), 5);  // characters, not bytes
  EXPECT_EQ(CountCharacters(Input::Pair("ab", "c")), 3);
  EXPECT_EQ(CountCharacters(Input::Tokens({1, 2, 3, 4})), 4);
  Timing timing;
  timing.tokenize = absl::Microseconds(1999);
  timing.queue = absl::Milliseconds(3);
  timing.inference = absl::Microseconds(12500);
  timing.total = absl::Milliseconds(18);
  const auto headers = TeiComputeHeaders(11, 7, timing, absl::Microseconds(20900));
  const std::vector<std::pair<std::string, std::string>> want = {
      {"x-compute-time", "20"}, {"x-compute-characters", "11"}, {"x-compute-tokens", "7"}, {"x-total-time", "20"},
      {"x-tokenization-time", "1"}, {"x-queue-time", "3"},     {"x-inference-time", "12"}};
  EXPECT_EQ(headers, want);
}

TEST(CohereV2Test, RerankRequestAndResponse) {
  auto r = ParseCohereV2Rerank(Body(R"({"model": "reranker", "query": "q", "documents": ["a", "b"], "top_n": 1,
                                        "max_tokens_per_doc": 512})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "reranker");
  EXPECT_EQ(r->documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->top_n, 1);
  EXPECT_THAT(std::string(ParseCohereV2Rerank(Body(R"({"query": "q", "documents": ["a"], "max_tokens_per_doc": 0})"))
                              .status()
                              .message()),
              HasSubstr("max_tokens_per_doc must be an integer in [1, "));
  RerankResult result;
  result.results = {{1, 0.5f, ""}, {0, 0.25f, ""}};
  result.usage.tokens = 9;
  EXPECT_EQ(CohereV2RerankJson(result, "id-1"), json::parse(R"({"id": "id-1",
      "results": [{"index": 1, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.25}],
      "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1},
               "tokens": {"input_tokens": 9, "output_tokens": 0}}})"));
  EXPECT_EQ(CohereErrorJson(absl::InvalidArgumentError("texts is empty")), json::parse(R"({"message": "texts is empty"})"));
}

TEST(CohereEmbedTest, RequestFieldsAndTheirErrors) {
  auto r = ParseCohereEmbed(Body(R"({"model": "embedder", "texts": ["a", "b"], "input_type": "search_query",
                                     "embedding_types": ["float", "int8", "float"], "truncate": "START",
                                     "output_dimension": 16})"),
                            /*v2=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->embed.model, "embedder");
  ASSERT_EQ(r->embed.inputs.size(), 2u);
  EXPECT_EQ(r->embed.inputs[1].text, "b");
  EXPECT_EQ(r->input_type, "search_query");
  EXPECT_EQ(r->types, (std::vector<std::string>{"float", "int8"}));
  EXPECT_EQ(r->embed.truncation.truncate, std::optional<bool>(true));
  EXPECT_EQ(r->embed.truncation.direction, TruncationDirection::kLeft);
  EXPECT_EQ(r->embed.dimensions, 16);
  EXPECT_TRUE(r->embed.normalize);
  auto d = ParseCohereEmbed(Body(R"({"texts": ["a"]})"), /*v2=*/false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->embed.truncation.truncate.has_value());  // --auto-truncate decides
  EXPECT_TRUE(d->types.empty());
  auto none = ParseCohereEmbed(Body(R"({"texts": ["a"], "truncate": "NONE"})"), false);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->embed.truncation.truncate, std::optional<bool>(false));
  struct Case {
    const char* body;
    int http;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"texts": []})", 400, "texts is empty"},
           {R"({"texts": ["a", ""]})", 400, "texts[1] is empty"},
           {R"({"texts": "a"})", 422, "texts must be an array of strings"},
           {R"({"model": "m"})", 422, "texts is required"},
           {R"({"texts": ["a"], "input_type": "image"})", 422, "input_type must be one of search_document"},
           {R"({"texts": ["a"], "embedding_types": ["float", "int4"]})", 422, "embedding_types[1] must be one of"},
           {R"({"texts": ["a"], "embedding_types": []})", 422, "embedding_types is empty"},
           {R"({"texts": ["a"], "truncate": "MIDDLE"})", 422, "truncate must be \"NONE\", \"START\" or \"END\""},
           {R"({"texts": ["a"], "images": ["data:"]})", 422, "images are not supported"},
       }) {
    auto b = ParseCohereEmbed(Body(c.body), true);
    ASSERT_FALSE(b.ok()) << c.body;
    EXPECT_EQ(HttpStatusOf(b.status()), c.http) << c.body;
    EXPECT_THAT(std::string(b.status().message()), HasSubstr(c.message)) << c.body;
  }
}

// input_type picks the model's sentence-transformers prompt of that name, where it has one.
TEST(CohereEmbedTest, InputTypeMapsToAPromptOfThatName) {
  EXPECT_EQ(CoherePromptName("search_query", {"search_query", "query"}), "search_query");
  EXPECT_EQ(CoherePromptName("search_query", {"query", "document"}), "query");
  EXPECT_EQ(CoherePromptName("search_document", {"query", "document"}), "document");
  EXPECT_EQ(CoherePromptName("search_document", {"query", "passage"}), "passage");
  EXPECT_EQ(CoherePromptName("clustering", {"clustering", "query"}), "clustering");
  EXPECT_EQ(CoherePromptName("classification", {"query", "document"}), "");  // ignored
  EXPECT_EQ(CoherePromptName("search_query", {}), "");
}

TEST(CohereEmbedTest, QuantizedTypesAndResponseShapes) {
  const std::vector<float> v = {0.5f, -0.25f, 0.0f, 0.1f, -0.5f, 0.3f, 0.2f, -0.1f, 0.4f};
  EXPECT_EQ(Int8Embedding(v), (std::vector<int>{127, -64, 0, 25, -127, 76, 51, -25, 102}));
  // Nine signs: 1 0 0 1 0 1 1 0 | 1 (padded with zeros), the first dimension in the high bit.
  EXPECT_EQ(BinaryEmbedding(v, /*as_unsigned=*/true), (std::vector<int>{0b10010110, 0b10000000}));
  EXPECT_EQ(BinaryEmbedding(v, /*as_unsigned=*/false), (std::vector<int>{0b10010110 - 128, 0}));
  EXPECT_EQ(Int8Embedding({0.0f, 0.0f}), (std::vector<int>{0, 0}));

  auto request = ParseCohereEmbed(Body(R"({"texts": ["x"], "embedding_types": ["float", "uint8", "ubinary"]})"), true);
  ASSERT_TRUE(request.ok()) << request.status();
  EmbedResult result;
  result.embeddings.resize(1);
  result.embeddings[0].values = {0.5f, -0.5f};
  result.usage.tokens = 3;
  EXPECT_EQ(CohereEmbedJson(*request, result, /*v2=*/true, "id-2"), json::parse(R"({"id": "id-2",
      "embeddings": {"float": [[0.5, -0.5]], "uint8": [[255, 1]], "ubinary": [[128]]},
      "texts": ["x"], "response_type": "embeddings_by_type",
      "meta": {"api_version": {"version": "2"}, "billed_units": {"input_tokens": 3},
               "tokens": {"input_tokens": 3, "output_tokens": 0}}})"));
  auto v1 = ParseCohereEmbed(Body(R"({"texts": ["x"]})"), false);
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(CohereEmbedJson(*v1, result, /*v2=*/false, "id-3"), json::parse(R"({"id": "id-3",
      "embeddings": [[0.5, -0.5]], "texts": ["x"], "response_type": "embeddings_floats",
      "meta": {"api_version": {"version": "1"}, "billed_units": {"input_tokens": 3},
               "tokens": {"input_tokens": 3, "output_tokens": 0}}})"));
  auto v2_default = ParseCohereEmbed(Body(R"({"texts": ["x"]})"), true);
  ASSERT_TRUE(v2_default.ok());
  EXPECT_EQ(CohereEmbedJson(*v2_default, result, true, "i")["embeddings"], json::parse(R"({"float": [[0.5, -0.5]]})"));

  const std::string id = RandomUuid();
  ASSERT_EQ(id.size(), 36u) << id;
  EXPECT_EQ(id[14], '4') << id;
  EXPECT_NE(id, RandomUuid());
}

TEST(InfinityTest, RerankAndClassifyShapes) {
  auto r = ParseInfinityRerank(Body(R"({"query": "q", "documents": ["a", "b"], "return_documents": true,
                                        "top_n": 1, "raw_scores": true, "model": "reranker"})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->documents, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r->return_documents);
  EXPECT_TRUE(r->raw_scores);
  EXPECT_EQ(r->top_n, 1);
  EXPECT_EQ(r->model, "reranker");
  EXPECT_EQ(HttpStatusOf(ParseInfinityRerank(Body(R"({"query": "q", "documents": []})")).status()), 400);
  EXPECT_THAT(std::string(ParseInfinityRerank(Body(R"({"query": "q", "documents": [{"text": "a"}]})")).status().message()),
              HasSubstr("documents[0] must be a string"));
  RerankResult result;
  result.model = "reranker";
  result.results = {{1, 0.5f, "b"}};
  result.usage.tokens = 4;
  EXPECT_EQ(InfinityRerankJson(result, true, "id", 1700000000), json::parse(R"({"object": "rerank",
      "results": [{"relevance_score": 0.5, "index": 1, "document": "b"}], "model": "reranker",
      "usage": {"prompt_tokens": 4, "total_tokens": 4}, "id": "id", "created": 1700000000})"));
  EXPECT_TRUE(InfinityRerankJson(result, false, "id", 0)["results"][0]["document"].is_null());

  auto c = ParseInfinityClassify(Body(R"({"input": ["good", "bad"], "model": "classifier"})"));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->inputs.size(), 2u);
  EXPECT_EQ(c->score_rule, ScoreRule::kLogitCount);
  EXPECT_EQ(c->model, "classifier");
  auto one = ParseInfinityClassify(Body(R"({"input": "good"})"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->inputs.size(), 1u);
  EXPECT_EQ(HttpStatusOf(ParseInfinityClassify(Body(R"({"input": []})")).status()), 400);
  EXPECT_THAT(std::string(ParseInfinityClassify(Body(R"({"inputs": ["a"]})")).status().message()),
              HasSubstr("input is required"));
  ClassifyResult classified;
  classified.model = "classifier";
  classified.results.resize(1);
  classified.results[0].labels = {{"POS", 1, 0.75f}, {"NEG", 0, 0.25f}};
  classified.usage.tokens = 5;
  EXPECT_EQ(InfinityClassifyJson(classified, "id", 7), json::parse(R"({"object": "classify",
      "data": [[{"score": 0.75, "label": "POS"}, {"score": 0.25, "label": "NEG"}]], "model": "classifier",
      "usage": {"prompt_tokens": 5, "total_tokens": 5}, "id": "id", "created": 7})"));
}

// The Inference API's zero-shot-classification request, as huggingface_hub and
// @huggingface/inference send it, and the pipeline's answer.
TEST(ZeroShotTest, RequestShapesAndAnswer) {
  auto r = ParseZeroShot(json::parse(R"({"inputs": "text", "parameters": {"candidate_labels": [" a", "b"],
      "multi_label": true, "hypothesis_template": null}})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->batch);
  EXPECT_EQ(r->zero_shot.sequences, std::vector<std::string>{"text"});
  EXPECT_EQ(r->zero_shot.candidate_labels, (std::vector<std::string>{" a", "b"}));  // a list is kept as it is
  EXPECT_TRUE(r->zero_shot.multi_label);
  EXPECT_EQ(r->zero_shot.hypothesis_template, "");  // null: the default
  EXPECT_FALSE(r->zero_shot.truncation.truncate.has_value());
  // A comma-separated string is split and stripped; multi_class is the old name of multi_label;
  // a list of inputs answers a list.
  r = ParseZeroShot(json::parse(R"({"inputs": ["x", "y"], "model": "nli", "parameters": {"candidate_labels":
      "sports, politics ,, food", "multi_class": true, "hypothesis_template": "About {}.", "truncate": false}})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->batch);
  EXPECT_EQ(r->zero_shot.model, "nli");
  EXPECT_EQ(r->zero_shot.candidate_labels, (std::vector<std::string>{"sports", "politics", "food"}));
  EXPECT_TRUE(r->zero_shot.multi_label);
  EXPECT_EQ(r->zero_shot.hypothesis_template, "About {}.");
  EXPECT_EQ(r->zero_shot.truncation.truncate, false);
  EXPECT_TRUE(HasCandidateLabels(json::parse(R"({"inputs": "x", "parameters": {"candidate_labels": "a"}})")));
  EXPECT_FALSE(HasCandidateLabels(json::parse(R"({"inputs": "x", "parameters": {"top_k": 1}})")));
  EXPECT_FALSE(HasCandidateLabels(json::parse(R"({"inputs": "x"})")));

  auto bad = [](const char* body, int status, const std::string& says) {
    auto p = ParseZeroShot(json::parse(body));
    ASSERT_FALSE(p.ok()) << body;
    EXPECT_EQ(HttpStatusOf(p.status()), status) << body << ": " << p.status();
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(says)) << body;
  };
  bad(R"({"inputs": "", "parameters": {"candidate_labels": ["a"]}})", 400, "inputs is empty");
  bad(R"({"inputs": [], "parameters": {"candidate_labels": ["a"]}})", 400, "inputs is empty");
  bad(R"({"inputs": 3, "parameters": {"candidate_labels": ["a"]}})", 422, "inputs must be a string or an array");
  bad(R"({"inputs": ["x", 2], "parameters": {"candidate_labels": ["a"]}})", 422, "inputs[1] must be a string");
  bad(R"({"inputs": "x", "parameters": {}})", 422, "parameters.candidate_labels");
  bad(R"({"inputs": "x", "parameters": {"candidate_labels": ["a", ""]}})", 400, "candidate_labels[1] is empty");
  bad(R"({"inputs": "x", "parameters": {"candidate_labels": {"a": 1}}})", 422,
      "candidate_labels must be an array of strings or a comma-separated string");
  bad(R"({"inputs": "x", "parameters": {"candidate_labels": ["a"], "multi_label": "yes"}})", 422,
      "parameters.multi_label");
  bad(R"({"inputs": "x", "parameters": {"candidate_labels": ["a"], "hypothesis_template": ""}})", 400,
      "parameters.hypothesis_template is empty");

  ZeroShotResult result;
  result.results.push_back({"text", {{"b", 1, 0.75f}, {"a", 0, 0.25f}}});
  EXPECT_EQ(ZeroShotJson(result, false),
            json::parse(R"({"sequence": "text", "labels": ["b", "a"], "scores": [0.75, 0.25]})"));
  EXPECT_EQ(ZeroShotJson(result, true),
            json::parse(R"([{"sequence": "text", "labels": ["b", "a"], "scores": [0.75, 0.25]}])"));
}

// /embed_sparse's and /embed_multi_vector's requests, and whole_input on /embed and /v1/embeddings.
TEST(TeiTest, SparseMultiVectorAndWholeInputFields) {
  auto sparse = ParseTeiEmbedSparse(json::parse(R"({"inputs": ["a", [5, 6]], "truncate": true,
      "prompt_name": "query", "whole_input": true, "window_overlap": 8, "model": "splade"})"));
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_TRUE(sparse->return_sparse);
  EXPECT_FALSE(sparse->return_multi_vector);
  EXPECT_EQ(sparse->inputs.size(), 2u);
  EXPECT_EQ(sparse->prompt_name, "query");
  EXPECT_EQ(sparse->whole_input, true);
  EXPECT_EQ(sparse->window_overlap, 8);
  EXPECT_EQ(sparse->model, "splade");
  auto multi = ParseMultiVector(json::parse(R"({"inputs": "a"})"));
  ASSERT_TRUE(multi.ok());
  EXPECT_TRUE(multi->return_multi_vector);
  EXPECT_FALSE(multi->whole_input.has_value());
  auto embed = ParseTeiEmbed(json::parse(R"({"inputs": "a", "whole_input": false})"));
  ASSERT_TRUE(embed.ok());
  EXPECT_EQ(embed->whole_input, false);
  auto openai = ParseOpenAIEmbeddings(json::parse(R"({"input": "a", "model": "m", "window_overlap": 4})"));
  ASSERT_TRUE(openai.ok());
  EXPECT_EQ(openai->embed.window_overlap, 4);
  EXPECT_FALSE(ParseTeiEmbed(json::parse(R"({"inputs": "a", "window_overlap": -1})")).ok());
  EXPECT_FALSE(ParseTeiEmbed(json::parse(R"({"inputs": "a", "whole_input": "yes"})")).ok());

  EmbedResult result;
  Embedding e;
  e.sparse = {{3, 0.5f}, {9, 1.25f}};
  e.multi_vector = {1, 0, 0, 2};
  e.multi_vector_dim = 2;
  e.multi_vector_count = 2;
  result.embeddings.push_back(e);
  EXPECT_EQ(TeiEmbedSparseJson(result), json::parse(R"([[{"index": 3, "value": 0.5}, {"index": 9, "value": 1.25}]])"));
  EXPECT_EQ(MultiVectorJson(result), json::parse(R"([[[1.0, 0.0], [0.0, 2.0]]])"));
  EmbedTokensResult states;
  TokenStates t;
  t.hidden_size = 2;
  t.values = {3, 4, 0, -2};
  states.sequences.push_back(t);
  EXPECT_EQ(NormalizedTokenStatesJson(states), json({{{0.6f, 0.8f}, {0.0f, -1.0f}}}));
  EXPECT_EQ(TeiEmbedAllJson(states), json::parse(R"([[[3.0, 4.0], [0.0, -2.0]]])"));
}

// The OpenAPI document is JSON and lists exactly the routes the server serves, each described.
TEST(OpenApiTest, DocumentListsEveryRoute) {
  RouteContext context;
  context.metrics_text = [] { return std::string(); };
  const std::vector<HttpRoute> table = MakeHttpRoutes(context);
  const json doc = json::parse(OpenApiDocument(table));
  EXPECT_EQ(doc["openapi"], "3.0.3");
  std::set<std::string> routes, documented;
  for (const HttpRoute& r : table) {
    routes.insert(r.name());
    EXPECT_FALSE(r.openapi.empty()) << r.name() << " has no operation in openapi_document.cc";
    EXPECT_EQ(r.openapi, OpenApiOperation(r.method, r.path));
  }
  EXPECT_TRUE(OpenApiOperation("POST", "/no-such-route").empty());
  for (auto path = doc["paths"].begin(); path != doc["paths"].end(); ++path) {
    for (auto op = path.value().begin(); op != path.value().end(); ++op) {
      std::string method = op.key();
      for (char& ch : method) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      documented.insert(method + " " + path.key());
      EXPECT_TRUE(op.value().contains("responses")) << method << " " << path.key();
    }
  }
  EXPECT_EQ(documented, routes);
  // Every schema a path refers to is defined.
  const std::string text = doc.dump();
  for (size_t at = text.find("#/components/schemas/"); at != std::string::npos;
       at = text.find("#/components/schemas/", at + 1)) {
    const size_t begin = at + std::strlen("#/components/schemas/");
    const std::string name = text.substr(begin, text.find('"', begin) - begin);
    EXPECT_TRUE(doc["components"]["schemas"].contains(name)) << name;
  }
}

TEST(DumpJsonTest, InvalidUtf8InAResponseIsReplacedNotThrown) {
  EXPECT_EQ(DumpJson(json{{"text", std::string("a\xff")}}), "{\"text\":\"a\xEF\xBF\xBD\"}");
}

}  // namespace
}  // namespace relserve
