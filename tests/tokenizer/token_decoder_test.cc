// Tokenizer::Decode: ids back to text as the `tokenizers` library's decoders write it (what
// text-embeddings-inference's /decode answers), for the SentencePiece, WordPiece and byte-level
// BPE families, with and without the special tokens.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/tokenizer/families/tokenizer_families.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::CopyFile;
using ::relserve::testing::MakeTempDir;
using ::relserve::testing::ReferenceModelPath;
using ::relserve::testing::WriteFile;
using Ids = std::vector<int32_t>;

std::string Decode(const Tokenizer& tokenizer, const Ids& ids, bool skip) {
  auto text = tokenizer.Decode(ids, skip);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "<error>";
}

Ids Encode(const Tokenizer& tokenizer, const std::string& text) {
  auto enc = tokenizer.Encode(text);
  EXPECT_TRUE(enc.ok()) << enc.status();
  return enc.ok() ? enc->input_ids : Ids{};
}

TEST(TokenDecoderTest, SentencePieceJoinsPiecesWithSpaces) {
  auto deberta = Tokenizer::LoadModelFile(ReferenceModelPath(), TokenizerFamily::kDeberta, 512);
  ASSERT_TRUE(deberta.ok()) << deberta.status();
  const Tokenizer& t = **deberta;
  const std::string text = "the quick brown fox jumps over the lazy dog";
  const Ids ids = Encode(t, text);
  ASSERT_EQ(ids.front(), t.cls_id());
  EXPECT_EQ(Decode(t, ids, /*skip=*/true), text);
  // The first token is [CLS], so the first word keeps its space, as tokenizers' Metaspace does.
  EXPECT_EQ(Decode(t, ids, /*skip=*/false), "[CLS] " + text + "[SEP]");
  // Without special tokens in the ids, nothing is skipped and the leading space goes.
  EXPECT_EQ(Decode(t, Ids(ids.begin() + 1, ids.end() - 1), false), text);
  auto outside = t.Decode({ids[1], 5000}, true);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(outside.status().message(), "ids[1] = 5000 is outside the vocabulary of 1000 tokens and its added tokens");
  EXPECT_FALSE(t.Decode({-1}, true).ok());
  EXPECT_EQ(Decode(t, {}, true), "");
  // [PAD], [UNK] and [MASK] are special too.
  EXPECT_EQ(Decode(t, {t.pad_id(), ids[1], t.unk_id()}, true), Decode(t, {ids[1]}, true));
}

TEST(TokenDecoderTest, XlnetsSeparatorsAreSpecial) {
  const std::string dir = MakeTempDir("decode_xlnet");
  CopyFile(JoinPath(RELSERVE_TEST_DATA_DIR, "reference/tokenizer_xlnet/spiece.model"), JoinPath(dir, "spiece.model"));
  auto xlnet = Tokenizer::Load(dir, TokenizerFamily::kXlnet, 512);
  ASSERT_TRUE(xlnet.ok()) << xlnet.status();
  const Ids ids = Encode(**xlnet, "Hello world");
  EXPECT_EQ(Decode(**xlnet, ids, true), "Hello world");
  EXPECT_EQ(Decode(**xlnet, ids, false), "Hello world<sep><cls>");
}

// One token per line; the id of each is its line number.
constexpr char kWordPieceVocab[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nHello\nworld\n##s\n,\ncafe\n.\nn\n't\n<s>\n</s>\n<pad>\n<unk>\n<mask>\n";

TEST(TokenDecoderTest, WordPieceGluesContinuationsAndCleansUpPunctuation) {
  for (const TokenizerFamily family : {TokenizerFamily::kBert, TokenizerFamily::kMpnet}) {
    const std::string dir = MakeTempDir(std::string("decode_wordpiece_") + TokenizerFamilyName(family));
    WriteFile(JoinPath(dir, "vocab.txt"), kWordPieceVocab);
    WriteFile(JoinPath(dir, "tokenizer_config.json"), R"({"do_lower_case": false})");
    auto bert = Tokenizer::Load(dir, family, 512);
    ASSERT_TRUE(bert.ok()) << bert.status();
    const Tokenizer& t = **bert;
    // [CLS] Hello world ##s , cafe . [SEP]
    const Ids ids = {t.cls_id(), 5, 6, 7, 8, 9, 10, t.sep_id()};
    EXPECT_EQ(Decode(t, ids, true), "Hello worlds, cafe.") << TokenizerFamilyName(family);
    const std::string cls = family == TokenizerFamily::kBert ? "[CLS]" : t.IdToPiece(t.cls_id());
    const std::string sep = family == TokenizerFamily::kBert ? "[SEP]" : t.IdToPiece(t.sep_id());
    EXPECT_EQ(Decode(t, ids, false), cls + " Hello worlds, cafe. " + sep) << TokenizerFamilyName(family);
    // The clean-up works inside one token, as tokenizers' does: " n" "'t" stay apart.
    EXPECT_EQ(Decode(t, {11, 12}, true), "n 't");
  }
}

// "Ġ" is the stand-in of a space; "é" is the bytes C3 A9, whose stand-ins are "Ã" and "©".
constexpr char kBpeVocab[] = R"({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "h": 4, "e": 5, "l": 6, "o": 7,
  "\u0120": 8, "w": 9, "r": 10, "d": 11, "he": 12, "ll": 13, "hell": 14, "hello": 15, "\u0120w": 16,
  "or": 17, "\u0120wor": 18, "\u00c3": 19, "\u00a9": 20, "\u00c3\u00a9": 21, "<mask>": 22})";
constexpr char kBpeMerges[] =
    "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\xC4\xA0 w\no r\n\xC4\xA0w or\n\xC3\x83 \xC2\xA9\n";

TEST(TokenDecoderTest, ByteLevelBpeGivesBackTheBytes) {
  const std::string dir = MakeTempDir("decode_roberta");
  WriteFile(JoinPath(dir, "vocab.json"), kBpeVocab);
  WriteFile(JoinPath(dir, "merges.txt"), kBpeMerges);
  auto roberta = Tokenizer::Load(dir, TokenizerFamily::kRoberta, 512);
  ASSERT_TRUE(roberta.ok()) << roberta.status();
  const Tokenizer& t = **roberta;
  const Ids ids = Encode(t, "hello world");
  EXPECT_EQ(ids, (Ids{0, 15, 18, 6, 11, 2}));
  EXPECT_EQ(Decode(t, ids, true), "hello world");
  EXPECT_EQ(Decode(t, ids, false), "<s>hello world</s>");
  EXPECT_EQ(Decode(t, {4, 19, 20}, true), "h\xC3\xA9");
  EXPECT_EQ(Decode(t, {21}, true), "\xC3\xA9");
  // Half a character is U+FFFD, as Rust's from_utf8_lossy writes it.
  EXPECT_EQ(Decode(t, {4, 19}, true), "h\xEF\xBF\xBD");
  EXPECT_EQ(Decode(t, {22, 4}, true), "h");  // <mask> is special
}

}  // namespace
}  // namespace relserve
