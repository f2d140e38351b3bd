#include "server/tokenizer/special_tokens.h"

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "server/tokenizer/families/tokenizer_families.h"

namespace relserve {
namespace {

constexpr RelserveSpmReservedIds kNoReservedIds = {-1, -1, -1, -1};

// A vocabulary seen only through piece_to_id, as ResolveSpecialTokenIds sees it.
struct FakeVocab {
  std::map<std::string, int, std::less<>> pieces;
  int operator()(std::string_view piece) const {
    auto it = pieces.find(piece);
    return it == pieces.end() ? -1 : it->second;
  }
};

TEST(SpecialTokensTest, NamedPiecesWin) {
  const FakeVocab vocab{{{"[PAD]", 7}, {"[CLS]", 8}, {"[SEP]", 9}, {"[UNK]", 10}}};
  auto ids = ResolveSpecialTokenIds(Describe(TokenizerFamily::kDeberta),
                                    DefaultSpecialTokenNames(Describe(TokenizerFamily::kDeberta)), vocab,
                                    RelserveSpmReservedIds{0, 1, 2, 3}, 100);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->pad, 7);
  EXPECT_EQ(ids->cls, 8);
  EXPECT_EQ(ids->sep, 9);
  EXPECT_EQ(ids->unk, 10);
  EXPECT_EQ(ids->eos, 9);  // DeBERTa ends a sequence with [SEP]
}

TEST(SpecialTokensTest, ReservedIdsComeBeforeFamilyDefaults) {
  // SentencePiece numbering: unk, bos (the [CLS] role), eos ([SEP] / </s>), pad.
  const RelserveSpmReservedIds reserved{5, 6, 7, 8};
  auto deberta = ResolveSpecialTokenIds(Describe(TokenizerFamily::kDeberta),
                                        DefaultSpecialTokenNames(Describe(TokenizerFamily::kDeberta)),
                                        FakeVocab{}, reserved, 100);
  ASSERT_TRUE(deberta.ok()) << deberta.status();
  EXPECT_EQ(deberta->unk, 5);
  EXPECT_EQ(deberta->cls, 6);
  EXPECT_EQ(deberta->sep, 7);
  EXPECT_EQ(deberta->pad, 8);

  auto t5 = ResolveSpecialTokenIds(Describe(TokenizerFamily::kT5),
                                   DefaultSpecialTokenNames(Describe(TokenizerFamily::kT5)), FakeVocab{},
                                   reserved, 100);
  ASSERT_TRUE(t5.ok()) << t5.status();
  EXPECT_EQ(t5->unk, 5);
  EXPECT_EQ(t5->eos, 7);
  EXPECT_EQ(t5->pad, 8);
  EXPECT_EQ(t5->cls, -1);
  EXPECT_EQ(t5->sep, -1);
}

TEST(SpecialTokensTest, FamilyDefaultsLast) {
  auto deberta = ResolveSpecialTokenIds(Describe(TokenizerFamily::kDeberta),
                                        DefaultSpecialTokenNames(Describe(TokenizerFamily::kDeberta)),
                                        FakeVocab{}, kNoReservedIds, 100);
  ASSERT_TRUE(deberta.ok()) << deberta.status();
  EXPECT_EQ(deberta->pad, 0);
  EXPECT_EQ(deberta->cls, 1);
  EXPECT_EQ(deberta->sep, 2);
  EXPECT_EQ(deberta->unk, 3);

  auto t5 = ResolveSpecialTokenIds(Describe(TokenizerFamily::kT5),
                                   DefaultSpecialTokenNames(Describe(TokenizerFamily::kT5)), FakeVocab{},
                                   kNoReservedIds, 100);
  ASSERT_TRUE(t5.ok()) << t5.status();
  EXPECT_EQ(t5->pad, 0);
  EXPECT_EQ(t5->eos, 1);
  EXPECT_EQ(t5->unk, 2);
}

TEST(SpecialTokensTest, DefaultOutsideVocabularyIsAnError) {
  // Three pieces: DeBERTa's default unk id 3 does not exist.
  auto ids = ResolveSpecialTokenIds(Describe(TokenizerFamily::kDeberta),
                                    DefaultSpecialTokenNames(Describe(TokenizerFamily::kDeberta)),
                                    FakeVocab{}, kNoReservedIds, 3);
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ids.status().message().find("[UNK]"), std::string_view::npos) << ids.status();
}

TEST(SpecialTokensTest, DefaultNames) {
  const SpecialTokenNames deberta = DefaultSpecialTokenNames(Describe(TokenizerFamily::kDeberta));
  EXPECT_EQ(deberta.cls, "[CLS]");
  EXPECT_EQ(deberta.sep, "[SEP]");
  EXPECT_EQ(deberta.pad, "[PAD]");
  EXPECT_EQ(deberta.unk, "[UNK]");
  const SpecialTokenNames t5 = DefaultSpecialTokenNames(Describe(TokenizerFamily::kT5));
  EXPECT_EQ(t5.eos, "</s>");
  EXPECT_EQ(t5.pad, "<pad>");
  EXPECT_EQ(t5.unk, "<unk>");
}

}  // namespace
}  // namespace relserve
