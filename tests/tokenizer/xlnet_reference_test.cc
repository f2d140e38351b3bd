// XLNet tokenization against tests/data/reference/tokenizer_xlnet/cases.json: what
// transformers 4.40.2's XLNetTokenizer gives for strings that exercise white space, accents,
// NFKD, the digit-comma rule, quotes, unknown characters, user-defined pieces, pairs, and
// left-padded batches.

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/tokenizer.h"
#include "server/util/json_util.h"
#include "tests/tokenizer/reference_case_util.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::CopyFile;
using ::relserve::testing::ExpectCase;
using ::relserve::testing::MakeTempDir;

std::string ReferenceDir() { return JoinPath(RELSERVE_TEST_DATA_DIR, "reference/tokenizer_xlnet"); }

class XlnetReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cases = ReadJsonFile(JoinPath(ReferenceDir(), "cases.json"));
    ASSERT_TRUE(cases.ok()) << cases.status();
    reference_ = *std::move(cases);
    const std::string dir = MakeTempDir("xlnet_reference");
    CopyFile(JoinPath(ReferenceDir(), "spiece.model"), JoinPath(dir, "spiece.model"));
    auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kXlnet, 512);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
  }

  nlohmann::json reference_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(XlnetReferenceTest, SpecialIdsAndPadding) {
  const nlohmann::json& special = reference_["tokenizer"]["special_tokens"];
  EXPECT_EQ(tokenizer_->cls_id(), special["cls_token"]["id"].get<int>());
  EXPECT_EQ(tokenizer_->sep_id(), special["sep_token"]["id"].get<int>());
  EXPECT_EQ(tokenizer_->pad_id(), special["pad_token"]["id"].get<int>());
  EXPECT_EQ(tokenizer_->unk_id(), special["unk_token"]["id"].get<int>());
  EXPECT_EQ(tokenizer_->mask_id(), special["mask_token"]["id"].get<int>());
  EXPECT_EQ(tokenizer_->eos_id(), special["eos_token"]["id"].get<int>());
  EXPECT_EQ(tokenizer_->vocab_size(), reference_["vocab_size"].get<int>());
  EXPECT_FALSE(tokenizer_->lower_case());
  EXPECT_TRUE(tokenizer_->pads_left());
  EXPECT_EQ(tokenizer_->pad_token_type_id(), 3);
}

TEST_F(XlnetReferenceTest, EveryCase) {
  const nlohmann::json& cases = reference_["cases"];
  ASSERT_EQ(cases.size(), 25u);
  for (const nlohmann::json& c : cases) ExpectCase(*tokenizer_, c, c["xlnet"], c["tokens"]);
}

}  // namespace
}  // namespace relserve
