// The engine against the naive port of transformers' modeling_t5.py (naive_reference.h, itself
// checked against transformers in naive_reference_test), one test per configuration switch the
// reference honours: the feed-forward variants, the relative-position buckets, d_kv * num_heads
// != d_model, the embedding tensor names, T5ForConditionalGeneration checkpoints and mT5.
// Every hidden state must match the port within 1e-4 at the unpadded positions of a padded
// batch (rows of 70, 33, 17 and 1 tokens, past max_exact and max_distance) and of an unpadded
// one, and each test shows that its switch matters: the outputs with the switch flipped differ
// by more than 100x the tolerance.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/model/engine.h"
#include "server/checkpoint/safetensors_checkpoint.h"
#include "server/safetensors/safetensors_writer.h"
#include "server/tools/model_creator.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "tests/model/naive_reference.h"
#include "tests/model/reference_fixture.h"
#include "tests/model/switch_test_support.h"

namespace relserve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::MaxAbsDiffMasked;
using namespace testing;  // NOLINT: the switch-test helpers

class T5SwitchTest : public SwitchTestBase {
 protected:
  // T5 (v1.0 layout: relu feed-forward, 32 buckets, max_distance 128), d_ff 64. `overrides`
  // are merged into config.json (null removes a key); the weights follow the final config.
  static CreateModelOptions Options(const json& overrides, const std::string& family = "t5") {
    return TinyOptions(family, overrides);
  }
  // A relative bias of std 1 (not 0.2), so that a wrong bucket shows.
  void AdjustWeights(F32Map* weights) override {
    Scale(weights, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", 5.0f);
  }
  std::string Create(const std::string& name, const json& overrides, const Edit& edit = nullptr) {
    return CreateFrom(name, Options(overrides), edit);
  }
  // T5 encoders have no head: the engine gives no logits.
  EngineOutputs Check(const std::string& dir, const std::string& label) {
    EngineOutputs got = SwitchTestBase::Check(dir, label);
    EXPECT_EQ(got.count("logits"), 0u) << label;
    return got;
  }
};

// ---------------------------------------------------------------------------------------------

TEST_F(T5SwitchTest, FeedForwardRelu) {
  // T5DenseActDense with ReLU: wo(relu(wi(x))).
  const auto relu = Check(Create("relu", {{"feed_forward_proj", "relu"}}), "feed_forward_proj relu");
  // The same weights through the exact gelu.
  const auto gelu = Check(Create("gelu", {{"feed_forward_proj", "gelu"}}), "feed_forward_proj gelu");
  EXPECT_GT(Diff(relu, gelu, batch_), kMatters);
  // The feed-forward reaches the output: scaling wo of block 1 changes it.
  const auto scaled = Check(Create("relu_wo", {{"feed_forward_proj", "relu"}},
                                   [](json&, F32Map& w) { Scale(&w, "encoder.block.1.layer.1.DenseReluDense.wo.weight", 2.0f); }),
                            "feed_forward_proj relu, wo * 2");
  EXPECT_GT(Diff(relu, scaled, batch_), kMatters);
  // An explicit is_gated_act wins over the one derived from feed_forward_proj: gated relu.
  const auto gated = Check(Create("relu_gated", {{"feed_forward_proj", "relu"}, {"is_gated_act", true}}),
                           "feed_forward_proj relu, is_gated_act true");
  EXPECT_GT(Diff(relu, gated, batch_), kMatters);
}

TEST_F(T5SwitchTest, FeedForwardGelu) {
  // "gelu" (not gated): dense_act_fn gelu, the exact erf form, one wi.
  const auto gelu = Check(Create("gelu", {{"feed_forward_proj", "gelu"}}), "feed_forward_proj gelu");
  const auto silu = Check(Create("silu", {{"feed_forward_proj", "silu"}}), "feed_forward_proj silu");
  const auto relu = Check(Create("relu", {{"feed_forward_proj", "relu"}}), "feed_forward_proj relu");
  EXPECT_GT(Diff(gelu, relu, batch_), kMatters);
  EXPECT_GT(Diff(gelu, silu, batch_), kMatters);
}

TEST_F(T5SwitchTest, FeedForwardGatedGelu) {
  // "gated-gelu": T5DenseGatedActDense, wo(act(wi_0 x) * wi_1 x), with act = gelu_new (the tanh
  // form), as T5Config maps it for backwards compatibility.
  const std::string dir = Create("gated_gelu", {{"feed_forward_proj", "gated-gelu"}});
  const auto gated_gelu = Check(dir, "feed_forward_proj gated-gelu");
  const auto gated_silu = Check(Create("gated_silu", {{"feed_forward_proj", "gated-silu"}}), "feed_forward_proj gated-silu");
  EXPECT_GT(Diff(gated_gelu, gated_silu, batch_), kMatters);
  // The t5-v1.1 family (gated-gelu, untied embeddings) is the same model.
  const auto v11 = Check(CreateFrom("v11", Options(json::object(), "t5-v1.1")), "t5-v1.1");
  EXPECT_LE(Diff(v11, gated_gelu, batch_), kTolerance);
  // An explicit dense_act_fn in config.json wins over the one derived from feed_forward_proj.
  const std::string exact_dir =
      Create("gated_exact", {{"feed_forward_proj", "gated-gelu"}, {"dense_act_fn", "gelu"}});
  const auto exact = Check(exact_dir, "feed_forward_proj gated-gelu, dense_act_fn gelu");
  const auto relu_dir = Check(Create("gated_relu", {{"feed_forward_proj", "gated-gelu"}, {"dense_act_fn", "relu"}}),
                              "feed_forward_proj gated-gelu, dense_act_fn relu");
  EXPECT_GT(Diff(relu_dir, gated_gelu, batch_), kMatters);
  // gelu_new and gelu differ by less than 100x the tolerance here; the engine must be at least
  // 10x closer to the port's gelu_new than to its gelu (and the other way round).
  const naive::Outputs naive_new = RunNaive(dir, batch_);
  const naive::Outputs naive_exact = RunNaive(exact_dir, batch_);
  for (const char* name : {"hidden_state_1", "hidden_state_2"}) {
    const double new_to_own = Diff(gated_gelu, naive_new, batch_, name);
    const double new_to_exact = Diff(gated_gelu, naive_exact, batch_, name);
    EXPECT_GT(new_to_exact, 10 * std::max(new_to_own, 1e-6)) << name << ": " << new_to_exact << " vs " << new_to_own;
    const double exact_to_own = Diff(exact, naive_exact, batch_, name);
    const double exact_to_new = Diff(exact, naive_new, batch_, name);
    EXPECT_GT(exact_to_new, 10 * std::max(exact_to_own, 1e-6)) << name << ": " << exact_to_new << " vs " << exact_to_own;
  }
}

TEST_F(T5SwitchTest, FeedForwardGatedSilu) {
  const auto gated_silu = Check(Create("gated_silu", {{"feed_forward_proj", "gated-silu"}}), "feed_forward_proj gated-silu");
  const auto gated_relu = Check(Create("gated_relu", {{"feed_forward_proj", "gated-relu"}}), "feed_forward_proj gated-relu");
  EXPECT_GT(Diff(gated_silu, gated_relu, batch_), kMatters);
  // The gate's second projection takes part: wi_1 scaled changes the output.
  const auto scaled = Check(Create("gated_silu_wi1", {{"feed_forward_proj", "gated-silu"}},
                                   [](json&, F32Map& w) { Scale(&w, "encoder.block.0.layer.1.DenseReluDense.wi_1.weight", -1.0f); }),
                            "feed_forward_proj gated-silu, wi_1 * -1");
  EXPECT_GT(Diff(gated_silu, scaled, batch_), kMatters);
}

TEST_F(T5SwitchTest, RelativeAttentionBucketsAndMaxDistance) {
  // 16 buckets (8 per direction, 4 exact) up to a distance of 20; rows of 70 and 33 tokens go
  // past it. Same [16, heads] bias table with max_distance 128: other buckets.
  const auto near = Check(Create("b16_d20", {{"relative_attention_num_buckets", 16}, {"relative_attention_max_distance", 20}}),
                          "16 buckets, max_distance 20");
  const auto far = Check(Create("b16_d128", {{"relative_attention_num_buckets", 16}, {"relative_attention_max_distance", 128}}),
                         "16 buckets, max_distance 128");
  EXPECT_GT(Diff(near, far, batch_), kMatters);
  // The defaults (32, 128) and an odd bucket count.
  Check(Create("b32_d128", json::object()), "32 buckets, max_distance 128");
  Check(Create("b11_d9", {{"relative_attention_num_buckets", 11}, {"relative_attention_max_distance", 9}}),
        "11 buckets, max_distance 9");
  // The bias is block 0's, shared by every block: block 1 has none of its own.
  const auto no_bias = Check(Create("b16_d20_zero", {{"relative_attention_num_buckets", 16}, {"relative_attention_max_distance", 20}},
                                    [](json&, F32Map& w) {
                                      Scale(&w, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", 0.0f);
                                    }),
                             "16 buckets, max_distance 20, zero bias");
  EXPECT_GT(Diff(near, no_bias, batch_, "hidden_state_2"), kMatters);
}

TEST_F(T5SwitchTest, LayerNormEpsilon) {
  const auto small = Check(Create("eps_small", json::object()), "layer_norm_epsilon 1e-6");
  const auto large = Check(Create("eps_large", {{"layer_norm_epsilon", 0.5}}), "layer_norm_epsilon 0.5");
  EXPECT_GT(Diff(small, large, batch_), kMatters);
}

TEST_F(T5SwitchTest, InnerDimDiffersFromDModel) {
  // d_kv * num_heads = 64 (and 16) with d_model 32.
  const auto wide = Check(Create("dkv16", {{"d_kv", 16}}), "d_kv 16");
  const auto narrow = Check(Create("dkv4", {{"d_kv", 4}}), "d_kv 4");
  const auto plain = Check(Create("dkv8", json::object()), "d_kv 8");
  EXPECT_GT(Diff(wide, plain, batch_), kMatters);
  EXPECT_GT(Diff(narrow, plain, batch_), kMatters);
  Check(Create("dkv16_gated", {{"d_kv", 16}, {"feed_forward_proj", "gated-gelu"}, {"num_heads", 2}}),
        "d_kv 16, 2 heads, gated-gelu");
}

TEST_F(T5SwitchTest, EmbeddingFromSharedOrEmbedTokens) {
  // T5EncoderModel ties encoder.embed_tokens to shared: a checkpoint may hold either name.
  const auto both = Check(Create("both", json::object()), "shared.weight and encoder.embed_tokens.weight");
  const auto shared = Check(Create("shared_only", json::object(),
                                   [](json&, F32Map& w) { w.erase("encoder.embed_tokens.weight"); }),
                            "only shared.weight");
  const auto embed_tokens = Check(Create("embed_tokens_only", json::object(),
                                         [](json&, F32Map& w) { w.erase("shared.weight"); }),
                                  "only encoder.embed_tokens.weight");
  EXPECT_LE(Diff(shared, both, batch_), kTolerance);
  EXPECT_LE(Diff(embed_tokens, both, batch_), kTolerance);
  // The tensor present is the one used: other values under either name change the output.
  const auto shared_other = Check(Create("shared_other", json::object(),
                                         [](json&, F32Map& w) {
                                           w.erase("encoder.embed_tokens.weight");
                                           Scale(&w, "shared.weight", -2.0f);
                                         }),
                                  "only shared.weight, other values");
  const auto embed_other = Check(Create("embed_tokens_other", json::object(),
                                        [](json&, F32Map& w) {
                                          w.erase("shared.weight");
                                          Scale(&w, "encoder.embed_tokens.weight", -2.0f);
                                        }),
                                 "only encoder.embed_tokens.weight, other values");
  EXPECT_GT(Diff(shared_other, both, batch_, "hidden_state_0"), kMatters);
  EXPECT_GT(Diff(embed_other, both, batch_, "hidden_state_0"), kMatters);
}

// The decoder and LM head of a T5ForConditionalGeneration state dict (transformers' names),
// random, for a model with `layers` blocks.
void AddDecoderAndLmHead(F32Map* w, int layers, int64_t d_model, int64_t inner, int64_t d_ff, int64_t heads,
                         int64_t buckets, int64_t vocab) {
  std::mt19937_64 rng(99);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    F32Tensor t{shape, std::vector<float>(static_cast<size_t>(n))};
    for (float& v : t.data) v = normal(rng);
    (*w)[name] = std::move(t);
  };
  add("decoder.embed_tokens.weight", {vocab, d_model});
  for (int i = 0; i < layers; ++i) {
    const std::string b = "decoder.block." + std::to_string(i) + ".layer.";
    for (const char* p : {"q", "k", "v"}) add(b + "0.SelfAttention." + p + ".weight", {inner, d_model});
    add(b + "0.SelfAttention.o.weight", {d_model, inner});
    if (i == 0) add(b + "0.SelfAttention.relative_attention_bias.weight", {buckets, heads});
    add(b + "0.layer_norm.weight", {d_model});
    for (const char* p : {"q", "k", "v"}) add(b + "1.EncDecAttention." + p + ".weight", {inner, d_model});
    add(b + "1.EncDecAttention.o.weight", {d_model, inner});
    add(b + "1.layer_norm.weight", {d_model});
    add(b + "2.DenseReluDense.wi.weight", {d_ff, d_model});
    add(b + "2.DenseReluDense.wo.weight", {d_model, d_ff});
    add(b + "2.layer_norm.weight", {d_model});
  }
  add("decoder.final_layer_norm.weight", {d_model});
  add("lm_head.weight", {vocab, d_model});
}

TEST_F(T5SwitchTest, ConditionalGenerationCheckpointRunsItsEncoder) {
  const auto encoder_only = Check(Create("encoder", json::object()), "T5EncoderModel");
  const Edit seq2seq = [](json& c, F32Map& w) {
    c["architectures"] = {"T5ForConditionalGeneration"};
    AddDecoderAndLmHead(&w, 2, 32, 32, 64, 4, 32, kVocab);
  };
  const auto full = Check(Create("seq2seq", json::object(), seq2seq), "T5ForConditionalGeneration");
  EXPECT_LE(Diff(full, encoder_only, batch_), kTolerance);
  // T5Model (encoder + decoder, no LM head) too.
  Check(Create("t5model", json::object(),
               [&](json& c, F32Map& w) {
                 seq2seq(c, w);
                 c["architectures"] = {"T5Model"};
                 w.erase("lm_head.weight");
               }),
        "T5Model");
  // The decoder's self-attention weights in the encoder's place give another output, so the
  // comparison above would catch an engine that read them.
  const std::string swapped = Create("swapped", json::object(), [&](json& c, F32Map& w) {
    seq2seq(c, w);
    for (int i = 0; i < 2; ++i) {
      for (const char* p : {"q", "k", "v", "o"}) {
        const std::string tail = std::to_string(i) + ".layer.0.SelfAttention." + p + ".weight";
        w["encoder.block." + tail] = w["decoder.block." + tail];
      }
    }
  });
  EXPECT_GT(Diff(full, RunNaive(swapped, batch_), batch_), kMatters);
}

// A T5 config as mT5 (MT5EncoderModel).
void AsMt5(json& c, F32Map&) {
  c["model_type"] = "mt5";
  c["architectures"] = {"MT5EncoderModel"};
  c["tie_word_embeddings"] = false;
}

TEST_F(T5SwitchTest, Mt5ModelType) {
  // model_type "mt5": the T5 encoder.
  const Edit as_mt5 = AsMt5;
  const json gated = {{"feed_forward_proj", "gated-gelu"}};
  const auto t5 = Check(Create("t5_gated", gated), "t5, gated-gelu");
  const auto mt5 = Check(Create("mt5", gated, as_mt5), "mt5, gated-gelu");
  EXPECT_LE(Diff(mt5, t5, batch_), kTolerance);
  // An mT5 with a relu feed-forward in its config is honoured as such.
  const auto mt5_relu = Check(Create("mt5_relu", json::object(), as_mt5), "mt5, relu");
  EXPECT_GT(Diff(mt5_relu, mt5, batch_), kMatters);
}

TEST_F(T5SwitchTest, Mt5DefaultFeedForwardIsGatedGelu) {
  // Without feed_forward_proj / dense_act_fn / is_gated_act, MT5Config.__init__ defaults to
  // feed_forward_proj "gated-gelu" (T5Config's default is "relu").
  const json gated = {{"feed_forward_proj", "gated-gelu"}};
  const Edit defaults = [](json& c, F32Map& w) {
    AsMt5(c, w);
    c.erase("feed_forward_proj");
    c.erase("dense_act_fn");
    c.erase("is_gated_act");
  };
  const auto t5 = Check(Create("t5_gated", gated), "t5, gated-gelu");
  const auto mt5_defaults = Check(Create("mt5_defaults", gated, defaults), "mt5, default feed_forward_proj");
  EXPECT_LE(Diff(mt5_defaults, t5, batch_), kTolerance);
  // The model type matters: the same directory as "t5" defaults to a relu T5DenseActDense,
  // whose wi.weight the checkpoint lacks; the engine refuses it, and so does the port.
  const std::string as_t5 = Create("t5_defaults", gated, [&](json& c, F32Map& w) {
    defaults(c, w);
    c["model_type"] = "t5";
    c["architectures"] = {"T5EncoderModel"};
  });
  EXPECT_FALSE(Engine::Load(as_t5, EngineOptions{}).ok());
  EXPECT_FALSE(naive::Forward(as_t5, batch_).ok());
}

}  // namespace
}  // namespace relserve
