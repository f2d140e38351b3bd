#include "client/input_parsing.h"

#include "client/request_building.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int32_t> Ids(const v1::Input& input) {
  return {input.tokens().ids().begin(), input.tokens().ids().end()};
}

TEST(InputParsingTest, JsonLinesOfEveryKind) {
  auto text = ParseInputLine(R"({"text": "a sentence"})");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->kind_case(), v1::Input::kText);
  EXPECT_EQ(text->text(), "a sentence");

  auto bare = ParseInputLine(R"("just a string")");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->text(), "just a string");

  auto pair = ParseInputLine(R"({"text": "query", "text_pair": "passage"})");
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->kind_case(), v1::Input::kPair);
  EXPECT_EQ(pair->pair().first(), "query");
  EXPECT_EQ(pair->pair().second(), "passage");

  auto tokens = ParseInputLine(R"({"tokens": [1, 334, 2], "token_type_ids": [0, 0, 1]})");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->kind_case(), v1::Input::kTokens);
  EXPECT_THAT(Ids(*tokens), ElementsAre(1, 334, 2));
  EXPECT_THAT(tokens->tokens().token_type_ids(), ElementsAre(0, 0, 1));
}

TEST(InputParsingTest, BadJsonLinesSayWhy) {
  struct Case {
    const char* line;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"text": "unterminated)", "not valid JSON"},
           {"[1, 2]", "expected a JSON object"},
           {R"({})", "exactly one of"},
           {R"({"text": "a", "tokens": [1]})", "exactly one of"},
           {R"({"text": 5})", "\"text\" must be a string"},
           {R"({"text": "a", "text_pair": ["b"]})", "\"text_pair\" must be a string"},
           {R"({"tokens": "1 2"})", "list of integers"},
           {R"({"tokens": [1, -2]})", ">= 0"},
           // Beyond double range: the parser's own reason, not a bare "not valid JSON".
           {R"({"tokens": [1, 1e400]})", "not valid JSON: number overflow parsing '1e400'"},
           {R"({"text": -1e400})", "beyond the range of a 64-bit float"},
           // 2^64 - 1 must not pass for -1 (or wrap to a valid id); the value is named as given.
           {R"({"tokens": [1, 18446744073709551615]})", "\"tokens\"[1] is 18446744073709551615"},
           {R"({"tokens": [4294967297]})", "\"tokens\"[0] is 4294967297"},
           {R"({"tokens": [1], "token_type_ids": [-1]})", "\"token_type_ids\"[0] is -1"},
           {R"({"tokens": [1.5]})", "list of integers"},
           {R"({"tokens": []})", "empty"},
           {R"({"tokens": [1, 2], "token_type_ids": [0]})", "as long as"},
           {R"({"tokens": [1], "text_pair": "b"})", "goes with \"text\""},
           {R"({"txt": "typo"})", "unknown key \"txt\""},
       }) {
    auto r = ParseInputLine(c.line);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.line;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message)) << c.line;
  }
}

TEST(InputParsingTest, RerankLines) {
  auto r = ParseRerankLine(R"({"query": "q", "documents": ["d1", "d2"]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->query, "q");
  EXPECT_THAT(r->documents, ElementsAre("d1", "d2"));
  EXPECT_THAT(std::string(ParseRerankLine(R"({"query": "q"})").status().message()), HasSubstr("documents"));
  EXPECT_THAT(std::string(ParseRerankLine(R"({"query": "q", "documents": [1]})").status().message()),
              HasSubstr("list of strings"));
  EXPECT_THAT(std::string(ParseRerankLine(R"({"query": "q", "documents": []})").status().message()),
              HasSubstr("empty"));
  EXPECT_EQ(ParseRerankLine(R"("q")").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(InputParsingTest, TokenIdLists) {
  EXPECT_THAT(*ParseTokenIds("1,334,2"), ElementsAre(1, 334, 2));
  EXPECT_THAT(*ParseTokenIds("1 334  2"), ElementsAre(1, 334, 2));
  EXPECT_THAT(*ParseTokenIds("[1, 334, 2]"), ElementsAre(1, 334, 2));
  EXPECT_EQ(ParseTokenIds("1,x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseTokenIds(" , ").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseTokenIds("-1").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(InputParsingTest, ArgumentsAsTextsPairsOrIds) {
  auto texts = InputsFromArgs({"a", "b"}, false, false);
  ASSERT_TRUE(texts.ok());
  ASSERT_EQ(texts->size(), 2u);
  EXPECT_EQ((*texts)[1].text(), "b");

  auto pairs = InputsFromArgs({"q1", "p1", "q2", "p2"}, true, false);
  ASSERT_TRUE(pairs.ok());
  ASSERT_EQ(pairs->size(), 2u);
  EXPECT_EQ((*pairs)[1].pair().first(), "q2");
  EXPECT_EQ((*pairs)[1].pair().second(), "p2");
  EXPECT_EQ(InputsFromArgs({"q1"}, true, false).status().code(), absl::StatusCode::kInvalidArgument);

  auto ids = InputsFromArgs({"1,5,2", "1 6 7 2"}, false, true);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(Ids((*ids)[1]), ElementsAre(1, 6, 7, 2));
  EXPECT_THAT(std::string(InputsFromArgs({"1,a"}, false, true).status().message()), HasSubstr("--ids"));

  // Text must be UTF-8 (protobuf strings are): refused before anything is sent.
  auto bad = InputsFromArgs({"fine", "\xff\xfe"}, false, false);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("argument 2: invalid UTF-8 at byte offset 0"));
  EXPECT_FALSE(InputsFromArgs({"q", "p\xc3"}, true, false).ok());
}

TEST(InputParsingTest, BlankLines) {
  EXPECT_TRUE(IsBlankLine(""));
  EXPECT_TRUE(IsBlankLine(" \t\r"));
  EXPECT_FALSE(IsBlankLine(" {}"));
}

TEST(RequestBuildingTest, FlagsBecomeRequestFields) {
  RequestOptions o;
  o.model = "m";
  o.normalize = true;
  o.truncate = true;
  o.dimensions = 16;
  o.request_id = "r1";
  o.top_n = 2;
  o.return_documents = true;
  o.raw_scores = true;
  o.top_k = 3;
  auto inputs = *InputsFromArgs({"a", "b"}, false, false);

  const v1::EmbedRequest embed = BuildEmbedRequest(o, inputs);
  EXPECT_EQ(embed.model(), "m");
  EXPECT_EQ(embed.inputs_size(), 2);
  EXPECT_TRUE(embed.normalize());
  EXPECT_TRUE(embed.truncate());
  EXPECT_EQ(embed.dimensions(), 16);
  EXPECT_EQ(embed.request_id(), "r1");

  const v1::ClassifyRequest classify = BuildClassifyRequest(o, inputs);
  EXPECT_EQ(classify.top_k(), 3);
  EXPECT_TRUE(classify.raw_scores());
  EXPECT_TRUE(classify.truncate());

  EXPECT_TRUE(BuildEmbedTokensRequest(o, inputs).truncate());
  EXPECT_EQ(BuildTokenizeRequest(o, inputs).inputs(1).text(), "b");

  const v1::RerankRequest rerank = BuildRerankRequest(o, "q", {"d1", "d2"});
  EXPECT_EQ(rerank.query(), "q");
  EXPECT_THAT(rerank.documents(), ElementsAre("d1", "d2"));
  EXPECT_EQ(rerank.top_n(), 2);
  EXPECT_TRUE(rerank.return_documents());
  EXPECT_TRUE(rerank.raw_scores());
  EXPECT_TRUE(rerank.truncate());
}

TEST(RequestBuildingTest, TruncateIsSentOnlyWhenGiven) {
  RequestOptions o;
  auto inputs = *InputsFromArgs({"a"}, false, false);
  const v1::EmbedRequest unsaid = BuildEmbedRequest(o, inputs);
  EXPECT_FALSE(unsaid.has_truncate());  // the server's --auto-truncate decides
  EXPECT_EQ(unsaid.truncation_direction(), v1::TRUNCATION_DIRECTION_UNSPECIFIED);
  o.truncate = false;
  o.truncation_direction = "left";
  for (const bool has : {BuildEmbedRequest(o, inputs).has_truncate(), BuildClassifyRequest(o, inputs).has_truncate(),
                         BuildEmbedTokensRequest(o, inputs).has_truncate(),
                         BuildTokenizeRequest(o, inputs).has_truncate(), BuildRerankRequest(o, "q", {"d"}).has_truncate()}) {
    EXPECT_TRUE(has);
  }
  EXPECT_FALSE(BuildEmbedRequest(o, inputs).truncate());
  EXPECT_EQ(BuildRerankRequest(o, "q", {"d"}).truncation_direction(), v1::TRUNCATION_DIRECTION_LEFT);
  EXPECT_EQ(BuildTokenizeRequest(o, inputs).truncation_direction(), v1::TRUNCATION_DIRECTION_LEFT);
}

}  // namespace
}  // namespace relserve::client
