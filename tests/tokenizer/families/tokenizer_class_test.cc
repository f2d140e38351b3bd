// tokenizer_config.json's tokenizer_class picks the tokenizer, as AutoTokenizer lets it: a BERT
// model with XLM-RoBERTa's tokenizer (Multilingual-MiniLM, multilingual-e5-small) is tokenized
// as XLM-RoBERTa.

#include "server/tokenizer/families/tokenizer_class.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::MakeTempDir;
using ::relserve::testing::WriteFile;

TEST(TokenizerClassTest, ClassNamesWithAndWithoutFast) {
  const std::pair<const char*, TokenizerFamily> cases[] = {
      {"DebertaV2Tokenizer", TokenizerFamily::kDeberta},  {"T5Tokenizer", TokenizerFamily::kT5},
      {"BertTokenizer", TokenizerFamily::kBert},          {"ElectraTokenizer", TokenizerFamily::kBert},
      {"DistilBertTokenizer", TokenizerFamily::kBert},    {"MPNetTokenizer", TokenizerFamily::kMpnet},
      {"XLNetTokenizer", TokenizerFamily::kXlnet},        {"RobertaTokenizer", TokenizerFamily::kRoberta},
      {"XLMRobertaTokenizer", TokenizerFamily::kXlmRoberta},
  };
  for (const auto& [name, family] : cases) {
    EXPECT_EQ(TokenizerFamilyOfClass(name), family) << name;
    EXPECT_EQ(TokenizerFamilyOfClass(std::string(name) + "Fast"), family) << name;
  }
  EXPECT_EQ(TokenizerFamilyOfClass("CamembertTokenizer"), std::nullopt);
  EXPECT_EQ(TokenizerFamilyOfClass("Fast"), std::nullopt);
  EXPECT_EQ(TokenizerFamilyOfClass(""), std::nullopt);
}

TEST(TokenizerClassTest, TheConfigOverridesTheModelType) {
  const std::string none = MakeTempDir("class_none");
  EXPECT_EQ(*ResolveTokenizerFamily(none, TokenizerFamily::kBert), TokenizerFamily::kBert);

  const std::string unnamed = MakeTempDir("class_unnamed");
  WriteFile(JoinPath(unnamed, "tokenizer_config.json"), R"({"do_lower_case": true, "tokenizer_class": null})");
  EXPECT_EQ(*ResolveTokenizerFamily(unnamed, TokenizerFamily::kBert), TokenizerFamily::kBert);

  const std::string generic = MakeTempDir("class_generic");
  WriteFile(JoinPath(generic, "tokenizer_config.json"), R"({"tokenizer_class": "PreTrainedTokenizerFast"})");
  EXPECT_EQ(*ResolveTokenizerFamily(generic, TokenizerFamily::kT5), TokenizerFamily::kT5);

  const std::string xlmr = MakeTempDir("class_xlmr");
  WriteFile(JoinPath(xlmr, "tokenizer_config.json"), R"({"tokenizer_class": "XLMRobertaTokenizer"})");
  EXPECT_EQ(*ResolveTokenizerFamily(xlmr, TokenizerFamily::kBert), TokenizerFamily::kXlmRoberta);
}

// A class relserve has no tokenizer for leaves the model taking token ids (FAILED_PRECONDITION),
// where a malformed file is an error of the file.
TEST(TokenizerClassTest, UnknownClassesAreErrorsNamingThem) {
  const std::string dir = MakeTempDir("class_unknown");
  WriteFile(JoinPath(dir, "tokenizer_config.json"), R"({"tokenizer_class": "CamembertTokenizer"})");
  auto family = ResolveTokenizerFamily(dir, TokenizerFamily::kRoberta);
  ASSERT_FALSE(family.ok());
  EXPECT_EQ(family.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(family.status().message());
  EXPECT_NE(message.find("tokenizer_config.json"), std::string::npos) << message;
  EXPECT_NE(message.find("\"CamembertTokenizer\""), std::string::npos) << message;
  EXPECT_NE(message.find("XLMRobertaTokenizer"), std::string::npos) << message;

  WriteFile(JoinPath(dir, "tokenizer_config.json"), R"({"tokenizer_class": 5})");
  family = ResolveTokenizerFamily(dir, TokenizerFamily::kRoberta);
  ASSERT_FALSE(family.ok());
  EXPECT_EQ(family.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(family.status().message()).find("tokenizer_class"), std::string::npos);
}

}  // namespace
}  // namespace relserve
