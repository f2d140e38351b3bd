#include "server/tokenizer/text/mapped_text.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/tokenizer/text/unicode_chars.h"

namespace relserve {
namespace {

using Span = std::pair<int32_t, int32_t>;

TEST(MappedTextTest, IdentityMapsEveryByteToItsCharacter) {
  const MappedText text = MappedText::Identity("a\xC3\xA9z", 10);
  EXPECT_EQ(text.Span(0, 1), Span(10, 11));
  EXPECT_EQ(text.Span(1, 2), Span(11, 13));  // half of é stands for all of it
  EXPECT_EQ(text.Span(1, 4), Span(11, 14));
  EXPECT_EQ(text.Span(4, 4), Span(14, 14));
  const MappedText tail = text.Substr(3, 4);
  EXPECT_EQ(tail.text(), "z");
  EXPECT_EQ(tail.Span(0, 1), Span(13, 14));
}

TEST(MappedTextTest, NormalizationKeepsTheOriginOfEachRun) {
  // NFC composes e + U+0301 (3 bytes of input) into é.
  const MappedText nfc = Normalize(MappedText::Identity("xe\xCC\x81y"), NormalizationForm::kNfc);
  EXPECT_EQ(nfc.text(), "x\xC3\xA9y");
  EXPECT_EQ(nfc.Span(1, 3), Span(1, 4));
  EXPECT_EQ(nfc.Span(3, 4), Span(4, 5));
  // NFKD spreads the ligature ﬁ (3 bytes) over "fi".
  const MappedText nfkd = Normalize(MappedText::Identity("\xEF\xAC\x81n"), NormalizationForm::kNfkd);
  EXPECT_EQ(nfkd.text(), "fin");
  EXPECT_EQ(nfkd.Span(1, 2), Span(0, 3));
  EXPECT_EQ(nfkd.Span(2, 3), Span(3, 4));
  // NFD of é, then the mark dropped.
  const MappedText nfd = Normalize(MappedText::Identity("\xC3\xA9"), NormalizationForm::kNfd);
  EXPECT_EQ(nfd.text(), "e\xCC\x81");
  EXPECT_EQ(FilterChars(nfd, [](char32_t c) { return !unicode::IsNonspacingMark(c); }).text(), "e");
}

TEST(MappedTextTest, SplitOnWhiteSpaceAsPythonSplits) {
  std::vector<std::string> words;
  for (const MappedText& w : SplitOnWhiteSpace(MappedText::Identity(" a\x1c" "b\xE2\x80\xA8" "c\xE3\x80\x80 "))) {
    words.push_back(w.text());
  }
  EXPECT_EQ(words, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(SplitOnWhiteSpace(MappedText::Identity(" \t ")).empty());
}

TEST(UnicodeCharsTest, ClassesAsTransformersSeesThem) {
  EXPECT_TRUE(unicode::IsBertPunctuation('$'));    // ASCII symbol, category Sc
  EXPECT_TRUE(unicode::IsBertPunctuation(0x3001));  // 、 Po
  EXPECT_FALSE(unicode::IsBertPunctuation(0x00B0));  // ° So
  EXPECT_TRUE(unicode::IsBertControl(0x200B));     // Cf
  EXPECT_TRUE(unicode::IsBertControl(0xE000));     // Co
  EXPECT_FALSE(unicode::IsBertControl('\t'));
  EXPECT_TRUE(unicode::IsBertWhitespace(0x3000));
  EXPECT_FALSE(unicode::IsBertWhitespace(0x2028));  // Zl: only Python's split sees it
  EXPECT_TRUE(unicode::IsPythonSpace(0x2028));
  EXPECT_TRUE(unicode::IsCjkIdeograph(0x4E2D));
  EXPECT_FALSE(unicode::IsCjkIdeograph(0x30C6));   // katakana
  EXPECT_TRUE(unicode::IsPythonDigit(0x00B2));     // ²
  EXPECT_TRUE(unicode::IsPythonDigit(0x0663));     // Arabic-Indic 3
  EXPECT_FALSE(unicode::IsPythonDigit(0x00BD));    // ½ is numeric, not a digit
  EXPECT_TRUE(unicode::IsCombining(0x0301));
  EXPECT_FALSE(unicode::IsCombining(0x0041));
  char32_t lowered[2];
  ASSERT_EQ(unicode::Lowercase(0x0130, lowered), 2);
  EXPECT_EQ(lowered[0], U'i');
  EXPECT_EQ(lowered[1], char32_t{0x0307});
  ASSERT_EQ(unicode::Lowercase(0x03A3, lowered), 1);
  EXPECT_EQ(lowered[0], char32_t{0x03C3});
}

}  // namespace
}  // namespace relserve
