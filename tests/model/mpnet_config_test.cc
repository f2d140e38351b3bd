// ParseMpnetConfig: MPNetConfig's defaults (configuration_mpnet.py, 4.40.2), a real checkpoint's
// config.json, and errors that name the key for values transformers' MPNet cannot run.
#include "server/model/families/mpnet/mpnet_config.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace relserve {
namespace {

using nlohmann::json;

absl::Status Parse(const json& j, MpnetConfig* c) { return ParseMpnetConfig(JsonFieldReader(j, "config.json"), c); }

TEST(MpnetConfigTest, AbsentKeysTakeMpnetConfigDefaults) {
  MpnetConfig c;
  ASSERT_TRUE(Parse(json::object(), &c).ok());
  EXPECT_EQ(c.vocab_size, 30527);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_EQ(c.relative_attention_num_buckets, 32);
  EXPECT_EQ(c.pad_token_id, 1);
  EXPECT_EQ(c.head_size(), 64);
  EXPECT_EQ(c.max_input_length(), 510);  // 512 - padding_idx - 1
}

TEST(MpnetConfigTest, ReadsAllMpnetBaseV2) {
  // sentence-transformers/all-mpnet-base-v2's config.json.
  const json j = json::parse(R"({
    "_name_or_path": "microsoft/mpnet-base", "architectures": ["MPNetModel"],
    "attention_probs_dropout_prob": 0.1, "bos_token_id": 0, "eos_token_id": 2, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
    "layer_norm_eps": 1e-05, "max_position_embeddings": 514, "model_type": "mpnet",
    "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 1,
    "relative_attention_num_buckets": 32, "torch_dtype": "float32", "transformers_version": "4.8.2",
    "vocab_size": 30527})");
  MpnetConfig c;
  ASSERT_TRUE(Parse(j, &c).ok());
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_EQ(c.max_position_embeddings, 514);
  EXPECT_EQ(c.max_input_length(), 512);
  // Null keeps the default, as getattr does for a key PretrainedConfig sets to None.
  MpnetConfig d;
  ASSERT_TRUE(Parse(json{{"hidden_act", nullptr}, {"layer_norm_eps", nullptr}}, &d).ok());
  EXPECT_EQ(d.hidden_act, "gelu");
  EXPECT_DOUBLE_EQ(d.layer_norm_eps, 1e-12);
}

TEST(MpnetConfigTest, BadValuesNameTheKey) {
  struct Case {
    json config;
    const char* key;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{{"hidden_size", 48}, {"num_attention_heads", 5}}, "num_attention_heads", "does not divide hidden_size 48"},
      {{{"hidden_act", "gelu_13"}}, "hidden_act", "\"gelu_13\""},
      {{{"relative_attention_num_buckets", 16}}, "relative_attention_num_buckets", "at least 32"},
      {{{"max_position_embeddings", 2}}, "max_position_embeddings", "at least 3"},
      {{{"vocab_size", 1}}, "vocab_size", "at least 2"},
      {{{"vocab_size", 1000}, {"pad_token_id", 1000}}, "pad_token_id", "outside the vocabulary [0, 1000)"},
      {{{"pad_token_id", -1}}, "pad_token_id", "at least 0"},
      {{{"layer_norm_eps", 0}}, "layer_norm_eps", ""},
      {{{"hidden_size", "768"}}, "hidden_size", ""},
      {{{"num_hidden_layers", -1}}, "num_hidden_layers", "at least 0"},
      {{{"intermediate_size", 0}}, "intermediate_size", "at least 1"},
      {{{"max_position_embeddings", 1 << 20}}, "max_position_embeddings", "at most"},
  };
  for (const Case& c : cases) {
    MpnetConfig config;
    const absl::Status s = Parse(c.config, &config);
    ASSERT_FALSE(s.ok()) << c.config.dump();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(std::string("config.json: \"") + c.key + "\""), std::string::npos) << s;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s;
  }
}

TEST(MpnetConfigTest, ArchitecturesServed) {
  const std::vector<std::string>& a = MpnetArchitectures();
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.front(), "MPNetModel");
  EXPECT_NE(std::find(a.begin(), a.end(), "MPNetForSequenceClassification"), a.end());
}

}  // namespace
}  // namespace relserve
