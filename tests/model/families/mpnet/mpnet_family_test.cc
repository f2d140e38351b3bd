// The MPNet descriptor without LibTorch: ParseMpnetConfig's defaults (configuration_mpnet.py,
// 4.40.2), a real checkpoint's config.json, errors that name the key for values transformers'
// MPNet cannot run; the architectures, the checkpoint layout against the one transformers saved
// (tests/data/reference/mpnet_like), ignored prefixes, tokenizer, FLOPs and what create writes.
#include "server/model/families/mpnet/mpnet_config.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/model/families/family_registry.h"
#include "server/model/families/mpnet/mpnet_family.h"
#include "server/safetensors/safetensors_file.h"

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


const std::string kReference = std::string(RELSERVE_TEST_DATA_DIR) + "/reference/mpnet_like";

TEST(MpnetFamilyTest, ReadsTheReferenceConfigThroughTheRegistry) {
  auto config = LoadModelConfig(kReference);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family, &MpnetFamily());
  EXPECT_EQ(config->architecture, "MPNetModel");
  EXPECT_EQ(config->head, HeadKind::kNone);
  EXPECT_EQ(config->hidden_size, 48);
  EXPECT_EQ(config->num_layers, 2);
  EXPECT_EQ(config->vocab_size, 1000);
  EXPECT_EQ(config->type_vocab_size, 0);  // token_type_ids are ignored
  EXPECT_EQ(config->pad_token_id, 1);
  EXPECT_EQ(config->max_length, 512);
  EXPECT_EQ(config->max_length_limit, 512);
  EXPECT_NE(config->max_length_limit_source.find("max_position_embeddings 514"), std::string::npos);
  EXPECT_EQ(config->family_config_as<MpnetConfig>().layer_norm_eps, 1e-5);
  EXPECT_EQ(MpnetFamily().tokenizer_family(*config), TokenizerFamily::kMpnet);
}

TEST(MpnetFamilyTest, Architectures) {
  auto parse = [](const char* arch) {
    return ParseModelConfig(json{{"model_type", "mpnet"}, {"architectures", {arch}}}, "config.json");
  };
  auto cls = parse("MPNetForSequenceClassification");
  ASSERT_TRUE(cls.ok()) << cls.status();
  EXPECT_EQ(cls->head, HeadKind::kSequenceClassification);
  EXPECT_EQ(cls->num_labels, 2);  // PretrainedConfig's default
  auto masked_lm = parse("MPNetForMaskedLM");
  ASSERT_TRUE(masked_lm.ok()) << masked_lm.status();
  EXPECT_EQ(masked_lm->head, HeadKind::kMaskedLm);
  EXPECT_TRUE(masked_lm->tie_word_embeddings);  // PretrainedConfig's default
  EXPECT_TRUE(MpnetFamily().CheckpointLayout(*masked_lm).ok());
  EXPECT_FALSE(MpnetFamily().MaskedLmHead(*cls).has_value());
  // MPNetForTokenClassification: the classifier on every token, labels as a classifier's.
  auto token_cls = parse("MPNetForTokenClassification");
  ASSERT_TRUE(token_cls.ok()) << token_cls.status();
  EXPECT_EQ(token_cls->head, HeadKind::kTokenClassification);
  EXPECT_EQ(token_cls->num_labels, 2);
  EXPECT_EQ(MpnetFamily().TokenClassifier(*token_cls), "classifier");
  EXPECT_FALSE(MpnetFamily().TokenClassifier(*cls).has_value());
  auto unsupported = parse("MPNetForQuestionAnswering");
  ASSERT_FALSE(unsupported.ok());
  EXPECT_NE(unsupported.status().message().find("\"architectures\""), std::string::npos) << unsupported.status();
}

using Shapes = std::map<std::string, std::vector<int64_t>>;

Shapes LayoutShapes(const ModelConfig& config) {
  auto layout = MpnetFamily().CheckpointLayout(config);
  EXPECT_TRUE(layout.ok()) << layout.status();
  Shapes shapes;
  if (layout.ok()) {
    for (const ModelTensorSpec& t : *layout) shapes[t.name] = t.shape;
  }
  return shapes;
}

TEST(MpnetFamilyTest, CheckpointLayoutIsTransformers) {
  // MPNetModel: exactly what transformers saved for the reference model, pooler included.
  auto config = LoadModelConfig(kReference);
  ASSERT_TRUE(config.ok()) << config.status();
  auto file = SafetensorsFile::Open(kReference + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  Shapes saved;
  for (const TensorView& t : (*file)->tensors()) saved[t.name] = t.shape;
  EXPECT_EQ(LayoutShapes(*config), saved);
  // MPNetForSequenceClassification: the backbone under "mpnet." without pooler, and the head.
  json j = json::parse(std::ifstream(kReference + "/config.json"));
  j["architectures"] = {"MPNetForSequenceClassification"};
  j["id2label"] = {{"0", "a"}, {"1", "b"}, {"2", "c"}};
  auto cls = ParseModelConfig(j, "config.json");
  ASSERT_TRUE(cls.ok()) << cls.status();
  Shapes want;
  for (const auto& [name, shape] : saved) {
    if (name.rfind("pooler.", 0) != 0) want["mpnet." + name] = shape;
  }
  want["classifier.dense.weight"] = {48, 48};
  want["classifier.dense.bias"] = {48};
  want["classifier.out_proj.weight"] = {3, 48};
  want["classifier.out_proj.bias"] = {3};
  EXPECT_EQ(LayoutShapes(*cls), want);
  // MPNetForMaskedLM: the backbone under "mpnet." without pooler, and MPNetLMHead as
  // save_pretrained writes it to safetensors: lm_head.decoder (tied to the word embeddings)
  // and its bias alias left out.
  j.erase("id2label");
  j["architectures"] = {"MPNetForMaskedLM"};
  auto masked_lm = ParseModelConfig(j, "config.json");
  ASSERT_TRUE(masked_lm.ok()) << masked_lm.status();
  want.clear();
  for (const auto& [name, shape] : saved) {
    if (name.rfind("pooler.", 0) != 0) want["mpnet." + name] = shape;
  }
  want["lm_head.dense.weight"] = {48, 48};
  want["lm_head.dense.bias"] = {48};
  want["lm_head.layer_norm.weight"] = {48};
  want["lm_head.layer_norm.bias"] = {48};
  want["lm_head.bias"] = {1000};
  EXPECT_EQ(LayoutShapes(*masked_lm), want);
  // Untied, the decoder is saved too.
  j["tie_word_embeddings"] = false;
  auto untied = ParseModelConfig(j, "config.json");
  ASSERT_TRUE(untied.ok()) << untied.status();
  want["lm_head.decoder.weight"] = {1000, 48};
  EXPECT_EQ(LayoutShapes(*untied), want);
}

TEST(MpnetFamilyTest, IgnoredPrefixesFollowTheArchitecture) {
  auto base = ParseModelConfig(json{{"model_type", "mpnet"}}, "config.json");
  ASSERT_TRUE(base.ok());
  const auto base_ignored = MpnetFamily().IgnoredPrefixes(*base);
  auto has = [](const std::vector<std::string>& v, const char* p) { return std::find(v.begin(), v.end(), p) != v.end(); };
  EXPECT_TRUE(has(base_ignored, "lm_head."));
  EXPECT_TRUE(has(base_ignored, "classifier."));
  EXPECT_FALSE(has(base_ignored, "pooler."));  // MPNetModel's own pooler is checked by the model
  auto cls = ParseModelConfig(json{{"model_type", "mpnet"}, {"architectures", {"MPNetForSequenceClassification"}}},
                              "config.json");
  ASSERT_TRUE(cls.ok());
  const auto cls_ignored = MpnetFamily().IgnoredPrefixes(*cls);
  EXPECT_TRUE(has(cls_ignored, "pooler."));
  EXPECT_FALSE(has(cls_ignored, "classifier."));
}

TEST(MpnetFamilyTest, FlopsPerToken) {
  // all-mpnet-base-v2 at 128 tokens, per layer: q, k, v, o (4 x 2 x 768^2), the feed-forward
  // (2 x 2 x 768 x 3072), q.k and p.v (2 x 2 x 128 x 768).
  auto config = ParseModelConfig(json{{"model_type", "mpnet"}}, "config.json");
  ASSERT_TRUE(config.ok());
  const double per_layer = 4 * 2.0 * 768 * 768 + 2 * 2.0 * 768 * 3072 + 2 * 2.0 * 128 * 768;
  EXPECT_DOUBLE_EQ(MpnetFamily().FlopsPerToken(*config, 128), 12 * per_layer);
}

TEST(MpnetFamilyTest, CreateConfig) {
  CreateRequest q;
  q.variant = "mpnet";
  auto j = MpnetFamily().CreateConfig(q);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["architectures"], json({"MPNetModel"}));
  EXPECT_EQ((*j)["hidden_size"], 768);
  EXPECT_EQ((*j)["vocab_size"], 30527);
  EXPECT_EQ((*j)["max_position_embeddings"], 514);
  EXPECT_EQ((*j)["pad_token_id"], 1);
  q.num_labels = 3;
  j = MpnetFamily().CreateConfig(q);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["architectures"], json({"MPNetForSequenceClassification"}));
  EXPECT_EQ((*j)["id2label"].size(), 3u);
  q.embedding_size = 16;
  EXPECT_EQ(MpnetFamily().CreateConfig(q).status().code(), absl::StatusCode::kInvalidArgument);
  q.embedding_size = 0;
  q.hidden = 48;
  q.heads = 5;
  EXPECT_EQ(MpnetFamily().CreateConfig(q).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace relserve
