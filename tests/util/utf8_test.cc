#include "server/util/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace relserve {
namespace {

using namespace std::string_literals;

struct BadCase {
  std::string text;
  size_t offset;
  std::string reason;
};

TEST(Utf8Test, AcceptsWellFormedText) {
  for (const std::string& text :
       {""s, "plain ASCII"s, "caf\xC3\xA9"s, "\xE2\x82\xAC 100"s, "\xF0\x9F\x98\x80"s,
        "a\0b"s,                                 // NUL is a character like any other
        "\xC2\x80"s,                             // U+0080, smallest two-byte form
        "\xE0\xA0\x80"s,                         // U+0800, smallest three-byte form
        "\xED\x9F\xBF"s, "\xEE\x80\x80"s,        // either side of the surrogates
        "\xF0\x90\x80\x80"s,                     // U+10000, smallest four-byte form
        "\xF4\x8F\xBF\xBF"s}) {                  // U+10FFFF, the last code point
    EXPECT_FALSE(FindInvalidUtf8(text).has_value()) << text;
    EXPECT_TRUE(ValidateUtf8(text, "text").ok()) << text;
  }
}

TEST(Utf8Test, ReportsOffsetAndReasonOfFirstBadSequence) {
  const BadCase cases[] = {
      {"ab\x80", 2, "unexpected continuation byte"},
      {"\xBF", 0, "unexpected continuation byte"},
      {"x\xC0\xAF", 1, "overlong encoding"},               // '/' in two bytes
      {"\xC1\xBF", 0, "overlong encoding"},
      {"\xE0\x80\xAF", 0, "overlong encoding"},            // '/' in three bytes
      {"\xF0\x80\x80\xAF", 0, "overlong encoding"},        // '/' in four bytes
      {"ok \xED\xA0\x80", 3, "UTF-16 surrogate (U+D800..U+DFFF)"},
      {"\xED\xBF\xBF", 0, "UTF-16 surrogate (U+D800..U+DFFF)"},
      {"\xF4\x90\x80\x80", 0, "code point above U+10FFFF"},  // U+110000
      {"\xF5\x80\x80\x80", 0, "code point above U+10FFFF"},
      {"\xF8\x88\x80\x80\x80", 0, "byte 0xF8..0xFF never occurs in UTF-8"},
      {"\xFF", 0, "byte 0xF8..0xFF never occurs in UTF-8"},
      {"caf\xC3", 3, "sequence cut short by the end of the text"},
      {"\xF0\x9F\x98", 0, "sequence cut short by the end of the text"},
      {"\xE2\x82z", 0, "sequence cut short (missing continuation byte)"},
      {"\xC3\xA9\xC3(", 2, "sequence cut short (missing continuation byte)"},
  };
  for (const BadCase& c : cases) {
    const auto error = FindInvalidUtf8(c.text);
    ASSERT_TRUE(error.has_value()) << c.reason;
    EXPECT_EQ(error->offset, c.offset) << c.reason;
    EXPECT_EQ(std::string(error->reason), c.reason);

    const absl::Status status = ValidateUtf8(c.text, "second text");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), "second text: invalid UTF-8 at byte offset " +
                                    std::to_string(c.offset) + ": " + c.reason);
  }
}

// One sequence's length, as the JSON writer of safetensors headers walks a text: the same
// verdict as FindInvalidUtf8 at every position.
TEST(Utf8SequenceLengthTest, LengthsOfWellFormedSequencesAndZeroWhereFindInvalidStops) {
  EXPECT_EQ(Utf8SequenceLength("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xC3\xA9", 0), 2u);          // é
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82\xAC", 0), 3u);      // €
  EXPECT_EQ(Utf8SequenceLength("\xF0\x9F\x98\x80", 0), 4u);  // U+1F600
  EXPECT_EQ(Utf8SequenceLength("\xC0\xAF", 0), 0u);          // overlong
  EXPECT_EQ(Utf8SequenceLength("\xED\xA0\x80", 0), 0u);      // surrogate
  EXPECT_EQ(Utf8SequenceLength("\xF4\x90\x80\x80", 0), 0u);  // past U+10FFFF
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82", 0), 0u);          // cut short
  EXPECT_EQ(Utf8SequenceLength("\x80", 0), 0u);              // stray continuation
  EXPECT_EQ(Utf8SequenceLength("a", 1), 0u);                 // past the end
  for (std::string_view text : {std::string_view("ab\xC3\xA9\xE2\x82\xAC"), std::string_view("a\xE2\x82" "b"),
                                std::string_view("\xF0\x9F\x98\x80\xFF")}) {
    size_t i = 0;
    while (i < text.size() && Utf8SequenceLength(text, i) > 0) i += Utf8SequenceLength(text, i);
    const auto error = FindInvalidUtf8(text);
    EXPECT_EQ(i == text.size(), !error.has_value()) << text;
    if (error.has_value()) {
      EXPECT_EQ(error->offset, i) << text;
    }
  }
}

}  // namespace
}  // namespace relserve
