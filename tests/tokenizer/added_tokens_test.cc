#include "server/tokenizer/added_tokens.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace relserve {
namespace {

AddedToken Token(std::string content, int32_t id) {
  AddedToken token;
  token.content = std::move(content);
  token.id = id;
  return token;
}

// The segments as (text, id or -1 for text) and their spans in the input.
struct Piece {
  std::string text;
  int32_t id;
  std::pair<int32_t, int32_t> span;
  bool operator==(const Piece& o) const { return text == o.text && id == o.id && span == o.span; }
};

std::ostream& operator<<(std::ostream& os, const Piece& p) {
  return os << "{\"" << p.text << "\", " << p.id << ", [" << p.span.first << ", " << p.span.second << ")}";
}

std::vector<Piece> Split(const AddedTokens& tokens, const std::string& text) {
  std::vector<Piece> out;
  for (const AddedTokens::Segment& s : tokens.Split(MappedText::Identity(text))) {
    out.push_back({s.text.text(), s.token ? s.token->id : -1, s.text.Span(0, s.text.size())});
  }
  return out;
}

TEST(AddedTokensTest, SplitsAtEveryTokenKeepingSpans) {
  const AddedTokens tokens({Token("[MASK]", 4), Token("[SEP]", 3)});
  EXPECT_EQ(Split(tokens, "a [MASK] b[SEP][SEP]"),
            (std::vector<Piece>{{"a ", -1, {0, 2}}, {"[MASK]", 4, {2, 8}}, {" b", -1, {8, 10}},
                                {"[SEP]", 3, {10, 15}}, {"[SEP]", 3, {15, 20}}}));
  // Not a token: other case, or cut short.
  EXPECT_EQ(Split(tokens, "[mask] [SEP"), (std::vector<Piece>{{"[mask] [SEP", -1, {0, 11}}}));
  EXPECT_TRUE(Split(tokens, "").empty());
}

TEST(AddedTokensTest, LeftmostThenLongestMatchWins) {
  const AddedTokens tokens({Token("<extra_id_1>", 1), Token("<extra_id_10>", 10), Token("id_1", 7)});
  EXPECT_EQ(Split(tokens, "<extra_id_10>x"),
            (std::vector<Piece>{{"<extra_id_10>", 10, {0, 13}}, {"x", -1, {13, 14}}}));
  EXPECT_EQ(Split(tokens, "<extra_id_1>"), (std::vector<Piece>{{"<extra_id_1>", 1, {0, 12}}}));
  // "id_1" starts later than "<extra_id_1>", which therefore wins.
  EXPECT_EQ(Split(tokens, "x<extra_id_1"),
            (std::vector<Piece>{{"x<extra_", -1, {0, 8}}, {"id_1", 7, {8, 12}}}));
}

TEST(AddedTokensTest, StripFlagsEatNeighbouringWhiteSpace) {
  AddedToken mask = Token("<mask>", 6);
  mask.lstrip = true;
  AddedToken extra = Token("<x>", 9);
  extra.lstrip = extra.rstrip = true;
  const AddedTokens tokens({mask, extra, Token("<s>", 0)});
  EXPECT_EQ(Split(tokens, "a \t <mask> b"),
            (std::vector<Piece>{{"a", -1, {0, 1}}, {"<mask>", 6, {4, 10}}, {" b", -1, {10, 12}}}));
  // Python's str.strip white space includes U+3000; a stretch stripped to nothing is dropped.
  EXPECT_EQ(Split(tokens, "a\xE3\x80\x80<x>\n b"),
            (std::vector<Piece>{{"a", -1, {0, 1}}, {"<x>", 9, {4, 7}}, {"b", -1, {9, 10}}}));
  EXPECT_EQ(Split(tokens, "  <x>  "), (std::vector<Piece>{{"<x>", 9, {2, 5}}}));
  // Without flags the white space stays with the text.
  EXPECT_EQ(Split(tokens, "a <s> b"),
            (std::vector<Piece>{{"a ", -1, {0, 2}}, {"<s>", 0, {2, 5}}, {" b", -1, {5, 7}}}));
}

TEST(AddedTokensTest, SingleWordTokenInsideAWordIsText) {
  AddedToken word = Token("new", 5);
  word.single_word = true;
  const AddedTokens tokens({word});
  EXPECT_EQ(Split(tokens, "a new b"),
            (std::vector<Piece>{{"a ", -1, {0, 2}}, {"new", 5, {2, 5}}, {" b", -1, {5, 7}}}));
  EXPECT_EQ(Split(tokens, "renew"), (std::vector<Piece>{{"renew", -1, {0, 5}}}));
  EXPECT_EQ(Split(tokens, "news"), (std::vector<Piece>{{"news", -1, {0, 4}}}));
}

TEST(AddedTokensTest, LowercasingSparesTheTokensThatKeepCase) {
  AddedToken mask = Token("[MASK]", 4);
  mask.keeps_case = true;
  const AddedTokens tokens({mask, Token("[OTHER]", 8)});
  const MappedText lowered =
      tokens.LowercaseOutside(MappedText::Identity("A [MASK] [OTHER] \xC4\xB0 \xCE\xA3"));
  // İ lowers to i + U+0307 (two characters, both from İ's two bytes); a lone Σ to σ.
  EXPECT_EQ(lowered.text(), "a [MASK] [other] i\xCC\x87 \xCF\x83");
  EXPECT_EQ(lowered.Span(17, 20), std::make_pair(17, 19));
}

}  // namespace
}  // namespace relserve
