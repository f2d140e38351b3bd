// The engine against the naive port of transformers' modeling_deberta_v2.py
// (naive_reference.h, itself checked against transformers in naive_reference_test), one test
// per configuration switch the reference honours. Each test builds tiny random models that flip
// the switch, requires every hidden state (and the logits) to match the port within 1e-4 at the
// unpadded positions of a padded batch (rows of 70, 33, 17 and 1 tokens: longer than the exact
// window of the log buckets and than max_relative_positions where that is set) and of an
// unpadded one, and shows that the switch matters: the outputs with the switch flipped differ by
// more than 100x the tolerance, so no test can pass by ignoring its switch.
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

class DebertaSwitchTest : public SwitchTestBase {
 protected:
  // deberta-v3 layout (relative attention, c2p + p2c, share_att_key, layer-normed relative
  // embeddings, no absolute positions); position_buckets 32 so that the rows of 70 and 33
  // tokens reach the log buckets. `overrides` are merged into config.json (null removes a
  // key); the weights follow the final config.
  static CreateModelOptions Options(const json& overrides, const std::string& family = "deberta-v3") {
    json merged = {{"position_buckets", 32}};
    for (const auto& [key, value] : overrides.items()) merged[key] = value;
    return TinyOptions(family, merged);
  }
  std::string Create(const std::string& name, const json& overrides, const Edit& edit = nullptr) {
    return CreateFrom(name, Options(overrides), edit);
  }
};

// ---------------------------------------------------------------------------------------------

TEST_F(DebertaSwitchTest, RelativeAttentionOffWithoutPosAttType) {
  const auto off = Check(Create("off", {{"relative_attention", false}, {"pos_att_type", nullptr},
                                        {"position_biased_input", true}}),
                         "relative_attention false, no pos_att_type");
  const auto on = Check(Create("on", {{"position_biased_input", true}}), "relative_attention true");
  EXPECT_GT(Diff(off, on, batch_), kMatters);
  // relative_attention true with no pos_att_type: a relative table that no term uses.
  const auto unused = Check(Create("unused", {{"pos_att_type", nullptr}, {"position_biased_input", true}}),
                            "relative_attention true, no pos_att_type");
  EXPECT_LE(Diff(unused, off, batch_), kTolerance);  // same weights, nothing relative computed
}

TEST_F(DebertaSwitchTest, RelativeAttentionOffScaleStillCountsPosAttType) {
  // With relative_attention false there is no relative term, but DisentangledSelfAttention still
  // divides by sqrt(head_size * (1 + #c2p + #p2c)). The three models share every weight.
  const json base = {{"relative_attention", false}, {"position_biased_input", true}};
  json both = base, c2p = base, none = base;
  both["pos_att_type"] = {"p2c", "c2p"};
  c2p["pos_att_type"] = {"c2p"};
  none["pos_att_type"] = nullptr;
  const auto out_both = Check(Create("both", both), "relative_attention false, p2c+c2p");
  const auto out_c2p = Check(Create("c2p", c2p), "relative_attention false, c2p");
  const auto out_none = Check(Create("none", none), "relative_attention false, none");
  EXPECT_GT(Diff(out_both, out_none, batch_), kMatters);
  EXPECT_GT(Diff(out_c2p, out_none, batch_), kMatters);
  EXPECT_GT(Diff(out_both, out_c2p, batch_), kMatters);
}

TEST_F(DebertaSwitchTest, PosAttTypeStringEqualsList) {
  // DebertaV2Config turns "p2c|c2p" into [x.strip() for x in s.lower().split("|")].
  // share_att_key false so that the string also decides which projections are loaded.
  const auto list = Check(Create("list", {{"share_att_key", false}}), "pos_att_type list");
  const auto str = Check(Create("str", {{"share_att_key", false}, {"pos_att_type", "p2c|c2p"}}),
                         "pos_att_type \"p2c|c2p\"");
  const auto upper = Check(Create("upper", {{"share_att_key", false}, {"pos_att_type", " C2P | P2C "}}),
                           "pos_att_type \" C2P | P2C \"");
  // "p2p" (DeBERTa v1) is neither a term nor counted in the scale by DebertaV2.
  const auto p2p = Check(Create("p2p", {{"share_att_key", false}, {"pos_att_type", "p2c|c2p|p2p"}}),
                         "pos_att_type \"p2c|c2p|p2p\"");
  const auto one = Check(Create("one", {{"share_att_key", false}, {"pos_att_type", "c2p"}}),
                         "pos_att_type \"c2p\"");
  EXPECT_LE(Diff(str, list, batch_), kTolerance);
  EXPECT_LE(Diff(upper, list, batch_), kTolerance);
  EXPECT_LE(Diff(p2p, list, batch_), kTolerance);
  EXPECT_GT(Diff(str, one, batch_), kMatters);
}

TEST_F(DebertaSwitchTest, C2POnly) {
  for (const bool share : {true, false}) {
    const std::string tag = share ? "shared" : "separate";
    const auto c2p = Check(Create("c2p_" + tag, {{"pos_att_type", {"c2p"}}, {"share_att_key", share}}),
                           "c2p only, share_att_key " + tag);
    const auto both = Check(Create("both_" + tag, {{"share_att_key", share}}), "c2p+p2c, share_att_key " + tag);
    EXPECT_GT(Diff(c2p, both, batch_), kMatters) << tag;
  }
}

TEST_F(DebertaSwitchTest, P2COnly) {
  for (const bool share : {true, false}) {
    const std::string tag = share ? "shared" : "separate";
    const auto p2c = Check(Create("p2c_" + tag, {{"pos_att_type", {"p2c"}}, {"share_att_key", share}}),
                           "p2c only, share_att_key " + tag);
    const auto both = Check(Create("both_" + tag, {{"share_att_key", share}}), "c2p+p2c, share_att_key " + tag);
    EXPECT_GT(Diff(p2c, both, batch_), kMatters) << tag;
  }
}

TEST_F(DebertaSwitchTest, LogBucketPositions) {
  // position_buckets 32 (mid 16): |q - k| > 16 goes to log buckets scaled by
  // max_relative_positions (512 when -1; 64 here, where distances near 69 reach the span edge).
  const auto buckets = Check(Create("b32", json::object()), "position_buckets 32");
  const auto buckets_64 = Check(Create("b32_m64", {{"max_relative_positions", 64}}),
                                "position_buckets 32, max_relative_positions 64");
  // Same 64-row table, plain clamped distances instead of buckets.
  const auto plain = Check(Create("m32", {{"position_buckets", -1}, {"max_relative_positions", 32}}),
                           "no buckets, max_relative_positions 32");
  EXPECT_GT(Diff(buckets, buckets_64, batch_), kMatters);
  EXPECT_GT(Diff(buckets, plain, batch_), kMatters);
  // max_relative_positions 20, barely above mid: steep log buckets, most distances past the span.
  const auto steep = Check(Create("b32_m20", {{"max_relative_positions", 20}}),
                           "position_buckets 32, max_relative_positions 20");
  EXPECT_GT(Diff(steep, buckets_64, batch_), kMatters);
}

TEST_F(DebertaSwitchTest, NoBucketsClampedAtMaxRelativePositions) {
  // position_buckets <= 0: relative distances are q - k, clamped to the span of 16 in c2p/p2c
  // (rows of 70, 33 and 17 tokens go past it).
  const auto minus1 = Check(Create("bm1", {{"position_buckets", -1}, {"max_relative_positions", 16}}),
                            "position_buckets -1, max_relative_positions 16");
  const auto zero = Check(Create("b0", {{"position_buckets", 0}, {"max_relative_positions", 16}}),
                          "position_buckets 0, max_relative_positions 16");
  // Same 32-row table read through log buckets of mid 8.
  const auto bucketed = Check(Create("b16", {{"position_buckets", 16}, {"max_relative_positions", 16}}),
                              "position_buckets 16, max_relative_positions 16");
  EXPECT_LE(Diff(minus1, zero, batch_), kTolerance);
  EXPECT_GT(Diff(minus1, bucketed, batch_), kMatters);
}

TEST_F(DebertaSwitchTest, NoBucketsMaxRelativePositionsFromMaxPositionEmbeddings) {
  // max_relative_positions -1 with no buckets: the span is max_position_embeddings (128 here,
  // a 256-row table), so nothing is clamped.
  const auto full = Check(Create("full", {{"position_buckets", -1}, {"max_relative_positions", -1},
                                          {"max_position_embeddings", 128}}),
                          "no buckets, max_relative_positions -1");
  const auto clamped = Check(Create("clamped", {{"position_buckets", -1}, {"max_relative_positions", 16},
                                                {"max_position_embeddings", 128}}),
                             "no buckets, max_relative_positions 16");
  EXPECT_GT(Diff(full, clamped, batch_), kMatters);
}

TEST_F(DebertaSwitchTest, ShareAttKey) {
  // true: the relative embeddings go through query_proj / key_proj (with their biases);
  // false: through pos_query_proj / pos_key_proj.
  const auto shared = Check(Create("shared", {{"share_att_key", true}}), "share_att_key true");
  const auto separate = Check(Create("separate", {{"share_att_key", false}}), "share_att_key false");
  EXPECT_GT(Diff(shared, separate, batch_), kMatters);
  // The biases of query_proj / key_proj take part in the shared positional projections.
  const auto no_bias = Check(Create("shared_nobias", {{"share_att_key", true}},
                                    [](json&, F32Map& w) {
                                      for (int l = 0; l < 2; ++l) {
                                        const std::string p = "encoder.layer." + std::to_string(l) + ".attention.self.";
                                        Scale(&w, p + "query_proj.bias", 0.0f);
                                        Scale(&w, p + "key_proj.bias", 0.0f);
                                      }
                                    }),
                             "share_att_key true, zero q/k biases");
  EXPECT_GT(Diff(shared, no_bias, batch_), kMatters);
}

TEST_F(DebertaSwitchTest, NormRelEbd) {
  const auto layer_norm = Check(Create("ln", {{"norm_rel_ebd", "layer_norm"}}), "norm_rel_ebd layer_norm");
  const auto none = Check(Create("none", {{"norm_rel_ebd", "none"}}), "norm_rel_ebd none");
  const auto both = Check(Create("both", {{"norm_rel_ebd", "none|layer_norm"}}), "norm_rel_ebd none|layer_norm");
  EXPECT_GT(Diff(layer_norm, none, batch_), kMatters);
  EXPECT_LE(Diff(layer_norm, both, batch_), kTolerance);
}

TEST_F(DebertaSwitchTest, PositionBiasedInput) {
  const auto absolute = Check(Create("abs", {{"position_biased_input", true}}), "position_biased_input true");
  const auto relative = Check(Create("rel", {{"position_biased_input", false}}), "position_biased_input false");
  EXPECT_GT(Diff(absolute, relative, batch_), kMatters);
}

TEST_F(DebertaSwitchTest, TokenTypeIdsForPairs) {
  const std::string dir = Create("types", {{"type_vocab_size", 2}, {"position_biased_input", true}});
  const PaddedBatch pairs = MakeBatch({70, 33, 17, 1}, kVocab, 11, /*pairs=*/true);
  const PaddedBatch single = MakeBatch({70, 33, 17, 1}, kVocab, 11, /*pairs=*/false);  // same ids, no types
  const auto with_types = Check(dir, pairs, "type_vocab_size 2, pairs");
  const auto without = Check(dir, single, "type_vocab_size 2, no token_type_ids");
  EXPECT_GT(Diff(with_types, without, pairs), kMatters);
}

TEST_F(DebertaSwitchTest, ConvLayer) {
  // deberta-v2 family: ConvLayer after layer 0 on the embedding output (kernel 3, conv_act gelu).
  const auto gelu = Check(CreateFrom("conv_gelu", Options(json::object(), "deberta-v2")), "conv gelu");
  const auto tanh = Check(CreateFrom("conv_tanh", Options({{"conv_act", "tanh"}}, "deberta-v2")), "conv tanh");
  const auto groups = Check(CreateFrom("conv_groups", Options({{"conv_groups", 2}}, "deberta-v2")), "conv groups 2");
  const auto kernel5 = Check(CreateFrom("conv_k5", Options({{"conv_kernel_size", 5}}, "deberta-v2")), "conv kernel 5");
  const auto none = Check(CreateFrom("no_conv", Options({{"conv_kernel_size", nullptr}, {"conv_act", nullptr}}, "deberta-v2")),
                          "no conv");
  EXPECT_GT(Diff(gelu, none, batch_), kMatters);
  EXPECT_GT(Diff(gelu, tanh, batch_), kMatters);
  EXPECT_GT(Diff(gelu, groups, batch_), kMatters);
  EXPECT_GT(Diff(gelu, kernel5, batch_), kMatters);
  // Only hidden_state_1 on (layer 0's output goes through the conv).
  EXPECT_LE(Diff(gelu, none, batch_, "hidden_state_0"), kTolerance);
  EXPECT_GT(Diff(gelu, none, batch_, "hidden_state_1"), kMatters);
}

TEST_F(DebertaSwitchTest, EmbeddingSizeWithEmbedProj) {
  // Word, position and token-type embeddings of size 24, then embed_proj to 32.
  const json common = {{"position_biased_input", true}, {"type_vocab_size", 2}};
  CreateModelOptions projected = Options(common);
  projected.embedding_size = 24;
  const PaddedBatch pairs = MakeBatch({70, 33, 17, 1}, kVocab, 11, /*pairs=*/true);
  const std::string dir = CreateFrom("proj", projected);
  Check(dir, "embedding_size 24");
  const auto proj = Check(dir, pairs, "embedding_size 24, pairs");
  // embed_proj matters: the same model with embed_proj scaled.
  const auto scaled = Check(CreateFrom("proj_scaled", projected,
                                   [](json&, F32Map& w) { Scale(&w, "embeddings.embed_proj.weight", -1.5f); }),
                            pairs, "embedding_size 24, embed_proj * -1.5");
  EXPECT_GT(Diff(proj, scaled, pairs, "hidden_state_0"), kMatters);
  const auto plain = Check(CreateFrom("plain", Options(common)), pairs, "embedding_size = hidden_size");
  EXPECT_GT(Diff(proj, plain, pairs), kMatters);
}

TEST_F(DebertaSwitchTest, HiddenActVariants) {
  std::map<std::string, EngineOutputs> out;
  for (const std::string& act : AllActivations()) {
    out[act] = Check(Create("act_" + act, {{"hidden_act", act}}), "hidden_act " + act);
  }
  for (const std::string& act : AllActivations()) {
    if (act == "gelu" || CloseToGelu(act)) continue;
    EXPECT_GT(Diff(out[act], out["gelu"], batch_), kMatters) << act;
  }
  EXPECT_GT(Diff(out["relu"], out["leaky_relu"], batch_), kMatters);
  EXPECT_LE(Diff(out["silu"], out["swish"], batch_), kTolerance);
  EXPECT_LE(Diff(out["gelu_python"], out["gelu"], batch_), kTolerance);
  // The intermediate dense scaled up (pre-activations of std ~11): gelu_10 and relu6 clip, and
  // the tanh approximations leave the 1e-4 band of gelu.
  const auto big = [](json&, F32Map& w) {
    for (int l = 0; l < 2; ++l) Scale(&w, "encoder.layer." + std::to_string(l) + ".intermediate.dense.weight", 10.0f);
  };
  std::map<std::string, EngineOutputs> wide;
  std::map<std::string, naive::Outputs> wide_naive;
  for (const char* name :
       {"gelu", "gelu_10", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate", "relu", "relu6"}) {
    const std::string act = name;
    const std::string dir = Create("wide_" + act, {{"hidden_act", act}}, big);
    wide[act] = Check(dir, "hidden_act " + act + ", wide pre-activations");
    wide_naive[act] = RunNaive(dir, batch_);
  }
  EXPECT_GT(Diff(wide["gelu_10"], wide["gelu"], batch_), kMatters);
  EXPECT_GT(Diff(wide["relu6"], wide["relu"], batch_), kMatters);
  // The tanh approximations differ from gelu by less than 100x the tolerance even here; the
  // engine must still be at least 10x closer to the port's own activation than to gelu.
  for (const char* name : {"gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate"}) {
    const std::string act = name;
    const double to_own = Diff(wide[act], wide_naive[act], batch_);
    const double to_gelu = Diff(wide[act], wide_naive["gelu"], batch_);
    EXPECT_GT(to_gelu, 10 * std::max(to_own, 1e-6)) << act << ": " << to_gelu << " vs " << to_own;
  }
}

TEST_F(DebertaSwitchTest, LayerNormEps) {
  const auto small = Check(Create("eps_small", json::object()), "layer_norm_eps 1e-7");
  const auto large = Check(Create("eps_large", {{"layer_norm_eps", 0.5}}), "layer_norm_eps 0.5");
  EXPECT_GT(Diff(small, large, batch_), kMatters);
}

TEST_F(DebertaSwitchTest, AttentionHeadSizeOverride) {
  // attention_head_size 16 with 4 heads: all_head_size 64 != hidden_size 32.
  const auto wide = Check(Create("head16", {{"attention_head_size", 16}}), "attention_head_size 16");
  const auto narrow = Check(Create("head4", {{"attention_head_size", 4}}), "attention_head_size 4");
  const auto plain = Check(Create("head8", json::object()), "attention_head_size 8 (hidden / heads)");
  EXPECT_GT(Diff(wide, plain, batch_), kMatters);
  EXPECT_GT(Diff(narrow, plain, batch_), kMatters);
  // ... also with separate positional projections and no relative attention (scale only).
  Check(Create("head16_sep", {{"attention_head_size", 16}, {"share_att_key", false}}),
        "attention_head_size 16, share_att_key false");
  Check(Create("head16_norel", {{"attention_head_size", 16}, {"relative_attention", false},
                                {"position_biased_input", true}}),
        "attention_head_size 16, relative_attention false");
}

TEST_F(DebertaSwitchTest, ClassifierHeadWithPoolerHiddenAct) {
  // DebertaV2ForSequenceClassification with 3 labels (id2label): ContextPooler(dense on token 0,
  // pooler_hidden_act) and the classifier; logits compared too.
  std::map<std::string, EngineOutputs> out;
  for (const std::string& act : AllActivations()) {
    CreateModelOptions o = Options({{"pooler_hidden_act", act}});
    o.num_labels = 3;
    out[act] = Check(CreateFrom("cls_" + act, o), "classifier, pooler_hidden_act " + act);
    ASSERT_EQ(out[act].at("logits").shape, (std::vector<int64_t>{4, 3})) << act;
  }
  for (const std::string& act : AllActivations()) {
    if (act == "gelu" || CloseToGelu(act)) continue;
    EXPECT_GT(Diff(out[act], out["gelu"], batch_, "logits"), kMatters) << act;
  }
  // pooler_hidden_act does not touch the encoder.
  EXPECT_LE(Diff(out["tanh"], out["gelu"], batch_), kTolerance);
  // The pooler reads token 0 only: a different token 0 in row 0 changes row 0's logits.
  PaddedBatch other = batch_;
  other.input_ids[0] = other.input_ids[0] == 5 ? 6 : 5;
  const std::string dir = scratch_.Path("cls_gelu");
  const auto changed = Check(dir, other, "classifier, token 0 changed");
  EXPECT_GT(Diff(changed, out["gelu"], batch_, "logits"), kMatters);
  // Without id2label, num_labels (3 here) sets the classifier's size.
  CreateModelOptions o = Options(json::object());
  o.num_labels = 3;
  const auto by_count = Check(CreateFrom("cls_num_labels", o,
                                         [](json& c, F32Map&) {
                                           c.erase("id2label");
                                           c.erase("label2id");
                                           c["num_labels"] = 3;
                                         }),
                              "classifier, num_labels 3 without id2label");
  EXPECT_EQ(by_count.at("logits").shape, (std::vector<int64_t>{4, 3}));
  EXPECT_LE(Diff(by_count, out["gelu"], batch_, "logits"), kTolerance);
}

TEST_F(DebertaSwitchTest, DebertaPrefixLoadedAsDebertaV2Model) {
  // A DebertaV2ForSequenceClassification checkpoint ("deberta." keys, pooler, classifier) with
  // architectures DebertaV2Model: from_pretrained strips the prefix and drops the head.
  CreateModelOptions o = Options(json::object());
  o.num_labels = 3;
  const std::string cls_dir = CreateFrom("cls", o);
  const auto cls = Check(cls_dir, "DebertaV2ForSequenceClassification");
  const auto base = Check(CreateFrom("base", o, [](json& c, F32Map&) { c["architectures"] = {"DebertaV2Model"}; }),
                          "deberta.-prefixed checkpoint as DebertaV2Model");
  EXPECT_EQ(base.count("logits"), 0u);
  EXPECT_LE(Diff(base, cls, batch_), kTolerance);
  // The prefixed weights are the ones used: scaling one changes the output.
  const auto changed = Check(CreateFrom("base_changed", o,
                                    [](json& c, F32Map& w) {
                                      c["architectures"] = {"DebertaV2Model"};
                                      Scale(&w, "deberta.encoder.layer.1.output.dense.weight", 2.0f);
                                    }),
                             "DebertaV2Model, changed prefixed weight");
  EXPECT_GT(Diff(base, changed, batch_), kMatters);
}

}  // namespace
}  // namespace relserve
