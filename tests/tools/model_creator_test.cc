#include "server/tools/model_creator.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/safetensors/safetensors_file.h"
#include "server/tokenizer/families/tokenizer_class.h"
#include "server/tokenizer/files/tokenizer_config.h"
#include "server/tokenizer/tokenizer.h"

namespace relserve {
namespace {

using nlohmann::json;
using Shapes = std::map<std::string, std::vector<int64_t>>;

// A fresh, empty directory path for the running test (not yet created).
std::string ScratchDir(const std::string& suffix = "") {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string("relserve_mc_") + std::to_string(getpid()) + "_" +
                     info->test_suite_name() + "_" + info->name() + suffix;
  for (char& c : name) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  std::string dir = ::testing::TempDir() + name;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return dir;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json ReadJson(const std::string& path) {
  std::string text = ReadBytes(path);
  EXPECT_FALSE(text.empty()) << path;
  return json::parse(text);
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::unique_ptr<SafetensorsFile> OpenWeights(const std::string& path) {
  auto file = SafetensorsFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? std::move(*file) : nullptr;
}

Shapes ShapesOf(const SafetensorsFile& file) {
  Shapes shapes;
  for (const TensorView& t : file.tensors()) shapes[t.name] = t.shape;
  return shapes;
}

Shapes ShapesOf(const std::vector<ModelTensorSpec>& specs) {
  Shapes shapes;
  for (const ModelTensorSpec& s : specs) shapes[s.name] = s.shape;
  return shapes;
}

std::vector<float> Floats(const TensorView& t) {
  EXPECT_EQ(t.dtype, StDType::kF32) << t.name;
  std::vector<float> out(t.nbytes / 4);
  std::memcpy(out.data(), t.data, out.size() * 4);
  return out;
}

// Creates the model and returns its tensors' shapes (empty on failure).
// The sizes of a reference checkpoint's config.json, read under the family's key names
// (hidden, layers, heads, intermediate), and its vocabulary.
CreateModelOptions SizedLike(const std::string& family, const json& ref_config, const char* hidden,
                             const char* layers, const char* heads, const char* intermediate) {
  CreateModelOptions o;
  o.family = family;
  o.hidden = ref_config[hidden];
  o.layers = ref_config[layers];
  o.heads = ref_config[heads];
  o.intermediate = ref_config[intermediate];
  o.vocab = ref_config["vocab_size"];
  return o;
}

Shapes CreateAndReadShapes(const CreateModelOptions& options, const std::string& dir) {
  absl::Status status = CreateModelDirectory(options, dir);
  EXPECT_TRUE(status.ok()) << status;
  if (!status.ok()) return {};
  auto file = OpenWeights(dir + "/model.safetensors");
  if (!file) return {};
  EXPECT_EQ(file->metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  // The weights follow exactly what the final config describes.
  auto specs = ModelTensorSpecs(ReadJson(dir + "/config.json"));
  EXPECT_TRUE(specs.ok()) << specs.status();
  Shapes shapes = ShapesOf(*file);
  if (specs.ok()) {
    EXPECT_EQ(shapes, ShapesOf(*specs));
  }
  return shapes;
}

// What `create` writes for `o` is what transformers saved in `ref`: config.json byte for byte,
// and every tensor's name and shape.
void ExpectCreatesReference(const CreateModelOptions& o, const std::string& ref) {
  const std::string dir = ScratchDir();
  Shapes shapes = CreateAndReadShapes(o, dir);
  EXPECT_EQ(ReadBytes(dir + "/config.json"), ReadBytes(ref + "/config.json"));
  auto ref_file = OpenWeights(ref + "/model.safetensors");
  ASSERT_NE(ref_file, nullptr);
  EXPECT_EQ(shapes, ShapesOf(*ref_file));
}

CreateModelOptions SmallDeberta(const std::string& family = "deberta-v3") {
  CreateModelOptions o;
  o.family = family;
  o.hidden = 32;
  o.layers = 2;
  o.heads = 4;
  o.intermediate = 64;
  o.vocab = 100;
  return o;
}

CreateModelOptions SmallT5(const std::string& family = "t5") {
  CreateModelOptions o;
  o.family = family;
  o.hidden = 32;
  o.layers = 2;
  o.heads = 4;
  o.intermediate = 48;
  o.vocab = 50;
  return o;
}

// Names and shapes of one DeBERTa layer with hidden H, attention width A, intermediate I.
void AddDebertaLayer(Shapes* s, const std::string& prefix, int i, int64_t H, int64_t I) {
  const std::string l = prefix + "encoder.layer." + std::to_string(i) + ".";
  for (const char* proj : {"query_proj", "key_proj", "value_proj"}) {
    (*s)[l + "attention.self." + proj + ".weight"] = {H, H};
    (*s)[l + "attention.self." + proj + ".bias"] = {H};
  }
  (*s)[l + "attention.output.dense.weight"] = {H, H};
  (*s)[l + "attention.output.dense.bias"] = {H};
  (*s)[l + "attention.output.LayerNorm.weight"] = {H};
  (*s)[l + "attention.output.LayerNorm.bias"] = {H};
  (*s)[l + "intermediate.dense.weight"] = {I, H};
  (*s)[l + "intermediate.dense.bias"] = {I};
  (*s)[l + "output.dense.weight"] = {H, I};
  (*s)[l + "output.dense.bias"] = {H};
  (*s)[l + "output.LayerNorm.weight"] = {H};
  (*s)[l + "output.LayerNorm.bias"] = {H};
}

Shapes DebertaV3Shapes(const std::string& prefix, int64_t V, int64_t H, int layers, int64_t I,
                       int64_t rel_rows) {
  Shapes s;
  s[prefix + "embeddings.word_embeddings.weight"] = {V, H};
  s[prefix + "embeddings.LayerNorm.weight"] = {H};
  s[prefix + "embeddings.LayerNorm.bias"] = {H};
  for (int i = 0; i < layers; ++i) AddDebertaLayer(&s, prefix, i, H, I);
  s[prefix + "encoder.rel_embeddings.weight"] = {rel_rows, H};
  s[prefix + "encoder.LayerNorm.weight"] = {H};
  s[prefix + "encoder.LayerNorm.bias"] = {H};
  return s;
}

// ---------------------------------------------------------------------------------------------

TEST(ModelCreatorTest, DebertaV3DefaultConfigAndLayout) {
  CreateModelOptions o;
  o.family = "deberta-v3";
  auto config = BuildModelConfig(o);
  ASSERT_TRUE(config.ok()) << config.status();
  const json expected = json::parse(R"({
    "architectures": ["DebertaV2Model"],
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-07,
    "max_position_embeddings": 512,
    "max_relative_positions": -1,
    "model_type": "deberta-v2",
    "norm_rel_ebd": "layer_norm",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 0,
    "pooler_dropout": 0,
    "pooler_hidden_act": "gelu",
    "pooler_hidden_size": 768,
    "pos_att_type": ["p2c", "c2p"],
    "position_biased_input": false,
    "position_buckets": 256,
    "relative_attention": true,
    "share_att_key": true,
    "torch_dtype": "float32",
    "transformers_version": "4.40.2",
    "type_vocab_size": 0,
    "vocab_size": 128100
  })");
  EXPECT_EQ(*config, expected) << config->dump(2);

  auto specs = ModelTensorSpecs(*config);
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ(ShapesOf(*specs), DebertaV3Shapes("", 128100, 768, 12, 3072, 512));
}

TEST(ModelCreatorTest, DebertaV3SmallDirectory) {
  const std::string dir = ScratchDir();
  CreateModelOptions o = SmallDeberta();
  Shapes shapes = CreateAndReadShapes(o, dir);
  EXPECT_EQ(shapes, DebertaV3Shapes("", 100, 32, 2, 64, 512));

  const json config = ReadJson(dir + "/config.json");
  EXPECT_EQ(config["hidden_size"], 32);
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_EQ(config["num_attention_heads"], 4);
  EXPECT_EQ(config["intermediate_size"], 64);
  EXPECT_EQ(config["vocab_size"], 100);
  EXPECT_EQ(config["pooler_hidden_size"], 32);
  // save_pretrained's formatting: sorted keys, two-space indent, trailing newline.
  const std::string text = ReadBytes(dir + "/config.json");
  EXPECT_EQ(text, config.dump(2) + "\n");
  EXPECT_NE(text.find("\"layer_norm_eps\": 1e-07,"), std::string::npos) << text;
  EXPECT_NE(text.find("  \"architectures\": [\n    \"DebertaV2Model\"\n  ],"), std::string::npos);
  // No tokenizer or sentence-transformers files without the options.
  EXPECT_FALSE(Exists(dir + "/spm.model"));
  EXPECT_FALSE(Exists(dir + "/tokenizer_config.json"));
  EXPECT_FALSE(Exists(dir + "/modules.json"));
}

// The project's reference checkpoint was saved by transformers itself: same config and layout.
TEST(ModelCreatorTest, MatchesTransformersReferenceCheckpoint) {
#ifndef RELSERVE_TEST_DATA_DIR
  GTEST_SKIP() << "RELSERVE_TEST_DATA_DIR not defined";
#else
  const std::string ref = std::string(RELSERVE_TEST_DATA_DIR) + "/reference/deberta_v3_like";
  if (!Exists(ref + "/config.json")) GTEST_SKIP() << "no reference checkpoint";
  const json ref_config = ReadJson(ref + "/config.json");
  CreateModelOptions o = SizedLike("deberta-v3", ref_config, "hidden_size", "num_hidden_layers",
                                     "num_attention_heads", "intermediate_size");
  o.config_overrides = {{"position_buckets", ref_config["position_buckets"]}};
  ExpectCreatesReference(o, ref);
#endif
}

// MPNet: the reference MPNetModel saved by transformers has the config and layout create
// writes for its sizes (all-mpnet-base-v2's layout: 514 positions, 32 buckets, a pooler).
TEST(ModelCreatorTest, MpnetMatchesTransformersReferenceCheckpoint) {
  const std::string ref = std::string(RELSERVE_TEST_DATA_DIR) + "/reference/mpnet_like";
  const json ref_config = ReadJson(ref + "/config.json");
  CreateModelOptions o = SizedLike("mpnet", ref_config, "hidden_size", "num_hidden_layers", "num_attention_heads",
                                     "intermediate_size");
  ExpectCreatesReference(o, ref);
}

// XLNet: the creator's config.json and layout are those transformers saved for xlnet_like.
TEST(ModelCreatorTest, XlnetMatchesTransformersReferenceCheckpoint) {
#ifndef RELSERVE_TEST_DATA_DIR
  GTEST_SKIP() << "RELSERVE_TEST_DATA_DIR not defined";
#else
  const std::string ref = std::string(RELSERVE_TEST_DATA_DIR) + "/reference/xlnet_like";
  if (!Exists(ref + "/config.json")) GTEST_SKIP() << "no reference checkpoint";
  const json ref_config = ReadJson(ref + "/config.json");
  CreateModelOptions o = SizedLike("xlnet", ref_config, "d_model", "n_layer", "n_head", "d_inner");
  ExpectCreatesReference(o, ref);
  // XLNetForSequenceClassification: the backbone under "transformer.", the summary and logits_proj.
  o.num_labels = 3;
  const std::string cls = ScratchDir();
  Shapes cls_shapes = CreateAndReadShapes(o, cls);
  EXPECT_EQ(cls_shapes.count("transformer.word_embedding.weight"), 1u);
  EXPECT_EQ(cls_shapes["sequence_summary.summary.weight"], (std::vector<int64_t>{48, 48}));
  EXPECT_EQ(cls_shapes["logits_proj.weight"], (std::vector<int64_t>{3, 48}));
  EXPECT_EQ(ReadJson(cls + "/config.json")["architectures"][0], "XLNetForSequenceClassification");
  // d_head follows an overridden d_model or n_head.
  o.num_labels = 0;
  o.config_overrides = {{"n_head", 8}};
  const std::string narrow = ScratchDir();
  CreateAndReadShapes(o, narrow);
  EXPECT_EQ(ReadJson(narrow + "/config.json")["d_head"], 6);
#endif
}

TEST(ModelCreatorTest, SeparatePositionProjectionsForC2POnly) {
  CreateModelOptions o = SmallDeberta();
  // The old string form of pos_att_type, as DebertaV2Config still accepts it.
  o.config_overrides = {{"share_att_key", false}, {"pos_att_type", "C2P"}};
  Shapes shapes = CreateAndReadShapes(o, ScratchDir());
  Shapes expected = DebertaV3Shapes("", 100, 32, 2, 64, 512);
  for (int i = 0; i < 2; ++i) {
    const std::string l = "encoder.layer." + std::to_string(i) + ".attention.self.";
    expected[l + "pos_key_proj.weight"] = {32, 32};
    expected[l + "pos_key_proj.bias"] = {32};
  }
  EXPECT_EQ(shapes, expected);

  // Both directions, from a list.
  o.config_overrides = {{"share_att_key", false}, {"pos_att_type", {"p2c", "c2p"}}};
  shapes = CreateAndReadShapes(o, ScratchDir("_both"));
  EXPECT_EQ(shapes.count("encoder.layer.1.attention.self.pos_query_proj.weight"), 1u);
  EXPECT_EQ(shapes.count("encoder.layer.1.attention.self.pos_key_proj.bias"), 1u);

  // Without relative attention there is neither a table nor projections, but
  // norm_rel_ebd still makes encoder.LayerNorm.
  o.config_overrides = {{"share_att_key", false}, {"relative_attention", false}};
  shapes = CreateAndReadShapes(o, ScratchDir("_norel"));
  EXPECT_EQ(shapes.count("encoder.rel_embeddings.weight"), 0u);
  EXPECT_EQ(shapes.count("encoder.layer.0.attention.self.pos_key_proj.weight"), 0u);
  EXPECT_EQ(shapes.count("encoder.LayerNorm.weight"), 1u);
}

TEST(ModelCreatorTest, AbsolutePositionsTokenTypesAndEmbeddingProjection) {
  CreateModelOptions o = SmallDeberta();
  o.embedding_size = 16;
  o.config_overrides = {{"position_biased_input", true},
                        {"type_vocab_size", 2},
                        {"max_position_embeddings", 128},
                        {"position_buckets", -1},
                        {"max_relative_positions", 64},
                        {"norm_rel_ebd", "none"}};
  const std::string dir = ScratchDir();
  Shapes shapes = CreateAndReadShapes(o, dir);
  Shapes expected;
  expected["embeddings.word_embeddings.weight"] = {100, 16};
  expected["embeddings.position_embeddings.weight"] = {128, 16};
  expected["embeddings.token_type_embeddings.weight"] = {2, 16};
  expected["embeddings.embed_proj.weight"] = {32, 16};
  expected["embeddings.LayerNorm.weight"] = {32};
  expected["embeddings.LayerNorm.bias"] = {32};
  for (int i = 0; i < 2; ++i) AddDebertaLayer(&expected, "", i, 32, 64);
  expected["encoder.rel_embeddings.weight"] = {128, 32};  // 2 * max_relative_positions
  EXPECT_EQ(shapes, expected);
  EXPECT_EQ(ReadJson(dir + "/config.json")["embedding_size"], 16);

  // max_relative_positions < 1 falls back to max_position_embeddings.
  o.config_overrides["max_relative_positions"] = -1;
  shapes = CreateAndReadShapes(o, ScratchDir("_maxpos"));
  EXPECT_EQ(shapes["encoder.rel_embeddings.weight"], (std::vector<int64_t>{256, 32}));
}

TEST(ModelCreatorTest, DebertaV2FamilyHasConvolution) {
  const std::string dir = ScratchDir();
  Shapes shapes = CreateAndReadShapes(SmallDeberta("deberta-v2"), dir);
  Shapes expected = DebertaV3Shapes("", 100, 32, 2, 64, 512);
  expected["encoder.conv.conv.weight"] = {32, 32, 3};
  expected["encoder.conv.conv.bias"] = {32};
  expected["encoder.conv.LayerNorm.weight"] = {32};
  expected["encoder.conv.LayerNorm.bias"] = {32};
  EXPECT_EQ(shapes, expected);
  const json config = ReadJson(dir + "/config.json");
  EXPECT_EQ(config["conv_kernel_size"], 3);
  EXPECT_EQ(config["conv_act"], "gelu");

  CreateModelOptions o = SmallDeberta("deberta-v2");
  o.config_overrides = {{"conv_groups", 4}, {"conv_kernel_size", 5}};
  shapes = CreateAndReadShapes(o, ScratchDir("_groups"));
  EXPECT_EQ(shapes["encoder.conv.conv.weight"], (std::vector<int64_t>{32, 8, 5}));
}

TEST(ModelCreatorTest, SequenceClassifier) {
  CreateModelOptions o = SmallDeberta();
  o.num_labels = 3;
  const std::string dir = ScratchDir();
  Shapes shapes = CreateAndReadShapes(o, dir);
  Shapes expected = DebertaV3Shapes("deberta.", 100, 32, 2, 64, 512);
  expected["pooler.dense.weight"] = {32, 32};
  expected["pooler.dense.bias"] = {32};
  expected["classifier.weight"] = {3, 32};
  expected["classifier.bias"] = {3};
  EXPECT_EQ(shapes, expected);
  const json config = ReadJson(dir + "/config.json");
  EXPECT_EQ(config["architectures"], json::array({"DebertaV2ForSequenceClassification"}));
  EXPECT_EQ(config["id2label"], json({{"0", "LABEL_0"}, {"1", "LABEL_1"}, {"2", "LABEL_2"}}));
  EXPECT_EQ(config["label2id"], json({{"LABEL_0", 0}, {"LABEL_1", 1}, {"LABEL_2", 2}}));
}

Shapes T5Shapes(int64_t V, int64_t D, int64_t inner, int64_t ff, int layers, int64_t heads,
                bool gated) {
  Shapes s;
  s["shared.weight"] = {V, D};
  s["encoder.embed_tokens.weight"] = {V, D};
  for (int i = 0; i < layers; ++i) {
    const std::string b = "encoder.block." + std::to_string(i) + ".layer.";
    s[b + "0.SelfAttention.q.weight"] = {inner, D};
    s[b + "0.SelfAttention.k.weight"] = {inner, D};
    s[b + "0.SelfAttention.v.weight"] = {inner, D};
    s[b + "0.SelfAttention.o.weight"] = {D, inner};
    if (i == 0) s[b + "0.SelfAttention.relative_attention_bias.weight"] = {32, heads};
    s[b + "0.layer_norm.weight"] = {D};
    if (gated) {
      s[b + "1.DenseReluDense.wi_0.weight"] = {ff, D};
      s[b + "1.DenseReluDense.wi_1.weight"] = {ff, D};
    } else {
      s[b + "1.DenseReluDense.wi.weight"] = {ff, D};
    }
    s[b + "1.DenseReluDense.wo.weight"] = {D, ff};
    s[b + "1.layer_norm.weight"] = {D};
  }
  s["encoder.final_layer_norm.weight"] = {D};
  return s;
}

TEST(ModelCreatorTest, T5DefaultConfig) {
  CreateModelOptions o;
  o.family = "t5";
  auto config = BuildModelConfig(o);
  ASSERT_TRUE(config.ok()) << config.status();
  const json expected = json::parse(R"({
    "architectures": ["T5EncoderModel"],
    "classifier_dropout": 0.0,
    "d_ff": 3072,
    "d_kv": 64,
    "d_model": 768,
    "decoder_start_token_id": 0,
    "dense_act_fn": "relu",
    "dropout_rate": 0.1,
    "eos_token_id": 1,
    "feed_forward_proj": "relu",
    "initializer_factor": 1.0,
    "is_encoder_decoder": true,
    "is_gated_act": false,
    "layer_norm_epsilon": 1e-06,
    "model_type": "t5",
    "num_decoder_layers": 12,
    "num_heads": 12,
    "num_layers": 12,
    "pad_token_id": 0,
    "relative_attention_max_distance": 128,
    "relative_attention_num_buckets": 32,
    "torch_dtype": "float32",
    "transformers_version": "4.40.2",
    "use_cache": true,
    "vocab_size": 32128
  })");
  EXPECT_EQ(*config, expected) << config->dump(2);
  auto specs = ModelTensorSpecs(*config);
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ(ShapesOf(*specs), T5Shapes(32128, 768, 768, 3072, 12, 12, false));

  o.family = "t5-v1.1";
  config = BuildModelConfig(o);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)["feed_forward_proj"], "gated-gelu");
  EXPECT_EQ((*config)["dense_act_fn"], "gelu_new");
  EXPECT_EQ((*config)["is_gated_act"], true);
  EXPECT_EQ((*config)["tie_word_embeddings"], false);
  EXPECT_EQ((*config)["d_ff"], 2048);
}

TEST(ModelCreatorTest, T5ReluDirectory) {
  const std::string dir = ScratchDir();
  Shapes shapes = CreateAndReadShapes(SmallT5(), dir);
  EXPECT_EQ(shapes, T5Shapes(50, 32, 32, 48, 2, 4, false));
  const json config = ReadJson(dir + "/config.json");
  EXPECT_EQ(config["d_kv"], 8);
  EXPECT_EQ(config["num_decoder_layers"], 2);

  auto file = OpenWeights(dir + "/model.safetensors");
  ASSERT_NE(file, nullptr);
  // shared and encoder.embed_tokens are one module in transformers: same values.
  const TensorView* shared = file->Find("shared.weight");
  const TensorView* embed = file->Find("encoder.embed_tokens.weight");
  ASSERT_TRUE(shared && embed);
  ASSERT_EQ(shared->nbytes, embed->nbytes);
  EXPECT_EQ(std::memcmp(shared->data, embed->data, shared->nbytes), 0);
  for (float v : Floats(*file->Find("encoder.final_layer_norm.weight"))) EXPECT_EQ(v, 1.0f);
  for (float v : Floats(*file->Find("encoder.block.1.layer.0.layer_norm.weight"))) EXPECT_EQ(v, 1.0f);
}

TEST(ModelCreatorTest, T5V11GatedDirectory) {
  CreateModelOptions o = SmallT5("t5-v1.1");
  o.heads = 2;
  o.config_overrides = {{"d_kv", 24}};  // d_kv need not be d_model / heads
  const std::string dir = ScratchDir();
  Shapes shapes = CreateAndReadShapes(o, dir);
  EXPECT_EQ(shapes, T5Shapes(50, 32, 48, 48, 2, 2, true));
  const json config = ReadJson(dir + "/config.json");
  EXPECT_EQ(config["dense_act_fn"], "gelu_new");
  EXPECT_EQ(config["is_gated_act"], true);
  EXPECT_EQ(config["tie_word_embeddings"], false);
}

TEST(ModelCreatorTest, OverridesReDeriveDependentKeys) {
  CreateModelOptions o = SmallT5();
  o.config_overrides = {{"feed_forward_proj", "gated-silu"}, {"num_heads", 2}, {"num_layers", 1}};
  auto config = BuildModelConfig(o);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)["dense_act_fn"], "silu");
  EXPECT_EQ((*config)["is_gated_act"], true);
  EXPECT_EQ((*config)["d_kv"], 16);
  EXPECT_EQ((*config)["num_decoder_layers"], 1);
  auto specs = ModelTensorSpecs(*config);
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ(ShapesOf(*specs), T5Shapes(50, 32, 32, 48, 1, 2, true));

  // An explicit is_gated_act wins over feed_forward_proj, as in transformers.
  o.config_overrides = {{"feed_forward_proj", "gated-silu"}, {"is_gated_act", false}};
  config = BuildModelConfig(o);
  ASSERT_TRUE(config.ok()) << config.status();
  specs = ModelTensorSpecs(*config);
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ(ShapesOf(*specs).count("encoder.block.0.layer.1.DenseReluDense.wi.weight"), 1u);

  o.config_overrides = {{"feed_forward_proj", "fancy-gated-gelu"}};
  EXPECT_EQ(BuildModelConfig(o).status().code(), absl::StatusCode::kInvalidArgument);

  CreateModelOptions d = SmallDeberta();
  d.config_overrides = {{"hidden_size", 48}, {"share_att_key", nullptr}};
  config = BuildModelConfig(d);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ((*config)["pooler_hidden_size"], 48);
  EXPECT_FALSE(config->contains("share_att_key"));  // null removes a key
  // ... and transformers' default for an absent share_att_key is False.
  specs = ModelTensorSpecs(*config);
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ(ShapesOf(*specs)["encoder.layer.0.attention.self.pos_query_proj.weight"],
            (std::vector<int64_t>{48, 48}));
}

TEST(ModelCreatorTest, DeterministicForASeed) {
  CreateModelOptions o = SmallDeberta();
  o.layers = 1;
  const std::string a = ScratchDir("_a"), b = ScratchDir("_b"), c = ScratchDir("_c");
  ASSERT_TRUE(CreateModelDirectory(o, a).ok());
  ASSERT_TRUE(CreateModelDirectory(o, b).ok());
  o.seed = 2;
  ASSERT_TRUE(CreateModelDirectory(o, c).ok());
  const std::string wa = ReadBytes(a + "/model.safetensors");
  EXPECT_EQ(wa, ReadBytes(b + "/model.safetensors"));
  EXPECT_NE(wa, ReadBytes(c + "/model.safetensors"));
  EXPECT_EQ(ReadBytes(a + "/config.json"), ReadBytes(c + "/config.json"));

  auto file = OpenWeights(a + "/model.safetensors");
  ASSERT_NE(file, nullptr);
  // Normal(0, 0.02) matrices; zero biases; unit layer-norm weights with zero biases.
  std::vector<float> w = Floats(*file->Find("embeddings.word_embeddings.weight"));
  double sum = 0, sum_sq = 0;
  for (float v : w) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double mean = sum / w.size(), stddev = std::sqrt(sum_sq / w.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(stddev, 0.02, 0.001);
  // Distinct tensors of the same shape get distinct values.
  EXPECT_NE(Floats(*file->Find("encoder.layer.0.attention.self.query_proj.weight")),
            Floats(*file->Find("encoder.layer.0.attention.self.key_proj.weight")));
  for (float v : Floats(*file->Find("encoder.layer.0.attention.self.query_proj.bias"))) EXPECT_EQ(v, 0.0f);
  for (float v : Floats(*file->Find("encoder.layer.0.output.LayerNorm.weight"))) EXPECT_EQ(v, 1.0f);
  for (float v : Floats(*file->Find("encoder.layer.0.output.LayerNorm.bias"))) EXPECT_EQ(v, 0.0f);
}

TEST(ModelCreatorTest, InitStdIsHonoured) {
  CreateModelOptions o = SmallDeberta();
  o.layers = 0;
  o.init_std = 0.5f;
  const std::string dir = ScratchDir();
  ASSERT_TRUE(CreateModelDirectory(o, dir).ok());
  EXPECT_EQ(ReadJson(dir + "/config.json")["initializer_range"], 0.5);
  auto file = OpenWeights(dir + "/model.safetensors");
  ASSERT_NE(file, nullptr);
  std::vector<float> w = Floats(*file->Find("encoder.rel_embeddings.weight"));
  double sum_sq = 0;
  for (float v : w) sum_sq += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(sum_sq / w.size()), 0.5, 0.02);
}

TEST(ModelCreatorTest, HalfPrecisionConversionRoundsToNearestEven) {
  auto bits = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  EXPECT_EQ(FloatToHalfBits(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalfBits(65519.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7C00);  // halfway to 2^16 rounds to even: infinity
  EXPECT_EQ(FloatToHalfBits(1e10f), 0x7C00);
  EXPECT_EQ(FloatToHalfBits(-INFINITY), 0xFC00);
  EXPECT_EQ(FloatToHalfBits(NAN) & 0x7C00, 0x7C00);
  EXPECT_NE(FloatToHalfBits(NAN) & 0x03FF, 0);
  EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even
  EXPECT_EQ(FloatToHalfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(FloatToHalfBits(bits(0x3F801001)), 0x3C01);                  // just above a tie
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -14)), 0x0400);             // smallest normal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);             // tie -> even (0)
  EXPECT_EQ(FloatToHalfBits(3 * std::ldexp(1.0f, -25)), 0x0002);         // tie -> even (2)
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1023.5f, -24)), 0x0400);          // rounds up to normal
  EXPECT_EQ(FloatToHalfBits(-std::ldexp(5.0f, -24)), 0x8005);
  EXPECT_EQ(FloatToHalfBits(0.1f), 0x2E66);

  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16Bits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBFloat16Bits(bits(0x3F808000)), 0x3F80);  // tie -> even (down)
  EXPECT_EQ(FloatToBFloat16Bits(bits(0x3F818000)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(FloatToBFloat16Bits(bits(0x3F808001)), 0x3F81);
  EXPECT_EQ(FloatToBFloat16Bits(bits(0x7F7FFFFF)), 0x7F80);  // FLT_MAX rounds to infinity
  EXPECT_EQ(FloatToBFloat16Bits(INFINITY), 0x7F80);
  EXPECT_EQ(FloatToBFloat16Bits(bits(0x7F800001)) & 0x7FC0, 0x7FC0);  // NaN stays (quiet) NaN
  EXPECT_EQ(FloatToBFloat16Bits(0.1f), 0x3DCD);
}

// Storage dtype: the same random values, rounded.
void CheckStorageDType(const std::string& dtype, StDType st, uint16_t (*convert)(float),
                       const std::string& dir32, const std::string& dir16) {
  CreateModelOptions o = SmallDeberta();
  o.layers = 1;
  ASSERT_TRUE(CreateModelDirectory(o, dir32).ok());
  o.dtype = dtype;
  ASSERT_TRUE(CreateModelDirectory(o, dir16).ok());
  EXPECT_EQ(ReadJson(dir16 + "/config.json")["torch_dtype"], dtype);
  auto f32 = OpenWeights(dir32 + "/model.safetensors");
  auto f16 = OpenWeights(dir16 + "/model.safetensors");
  ASSERT_TRUE(f32 && f16);
  EXPECT_EQ(ShapesOf(*f32), ShapesOf(*f16));
  for (const TensorView& t : f16->tensors()) {
    ASSERT_EQ(t.dtype, st) << t.name;
    std::vector<float> ref = Floats(*f32->Find(t.name));
    ASSERT_EQ(t.nbytes, ref.size() * 2) << t.name;
    for (size_t i = 0; i < ref.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      ASSERT_EQ(h, convert(ref[i])) << t.name << "[" << i << "]";
    }
  }
}

TEST(ModelCreatorTest, BFloat16Storage) {
  CheckStorageDType("bfloat16", StDType::kBF16, FloatToBFloat16Bits, ScratchDir("_32"),
                    ScratchDir("_16"));
}

TEST(ModelCreatorTest, Float16Storage) {
  CheckStorageDType("float16", StDType::kF16, FloatToHalfBits, ScratchDir("_32"), ScratchDir("_16"));
}

absl::StatusCode CreateCode(const CreateModelOptions& o, const std::string& dir,
                            const std::string& must_mention) {
  absl::Status s = CreateModelDirectory(o, dir);
  EXPECT_NE(std::string(s.message()).find(must_mention), std::string::npos)
      << "\"" << s.message() << "\" should name " << must_mention;
  return s.code();
}

TEST(ModelCreatorTest, ValidatesOptions) {
  const std::string dir = ScratchDir();
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  CreateModelOptions o = SmallDeberta();
  o.family = "bort";
  EXPECT_EQ(CreateCode(o, dir, "family"), kInvalid);
  o.family = "";
  EXPECT_EQ(CreateCode(o, dir, "family"), kInvalid);

  o = SmallDeberta();
  o.heads = 5;
  EXPECT_EQ(CreateCode(o, dir, "heads"), kInvalid);
  o = SmallT5();
  o.heads = 5;
  EXPECT_EQ(CreateCode(o, dir, "heads"), kInvalid);

  struct Field {
    const char* name;
    int CreateModelOptions::*member;
  };
  for (const Field& f : {Field{"hidden", &CreateModelOptions::hidden},
                         Field{"layers", &CreateModelOptions::layers},
                         Field{"heads", &CreateModelOptions::heads},
                         Field{"intermediate", &CreateModelOptions::intermediate},
                         Field{"vocab", &CreateModelOptions::vocab},
                         Field{"embedding_size", &CreateModelOptions::embedding_size},
                         Field{"num_labels", &CreateModelOptions::num_labels},
                         Field{"dense_out", &CreateModelOptions::dense_out}}) {
    o = SmallDeberta();
    o.*f.member = -1;
    EXPECT_EQ(CreateCode(o, dir, f.name), kInvalid) << f.name;
  }

  o = SmallDeberta();
  o.dtype = "float64";
  EXPECT_EQ(CreateCode(o, dir, "dtype"), kInvalid);
  o = SmallDeberta();
  o.init_std = -1;
  EXPECT_EQ(CreateCode(o, dir, "init_std"), kInvalid);
  o = SmallDeberta();
  o.dense_out = 8;
  EXPECT_EQ(CreateCode(o, dir, "sentence_transformers"), kInvalid);
  o = SmallT5();
  o.num_labels = 2;
  EXPECT_EQ(CreateCode(o, dir, "num_labels"), kInvalid);
  o = SmallT5();
  o.embedding_size = 16;
  EXPECT_EQ(CreateCode(o, dir, "embedding_size"), kInvalid);

  // Final configs transformers could not build a model from name the key.
  o = SmallDeberta();
  o.config_overrides = {{"num_attention_heads", 3}};
  EXPECT_EQ(CreateCode(o, dir, "num_attention_heads"), kInvalid);
  o.config_overrides = {{"hidden_size", "big"}};
  EXPECT_EQ(CreateCode(o, dir, "hidden_size"), kInvalid);
  o.config_overrides = {{"position_buckets", 0}, {"max_relative_positions", -1},
                        {"max_position_embeddings", 0}};
  EXPECT_EQ(CreateCode(o, dir, "max_position_embeddings"), kInvalid);
  o.config_overrides = {{"architectures", {"DebertaV2ForQuestionAnswering"}}};
  EXPECT_EQ(CreateCode(o, dir, "architectures"), kInvalid);
  o.config_overrides = {{"model_type", "t5"}};
  EXPECT_EQ(CreateCode(o, dir, "model_type"), kInvalid);
  o.config_overrides = json::array();
  EXPECT_EQ(CreateCode(o, dir, "config_overrides"), kInvalid);

  // Nothing was written by any of the failures.
  EXPECT_FALSE(Exists(dir));
}

TEST(ModelCreatorTest, RefusesToReplaceAModelUnlessOverwrite) {
  const std::string dir = ScratchDir();
  CreateModelOptions o = SmallDeberta();
  o.layers = 1;
  o.sentence_transformers = true;
  ASSERT_TRUE(CreateModelDirectory(o, dir).ok());
  ASSERT_TRUE(Exists(dir + "/modules.json"));
  absl::Status again = CreateModelDirectory(o, dir);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  EXPECT_NE(std::string(again.message()).find("overwrite"), std::string::npos);

  o.overwrite = true;
  o.sentence_transformers = false;
  o.hidden = 16;
  ASSERT_TRUE(CreateModelDirectory(o, dir).ok());
  EXPECT_EQ(ReadJson(dir + "/config.json")["hidden_size"], 16);
  EXPECT_FALSE(Exists(dir + "/modules.json"));  // files of the old model are gone

  // A directory with other content but no model is fine; a plain file is not.
  const std::string other = ScratchDir("_other");
  std::filesystem::create_directories(other);
  std::ofstream(other + "/README.md") << "hello";
  EXPECT_TRUE(CreateModelDirectory(o, other).ok());
  EXPECT_TRUE(Exists(other + "/README.md"));
  EXPECT_EQ(CreateModelDirectory(o, other + "/README.md").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ModelCreatorTest, CreatesParentDirectories) {
  const std::string dir = ScratchDir() + "/a/b/model";
  CreateModelOptions o = SmallT5();
  o.layers = 1;
  ASSERT_TRUE(CreateModelDirectory(o, dir).ok());
  EXPECT_TRUE(Exists(dir + "/config.json"));
  EXPECT_TRUE(Exists(dir + "/model.safetensors"));
  EXPECT_FALSE(Exists(dir + "/model.safetensors.tmp"));
}

// A hand-encoded SentencePiece ModelProto: a trainer_spec, then pieces (piece, score, type),
// then a normalizer_spec, as spm_train writes them; SentencePiece itself loads it.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string LengthDelimited(int field, const std::string& bytes) {
  return Varint(static_cast<uint64_t>(field) << 3 | 2) + Varint(bytes.size()) + bytes;
}
std::string SpmModel(const std::vector<std::string>& pieces) {
  std::string model;
  for (const std::string& p : pieces) {
    std::string piece = LengthDelimited(1, p);
    piece += std::string("\x15\x00\x00\x80\xbf", 5);  // score (field 2, fixed32) = -1.0
    // type (field 3, varint): UNKNOWN for <unk> and [UNK], CONTROL for the other special
    // pieces, else NORMAL
    const bool control = p == "<s>" || p == "</s>" || p == "<pad>" || p == "[PAD]" || p == "[CLS]" || p == "[SEP]";
    const char type = p == "<unk>" || p == "[UNK]" ? 2 : control ? 3 : 1;
    piece += std::string("\x18") + type;
    model += LengthDelimited(1, piece);
  }
  const std::string trainer_spec = LengthDelimited(1, "input.txt") + "\x18\x80\x02";  // field 3
  const std::string normalizer = LengthDelimited(1, "nmt_nfkc");
  return LengthDelimited(2, trainer_spec) + model + LengthDelimited(3, normalizer);
}

TEST(ModelCreatorTest, ReadsSentencePiecePieces) {
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>", "\xe2\x96\x81the", "a"};
  for (int i = 0; i < 300; ++i) pieces.push_back("p" + std::to_string(i));
  auto read = ReadSentencePiecePieces(SpmModel(pieces));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, pieces);

  EXPECT_FALSE(ReadSentencePiecePieces("").ok());
  EXPECT_FALSE(ReadSentencePiecePieces(LengthDelimited(2, "spec")).ok());  // no pieces
  std::string truncated = SpmModel(pieces);
  truncated.resize(truncated.size() / 2);
  EXPECT_FALSE(ReadSentencePiecePieces(truncated).ok());
  EXPECT_FALSE(ReadSentencePiecePieces("this is not a protobuf").ok());
}

TEST(ModelCreatorTest, VocabFileSetsVocabularyAndTokenizerFiles) {
  const std::string scratch = ScratchDir("_spm");
  std::filesystem::create_directories(scratch);
  // DeBERTa-v3's spm.model holds [PAD] [CLS] [SEP] [UNK] but not [MASK], which the tokenizer
  // appends after the pieces.
  std::vector<std::string> pieces = {"[PAD]", "[CLS]", "[SEP]", "[UNK]"};
  for (int i = 0; i < 60; ++i) pieces.push_back("p" + std::to_string(i));
  const std::string spm_path = scratch + "/deberta.model";
  std::ofstream(spm_path, std::ios::binary) << SpmModel(pieces);

  CreateModelOptions o = SmallDeberta();
  o.vocab = 0;
  o.layers = 1;
  o.vocab_file = spm_path;
  const std::string dir = ScratchDir();
  Shapes shapes = CreateAndReadShapes(o, dir);
  EXPECT_EQ(ReadJson(dir + "/config.json")["vocab_size"], 65);
  EXPECT_EQ(shapes["embeddings.word_embeddings.weight"], (std::vector<int64_t>{65, 32}));
  EXPECT_EQ(ReadBytes(dir + "/spm.model"), ReadBytes(spm_path));
  const json tok = ReadJson(dir + "/tokenizer_config.json");
  EXPECT_EQ(tok["tokenizer_class"], "DebertaV2Tokenizer");
  EXPECT_EQ(tok["mask_token"], "[MASK]");
  EXPECT_EQ(tok["do_lower_case"], false);
  EXPECT_EQ(tok["vocab_type"], "spm");
  EXPECT_EQ(ReadJson(dir + "/special_tokens_map.json")["cls_token"], "[CLS]");

  // An explicit vocab wins.
  o.vocab = 200;
  const std::string dir2 = ScratchDir("_explicit");
  ASSERT_TRUE(CreateModelDirectory(o, dir2).ok());
  EXPECT_EQ(ReadJson(dir2 + "/config.json")["vocab_size"], 200);

  // T5: spiece.model; its pieces hold all of <pad> </s> <unk>.
  std::vector<std::string> t5_pieces = {"<pad>", "</s>", "<unk>", "a", "b", "c"};
  const std::string t5_spm = scratch + "/t5.model";
  std::ofstream(t5_spm, std::ios::binary) << SpmModel(t5_pieces);
  CreateModelOptions t = SmallT5();
  t.vocab = 0;
  t.layers = 1;
  t.vocab_file = t5_spm;
  const std::string dir3 = ScratchDir("_t5");
  shapes = CreateAndReadShapes(t, dir3);
  EXPECT_EQ(ReadJson(dir3 + "/config.json")["vocab_size"], 6);
  EXPECT_EQ(shapes["shared.weight"], (std::vector<int64_t>{6, 32}));
  EXPECT_EQ(ReadBytes(dir3 + "/spiece.model"), ReadBytes(t5_spm));
  EXPECT_FALSE(Exists(dir3 + "/spm.model"));
  const json t5_tok = ReadJson(dir3 + "/tokenizer_config.json");
  EXPECT_EQ(t5_tok["tokenizer_class"], "T5Tokenizer");
  EXPECT_EQ(t5_tok["extra_ids"], 0);
  EXPECT_EQ(ReadJson(dir3 + "/special_tokens_map.json"),
            json({{"eos_token", "</s>"}, {"unk_token", "<unk>"}, {"pad_token", "<pad>"}}));

  // Missing and corrupt vocab files.
  t.vocab_file = scratch + "/missing.model";
  EXPECT_EQ(CreateModelDirectory(t, ScratchDir("_missing")).code(), absl::StatusCode::kNotFound);
  std::ofstream(scratch + "/bad.model", std::ios::binary) << "not a model";
  t.vocab_file = scratch + "/bad.model";
  EXPECT_EQ(CreateCode(t, ScratchDir("_bad"), "vocab_file"), absl::StatusCode::kInvalidArgument);
}

// `create` writes the special tokens of the tokenizer descriptor that serving reads: for every
// variant that writes tokenizer files, the directory loads as that family's tokenizer, each role
// is played by the descriptor's token, and tokenizer_config.json and special_tokens_map.json
// name exactly those tokens.
TEST(ModelCreatorTest, SpecialTokensRoundTripThroughTheTokenizer) {
  const std::string data = RELSERVE_TEST_DATA_DIR;
  const struct {
    const char* variant;
    std::string vocab_file;
    TokenizerFamily family;
  } cases[] = {
      {"deberta-v3", data + "/reference/tokenizer/spm.model", TokenizerFamily::kDeberta},
      {"deberta-v2", data + "/reference/tokenizer/spm.model", TokenizerFamily::kDeberta},
      {"t5", data + "/tokenizer_json/t5/spiece.model", TokenizerFamily::kT5},
      {"bert", data + "/ner/ner_bert/vocab.txt", TokenizerFamily::kBert},
      {"electra", data + "/ner/ner_bert/vocab.txt", TokenizerFamily::kBert},
      {"mpnet", data + "/ner/ner_bert/vocab.txt", TokenizerFamily::kMpnet},
      {"xlnet", data + "/reference/tokenizer_xlnet/spiece.model", TokenizerFamily::kXlnet},
      {"xlm-roberta", data + "/tokenizer_json/xlm_roberta/sentencepiece.bpe.model",
       TokenizerFamily::kXlmRoberta},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.variant);
    CreateModelOptions o = c.variant == std::string("t5") ? SmallT5(c.variant) : SmallDeberta(c.variant);
    o.layers = 1;
    o.vocab = 64;  // the vocabulary file's size does not matter here
    o.vocab_file = c.vocab_file;
    const std::string dir = ScratchDir(std::string("_") + c.variant);
    ASSERT_TRUE(CreateModelDirectory(o, dir).ok());

    auto family = ResolveTokenizerFamily(dir, TokenizerFamily::kBert);
    ASSERT_TRUE(family.ok()) << family.status();
    EXPECT_EQ(*family, c.family);
    const SpecialTokenNames names = Tokenizer::DefaultSpecialTokens(c.family);
    const json written = SpecialTokensJson(names);
    EXPECT_EQ(ReadJson(dir + "/special_tokens_map.json"), written);
    const json config = ReadJson(dir + "/tokenizer_config.json");
    for (const auto& [key, value] : written.items()) EXPECT_EQ(config[key], value) << key;
    for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                            "mask_token", "additional_special_tokens"}) {
      EXPECT_EQ(config.contains(key), written.contains(key)) << key;
    }

    auto tokenizer = Tokenizer::Load(dir, *family, 512);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    const Tokenizer& t = **tokenizer;
    const struct {
      const std::string& name;
      int id;
    } roles[] = {{names.pad, t.pad_id()}, {names.unk, t.unk_id()}, {names.cls, t.cls_id()},
                 {names.sep, t.sep_id()}, {names.eos, t.eos_id()}, {names.mask, t.mask_id()}};
    for (const auto& role : roles) {
      if (role.name.empty()) continue;
      EXPECT_GE(role.id, 0) << role.name;
      EXPECT_EQ(t.IdToPiece(role.id), role.name);
    }
    std::vector<std::string> others = names.additional;
    if (!names.bos.empty()) others.push_back(names.bos);
    for (const std::string& name : others) EXPECT_GE(t.TokenToId(name), 0) << name;
  }
}

TEST(ModelCreatorTest, SentenceTransformersLayout) {
  CreateModelOptions o = SmallDeberta();
  o.layers = 1;
  o.sentence_transformers = true;
  const std::string dir = ScratchDir();
  ASSERT_TRUE(CreateModelDirectory(o, dir).ok());
  const json modules = ReadJson(dir + "/modules.json");
  ASSERT_EQ(modules.size(), 3u);
  EXPECT_EQ(modules[0], json({{"idx", 0}, {"name", "0"}, {"path", ""},
                              {"type", "sentence_transformers.models.Transformer"}}));
  EXPECT_EQ(modules[1]["path"], "1_Pooling");
  EXPECT_EQ(modules[1]["type"], "sentence_transformers.models.Pooling");
  EXPECT_EQ(modules[2]["type"], "sentence_transformers.models.Normalize");
  const json pooling = ReadJson(dir + "/1_Pooling/config.json");
  EXPECT_EQ(pooling["word_embedding_dimension"], 32);
  EXPECT_EQ(pooling["pooling_mode_mean_tokens"], true);
  EXPECT_EQ(pooling["pooling_mode_cls_token"], false);
  EXPECT_FALSE(Exists(dir + "/2_Dense"));

  o.dense_out = 8;
  const std::string dense = ScratchDir("_dense");
  ASSERT_TRUE(CreateModelDirectory(o, dense).ok());
  const json modules2 = ReadJson(dense + "/modules.json");
  ASSERT_EQ(modules2.size(), 4u);
  EXPECT_EQ(modules2[2], json({{"idx", 2}, {"name", "2"}, {"path", "2_Dense"},
                               {"type", "sentence_transformers.models.Dense"}}));
  EXPECT_EQ(modules2[3]["type"], "sentence_transformers.models.Normalize");
  const json dense_config = ReadJson(dense + "/2_Dense/config.json");
  EXPECT_EQ(dense_config["in_features"], 32);
  EXPECT_EQ(dense_config["out_features"], 8);
  EXPECT_EQ(dense_config["bias"], true);
  EXPECT_EQ(dense_config["activation_function"], "torch.nn.modules.activation.Tanh");
  auto file = OpenWeights(dense + "/2_Dense/model.safetensors");
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(ShapesOf(*file), (Shapes{{"linear.weight", {8, 32}}, {"linear.bias", {8}}}));
}

}  // namespace
}  // namespace relserve

namespace relserve {
namespace {

// The tensors transformers 4.40.2 saves for the BERT family (hidden 32, 2 layers, 4 heads,
// intermediate 64, vocab 100).
Shapes BertShapes(const std::string& prefix, int64_t E, int64_t max_pos, int64_t types, bool relative) {
  Shapes s;
  const std::string emb = prefix + "embeddings.";
  s[emb + "word_embeddings.weight"] = {100, E};
  s[emb + "position_embeddings.weight"] = {max_pos, E};
  s[emb + "token_type_embeddings.weight"] = {types, E};
  s[emb + "LayerNorm.weight"] = {E};
  s[emb + "LayerNorm.bias"] = {E};
  for (int i = 0; i < 2; ++i) {
    const std::string l = prefix + "encoder.layer." + std::to_string(i) + ".";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      s[l + m + ".weight"] = {32, 32};
      s[l + m + ".bias"] = {32};
    }
    if (relative) s[l + "attention.self.distance_embedding.weight"] = {2 * max_pos - 1, 8};
    for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
      s[l + n + ".weight"] = {32};
      s[l + n + ".bias"] = {32};
    }
    s[l + "intermediate.dense.weight"] = {64, 32};
    s[l + "intermediate.dense.bias"] = {64};
    s[l + "output.dense.weight"] = {32, 64};
    s[l + "output.dense.bias"] = {32};
  }
  return s;
}

CreateModelOptions SmallBert(const std::string& family) { return SmallDeberta(family); }

TEST(ModelCreatorTest, BertFamilyLayouts) {
  // BertModel: with its pooler.
  Shapes want = BertShapes("", 32, 512, 2, false);
  want["pooler.dense.weight"] = {32, 32};
  want["pooler.dense.bias"] = {32};
  EXPECT_EQ(CreateAndReadShapes(SmallBert("bert"), ScratchDir("_bert")), want);

  // BertForSequenceClassification with relative_key: "bert." backbone with pooler, classifier.
  CreateModelOptions o = SmallBert("bert");
  o.num_labels = 3;
  o.config_overrides = {{"position_embedding_type", "relative_key"}};
  want = BertShapes("bert.", 32, 512, 2, true);
  want["bert.pooler.dense.weight"] = {32, 32};
  want["bert.pooler.dense.bias"] = {32};
  want["classifier.weight"] = {3, 32};
  want["classifier.bias"] = {3};
  EXPECT_EQ(CreateAndReadShapes(o, ScratchDir("_bert_cls")), want);

  // RobertaForSequenceClassification: no pooler, classifier.dense / out_proj; 514 positions,
  // one token type.
  o = SmallBert("roberta");
  o.num_labels = 2;
  want = BertShapes("roberta.", 32, 514, 1, false);
  want["classifier.dense.weight"] = {32, 32};
  want["classifier.dense.bias"] = {32};
  want["classifier.out_proj.weight"] = {2, 32};
  want["classifier.out_proj.bias"] = {2};
  const std::string roberta_dir = ScratchDir("_roberta_cls");
  EXPECT_EQ(CreateAndReadShapes(o, roberta_dir), want);
  const json roberta = ReadJson(roberta_dir + "/config.json");
  EXPECT_EQ(roberta["pad_token_id"], 1);
  EXPECT_EQ(roberta["model_type"], "roberta");

  // ElectraModel with embedding_size 16: 16-wide embeddings and embeddings_project; no pooler.
  o = SmallBert("electra");
  o.embedding_size = 16;
  want = BertShapes("", 16, 512, 2, false);
  want["embeddings_project.weight"] = {32, 16};
  want["embeddings_project.bias"] = {32};
  const std::string electra_dir = ScratchDir("_electra");
  EXPECT_EQ(CreateAndReadShapes(o, electra_dir), want);
  EXPECT_EQ(ReadJson(electra_dir + "/config.json")["embedding_size"], 16);
}

// *ForMaskedLM as transformers 4.40.2's save_pretrained writes model.safetensors: the backbone
// under its prefix without a pooler (add_pooling_layer=False), the head's transform and bias,
// and no decoder weight while it is tied to the word embeddings (nor the decoder.bias alias).
TEST(ModelCreatorTest, MaskedLmLayouts) {
  CreateModelOptions o = SmallBert("bert");
  o.config_overrides = {{"architectures", {"BertForMaskedLM"}}};
  Shapes want = BertShapes("bert.", 32, 512, 2, false);
  want["cls.predictions.bias"] = {100};
  want["cls.predictions.transform.dense.weight"] = {32, 32};
  want["cls.predictions.transform.dense.bias"] = {32};
  want["cls.predictions.transform.LayerNorm.weight"] = {32};
  want["cls.predictions.transform.LayerNorm.bias"] = {32};
  EXPECT_EQ(CreateAndReadShapes(o, ScratchDir("_bert_mlm")), want);
  // tie_word_embeddings false: the decoder is the head's own.
  o.config_overrides["tie_word_embeddings"] = false;
  want["cls.predictions.decoder.weight"] = {100, 32};
  EXPECT_EQ(CreateAndReadShapes(o, ScratchDir("_bert_mlm_untied")), want);

  // XLMRobertaForMaskedLM: lm_head.dense, layer_norm and bias.
  o = SmallBert("xlm-roberta");
  o.config_overrides = {{"architectures", {"XLMRobertaForMaskedLM"}}};
  want = BertShapes("roberta.", 32, 514, 1, false);
  want["lm_head.bias"] = {100};
  want["lm_head.dense.weight"] = {32, 32};
  want["lm_head.dense.bias"] = {32};
  want["lm_head.layer_norm.weight"] = {32};
  want["lm_head.layer_norm.bias"] = {32};
  EXPECT_EQ(CreateAndReadShapes(o, ScratchDir("_xlmr_mlm")), want);

  // ElectraForMaskedLM with embedding_size 16: the generator head projects to 16 features and
  // generator_lm_head (tied, 16 wide) keeps its own bias.
  o = SmallBert("electra");
  o.embedding_size = 16;
  o.config_overrides = {{"architectures", {"ElectraForMaskedLM"}}};
  want = BertShapes("electra.", 16, 512, 2, false);
  want["electra.embeddings_project.weight"] = {32, 16};
  want["electra.embeddings_project.bias"] = {32};
  want["generator_predictions.dense.weight"] = {16, 32};
  want["generator_predictions.dense.bias"] = {16};
  want["generator_predictions.LayerNorm.weight"] = {16};
  want["generator_predictions.LayerNorm.bias"] = {16};
  want["generator_lm_head.bias"] = {100};
  EXPECT_EQ(CreateAndReadShapes(o, ScratchDir("_electra_mlm")), want);

  // DebertaV2ForMaskedLM with embedding_size 16: the transform's dense goes from hidden to
  // embedding_size, as DebertaV2PredictionHeadTransform does.
  o = SmallDeberta();
  o.embedding_size = 16;
  o.config_overrides = {{"architectures", {"DebertaV2ForMaskedLM"}}};
  const Shapes deberta = CreateAndReadShapes(o, ScratchDir("_deberta_mlm"));
  EXPECT_EQ(deberta.count("pooler.dense.weight"), 0u);
  ASSERT_EQ(deberta.count("deberta.embeddings.word_embeddings.weight"), 1u);
  EXPECT_EQ(deberta.at("deberta.embeddings.word_embeddings.weight")[1], 16);
  const std::map<std::string, std::vector<int64_t>> head = {
      {"cls.predictions.bias", {deberta.at("deberta.embeddings.word_embeddings.weight")[0]}},
      {"cls.predictions.transform.dense.weight", {16, 32}},
      {"cls.predictions.transform.dense.bias", {16}},
      {"cls.predictions.transform.LayerNorm.weight", {16}},
      {"cls.predictions.transform.LayerNorm.bias", {16}}};
  size_t head_tensors = 0;
  for (const auto& [name, shape] : deberta) {
    if (name.rfind("cls.", 0) != 0) continue;
    ++head_tensors;
    ASSERT_EQ(head.count(name), 1u) << name;
    EXPECT_EQ(shape, head.at(name)) << name;
  }
  EXPECT_EQ(head_tensors, head.size());
}

TEST(ModelCreatorTest, BertDefaultConfig) {
  CreateModelOptions o;
  o.family = "bert";
  auto config = BuildModelConfig(o);
  ASSERT_TRUE(config.ok()) << config.status();
  // As BertConfig().save_pretrained writes bert-base-uncased's shape.
  const json expected = json::parse(R"({
    "architectures": ["BertModel"],
    "attention_probs_dropout_prob": 0.1,
    "classifier_dropout": null,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "torch_dtype": "float32",
    "transformers_version": "4.40.2",
    "type_vocab_size": 2,
    "use_cache": true,
    "vocab_size": 30522
  })");
  EXPECT_EQ(*config, expected) << config->dump(2);
  // Other families take no model_type of this one.
  o.config_overrides = {{"model_type", "roberta"}};
  EXPECT_EQ(BuildModelConfig(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelCreatorTest, BertVocabFileIsWordPieceLines) {
  const std::string scratch = ScratchDir("_files");
  std::filesystem::create_directories(scratch);
  const std::string vocab = scratch + "/vocab.txt";
  std::ofstream(vocab) << "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld";  // last line without \n
  CreateModelOptions o = SmallBert("bert");
  o.vocab = 0;
  o.vocab_file = vocab;
  const std::string dir = ScratchDir();
  ASSERT_TRUE(CreateModelDirectory(o, dir).ok());
  EXPECT_EQ(ReadJson(dir + "/config.json")["vocab_size"], 7);
  EXPECT_EQ(ReadBytes(dir + "/vocab.txt"), ReadBytes(vocab));
  EXPECT_EQ(ReadJson(dir + "/tokenizer_config.json")["tokenizer_class"], "BertTokenizer");
  // RoBERTa's byte-level BPE needs vocab.json and merges.txt: no single vocabulary file.
  o.family = "roberta";
  EXPECT_EQ(CreateCode(o, ScratchDir("_roberta"), "vocab_file"), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace relserve
