// Hostile request bodies: JSON nested 100,000 deep in every field a route reads is refused at
// parse (400, naming the limit) instead of overflowing the stack of whatever copies, compares
// or prints it; values quoted in error messages and the error bodies themselves stay small
// however large the value.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/http_api/cohere_api.h"
#include "server/http_api/http_status.h"
#include "server/http_api/json_fields.h"
#include "server/http_api/openai_api.h"
#include "server/http_api/tei_api.h"

namespace relserve {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

// `depth` arrays one inside another around a 1.
std::string NestedArrays(int depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }
// `depth` objects one inside another, each {"a": ...}, around a 1.
std::string NestedObjects(int depth) {
  std::string text;
  for (int i = 0; i < depth; ++i) text += "{\"a\":";
  return text + "1" + std::string(depth, '}');
}

std::string BodyWith(const std::string& field, const std::string& value) {
  return "{\"" + field + "\": " + value + "}";
}

void ExpectDepthError(const absl::StatusOr<json>& parsed, const std::string& what) {
  ASSERT_FALSE(parsed.ok()) << what;
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << what;
  EXPECT_EQ(HttpStatusOf(parsed.status()), 400) << what;
  const std::string message(parsed.status().message());
  EXPECT_THAT(message, HasSubstr("nests deeper than 64 levels")) << what;
  EXPECT_LT(message.size(), 200u) << what;
}

TEST(JsonDepthTest, DeepNestingInEveryFieldIsRefusedAtParse) {
  // The fields of /v1/embeddings, /embed, /rerank, /predict, /tokenize and /v1/rerank.
  for (const char* field : {"input", "inputs", "dimensions", "top_n", "texts", "query", "documents",
                            "truncation_direction", "encoding_format", "model"}) {
    ExpectDepthError(ParseJsonObject(BodyWith(field, NestedArrays(100000))), std::string(field) + " arrays");
    ExpectDepthError(ParseJsonObject(BodyWith(field, NestedObjects(100000))), std::string(field) + " objects");
  }
  // The body itself, and brackets that never close.
  ExpectDepthError(ParseJsonObject(NestedObjects(100000)), "body");
  ExpectDepthError(ParseJsonObject(std::string(200000, '[')), "unclosed");
  ExpectDepthError(ParseJsonObject("{\"input\": " + std::string(100000, '{')), "unclosed objects");
}

TEST(JsonDepthTest, TheLimitItselfParses) {
  static_assert(kMaxRequestJsonDepth == 64, "the messages tested name 64");
  // The body is level 1: 63 arrays inside it reach the limit.
  auto at_limit = ParseJsonObject(BodyWith("input", NestedArrays(kMaxRequestJsonDepth - 1)));
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  ExpectDepthError(ParseJsonObject(BodyWith("input", NestedArrays(kMaxRequestJsonDepth))), "one beyond");
  auto objects = ParseJsonObject(NestedObjects(kMaxRequestJsonDepth));
  ASSERT_TRUE(objects.ok()) << objects.status();
  ExpectDepthError(ParseJsonObject(NestedObjects(kMaxRequestJsonDepth + 1)), "objects one beyond");
  // Parsed, it is an ordinary bad input, its value quoted short.
  auto r = ParseOpenAIEmbeddings(*at_limit);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(r.status().message().size(), 200u) << r.status();
  // Sibling arrays do not add up: 1000 of them, each one level deep.
  std::string many = "{\"input\": [";
  for (int i = 0; i < 1000; ++i) many += i ? ",[1,2]" : "[1,2]";
  auto wide = ParseJsonObject(many + "]}");
  ASSERT_TRUE(wide.ok()) << wide.status();
  auto embed = ParseOpenAIEmbeddings(*wide);
  ASSERT_TRUE(embed.ok()) << embed.status();
  EXPECT_EQ(embed->embed.inputs.size(), 1000u);
}

TEST(JsonDepthTest, BracketsInsideStringsDoNotCount) {
  const std::string text = std::string(100000, '[') + "\\\"" + std::string(100000, '{');
  auto parsed = ParseJsonObject(BodyWith("input", "\"" + text + "\""));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto r = ParseOpenAIEmbeddings(*parsed);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->embed.inputs.size(), 1u);
  EXPECT_EQ(r->embed.inputs[0].text.size(), 200001u);
  // A key full of brackets, and an escaped backslash before the closing quote.
  auto key = ParseJsonObject("{\"" + std::string(1000, '{') + "\\\\\": 1, \"input\": \"x\"}");
  ASSERT_TRUE(key.ok()) << key.status();
  // Not JSON is still the parser's error, with its position.
  auto bad = ParseJsonObject("{\"input\": [1, 2}");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(HttpStatusOf(bad.status()), 400);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("not valid JSON"));
}

TEST(JsonDepthTest, DepthErrorIsABadRequestInBothErrorStyles) {
  auto parsed = ParseJsonObject(BodyWith("inputs", NestedArrays(100000)));
  ASSERT_FALSE(parsed.ok());
  const int http = HttpStatusOf(parsed.status());
  EXPECT_EQ(http, 400);
  const json openai = OpenAIErrorJson(parsed.status(), http);
  EXPECT_EQ(openai["error"]["type"], "invalid_request_error");
  EXPECT_EQ(openai["error"]["code"], "invalid_argument");
  EXPECT_THAT(openai["error"]["message"].get<std::string>(), HasSubstr("64 levels"));
  const json tei = TeiErrorJson(parsed.status(), http);
  EXPECT_EQ(tei["error_type"], "Validation");
  EXPECT_THAT(tei["error"].get<std::string>(), HasSubstr("64 levels"));
}

// The value a message quotes is cut after about 60 characters, whatever its size or shape.
TEST(JsonDepthTest, MessagesQuoteLongValuesShort) {
  const std::string long_text(100000, 'x');
  auto expect_short = [](const absl::Status& status, const std::string& field) {
    ASSERT_FALSE(status.ok()) << field;
    const std::string message(status.message());
    EXPECT_LT(message.size(), 300u) << field;
    EXPECT_THAT(message.substr(0, 300), AllOf(HasSubstr(field), HasSubstr("..."))) << field;
  };
  json body = {{"input", json::array({1, 2, long_text})}};
  expect_short(ParseOpenAIEmbeddings(body).status(), "input[2]");
  body = {{"input", "x"}, {"encoding_format", long_text}};
  expect_short(ParseOpenAIEmbeddings(body).status(), "encoding_format");
  body = {{"inputs", "x"}, {"truncation_direction", long_text}};
  expect_short(ParseTeiEmbed(body).status(), "truncation_direction");
  body = {{"inputs", json::array({json::array({1, json::array({long_text, long_text})})})}};
  expect_short(ParseTeiEmbed(body).status(), "inputs[0][1]");
  // A deep value (at the limit) in a token id list.
  auto deep = ParseJsonObject(BodyWith("input", "[1, " + NestedArrays(kMaxRequestJsonDepth - 2) + "]"));
  ASSERT_TRUE(deep.ok()) << deep.status();
  expect_short(ParseOpenAIEmbeddings(*deep).status(), "input[1]");
  // An integer out of range is quoted whole (it is short).
  body = {{"query", "q"}, {"documents", json::array({"a"})}, {"top_n", 0}};
  auto top_n = ParseCohereRerank(body);
  ASSERT_FALSE(top_n.ok());
  EXPECT_THAT(std::string(top_n.status().message()),
              HasSubstr("top_n must be an integer in [1, 1073741824], not 0"));
}

// Whatever a message quotes (an unknown model name of 900 KB), the error body stays under the
// cap gRPC applies too, cut with "..." and the number of bytes cut.
TEST(JsonDepthTest, ErrorBodiesCapTheirMessage) {
  static_assert(kMaxHttpErrorMessageBytes == 2048, "as gRPC's kMaxStatusMessageBytes");
  const std::string name(900000, 'm');
  const absl::Status huge = absl::NotFoundError("model \"" + name + "\" is not served here");
  const std::string openai = OpenAIErrorJson(huge, 404)["error"]["message"].get<std::string>();
  EXPECT_LE(openai.size(), kMaxHttpErrorMessageBytes + 40);
  EXPECT_THAT(openai, AllOf(HasSubstr("model \"mmm"), HasSubstr("..."), HasSubstr("more bytes cut")));
  EXPECT_EQ(OpenAIErrorJson(huge, 404)["error"]["param"], "model");
  const std::string tei = TeiErrorJson(huge, 404)["error"].get<std::string>();
  EXPECT_LE(tei.size(), kMaxHttpErrorMessageBytes + 40);
  EXPECT_THAT(tei, AllOf(HasSubstr("..."), HasSubstr("more bytes cut")));
  EXPECT_LT(DumpJson(TeiErrorJson(huge, 404)).size(), 2200u);
  EXPECT_LT(DumpJson(OpenAIErrorJson(huge, 404)).size(), 2300u);
  // A message at the cap is left whole.
  const std::string exact(kMaxHttpErrorMessageBytes, 'e');
  EXPECT_EQ(TeiErrorJson(absl::InvalidArgumentError(exact), 422)["error"], exact);
  EXPECT_THAT(OpenAIErrorJson(absl::InvalidArgumentError(exact), 422)["error"]["message"].get<std::string>(),
              Not(HasSubstr("cut")));
}

}  // namespace
}  // namespace relserve
