// XLNetTokenizer's switches (do_lower_case, remove_space, keep_accents), its quote and
// digit-comma handling, special tokens written in the text, its template, truncation and left
// padding, on the reference model of tests/data/reference/tokenizer_xlnet.

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::CopyFile;
using ::relserve::testing::MakeTempDir;
using ::relserve::testing::WriteFile;
using Ids = std::vector<int32_t>;
using Offsets = std::vector<std::pair<int32_t, int32_t>>;

std::unique_ptr<Tokenizer> LoadXlnet(const std::string& name, const std::string& config = "") {
  const std::string dir = MakeTempDir("xlnet_" + name);
  CopyFile(JoinPath(RELSERVE_TEST_DATA_DIR, "reference/tokenizer_xlnet/spiece.model"),
           JoinPath(dir, "spiece.model"));
  if (!config.empty()) WriteFile(JoinPath(dir, "tokenizer_config.json"), config);
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kXlnet, 512);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

Ids Raw(const Tokenizer& tokenizer, const std::string& text) {
  auto ids = tokenizer.EncodeRaw(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : Ids{};
}

Ids Concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

class XlnetTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    xlnet_ = LoadXlnet("default");
    ASSERT_NE(xlnet_, nullptr);
  }
  std::unique_ptr<Tokenizer> xlnet_;
};

TEST_F(XlnetTokenizerTest, LowerCasingIsOffByDefault) {
  EXPECT_NE(Raw(*xlnet_, "HELLO World"), Raw(*xlnet_, "hello world"));
  auto lower = LoadXlnet("lower", R"({"do_lower_case": true})");
  EXPECT_TRUE(lower->lower_case());
  EXPECT_EQ(Raw(*lower, "HELLO World"), Raw(*xlnet_, "hello world"));
  // The special tokens are spared: <MASK> is text, <mask> the token.
  EXPECT_EQ(Raw(*lower, "A<mask>"), Concat({Raw(*xlnet_, "a"), {xlnet_->mask_id()}}));
}

TEST_F(XlnetTokenizerTest, AccentsAreStrippedUnlessKept) {
  EXPECT_EQ(Raw(*xlnet_, "Caf\xC3\xA9 na\xC3\xAFve"), Raw(*xlnet_, "Cafe naive"));
  auto keep = LoadXlnet("keep_accents", R"({"keep_accents": true})");
  EXPECT_NE(Raw(*keep, "Caf\xC3\xA9"), Raw(*keep, "Cafe"));
}

TEST_F(XlnetTokenizerTest, RemoveSpaceCollapsesPythonWhiteSpace) {
  // U+001C is white space to Python's str.split, which SentencePiece instead drops.
  EXPECT_EQ(Raw(*xlnet_, "a\x1c" "b"), Raw(*xlnet_, "a b"));
  auto keep = LoadXlnet("keep_space", R"({"remove_space": false})");
  EXPECT_NE(Raw(*keep, "a\x1c" "b"), Raw(*keep, "a b"));
}

TEST_F(XlnetTokenizerTest, DoubledQuotesAreQuotes) {
  EXPECT_EQ(Raw(*xlnet_, "``a'' '''"), Raw(*xlnet_, "\"a\" \"'"));
}

TEST_F(XlnetTokenizerTest, DigitCommaPiecesAreSplitWithTheirSpans) {
  // "▁2," is one piece of the model; XLNet makes it "▁2" and ",".
  auto enc = xlnet_->Encode("version 2, x1,");
  ASSERT_TRUE(enc.ok()) << enc.status();
  std::vector<std::string> pieces;
  for (int32_t id : enc->input_ids) pieces.push_back(xlnet_->IdToPiece(id));
  EXPECT_EQ(pieces, (std::vector<std::string>{"\xE2\x96\x81version", "\xE2\x96\x81" "2", ",", "\xE2\x96\x81", "x",
                                              "1", ",", "<sep>", "<cls>"}));
  EXPECT_EQ(enc->offsets, (Offsets{{0, 7}, {8, 9}, {9, 10}, {10, 11}, {11, 12}, {12, 13}, {13, 14}, {0, 0}, {0, 0}}));
}

TEST_F(XlnetTokenizerTest, SpecialTokensInTheTextAreTokens) {
  const int sep = xlnet_->sep_id(), cls = xlnet_->cls_id();
  EXPECT_EQ(Raw(*xlnet_, "x<sep>y<cls>"), Concat({Raw(*xlnet_, "x"), {sep}, Raw(*xlnet_, "y"), {cls}}));
  EXPECT_EQ(Raw(*xlnet_, "<eop> <eod> <pad> </s>"), (Ids{8, 7, xlnet_->pad_id(), xlnet_->eos_id()}));
  auto enc = xlnet_->Encode("a <mask> b");
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, Concat({Raw(*xlnet_, "a"), {xlnet_->mask_id()}, Raw(*xlnet_, "b"), {sep, cls}}));
  EXPECT_EQ(enc->offsets[1], std::make_pair(2, 8));
  EXPECT_EQ(enc->sequence_ids, (std::vector<int8_t>{0, 0, 0, -1, -1}));
}

TEST_F(XlnetTokenizerTest, PairTemplateTruncationAndLeftPadding) {
  const Ids a = Raw(*xlnet_, "only the first segment");   // 7 pieces
  const Ids b = Raw(*xlnet_, "Hello world");              // 6 pieces
  ASSERT_EQ(a.size(), 7u);
  ASSERT_EQ(b.size(), 6u);
  TokenizeOptions opts;
  opts.max_length = 12;  // 13 pieces and 3 special tokens: 4 to drop
  auto enc = xlnet_->EncodePair("only the first segment", "Hello world", opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  // Longest first: a loses 1 (down to b's 6), then of the other 3, b 2 and a 1.
  const Ids a5(a.begin(), a.begin() + 5), b4(b.begin(), b.begin() + 4);
  EXPECT_EQ(enc->input_ids, Concat({a5, {xlnet_->sep_id()}, b4, {xlnet_->sep_id(), xlnet_->cls_id()}}));
  EXPECT_EQ(enc->token_type_ids, (Ids{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2}));
  EXPECT_TRUE(enc->truncated);
  ASSERT_TRUE(xlnet_->Pad(&*enc, 14).ok());
  EXPECT_EQ(enc->input_ids[0], xlnet_->pad_id());
  EXPECT_EQ(enc->input_ids[1], xlnet_->pad_id());
  EXPECT_EQ(enc->input_ids[2], a[0]);
  EXPECT_EQ(enc->token_type_ids, (Ids{3, 3, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2}));
  EXPECT_EQ(enc->attention_mask, (Ids{0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(enc->sequence_ids[0], -1);
}

TEST_F(XlnetTokenizerTest, LeftTruncationKeepsTheTemplateAtTheEnd) {
  const Ids a = Raw(*xlnet_, "only the first segment");  // 7 pieces
  TokenizeOptions opts;
  opts.max_length = 5;
  opts.direction = TruncationDirection::kLeft;
  auto enc = xlnet_->Encode("only the first segment", opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, (Ids{a[4], a[5], a[6], xlnet_->sep_id(), xlnet_->cls_id()}));
}

TEST_F(XlnetTokenizerTest, BadSwitchIsAnErrorNamingTheKey) {
  const std::string dir = MakeTempDir("xlnet_bad_switch");
  CopyFile(JoinPath(RELSERVE_TEST_DATA_DIR, "reference/tokenizer_xlnet/spiece.model"), JoinPath(dir, "spiece.model"));
  WriteFile(JoinPath(dir, "tokenizer_config.json"), R"({"keep_accents": "yes"})");
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kXlnet, 512);
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tokenizer.status().message().find("\"keep_accents\""), std::string_view::npos) << tokenizer.status();
}

}  // namespace
}  // namespace relserve
