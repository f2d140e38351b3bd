// Raw SentencePiece ids against tests/data/reference/tokenizer/cases.json: what
// SentencePieceProcessor.encode(text, out_type=int) returns in sentencepiece 0.1.97 for strings
// that exercise whitespace, NFKC normalization, unknown scripts, emoji and long words.

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/tokenizer.h"
#include "server/util/json_util.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::ReferenceCasesPath;
using ::relserve::testing::ReferenceModelPath;

class SentencePieceReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cases = ReadJsonFile(ReferenceCasesPath());
    ASSERT_TRUE(cases.ok()) << cases.status();
    reference_ = *std::move(cases);
    auto tokenizer = Tokenizer::LoadModelFile(ReferenceModelPath(), TokenizerFamily::kDeberta, 512);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }

  nlohmann::json reference_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(SentencePieceReferenceTest, VocabularyAndSpecialIds) {
  // The model has no [MASK] piece: as in transformers, DeBERTa's mask token is added after the
  // SentencePiece vocabulary, at id 1000.
  EXPECT_EQ(tokenizer_->vocab_size(), reference_["vocab_size"].get<int>() + 1);
  EXPECT_EQ(tokenizer_->mask_id(), reference_["vocab_size"].get<int>());
  const nlohmann::json& special = reference_["special_ids"];
  EXPECT_EQ(tokenizer_->pad_id(), special["pad"].get<int>());
  EXPECT_EQ(tokenizer_->cls_id(), special["bos"].get<int>());
  EXPECT_EQ(tokenizer_->sep_id(), special["eos"].get<int>());
  EXPECT_EQ(tokenizer_->unk_id(), special["unk"].get<int>());
}

TEST_F(SentencePieceReferenceTest, EveryCaseGivesTheReferenceIds) {
  const nlohmann::json& cases = reference_["cases"];
  ASSERT_EQ(cases.size(), 20u);
  for (const nlohmann::json& c : cases) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    auto got = tokenizer_->EncodeRaw(text);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want) << "text: " << text;
  }
}

TEST_F(SentencePieceReferenceTest, KnownIdsMapBackToTheReferencePieces) {
  // For unknown spans the reference lists the surface text, so only known ids are compared.
  for (const nlohmann::json& c : reference_["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const auto pieces = c["pieces"].get<std::vector<std::string>>();
    ASSERT_EQ(ids.size(), pieces.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == tokenizer_->unk_id()) continue;
      EXPECT_EQ(tokenizer_->IdToPiece(ids[i]), pieces[i]) << c["text"];
    }
  }
}

}  // namespace
}  // namespace relserve
