#include "server/tokenizer/tokenizer.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::CopyFile;
using ::relserve::testing::MakeTempDir;
using ::relserve::testing::ReferenceModelPath;
using ::relserve::testing::WriteFile;
using Offsets = std::vector<std::pair<int32_t, int32_t>>;

constexpr char kHello[] = "Hello world";                              // 6 pieces
constexpr char kLicense[] =                                           // 21 pieces
    "The GNU General Public License is a free, copyleft license for software and other kinds "
    "of works.";

std::vector<int32_t> Concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

std::vector<int32_t> Head(const std::vector<int32_t>& ids, size_t n) {
  return std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
}

std::vector<int32_t> Tail(const std::vector<int32_t>& ids, size_t n) {
  return std::vector<int32_t>(ids.end() - static_cast<std::ptrdiff_t>(n), ids.end());
}

class TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokenizer = Tokenizer::LoadModelFile(ReferenceModelPath(), TokenizerFamily::kDeberta, 512);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    deberta_ = *std::move(tokenizer);
  }

  // Raw ids are checked against the reference in sentencepiece_reference_test.
  std::vector<int32_t> Raw(const std::string& text) const {
    auto ids = deberta_->EncodeRaw(text);
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? *ids : std::vector<int32_t>{};
  }

  // The same model file saved as a T5 checkpoint would save it.
  std::unique_ptr<Tokenizer> LoadT5() const {
    const std::string dir = MakeTempDir("t5");
    CopyFile(ReferenceModelPath(), JoinPath(dir, "spiece.model"));
    auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kT5, 512);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
  }

  std::unique_ptr<Tokenizer> deberta_;
};

TEST_F(TokenizerTest, DebertaSpecialIdsComeFromThePieces) {
  // 1000 pieces, then [MASK], which the model lacks, added after them as transformers adds it.
  EXPECT_EQ(deberta_->vocab_size(), 1001);
  EXPECT_EQ(deberta_->mask_id(), 1000);
  EXPECT_EQ(deberta_->pad_id(), 0);
  EXPECT_EQ(deberta_->cls_id(), 1);
  EXPECT_EQ(deberta_->sep_id(), 2);
  EXPECT_EQ(deberta_->unk_id(), 3);
  EXPECT_EQ(deberta_->eos_id(), deberta_->sep_id());
  EXPECT_EQ(deberta_->default_max_length(), 512);
  EXPECT_EQ(deberta_->family(), TokenizerFamily::kDeberta);
  EXPECT_EQ(deberta_->IdToPiece(1), "[CLS]");
  EXPECT_EQ(deberta_->IdToPiece(713), "\xE2\x96\x81world");
  EXPECT_EQ(deberta_->IdToPiece(-1), "");
  EXPECT_EQ(deberta_->IdToPiece(1000), "[MASK]");
  EXPECT_EQ(deberta_->IdToPiece(1001), "");
}

TEST_F(TokenizerTest, DebertaSingleTemplate) {
  auto enc = deberta_->Encode(kHello);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, (std::vector<int32_t>{1, 5, 998, 11, 28, 339, 713, 2}));
  EXPECT_EQ(enc->token_type_ids, std::vector<int32_t>(8, 0));
  EXPECT_EQ(enc->attention_mask, std::vector<int32_t>(8, 1));
  EXPECT_EQ(enc->sequence_ids, (std::vector<int8_t>{-1, 0, 0, 0, 0, 0, 0, -1}));
  // The leading "▁" stands for no input byte; "▁world" covers " world".
  EXPECT_EQ(enc->offsets,
            (Offsets{{0, 0}, {0, 0}, {0, 1}, {1, 2}, {2, 3}, {3, 5}, {5, 11}, {0, 0}}));
  EXPECT_FALSE(enc->truncated);
  EXPECT_EQ(enc->untruncated_length, 8);
}

TEST_F(TokenizerTest, DebertaPairTemplate) {
  auto enc = deberta_->EncodePair(kHello, kLicense);
  ASSERT_TRUE(enc.ok()) << enc.status();
  const std::vector<int32_t> a = Raw(kHello), b = Raw(kLicense);
  EXPECT_EQ(enc->input_ids, Concat({{1}, a, {2}, b, {2}}));
  // [CLS] a [SEP] is segment 0, b [SEP] segment 1.
  std::vector<int32_t> types(a.size() + 2, 0);
  types.resize(a.size() + b.size() + 3, 1);
  EXPECT_EQ(enc->token_type_ids, types);
  std::vector<int8_t> sequences{-1};
  sequences.resize(a.size() + 1, 0);
  sequences.push_back(-1);
  sequences.resize(sequences.size() + b.size(), 1);
  sequences.push_back(-1);
  EXPECT_EQ(enc->sequence_ids, sequences);
  EXPECT_EQ(enc->attention_mask, std::vector<int32_t>(types.size(), 1));
  EXPECT_EQ(enc->untruncated_length, static_cast<int32_t>(types.size()));
}

TEST_F(TokenizerTest, T5PicksTheIdsTheModelReserved) {
  // The reference model has no "</s>", "<pad>" or "<unk>" pieces, so each role falls back to the
  // id SentencePiece reserved for it at training (--eos_id=2 "[SEP]", --pad_id=0 "[PAD]",
  // --unk_id=3 "[UNK]") rather than T5's own defaults (eos 1, pad 0, unk 2), which here would
  // make [CLS] the end of sequence. T5 has no [CLS] or [SEP].
  std::unique_ptr<Tokenizer> t5 = LoadT5();
  ASSERT_NE(t5, nullptr);
  EXPECT_EQ(t5->family(), TokenizerFamily::kT5);
  EXPECT_EQ(t5->eos_id(), 2);
  EXPECT_EQ(t5->pad_id(), 0);
  EXPECT_EQ(t5->unk_id(), 3);
  EXPECT_EQ(t5->cls_id(), -1);
  EXPECT_EQ(t5->sep_id(), -1);
}

TEST_F(TokenizerTest, T5Templates) {
  std::unique_ptr<Tokenizer> t5 = LoadT5();
  ASSERT_NE(t5, nullptr);
  const std::vector<int32_t> a = Raw(kHello), b = Raw(kLicense);
  const int32_t eos = t5->eos_id();

  auto single = t5->Encode(kHello);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->input_ids, Concat({a, {eos}}));
  EXPECT_EQ(single->token_type_ids, std::vector<int32_t>(a.size() + 1, 0));
  EXPECT_EQ(single->sequence_ids.back(), -1);
  EXPECT_EQ(single->offsets.back(), std::make_pair(0, 0));

  auto pair = t5->EncodePair(kHello, kLicense);
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->input_ids, Concat({a, {eos}, b, {eos}}));
  EXPECT_EQ(pair->token_type_ids, std::vector<int32_t>(a.size() + b.size() + 2, 0));
  std::vector<int8_t> sequences(a.size(), 0);
  sequences.push_back(-1);
  sequences.resize(sequences.size() + b.size(), 1);
  sequences.push_back(-1);
  EXPECT_EQ(pair->sequence_ids, sequences);
}

TEST_F(TokenizerTest, EmptyTextGivesOnlySpecialTokens) {
  auto deberta = deberta_->Encode("");
  ASSERT_TRUE(deberta.ok()) << deberta.status();
  EXPECT_EQ(deberta->input_ids, (std::vector<int32_t>{1, 2}));
  std::unique_ptr<Tokenizer> t5 = LoadT5();
  ASSERT_NE(t5, nullptr);
  auto t5_enc = t5->Encode("");
  ASSERT_TRUE(t5_enc.ok()) << t5_enc.status();
  EXPECT_EQ(t5_enc->input_ids, (std::vector<int32_t>{t5->eos_id()}));
}

TEST_F(TokenizerTest, SingleTextIsTruncatedFromTheEnd) {
  const std::vector<int32_t> raw = Raw(kLicense);
  TokenizeOptions opts;
  opts.max_length = 7;
  auto enc = deberta_->Encode(kLicense, opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, Concat({{1}, Head(raw, 5), {2}}));
  EXPECT_TRUE(enc->truncated);
  EXPECT_EQ(enc->untruncated_length, static_cast<int32_t>(raw.size() + 2));
  EXPECT_EQ(enc->offsets.size(), 7u);

  opts.max_length = static_cast<int>(raw.size() + 2);  // exactly fits
  auto fits = deberta_->Encode(kLicense, opts);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_FALSE(fits->truncated);
  EXPECT_EQ(fits->input_ids.size(), raw.size() + 2);
}

TEST_F(TokenizerTest, DefaultMaxLengthApplies) {
  auto tokenizer = Tokenizer::LoadModelFile(ReferenceModelPath(), TokenizerFamily::kDeberta, 8);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto enc = (*tokenizer)->Encode(kLicense);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids.size(), 8u);
  EXPECT_TRUE(enc->truncated);
}

TEST_F(TokenizerTest, PairIsTruncatedLongestFirst) {
  const std::vector<int32_t> a = Raw(kLicense), b = Raw(kHello);  // 21 and 6 pieces
  ASSERT_EQ(a.size(), 21u);
  ASSERT_EQ(b.size(), 6u);
  TokenizeOptions opts;

  opts.max_length = 3 + 12;  // only the longer first text is cut, down to 6
  auto enc = deberta_->EncodePair(kLicense, kHello, opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, Concat({{1}, Head(a, 6), {2}, b, {2}}));
  EXPECT_TRUE(enc->truncated);
  EXPECT_EQ(enc->untruncated_length, 30);

  opts.max_length = 3 + 7;  // both are cut; at equal length the second loses first: 4 + 3
  enc = deberta_->EncodePair(kLicense, kHello, opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, Concat({{1}, Head(a, 4), {2}, Head(b, 3), {2}}));

  opts.max_length = 3 + 15;  // only the longer second text is cut, down to 9
  enc = deberta_->EncodePair(kHello, kLicense, opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, Concat({{1}, b, {2}, Head(a, 9), {2}}));
  EXPECT_EQ(enc->token_type_ids.back(), 1);

  opts.max_length = 3 + 11;  // a tie (6 and 6) cuts the second text
  enc = deberta_->EncodePair(kHello, kHello, opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, Concat({{1}, b, {2}, Head(b, 5), {2}}));
}

// truncation="only_first" (the zero-shot-classification pipeline): the second text is never
// cut; the first keeps what is left, and is refused when nothing of it would be.
TEST_F(TokenizerTest, PairTruncatedOnlyFirstKeepsTheSecondWhole) {
  const std::vector<int32_t> a = Raw(kLicense), b = Raw(kHello);  // 21 and 6 pieces
  TokenizeOptions opts;
  opts.pair_truncation = PairTruncation::kOnlyFirst;
  opts.max_length = 3 + 7;  // longest_first would keep 4 + 3; only_first keeps 1 + 6
  auto enc = deberta_->EncodePair(kLicense, kHello, opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, Concat({{1}, Head(a, 1), {2}, b, {2}}));
  EXPECT_TRUE(enc->truncated);

  opts.direction = TruncationDirection::kLeft;
  enc = deberta_->EncodePair(kLicense, kHello, opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, Concat({{1}, Tail(a, 1), {2}, b, {2}}));

  opts.direction = TruncationDirection::kRight;
  opts.max_length = 3 + 6;  // the second alone fills the budget
  auto refused = deberta_->EncodePair(kLicense, kHello, opts);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(refused.status().message()).find("only the first text may be cut"), std::string::npos)
      << refused.status();

  opts.max_length = 3 + 27;  // everything fits: nothing is cut
  enc = deberta_->EncodePair(kLicense, kHello, opts);
  ASSERT_TRUE(enc.ok());
  EXPECT_FALSE(enc->truncated);
}

// truncation_side="left" in transformers: the same number of tokens is cut from each text as
// on the right (longest first), but from its start; the template's tokens stay where they are.
TEST_F(TokenizerTest, LeftTruncationCutsTheStartOfEachTextNotTheTemplate) {
  const std::vector<int32_t> a = Raw(kLicense), b = Raw(kHello);  // 21 and 6 pieces
  TokenizeOptions opts;
  opts.direction = TruncationDirection::kLeft;
  opts.max_length = 7;
  auto single = deberta_->Encode(kLicense, opts);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->input_ids, Concat({{1}, Tail(a, 5), {2}}));
  EXPECT_TRUE(single->truncated);
  EXPECT_EQ(single->untruncated_length, 23);
  EXPECT_EQ(single->sequence_ids, (std::vector<int8_t>{-1, 0, 0, 0, 0, 0, -1}));
  // The offsets are those of the kept pieces: the end of the text.
  auto whole = deberta_->Encode(kLicense);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(single->offsets[1], whole->offsets[1 + 21 - 5]);
  EXPECT_EQ(single->offsets[5].second, static_cast<int32_t>(std::string(kLicense).size()));
  EXPECT_EQ(single->offsets[6], std::make_pair(0, 0));

  opts.max_length = 3 + 12;  // only the longer first text is cut, down to its last 6
  auto pair = deberta_->EncodePair(kLicense, kHello, opts);
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->input_ids, Concat({{1}, Tail(a, 6), {2}, b, {2}}));
  opts.max_length = 3 + 7;  // both are cut, 4 + 3, each keeping its end
  pair = deberta_->EncodePair(kLicense, kHello, opts);
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->input_ids, Concat({{1}, Tail(a, 4), {2}, Tail(b, 3), {2}}));
  EXPECT_EQ(pair->token_type_ids, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1}));

  // Nothing to cut: the direction changes nothing.
  opts.max_length = 512;
  auto fits = deberta_->Encode(kLicense, opts);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->input_ids, whole->input_ids);
  EXPECT_FALSE(fits->truncated);

  // T5's template ends in </s>: that stays, the text loses its start.
  std::unique_ptr<Tokenizer> t5 = LoadT5();
  ASSERT_NE(t5, nullptr);
  opts.max_length = 6;
  auto t5_single = t5->Encode(kLicense, opts);
  ASSERT_TRUE(t5_single.ok()) << t5_single.status();
  EXPECT_EQ(t5_single->input_ids, Concat({Tail(a, 5), {t5->eos_id()}}));
  opts.max_length = 2 + 7;
  auto t5_pair = t5->EncodePair(kLicense, kHello, opts);
  ASSERT_TRUE(t5_pair.ok()) << t5_pair.status();
  EXPECT_EQ(t5_pair->input_ids, Concat({Tail(a, 4), {t5->eos_id()}, Tail(b, 3), {t5->eos_id()}}));
}

TEST_F(TokenizerTest, OverLongInputWithoutTruncationIsInvalidArgument) {
  TokenizeOptions opts;
  opts.max_length = 10;
  opts.truncate = false;
  auto single = deberta_->Encode(kLicense, opts);
  EXPECT_EQ(single.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(single.status().message().find("23 tokens"), std::string_view::npos) << single.status();
  EXPECT_NE(single.status().message().find("max_length 10"), std::string_view::npos);

  auto pair = deberta_->EncodePair(kHello, kLicense, opts);
  EXPECT_EQ(pair.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pair.status().message().find("30 tokens"), std::string_view::npos) << pair.status();

  opts.max_length = 8;  // "Hello world" is exactly 8 with [CLS] and [SEP]
  EXPECT_TRUE(deberta_->Encode(kHello, opts).ok());
}

TEST_F(TokenizerTest, MaxLengthMustHoldTheSpecialTokens) {
  TokenizeOptions opts;
  opts.max_length = 1;
  EXPECT_EQ(deberta_->Encode(kHello, opts).status().code(), absl::StatusCode::kInvalidArgument);
  opts.max_length = 2;
  EXPECT_EQ(deberta_->EncodePair(kHello, kHello, opts).status().code(),
            absl::StatusCode::kInvalidArgument);
  opts.max_length = -5;
  EXPECT_EQ(deberta_->Encode(kHello, opts).status().code(), absl::StatusCode::kInvalidArgument);

  opts.max_length = 2;  // room for the specials alone: every text token is cut
  auto enc = deberta_->Encode(kHello, opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(enc->truncated);

  std::unique_ptr<Tokenizer> t5 = LoadT5();
  ASSERT_NE(t5, nullptr);
  opts.max_length = 1;
  EXPECT_EQ(t5->EncodePair(kHello, kHello, opts).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(t5->Encode(kHello, opts).ok());
}

TEST_F(TokenizerTest, InvalidUtf8IsInvalidArgumentNamingTheOffset) {
  auto single = deberta_->Encode("abc\xC3(");
  EXPECT_EQ(single.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(single.status().message().find("byte offset 3"), std::string_view::npos)
      << single.status();

  auto pair = deberta_->EncodePair("fine", "\xED\xA0\x80");
  EXPECT_EQ(pair.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pair.status().message().find("second text"), std::string_view::npos) << pair.status();

  EXPECT_EQ(deberta_->EncodeRaw("\xFF").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TokenizerTest, NulBytesAreEncodedNotCutOff) {
  // SentencePiece maps NUL to the unknown piece and goes on; the text after it must survive.
  const std::string text("a\0b c", 5);
  auto raw = deberta_->EncodeRaw(text);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(*raw, (std::vector<int32_t>{12, 3, 93, 126}));  // ▁a [UNK] b ▁c
  auto enc = deberta_->Encode(text);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->offsets[2], std::make_pair(1, 2));  // the NUL byte
  EXPECT_EQ(enc->offsets[4], std::make_pair(3, 5));
}

TEST_F(TokenizerTest, OffsetsMapBackToTheText) {
  // Without normalization at work, each piece ("▁" read as a space) is its span of the input.
  for (const std::string& text : {std::string(kHello), std::string(kLicense),
                                 std::string("antidisestablishmentarianism")}) {
    auto enc = deberta_->Encode(text);
    ASSERT_TRUE(enc.ok()) << enc.status();
    for (size_t i = 0; i < enc->input_ids.size(); ++i) {
      const auto [begin, end] = enc->offsets[i];
      if (enc->sequence_ids[i] < 0 || begin == end) continue;
      std::string piece = deberta_->IdToPiece(enc->input_ids[i]);
      if (piece.rfind("\xE2\x96\x81", 0) == 0) piece.replace(0, 3, " ");
      // The "▁" SentencePiece puts before the first word stands for no byte of the input.
      if (begin == 0 && piece[0] == ' ' && text[0] != ' ') piece.erase(0, 1);
      EXPECT_EQ(text.substr(begin, end - begin), piece) << text << " token " << i;
    }
  }
  // NFKC: "ﬁ" (3 bytes) becomes the piece "▁fi", whose span is the ligature.
  const std::string ligature = "\xEF\xAC\x81nance";
  auto enc = deberta_->Encode(ligature);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(deberta_->IdToPiece(enc->input_ids[1]), "\xE2\x96\x81" "fi");
  EXPECT_EQ(enc->offsets[1], std::make_pair(0, 3));
  // In a pair, the second text's offsets index the second text.
  auto pair = deberta_->EncodePair("xyz", kHello);
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->offsets[pair->offsets.size() - 2], std::make_pair(5, 11));
}

// Special tokens written in the text are those tokens, as transformers splits text on them
// before SentencePiece sees it; the text around them is encoded on its own.
TEST_F(TokenizerTest, DebertaSpecialTokensInTheText) {
  auto enc = deberta_->Encode("a [MASK] b");
  ASSERT_TRUE(enc.ok()) << enc.status();
  // [MASK] is no piece of this model: it comes after the vocabulary, as transformers adds it.
  EXPECT_EQ(enc->input_ids, Concat({{1}, Raw("a"), {1000}, Raw("b"), {2}}));
  EXPECT_EQ(enc->offsets[2], std::make_pair(2, 8));
  EXPECT_EQ(enc->offsets[3], std::make_pair(9, 10));  // "▁b": its leading space was dropped
  EXPECT_EQ(Raw("x[SEP]y [CLS] [PAD] [UNK]"), Concat({Raw("x"), {2}, Raw("y"), {1, 0, 3}}));
  // Another spelling is text.
  EXPECT_EQ(Raw("[sep]"), Raw("[sep" "]"));
  EXPECT_NE(Raw("[sep]"), (std::vector<int32_t>{2}));

  // Lower-casing leaves them alone.
  const std::string dir = MakeTempDir("deberta_lower_special");
  CopyFile(ReferenceModelPath(), JoinPath(dir, "spm.model"));
  WriteFile(JoinPath(dir, "tokenizer_config.json"), R"({"do_lower_case": true})");
  auto lower = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 512);
  ASSERT_TRUE(lower.ok()) << lower.status();
  EXPECT_EQ((*lower)->EncodeRaw("A [SEP] B").value(), Concat({Raw("a"), {2}, Raw("b")}));
}

TEST_F(TokenizerTest, DebertaAddedTokensFile) {
  // added_tokens.json (tokens added after training), then [MASK] after them.
  const std::string dir = MakeTempDir("deberta_added_tokens");
  CopyFile(ReferenceModelPath(), JoinPath(dir, "spm.model"));
  WriteFile(JoinPath(dir, "added_tokens.json"), R"({"<new>": 1000})");
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 512);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->mask_id(), 1001);
  EXPECT_EQ((*tokenizer)->vocab_size(), 1002);
  EXPECT_EQ((*tokenizer)->EncodeRaw("a<new>[MASK]").value(), Concat({Raw("a"), {1000, 1001}}));
}

TEST_F(TokenizerTest, T5SpecialTokensInTheText) {
  std::unique_ptr<Tokenizer> t5 = LoadT5();
  ASSERT_NE(t5, nullptr);
  const int32_t eos = t5->eos_id();
  auto enc = t5->Encode("x </s> y");
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, Concat({Raw("x"), {eos}, Raw("y"), {eos}}));
  EXPECT_EQ(enc->sequence_ids.back(), -1);
  EXPECT_EQ(enc->sequence_ids[enc->sequence_ids.size() - 3], 0);  // the </s> of the text
  // <extra_id_N> follow the 1000 pieces from the top down, and eat the spaces around them.
  EXPECT_EQ(t5->vocab_size(), 1100);
  auto extra = t5->Encode("a <extra_id_0> b<extra_id_99>");
  ASSERT_TRUE(extra.ok()) << extra.status();
  EXPECT_EQ(extra->input_ids, Concat({Raw("a"), {1099}, Raw("b"), {1000, eos}}));
  EXPECT_EQ(t5->IdToPiece(1099), "<extra_id_0>");
}

TEST_F(TokenizerTest, T5PairsAreTruncatedLongestFirst) {
  std::unique_ptr<Tokenizer> t5 = LoadT5();
  ASSERT_NE(t5, nullptr);
  const std::vector<int32_t> a = Raw(kLicense), b = Raw(kHello);  // 21 and 6 pieces
  TokenizeOptions opts;
  opts.max_length = 2 + 10;  // a is cut to b's 6, then both to 5
  auto enc = t5->EncodePair(kLicense, kHello, opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, Concat({Head(a, 5), {t5->eos_id()}, Head(b, 5), {t5->eos_id()}}));
  EXPECT_TRUE(enc->truncated);
}

TEST_F(TokenizerTest, ConcurrentEncodingGivesIdenticalResults) {
  const std::vector<std::string> texts = {kHello, kLicense, "Caf\xC3\xA9 na\xC3\xAFve", "",
                                          "URL https://www.gnu.org/licenses/gpl-3.0.html"};
  std::vector<std::vector<int32_t>> want;
  for (const std::string& text : texts) {
    auto enc = deberta_->EncodePair(text, kHello);
    ASSERT_TRUE(enc.ok()) << enc.status();
    want.push_back(enc->input_ids);
  }
  constexpr int kThreads = 8, kRounds = 200;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const size_t i = static_cast<size_t>(round + t) % texts.size();
        auto enc = deberta_->EncodePair(texts[i], kHello);
        if (!enc.ok() || enc->input_ids != want[i]) ++mismatches[static_cast<size_t>(t)];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(kThreads, 0));
}

}  // namespace
}  // namespace relserve
