// XLNet's config.json reader against XLNetConfig (configuration_xlnet.py, transformers 4.40.2):
// its defaults, its attribute_map aliases, and an INVALID_ARGUMENT naming the key for every
// value transformers refuses or cannot run.
#include "server/model/families/xlnet/xlnet_config.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace relserve {
namespace {

using nlohmann::json;

absl::Status Parse(const json& j, XlnetConfig* c) { return ParseXlnetConfig(JsonFieldReader(j, "config.json"), j, c); }

// The error for `j`, which must fail with INVALID_ARGUMENT.
std::string ErrorOf(const json& j) {
  XlnetConfig c;
  absl::Status s = Parse(j, &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << j.dump();
  return std::string(s.message());
}

std::string SummaryErrorOf(const json& j, int num_labels) {
  XlnetConfig c;
  absl::Status parsed = Parse(j, &c);
  EXPECT_TRUE(parsed.ok()) << parsed;
  absl::Status s = CheckXlnetSequenceSummary(JsonFieldReader(j, "config.json"), c, num_labels);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << j.dump();
  return std::string(s.message());
}

TEST(XlnetConfigTest, DefaultsAreXlnetConfigs) {
  XlnetConfig c;
  ASSERT_TRUE(Parse(json::object(), &c).ok());
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.d_model, 1024);
  EXPECT_EQ(c.n_layer, 24);
  EXPECT_EQ(c.n_head, 16);
  EXPECT_EQ(c.d_head, 64);
  EXPECT_EQ(c.d_inner, 4096);
  EXPECT_EQ(c.ff_activation, "gelu");
  EXPECT_EQ(c.attn_type, "bi");
  EXPECT_FALSE(c.causal());
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_EQ(c.clamp_len, -1);
  EXPECT_FALSE(c.same_length);
  EXPECT_EQ(c.pad_token_id, 5);
  EXPECT_EQ(c.summary_type, "last");
  EXPECT_TRUE(c.summary_use_proj);
  EXPECT_FALSE(c.summary_proj_to_labels);  // not an XLNetConfig argument: hasattr is false
  EXPECT_EQ(c.summary_activation, "tanh");
  EXPECT_EQ(c.summary_width(3), 1024);
}

TEST(XlnetConfigTest, ReadsEveryKey) {
  const json j = {{"vocab_size", 1000}, {"d_model", 48},        {"n_layer", 2},          {"n_head", 4},
                  {"d_head", 12},       {"d_inner", 96},        {"ff_activation", "relu"}, {"attn_type", "uni"},
                  {"layer_norm_eps", 1e-5}, {"clamp_len", 7},    {"same_length", true},   {"untie_r", false},
                  {"pad_token_id", 9},  {"summary_type", "mean"}, {"summary_use_proj", false},
                  {"summary_proj_to_labels", true}, {"summary_activation", "gelu"}, {"bi_data", false},
                  {"mem_len", nullptr}, {"reuse_len", nullptr}};
  XlnetConfig c;
  ASSERT_TRUE(Parse(j, &c).ok());
  EXPECT_EQ(c.vocab_size, 1000);
  EXPECT_EQ(c.d_model, 48);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.d_head, 12);
  EXPECT_EQ(c.d_inner, 96);
  EXPECT_EQ(c.ff_activation, "relu");
  EXPECT_TRUE(c.causal());
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_EQ(c.clamp_len, 7);
  EXPECT_TRUE(c.same_length);
  EXPECT_FALSE(c.untie_r);
  EXPECT_EQ(c.pad_token_id, 9);
  EXPECT_EQ(c.summary_type, "mean");
  EXPECT_FALSE(c.summary_use_proj);
  EXPECT_TRUE(c.summary_proj_to_labels);
  EXPECT_EQ(c.summary_activation, "gelu");
  EXPECT_EQ(c.summary_width(3), 3);
}

TEST(XlnetConfigTest, NullSummaryKeysAreFalsy) {
  // `if activation_string`, `if config.summary_use_proj`: None turns them off.
  XlnetConfig c;
  ASSERT_TRUE(Parse({{"summary_activation", nullptr}, {"summary_use_proj", nullptr}}, &c).ok());
  EXPECT_EQ(c.summary_activation, "");
  EXPECT_FALSE(c.summary_use_proj);
  XlnetConfig empty;
  ASSERT_TRUE(Parse({{"summary_activation", ""}}, &empty).ok());
  EXPECT_EQ(empty.summary_activation, "");
}

TEST(XlnetConfigTest, AttributeMapAliasesOverrideAfterDHead) {
  // hidden_size / num_attention_heads / num_hidden_layers / n_token are set after __init__
  // computed d_head = d_model // n_head.
  XlnetConfig c;
  ASSERT_TRUE(Parse({{"d_model", 32}, {"n_head", 4}, {"num_attention_heads", 2}, {"num_hidden_layers", 3},
                     {"n_token", 77}, {"hidden_size", 32}},
                    &c)
                  .ok());
  EXPECT_EQ(c.n_head, 2);
  EXPECT_EQ(c.d_head, 8);
  EXPECT_EQ(c.inner_dim(), 16);
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.vocab_size, 77);
}

TEST(XlnetConfigTest, RefusesWhatTransformersRefuses) {
  auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(ErrorOf({{"d_model", 30}, {"n_head", 4}}), "\"n_head\" 4 does not divide d_model 30"));
  EXPECT_TRUE(has(ErrorOf({{"d_model", 32}, {"n_head", 4}, {"d_head", 16}}),
                  "\"d_head\" 16 differs from d_model / n_head = 32 / 4 = 8"));
  EXPECT_TRUE(has(ErrorOf({{"d_model", 32}, {"n_head", 4}, {"num_attention_heads", 3}}), "\"num_attention_heads\""));
  EXPECT_TRUE(has(ErrorOf({{"d_model", 33}, {"n_head", 3}}), "\"d_model\" is 33"));
  EXPECT_TRUE(has(ErrorOf({{"attn_type", "bidirectional"}}), "\"attn_type\" \"bidirectional\" is not one of bi, uni"));
  EXPECT_TRUE(has(ErrorOf({{"bi_data", true}}), "\"bi_data\" is true"));
  EXPECT_TRUE(has(ErrorOf({{"ff_activation", "laplace"}}), "\"ff_activation\" names activation \"laplace\""));
  EXPECT_TRUE(has(ErrorOf({{"layer_norm_eps", 0}}), "\"layer_norm_eps\""));
  EXPECT_TRUE(has(ErrorOf({{"clamp_len", 2.5}}), "\"clamp_len\" must be an integer"));
  EXPECT_TRUE(has(ErrorOf({{"max_position_embeddings", 512}}), "\"max_position_embeddings\" cannot be set"));
  EXPECT_TRUE(has(ErrorOf({{"vocab_size", 5}}), "\"pad_token_id\" is 5, outside the vocabulary [0, 5)"));
  EXPECT_TRUE(has(ErrorOf({{"summary_use_proj", "yes"}}), "\"summary_use_proj\" must be true or false"));
  EXPECT_TRUE(has(ErrorOf({{"n_layer", -1}}), "\"n_layer\" must be at least 0"));
  EXPECT_TRUE(has(ErrorOf({{"d_inner", 0}}), "\"d_inner\" must be at least 1"));
}

TEST(XlnetConfigTest, SequenceSummaryChecks) {
  auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(SummaryErrorOf({{"summary_type", "attn"}}, 2), "\"summary_type\" is \"attn\""));
  EXPECT_TRUE(has(SummaryErrorOf({{"summary_type", "max"}}, 2), "\"summary_type\" \"max\" is not one of"));
  EXPECT_TRUE(has(SummaryErrorOf({{"summary_activation", "softplus"}}, 2), "\"summary_activation\""));
  // The summary projects to 3 labels; logits_proj takes d_model 32.
  EXPECT_TRUE(has(SummaryErrorOf({{"d_model", 32}, {"n_head", 4}, {"summary_proj_to_labels", true}}, 3),
                  "\"summary_proj_to_labels\" is true with summary_use_proj: the summary then has num_labels = 3"));
  // Accepted: no projection to the labels, or as many labels as d_model, or no projection.
  const std::vector<std::pair<json, int>> accepted = {
      {{{"d_model", 32}, {"n_head", 4}, {"summary_proj_to_labels", true}, {"summary_use_proj", false}}, 3},
      {{{"d_model", 32}, {"n_head", 4}, {"summary_proj_to_labels", true}}, 32},
      {{{"summary_type", "cls_index"}, {"summary_activation", nullptr}}, 2}};
  for (const auto& [ok, labels] : accepted) {
    XlnetConfig c;
    ASSERT_TRUE(Parse(ok, &c).ok());
    EXPECT_TRUE(CheckXlnetSequenceSummary(JsonFieldReader(ok, "config.json"), c, labels).ok()) << ok.dump();
  }
}

}  // namespace
}  // namespace relserve
