#include "server/tokenizer/files/tokenizer_config.h"

#include "gtest/gtest.h"
#include "server/tokenizer/families/tokenizer_families.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::MakeTempDir;
using ::relserve::testing::WriteFile;

TEST(TokenizerConfigTest, DefaultsWhenDirectoryHasNoFiles) {
  auto config = ReadTokenizerConfig(MakeTempDir("config_empty"), Describe(TokenizerFamily::kT5));
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
  auto config = ReadTokenizerConfig(dir, Describe(TokenizerFamily::kDeberta));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->do_lower_case);
  EXPECT_EQ(config->model_max_length, 384);
  EXPECT_EQ(config->special_tokens.cls, "[CLS]");
  EXPECT_EQ(config->special_tokens.sep, "[SEP]");
  EXPECT_EQ(config->special_tokens.unk, "<unk-object>");
  EXPECT_EQ(config->special_tokens.pad, "[PAD]");  // untouched default
}

TEST(TokenizerConfigTest, NoLimitSentinelMeansUnset) {
  TokenizerConfig config = DefaultTokenizerConfig(Describe(TokenizerFamily::kDeberta));
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
    TokenizerConfig config = DefaultTokenizerConfig(Describe(TokenizerFamily::kDeberta));
    const absl::Status status =
        ApplyTokenizerConfigJson(nlohmann::json::parse(text), "cfg.json", &config);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(status.message().substr(0, 8), "cfg.json") << status;
  }
}

TEST(TokenizerConfigTest, FamilyDefaults) {
  EXPECT_TRUE(DefaultTokenizerConfig(Describe(TokenizerFamily::kBert)).do_lower_case);
  EXPECT_TRUE(DefaultTokenizerConfig(Describe(TokenizerFamily::kMpnet)).do_lower_case);
  EXPECT_FALSE(DefaultTokenizerConfig(Describe(TokenizerFamily::kXlnet)).do_lower_case);
  const TokenizerConfig xlnet = DefaultTokenizerConfig(Describe(TokenizerFamily::kXlnet));
  EXPECT_TRUE(xlnet.remove_space);
  EXPECT_FALSE(xlnet.keep_accents);
  EXPECT_EQ(xlnet.special_tokens.additional, (std::vector<std::string>{"<eop>", "<eod>"}));
  EXPECT_EQ(xlnet.special_tokens.cls, "<cls>");
  const TokenizerConfig mpnet = DefaultTokenizerConfig(Describe(TokenizerFamily::kMpnet));
  EXPECT_EQ(mpnet.special_tokens.unk, "[UNK]");  // MPNetTokenizer keeps BERT's
  EXPECT_EQ(mpnet.special_tokens.mask, "<mask>");
  const TokenizerConfig bert = DefaultTokenizerConfig(Describe(TokenizerFamily::kBert));
  EXPECT_FALSE(bert.strip_accents.has_value());
  EXPECT_TRUE(bert.tokenize_chinese_chars);
  EXPECT_EQ(bert.max_input_chars_per_word, 100);
}

TEST(TokenizerConfigTest, ReadsTheFamilySwitchesAndAddedTokens) {
  const std::string dir = MakeTempDir("config_switches");
  WriteFile(JoinPath(dir, "tokenizer_config.json"), R"({
    "do_lower_case": false, "strip_accents": true, "tokenize_chinese_chars": false,
    "never_split": ["[X]"], "do_basic_tokenize": false, "max_input_chars_per_word": 7,
    "remove_space": false, "keep_accents": true, "add_prefix_space": true, "extra_ids": 3,
    "mask_token": {"content": "<m>", "lstrip": true, "rstrip": false, "normalized": false},
    "additional_special_tokens": ["<a>"],
    "added_tokens_decoder": {
      "7": {"content": "<m>", "lstrip": true, "rstrip": false, "single_word": false, "normalized": false, "special": true},
      "9": {"content": "word", "lstrip": false, "rstrip": true, "single_word": true, "normalized": true, "special": false}}
  })");
  WriteFile(JoinPath(dir, "special_tokens_map.json"), R"({"additional_special_tokens": ["<b>", "<a>"]})");
  WriteFile(JoinPath(dir, "added_tokens.json"), R"({"ignored": 12})");
  auto config = ReadTokenizerConfig(dir, Describe(TokenizerFamily::kBert));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->do_lower_case);
  EXPECT_EQ(config->strip_accents, true);
  EXPECT_FALSE(config->tokenize_chinese_chars);
  EXPECT_EQ(config->never_split, std::vector<std::string>{"[X]"});
  EXPECT_FALSE(config->do_basic_tokenize);
  EXPECT_EQ(config->max_input_chars_per_word, 7);
  EXPECT_FALSE(config->remove_space);
  EXPECT_TRUE(config->keep_accents);
  EXPECT_TRUE(config->add_prefix_space);
  EXPECT_EQ(config->extra_ids, 3);
  EXPECT_EQ(config->special_tokens.mask, "<m>");
  EXPECT_TRUE(config->token_flags.at("<m>").lstrip);
  // special_tokens_map.json adds to the list rather than replacing it.
  EXPECT_EQ(config->special_tokens.additional, (std::vector<std::string>{"<a>", "<b>"}));
  // added_tokens_decoder wins over added_tokens.json, which is then not read.
  ASSERT_EQ(config->added_tokens.size(), 2u);
  EXPECT_EQ(config->added_tokens.at(9).content, "word");
  EXPECT_TRUE(config->added_tokens.at(9).flags.single_word);
  EXPECT_TRUE(config->added_tokens.at(9).flags.rstrip);
  EXPECT_TRUE(config->added_tokens.at(9).flags.IsNormalized());
  EXPECT_FALSE(config->added_tokens.at(7).flags.IsNormalized());

  // Without added_tokens_decoder, added_tokens.json is read.
  const std::string legacy = MakeTempDir("config_legacy_added");
  WriteFile(JoinPath(legacy, "added_tokens.json"), R"({"[MASK]": 128000})");
  auto legacy_config = ReadTokenizerConfig(legacy, Describe(TokenizerFamily::kDeberta));
  ASSERT_TRUE(legacy_config.ok()) << legacy_config.status();
  EXPECT_EQ(legacy_config->added_tokens.at(128000).content, "[MASK]");
}

TEST(TokenizerConfigTest, WrongTypesOfTheNewKeysNameTheKey) {
  for (const char* text : {R"({"strip_accents": "yes"})", R"({"never_split": "[X]"})",
                           R"({"never_split": [1]})", R"({"tokenize_chinese_chars": 1})",
                           R"({"max_input_chars_per_word": -1})", R"({"remove_space": null, "keep_accents": 0})",
                           R"({"additional_special_tokens": "<a>"})", R"({"added_tokens_decoder": []})",
                           R"({"added_tokens_decoder": {"x": {"content": "a"}}})",
                           R"({"added_tokens_decoder": {"-1": {"content": "a"}}})",
                           R"({"added_tokens_decoder": {"1": {"content": "a", "lstrip": "no"}}})",
                           R"({"added_tokens_decoder": {"1": {"text": "a"}}})"}) {
    TokenizerConfig config = DefaultTokenizerConfig(Describe(TokenizerFamily::kBert));
    const absl::Status status = ApplyTokenizerConfigJson(nlohmann::json::parse(text), "cfg.json", &config);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(status.message().substr(0, 10), "cfg.json: ") << status;
  }
  const std::string dir = MakeTempDir("config_bad_added_tokens");
  WriteFile(JoinPath(dir, "added_tokens.json"), R"({"<x>": "5"})");
  auto config = ReadTokenizerConfig(dir, Describe(TokenizerFamily::kBert));
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("added_tokens.json: \"<x>\""), std::string_view::npos) << config.status();
}

TEST(TokenizerConfigTest, MalformedJsonFileIsInvalidArgument) {
  const std::string dir = MakeTempDir("config_malformed");
  WriteFile(JoinPath(dir, "tokenizer_config.json"), "{not json");
  EXPECT_EQ(ReadTokenizerConfig(dir, Describe(TokenizerFamily::kT5)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace relserve
