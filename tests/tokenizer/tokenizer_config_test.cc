#include "server/tokenizer/tokenizer_config.h"

#include "gtest/gtest.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::MakeTempDir;
using ::relserve::testing::WriteFile;

TEST(TokenizerConfigTest, DefaultsWhenDirectoryHasNoFiles) {
  auto config = ReadTokenizerConfig(MakeTempDir("config_empty"), TokenizerFamily::kT5);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->do_lower_case);
  EXPECT_FALSE(config->model_max_length.has_value());
  EXPECT_EQ(config->special_tokens.eos, "</s>");
}

TEST(TokenizerConfigTest, ReadsKeysAndSpecialTokensMapWins) {
  const std::string dir = MakeTempDir("config_both");
  WriteFile(JoinPath(dir, "tokenizer_config.json"), R"({
    "do_lower_case": true, "model_max_length": 384, "vocab_type": "spm",
    "cls_token": "[CLS]", "sep_token": "<sep-from-config>",
    "unk_token": {"__type": "AddedToken", "content": "<unk-object>", "lstrip": false}
  })");
  WriteFile(JoinPath(dir, "special_tokens_map.json"),
            R"({"sep_token": "[SEP]", "mask_token": "[MASK]"})");
  auto config = ReadTokenizerConfig(dir, TokenizerFamily::kDeberta);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->do_lower_case);
  EXPECT_EQ(config->model_max_length, 384);
  EXPECT_EQ(config->special_tokens.cls, "[CLS]");
  EXPECT_EQ(config->special_tokens.sep, "[SEP]");
  EXPECT_EQ(config->special_tokens.unk, "<unk-object>");
  EXPECT_EQ(config->special_tokens.pad, "[PAD]");  // untouched default
}

TEST(TokenizerConfigTest, NoLimitSentinelMeansUnset) {
  TokenizerConfig config = DefaultTokenizerConfig(TokenizerFamily::kDeberta);
  const auto json =
      nlohmann::json::parse(R"({"model_max_length": 1000000000000000019884624838656})");
  ASSERT_TRUE(ApplyTokenizerConfigJson(json, "cfg", &config).ok());
  EXPECT_FALSE(config.model_max_length.has_value());
}

TEST(TokenizerConfigTest, WrongTypesAreInvalidArgument) {
  for (const char* text : {R"({"do_lower_case": "yes"})", R"({"model_max_length": "512"})",
                           R"({"model_max_length": 0})", R"({"model_max_length": 12.5})",
                           R"({"cls_token": 1})", R"({"sep_token": {"text": "[SEP]"}})",
                           R"([1, 2])"}) {
    TokenizerConfig config = DefaultTokenizerConfig(TokenizerFamily::kDeberta);
    const absl::Status status =
        ApplyTokenizerConfigJson(nlohmann::json::parse(text), "cfg.json", &config);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(status.message().substr(0, 8), "cfg.json") << status;
  }
}

TEST(TokenizerConfigTest, MalformedJsonFileIsInvalidArgument) {
  const std::string dir = MakeTempDir("config_malformed");
  WriteFile(JoinPath(dir, "tokenizer_config.json"), "{not json");
  EXPECT_EQ(ReadTokenizerConfig(dir, TokenizerFamily::kT5).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace relserve
