// WordPiece tokenization against tests/data/reference/tokenizer_wordpiece/cases.json: what
// transformers 4.40.2's BertTokenizer (uncased and cased) and MPNetTokenizer give for strings
// that exercise case, accents, CJK, punctuation, control characters, white space, unknown
// words, long words, pairs and padded batches.

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
using ::relserve::testing::WriteFile;

std::string ReferenceDir() { return JoinPath(RELSERVE_TEST_DATA_DIR, "reference/tokenizer_wordpiece"); }

class WordPieceReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cases = ReadJsonFile(JoinPath(ReferenceDir(), "cases.json"));
    ASSERT_TRUE(cases.ok()) << cases.status();
    reference_ = *std::move(cases);
  }

  // A model directory as save_pretrained leaves it: vocab.txt and, where the construction
  // differs from the class defaults, tokenizer_config.json.
  std::unique_ptr<Tokenizer> Load(const std::string& name, TokenizerFamily family,
                                  const std::string& config_json) {
    const std::string dir = MakeTempDir("wordpiece_reference_" + name);
    const std::string file = reference_["vocab_files"][name]["file"].get<std::string>();
    CopyFile(JoinPath(ReferenceDir(), file), JoinPath(dir, "vocab.txt"));
    if (!config_json.empty()) WriteFile(JoinPath(dir, "tokenizer_config.json"), config_json);
    auto tokenizer = Tokenizer::Load(dir, family, 512);
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
  }

  void ExpectEveryCase(const std::string& name, const Tokenizer& tokenizer) {
    const nlohmann::json& cases = reference_["cases"];
    ASSERT_EQ(cases.size(), 25u);
    for (const nlohmann::json& c : cases) {
      ExpectCase(tokenizer, c, c[name], c["tokens"][name]);
    }
  }

  void ExpectSpecialIds(const std::string& name, const Tokenizer& tokenizer) {
    const nlohmann::json& special = reference_["tokenizers"][name]["special_tokens"];
    EXPECT_EQ(tokenizer.cls_id(), special["cls_token"]["id"].get<int>());
    EXPECT_EQ(tokenizer.sep_id(), special["sep_token"]["id"].get<int>());
    EXPECT_EQ(tokenizer.pad_id(), special["pad_token"]["id"].get<int>());
    EXPECT_EQ(tokenizer.unk_id(), special["unk_token"]["id"].get<int>());
    EXPECT_EQ(tokenizer.mask_id(), special["mask_token"]["id"].get<int>());
    EXPECT_EQ(tokenizer.vocab_size(), reference_["vocab_files"][name]["entries"].get<int>());
  }

  nlohmann::json reference_;
};

TEST_F(WordPieceReferenceTest, BertUncased) {
  std::unique_ptr<Tokenizer> tokenizer = Load("bert_uncased", TokenizerFamily::kBert, "");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_TRUE(tokenizer->lower_case());  // BertTokenizer's default
  ExpectSpecialIds("bert_uncased", *tokenizer);
  ExpectEveryCase("bert_uncased", *tokenizer);
}

TEST_F(WordPieceReferenceTest, BertCased) {
  std::unique_ptr<Tokenizer> tokenizer =
      Load("bert_cased", TokenizerFamily::kBert, R"({"do_lower_case": false})");
  ASSERT_NE(tokenizer, nullptr);
  ExpectSpecialIds("bert_cased", *tokenizer);
  ExpectEveryCase("bert_cased", *tokenizer);
}

TEST_F(WordPieceReferenceTest, Mpnet) {
  std::unique_ptr<Tokenizer> tokenizer = Load("mpnet", TokenizerFamily::kMpnet, "");
  ASSERT_NE(tokenizer, nullptr);
  ExpectSpecialIds("mpnet", *tokenizer);
  ExpectEveryCase("mpnet", *tokenizer);
}

}  // namespace
}  // namespace relserve
