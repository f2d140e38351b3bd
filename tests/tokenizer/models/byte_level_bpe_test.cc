// RobertaTokenizer's byte-level BPE: GPT-2's pre-tokenizer, the byte stand-ins, merges by
// rank, add_prefix_space, special tokens written in the text, the template, and the files.

#include "server/tokenizer/models/byte_level_bpe_text_model.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::MakeTempDir;
using ::relserve::testing::WriteFile;
using Ids = std::vector<int32_t>;
using Offsets = std::vector<std::pair<int32_t, int32_t>>;
using Spans = std::vector<std::pair<size_t, size_t>>;

// "Ġ" is the stand-in of a space, "Ċ" of a line feed; "é" is the bytes C3 A9, whose stand-ins
// are "Ã" and "©".
constexpr char kVocab[] = R"({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "h": 4, "e": 5, "l": 6, "o": 7,
  "\u0120": 8, "w": 9, "r": 10, "d": 11, "he": 12, "ll": 13, "hell": 14, "hello": 15, "\u0120w": 16,
  "or": 17, "\u0120wor": 18, "\u00c3": 19, "\u00a9": 20, "\u00c3\u00a9": 21, "<mask>": 22})";
constexpr char kMerges[] =
    "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\xC4\xA0 w\no r\n\xC4\xA0w or\n\xC3\x83 \xC2\xA9\n";

std::unique_ptr<Tokenizer> LoadRoberta(const std::string& name, const std::string& config = "",
                                       const std::string& merges = kMerges) {
  const std::string dir = MakeTempDir("roberta_" + name);
  WriteFile(JoinPath(dir, "vocab.json"), kVocab);
  WriteFile(JoinPath(dir, "merges.txt"), merges);
  if (!config.empty()) WriteFile(JoinPath(dir, "tokenizer_config.json"), config);
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kRoberta, 512);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

Spans PreTokenize(const std::string& text) { return ByteLevelPreTokenize(text); }

TEST(ByteLevelBpeTest, PreTokenizerFollowsGpt2Pattern) {
  // Contractions, a space kept with the word after it, a white-space run less its last
  // character before text, symbols together, and trailing white space whole.
  EXPECT_EQ(PreTokenize("I'm  ok!!\n"), (Spans{{0, 1}, {1, 3}, {3, 4}, {4, 7}, {7, 9}, {9, 10}}));
  EXPECT_EQ(PreTokenize("a1 22 x  \n"), (Spans{{0, 1}, {1, 2}, {2, 5}, {5, 7}, {7, 10}}));
  // Only U+0020 joins the next word; a tab stays on its own. "é" is a letter.
  EXPECT_EQ(PreTokenize("a\tb caf\xC3\xA9's"), (Spans{{0, 1}, {1, 2}, {2, 3}, {3, 9}, {9, 11}}));
  EXPECT_TRUE(PreTokenize("").empty());
}

TEST(ByteLevelBpeTest, MergesByRankIntoVocabularyTokens) {
  auto roberta = LoadRoberta("merges");
  ASSERT_NE(roberta, nullptr);
  auto enc = roberta->Encode("hello world");
  ASSERT_TRUE(enc.ok()) << enc.status();
  // "hello" merges all the way; " world" only to "Ġwor" (no merge takes it further).
  EXPECT_EQ(enc->input_ids, (Ids{0, 15, 18, 6, 11, 2}));
  EXPECT_EQ(enc->offsets, (Offsets{{0, 0}, {0, 5}, {5, 9}, {9, 10}, {10, 11}, {0, 0}}));
  EXPECT_EQ(enc->token_type_ids, Ids(6, 0));
  // Bytes of a character: "é" merges, "è" (C3 A8) has no stand-in token for A8; both pieces
  // of the character cover all of it.
  auto accents = roberta->Encode("\xC3\xA9\xC3\xA8");
  ASSERT_TRUE(accents.ok()) << accents.status();
  EXPECT_EQ(accents->input_ids, (Ids{0, 21, 19, 3, 2}));
  EXPECT_EQ(accents->offsets, (Offsets{{0, 0}, {0, 2}, {2, 4}, {2, 4}, {0, 0}}));
}

TEST(ByteLevelBpeTest, AddPrefixSpace) {
  auto plain = LoadRoberta("no_prefix");
  auto prefixed = LoadRoberta("prefix", R"({"add_prefix_space": true})");
  EXPECT_EQ(plain->EncodeRaw("hello").value(), (Ids{15}));
  auto enc = prefixed->Encode("hello");
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, (Ids{0, 8, 15, 2}));
  EXPECT_EQ(enc->offsets[1], std::make_pair(0, 0));  // the added space is no byte of the text
  EXPECT_EQ(enc->offsets[2], std::make_pair(0, 5));
  // Text that starts with white space gets none.
  EXPECT_EQ(prefixed->EncodeRaw(" hello").value(), plain->EncodeRaw(" hello").value());
}

TEST(ByteLevelBpeTest, SpecialTokensInTheText) {
  auto roberta = LoadRoberta("special");
  // <mask> eats the space before it (lstrip); </s> does not, so that space is a token.
  EXPECT_EQ(roberta->EncodeRaw("hello <mask> world").value(), (Ids{15, 22, 18, 6, 11}));
  EXPECT_EQ(roberta->EncodeRaw("hello </s>").value(), (Ids{15, 8, 2}));
  EXPECT_EQ(roberta->mask_id(), 22);
  EXPECT_EQ(roberta->cls_id(), 0);
  EXPECT_EQ(roberta->sep_id(), 2);
  EXPECT_EQ(roberta->pad_id(), 1);
}

TEST(ByteLevelBpeTest, PairTemplateAndTruncation) {
  auto roberta = LoadRoberta("pair");
  TokenizeOptions opts;
  opts.max_length = 7;  // 4 + 1 tokens and 4 special tokens: 2 to drop, both from the first
  auto enc = roberta->EncodePair("hello world", "hello", opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, (Ids{0, 15, 18, 2, 2, 15, 2}));
  EXPECT_EQ(enc->token_type_ids, Ids(7, 0));
  EXPECT_EQ(enc->sequence_ids, (std::vector<int8_t>{-1, 0, 0, -1, -1, 1, -1}));
  EXPECT_TRUE(enc->truncated);
}

TEST(ByteLevelBpeTest, MergesFileAsTransformersReadsIt) {
  // The first line is a header, and what follows the last line end is dropped: here the only
  // merge, so "he" stays two tokens.
  auto unterminated = LoadRoberta("unterminated", "", "#version: 0.2\nh e");
  EXPECT_EQ(unterminated->EncodeRaw("he").value(), (Ids{4, 5}));
  auto terminated = LoadRoberta("terminated", "", "#version: 0.2\nh e\n");
  EXPECT_EQ(terminated->EncodeRaw("he").value(), (Ids{12}));
}

TEST(ByteLevelBpeTest, BrokenOrMissingFilesAreErrors) {
  const std::string dir = MakeTempDir("roberta_broken");
  WriteFile(JoinPath(dir, "vocab.json"), R"({"a": "1"})");
  EXPECT_TRUE(Tokenizer::HasFiles(dir, TokenizerFamily::kRoberta).value());
  auto no_merges = Tokenizer::Load(dir, TokenizerFamily::kRoberta, 512);
  EXPECT_EQ(no_merges.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(no_merges.status().message().find("merges.txt"), std::string_view::npos) << no_merges.status();
  WriteFile(JoinPath(dir, "merges.txt"), "#version: 0.2\n");
  auto bad_id = Tokenizer::Load(dir, TokenizerFamily::kRoberta, 512);
  EXPECT_EQ(bad_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_id.status().message().find("vocab.json: \"a\" must be an id"), std::string_view::npos)
      << bad_id.status();
  WriteFile(JoinPath(dir, "vocab.json"), "[1]");
  EXPECT_EQ(Tokenizer::Load(dir, TokenizerFamily::kRoberta, 512).status().code(), absl::StatusCode::kInvalidArgument);
  WriteFile(JoinPath(dir, "vocab.json"), kVocab);
  WriteFile(JoinPath(dir, "merges.txt"), "#version: 0.2\n\xFF \xFE\n");
  auto bad_merges = Tokenizer::Load(dir, TokenizerFamily::kRoberta, 512);
  EXPECT_EQ(bad_merges.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_merges.status().message().find("merges.txt: not UTF-8"), std::string_view::npos) << bad_merges.status();
  EXPECT_FALSE(Tokenizer::HasFiles(MakeTempDir("roberta_empty"), TokenizerFamily::kRoberta).value());
  EXPECT_EQ(Tokenizer::LoadModelFile(JoinPath(dir, "vocab.json"), TokenizerFamily::kRoberta, 512).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace relserve
