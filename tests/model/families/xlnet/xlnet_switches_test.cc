// XLNet against the naive port of transformers' modeling_xlnet.py (naive_xlnet.h, itself
// checked against transformers in naive_reference_test), one test per configuration switch
// that XLNetModel and XLNetForSequenceClassification honour at inference. Each model is tiny
// (d_model 32, 2 layers, 4 heads) with large random weights; every hidden state must match the
// port within 1e-4 at the real tokens of a right-padded batch of pairs (rows of 70, 33, 17 and
// 1 tokens, token types 0, 1 and 2 as XLNet's tokenizer gives them), the same rows padded on
// the left (XLNet's own padding side, token type 3 on padding) must give the same real tokens,
// and logits must equal the port's for each row alone. A switch that matters changes the
// outputs by more than 100x the tolerance, so no test passes by ignoring its switch.
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/backend/inference_backend.h"
#include "server/model/engine.h"
#include "server/tools/model_creator.h"
#include "tests/model/naive_reference.h"
#include "tests/model/reference_fixture.h"
#include "tests/model/switch_test_support.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using nlohmann::json;
using namespace testing;  // NOLINT: the switch-test helpers

// Right-padded rows of pairs: `A <sep> B <sep> <cls>` types, 0 for the first half, 1 for the
// second, 2 for the last token.
PaddedBatch PairBatch(const std::vector<int64_t>& lengths, int64_t vocab, uint64_t seed) {
  PaddedBatch b = MakeBatch(lengths, vocab, seed);
  for (int64_t r = 0; r < b.batch; ++r) {
    const int64_t n = lengths[r];
    for (int64_t t = 0; t < b.length; ++t) {
      b.token_type_ids.push_back(t >= n ? 0 : t == n - 1 ? 2 : t < n / 2 ? 0 : 1);
    }
  }
  return b;
}

// The same rows padded on the left, as XLNet's tokenizer pads: <pad> = 5, token type 3.
PaddedBatch ToLeftPadding(const PaddedBatch& right) {
  PaddedBatch left = right;
  const int64_t L = right.length;
  for (int64_t b = 0; b < right.batch; ++b) {
    int64_t n = 0;
    for (int64_t t = 0; t < L; ++t) n += right.attention_mask[b * L + t];
    for (int64_t t = 0; t < L; ++t) {
      const bool real = t >= L - n;
      const int64_t from = b * L + t - (L - n);
      left.input_ids[b * L + t] = real ? right.input_ids[from] : 5;
      left.attention_mask[b * L + t] = real ? 1 : 0;
      if (!right.token_type_ids.empty()) left.token_type_ids[b * L + t] = real ? right.token_type_ids[from] : 3;
    }
  }
  return left;
}

// Row b of a padded batch alone, without padding.
PaddedBatch Row(const PaddedBatch& batch, int64_t b) {
  PaddedBatch row;
  row.batch = 1;
  for (int64_t t = 0; t < batch.length; ++t) {
    const int64_t i = b * batch.length + t;
    if (!batch.attention_mask[i]) continue;
    row.input_ids.push_back(batch.input_ids[i]);
    row.attention_mask.push_back(1);
    if (!batch.token_type_ids.empty()) row.token_type_ids.push_back(batch.token_type_ids[i]);
  }
  row.length = static_cast<int64_t>(row.input_ids.size());
  return row;
}

// The hidden states of row b's real tokens, concatenated.
std::vector<float> RealTokensOfRow(const NamedTensor& t, const PaddedBatch& batch, int64_t b) {
  const int64_t H = t.shape.back();
  std::vector<float> out;
  for (int64_t i = 0; i < batch.length; ++i) {
    const int64_t token = b * batch.length + i;
    if (batch.attention_mask[token]) out.insert(out.end(), t.data.begin() + token * H, t.data.begin() + (token + 1) * H);
  }
  return out;
}

// Largest difference between the real tokens of `a` (laid out as `batch_a`) and of `b` (as
// `batch_b`): the same rows with other padding.
double RealTokenDiff(const NamedTensor& a, const PaddedBatch& batch_a, const NamedTensor& b, const PaddedBatch& batch_b) {
  const int64_t H = a.shape.back();
  double worst = 0;
  for (int64_t r = 0; r < batch_a.batch; ++r) {
    std::vector<int64_t> ta, tb;
    for (int64_t t = 0; t < batch_a.length; ++t) {
      if (batch_a.attention_mask[r * batch_a.length + t]) ta.push_back(r * batch_a.length + t);
    }
    for (int64_t t = 0; t < batch_b.length; ++t) {
      if (batch_b.attention_mask[r * batch_b.length + t]) tb.push_back(r * batch_b.length + t);
    }
    if (ta.size() != tb.size()) return testing::kNotComparable;
    for (size_t k = 0; k < ta.size(); ++k) {
      for (int64_t h = 0; h < H; ++h) {
        worst = std::max(worst, testing::AbsDiff(a.data[ta[k] * H + h], b.data[tb[k] * H + h]));
      }
    }
  }
  return worst;
}

class XlnetSwitchTest : public SwitchTestBase {
 protected:
  // The creator's std 0.2 would leave the bias terms small next to q.k: the attention biases
  // and segment embeddings are drawn 2.5x larger, so that each term shows.
  void AdjustWeights(F32Map* weights) override {
    for (auto& [name, t] : *weights) {
      if (EndsWith(name, "_bias") || EndsWith(name, "seg_embed")) {
        for (float& v : t.data) v *= 2.5f;
      }
    }
  }

  // A tiny XLNetModel (d_model 32, 2 layers, 4 heads, d_inner 64, vocab 128) from
  // `relserve-model create --family xlnet`, or XLNetForSequenceClassification with
  // num_labels > 0; `overrides` are merged into config.json (null removes a key), `edit` runs
  // on the written config and weights.
  std::string Create(const std::string& name, const json& overrides, int num_labels = 0, const Edit& edit = nullptr) {
    CreateModelOptions o = TinyOptions("xlnet", overrides);
    o.num_labels = num_labels;
    return CreateFrom(name, o, edit);
  }

  // The engine on `batch`; throws with the engine's message when it refuses the model.
  EngineOutputs Run(const std::string& dir, const PaddedBatch& batch) { return RunEngine(dir, batch); }

  // The model against the port on `batch` (right-padded), the same rows padded on the left,
  // and (logits) each row alone. Returns the right-padded batch's outputs.
  EngineOutputs Check(const std::string& dir, const std::string& label, const PaddedBatch& batch) {
    const naive::Outputs want = RunNaive(dir, batch);
    EngineOutputs got = Run(dir, batch);
    const PaddedBatch left = ToLeftPadding(batch);
    EngineOutputs got_left = Run(dir, left);
    size_t states = 0;
    for (const auto& [name, t] : want) {
      if (name == "logits") continue;
      states += name.rfind("hidden_state_", 0) == 0 ? 1 : 0;
      auto it = got.find(name);
      EXPECT_NE(it, got.end()) << label << ": no " << name;
      if (it == got.end()) continue;
      EXPECT_LE(Diff(it->second, naive::ToNamedTensor(name, t), batch), kTolerance) << label << ": " << name;
      EXPECT_LE(RealTokenDiff(got_left.at(name), left, it->second, batch), kTolerance)
          << label << ": " << name << " padded on the left";
    }
    EXPECT_EQ(states, 3u) << label;
    EXPECT_EQ(got.count("logits"), want.count("logits")) << label;
    if (want.count("logits")) {
      // Each row alone: what transformers gives a sequence, whatever the batch around it.
      const int64_t labels = want.at("logits").shape[1];
      for (int64_t b = 0; b < batch.batch; ++b) {
        const naive::Outputs alone = RunNaive(dir, Row(batch, b));
        for (int64_t k = 0; k < labels; ++k) {
          const double expected = alone.at("logits").data[k];
          EXPECT_NEAR(got.at("logits").data[b * labels + k], expected, kTolerance) << label << ": logits row " << b;
          EXPECT_NEAR(got_left.at("logits").data[b * labels + k], expected, kTolerance)
              << label << ": logits row " << b << " padded on the left";
        }
      }
    }
    return got;
  }
  EngineOutputs Check(const std::string& dir, const std::string& label) { return Check(dir, label, pairs_); }

  PaddedBatch pairs_ = PairBatch({70, 33, 17, 1}, kVocab, 11);
};

// ---------------------------------------------------------------------------------------------

TEST_F(XlnetSwitchTest, TransformersFixtureLayoutLoads) {
  // The defaults of TinyConfig: bi attention, no clamp, pairs.
  Check(Create("base", json::object()), "base");
}

TEST_F(XlnetSwitchTest, AttnTypeUniIsCausal) {
  const auto bi = Check(Create("bi", json::object()), "attn_type bi");
  const auto uni = Check(Create("uni", {{"attn_type", "uni"}}), "attn_type uni");
  EXPECT_GT(Diff(bi, uni, pairs_), kMatters);
}

TEST_F(XlnetSwitchTest, SameLengthMattersOnlyWithUni) {
  // create_mask with same_length and no memory leaves each query its own key alone.
  const auto uni = Check(Create("uni", {{"attn_type", "uni"}}), "uni");
  const auto same = Check(Create("uni_same", {{"attn_type", "uni"}, {"same_length", true}}), "uni, same_length");
  EXPECT_GT(Diff(uni, same, pairs_), kMatters);
  const auto bi = Check(Create("bi", json::object()), "bi");
  const auto bi_same = Check(Create("bi_same", {{"same_length", true}}), "bi, same_length");
  EXPECT_LE(Diff(bi, bi_same, pairs_), kTolerance);
}

TEST_F(XlnetSwitchTest, ClampLen) {
  const auto none = Check(Create("none", json::object()), "clamp_len -1");
  const auto zero = Check(Create("zero", {{"clamp_len", 0}}), "clamp_len 0");
  const auto negative = Check(Create("negative", {{"clamp_len", -5}}), "clamp_len -5");
  const auto large = Check(Create("large", {{"clamp_len", 1000}}), "clamp_len 1000");
  const auto five = Check(Create("five", {{"clamp_len", 5}}), "clamp_len 5");
  const auto one = Check(Create("one", {{"clamp_len", 1}}), "clamp_len 1");
  EXPECT_LE(Diff(none, zero, pairs_), kTolerance);  // 0 and below: no clamping
  EXPECT_LE(Diff(none, negative, pairs_), kTolerance);
  EXPECT_LE(Diff(none, large, pairs_), kTolerance);  // beyond every distance
  EXPECT_GT(Diff(none, five, pairs_), kMatters);
  EXPECT_GT(Diff(five, one, pairs_), kMatters);
  // With uni too (the table of distances >= 0 only).
  const auto uni_five = Check(Create("uni_five", {{"attn_type", "uni"}, {"clamp_len", 5}}), "uni, clamp_len 5");
  EXPECT_GT(Diff(five, uni_five, pairs_), kMatters);
}

TEST_F(XlnetSwitchTest, RowsLongerThanTheKeptPositionTable) {
  // Distances up to 1023 are projected once and kept; a row of 1100 tokens projects its own
  // in its forward, and the kept table still serves the shorter batch after it.
  const std::string dir = Create("long", json::object());
  Check(dir, "1100 tokens", PairBatch({1100}, kVocab, 5));
  Check(dir, "after the long row");
}

TEST_F(XlnetSwitchTest, UntieRKeepsPerLayerBiases) {
  // transformers' PyTorch XLNet holds r_w_bias, r_r_bias, r_s_bias and seg_embed per layer
  // whatever untie_r says (only its TensorFlow converter reads it).
  const auto tied = Check(Create("untie_false", {{"untie_r", false}}), "untie_r false");
  const auto untied = Check(Create("untie_true", {{"untie_r", true}}), "untie_r true");
  EXPECT_LE(Diff(tied, untied, pairs_), kTolerance);
  // Layer 1's own biases are read: giving it layer 0's changes the result.
  const auto shared = Check(Create("shared_values", {{"untie_r", false}}, 0,
                                   [](json&, F32Map& w) {
                                     for (const char* b : {"r_w_bias", "r_r_bias", "r_s_bias", "seg_embed"}) {
                                       w["layer.1.rel_attn." + std::string(b)] = w["layer.0.rel_attn." + std::string(b)];
                                     }
                                   }),
                            "untie_r false, layer 1 with layer 0's biases");
  EXPECT_GT(Diff(tied, shared, pairs_), kMatters);
  // One bias for all layers at the top level (TensorFlow's untie_r false layout): refused with
  // a message naming untie_r, where transformers would initialise the layers' biases at random.
  const std::string dir = Create("top_level", {{"untie_r", false}}, 0, [](json&, F32Map& w) {
    for (const char* b : {"r_w_bias", "r_r_bias", "r_s_bias", "seg_embed"}) {
      w[b] = w["layer.0.rel_attn." + std::string(b)];
      for (int i = 0; i < 2; ++i) w.erase("layer." + std::to_string(i) + ".rel_attn." + b);
    }
  });
  try {
    Run(dir, pairs_);
    ADD_FAILURE() << "a top-level r_w_bias loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("\"untie_r\" false"), std::string::npos) << e.what();
  }
}

TEST_F(XlnetSwitchTest, FfActivation) {
  const auto gelu = Check(Create("gelu", json::object()), "gelu");
  const auto relu = Check(Create("relu", {{"ff_activation", "relu"}}), "relu");
  EXPECT_GT(Diff(gelu, relu, pairs_), kMatters);
  for (const char* act : {"gelu_new", "silu", "swish", "tanh"}) {
    const auto other = Check(Create(act, {{"ff_activation", act}}), act);
    EXPECT_GT(Diff(relu, other, pairs_), kMatters) << act;
  }
  // gelu_new, the tanh approximation, stays near gelu but is not it.
  EXPECT_GT(Diff(gelu, Check(Create("gelu_new_2", {{"ff_activation", "gelu_new"}}), "gelu_new"), pairs_), 5 * kTolerance);
}

TEST_F(XlnetSwitchTest, LayerNormEps) {
  const auto tiny = Check(Create("eps_tiny", json::object()), "layer_norm_eps 1e-12");
  const auto large = Check(Create("eps_large", {{"layer_norm_eps", 0.5}}), "layer_norm_eps 0.5");
  EXPECT_GT(Diff(tiny, large, pairs_), kMatters);
}

TEST_F(XlnetSwitchTest, HeadWidthFromAliases) {
  // XLNetConfig fixes d_head = d_model // n_head (a "d_head" key must agree), but the
  // attribute_map alias num_attention_heads, applied after, changes n_head alone: 2 heads of 8
  // in a d_model of 32.
  const auto narrow = Check(Create("alias", {{"num_attention_heads", 2}}), "num_attention_heads 2 after n_head 4");
  const auto base = Check(Create("base", json::object()), "n_head 4");
  EXPECT_GT(Diff(narrow, base, pairs_), kMatters);
  EXPECT_THROW(Run(Create("bad_d_head", {{"d_head", 16}}), pairs_), std::runtime_error);
}

TEST_F(XlnetSwitchTest, TokenTypes) {
  const std::string dir = Create("types", json::object());
  const auto pairs = Check(dir, "pairs (types 0, 1, 2)");
  PaddedBatch none = pairs_;
  none.token_type_ids.clear();
  const auto without = Check(dir, "no token_type_ids", none);
  PaddedBatch zeros = pairs_;
  std::fill(zeros.token_type_ids.begin(), zeros.token_type_ids.end(), 0);
  const auto single = Check(dir, "token types all 0", zeros);
  EXPECT_GT(Diff(pairs, without, pairs_), kMatters);
  EXPECT_GT(Diff(pairs, single, pairs_), kMatters);
  // Segment ids are only compared: types 7 and 9 where pairs have 0 and 1 give the same.
  PaddedBatch renamed = pairs_;
  for (int64_t& t : renamed.token_type_ids) t = t == 0 ? 7 : t == 1 ? 9 : t;
  EXPECT_LE(Diff(pairs, Run(dir, renamed), pairs_), kTolerance);
}

TEST_F(XlnetSwitchTest, SummaryTypes) {
  std::map<std::string, EngineOutputs> out;
  for (const char* type : {"last", "first", "mean", "cls_index"}) {
    out[type] = Check(Create(type, {{"summary_type", type}}, 3), std::string("summary_type ") + type);
  }
  EXPECT_LE(Diff(out["last"], out["cls_index"], pairs_, "logits"), kTolerance);  // cls_index None: the last token
  EXPECT_GT(Diff(out["last"], out["first"], pairs_, "logits"), kMatters);
  EXPECT_GT(Diff(out["last"], out["mean"], pairs_, "logits"), kMatters);
  EXPECT_GT(Diff(out["first"], out["mean"], pairs_, "logits"), kMatters);
  EXPECT_THROW(Run(Create("attn", {{"summary_type", "attn"}}, 3), pairs_), std::runtime_error);
}

TEST_F(XlnetSwitchTest, SummaryProjection) {
  const auto proj = Check(Create("proj", json::object(), 3), "summary_use_proj true");
  const auto no_proj = Check(Create("no_proj", {{"summary_use_proj", false}}, 3), "summary_use_proj false");
  // Absent: XLNetConfig's default, true. null: None, which is falsy.
  const auto absent = Check(Create("absent_proj", {{"summary_use_proj", nullptr}}, 3), "summary_use_proj absent");
  const auto null_proj = Check(Create("null_proj", json::object(), 3,
                                      [](json& c, F32Map& w) {
                                        c["summary_use_proj"] = nullptr;
                                        w.erase("sequence_summary.summary.weight");
                                        w.erase("sequence_summary.summary.bias");
                                      }),
                               "summary_use_proj null");
  EXPECT_GT(Diff(proj, no_proj, pairs_, "logits"), kMatters);
  EXPECT_LE(Diff(proj, absent, pairs_, "logits"), kTolerance);
  EXPECT_LE(Diff(no_proj, null_proj, pairs_, "logits"), kTolerance);
  // To the labels: only where num_labels equals d_model can logits_proj take the summary.
  const auto to_labels = Check(Create("to_labels", {{"summary_proj_to_labels", true}}, 32),
                               "summary_proj_to_labels true, 32 labels");
  const auto to_hidden = Check(Create("to_hidden", {{"summary_proj_to_labels", false}}, 32),
                               "summary_proj_to_labels false, 32 labels");
  EXPECT_LE(Diff(to_labels, to_hidden, pairs_, "logits"), kTolerance);  // same shapes, same values
  EXPECT_THROW(Run(Create("to_3_labels", {{"summary_proj_to_labels", true}}, 3), pairs_), std::runtime_error);
  // summary_use_proj false with a summary tensor in the checkpoint: the config disagrees.
  EXPECT_THROW(Run(Create("stray", {{"summary_use_proj", false}}, 3,
                          [](json&, F32Map& w) {
                            w["sequence_summary.summary.weight"] = F32Tensor{{32, 32}, std::vector<float>(32 * 32)};
                          }),
                   pairs_),
               std::runtime_error);
}

TEST_F(XlnetSwitchTest, SummaryActivation) {
  const auto tanh = Check(Create("tanh", json::object(), 3), "summary_activation tanh");
  // null (None) and "" mean no activation; an absent key is XLNetConfig's default, tanh.
  const auto none = Check(Create("none", json::object(), 3, [](json& c, F32Map&) { c["summary_activation"] = nullptr; }),
                          "summary_activation null");
  const auto absent = Check(Create("absent", {{"summary_activation", nullptr}}, 3), "summary_activation absent");
  EXPECT_LE(Diff(tanh, absent, pairs_, "logits"), kTolerance);
  const auto empty = Check(Create("empty", {{"summary_activation", ""}}, 3), "summary_activation \"\"");
  const auto gelu = Check(Create("gelu", {{"summary_activation", "gelu"}}, 3), "summary_activation gelu");
  const auto linear = Check(Create("linear", {{"summary_activation", "linear"}}, 3), "summary_activation linear");
  EXPECT_GT(Diff(tanh, none, pairs_, "logits"), kMatters);
  EXPECT_GT(Diff(tanh, gelu, pairs_, "logits"), kMatters);
  EXPECT_LE(Diff(none, empty, pairs_, "logits"), kTolerance);
  EXPECT_LE(Diff(none, linear, pairs_, "logits"), kTolerance);
}

TEST_F(XlnetSwitchTest, NumLabels) {
  const auto regression = Check(Create("one", json::object(), 1), "num_labels 1");
  const auto five = Check(Create("five", json::object(), 5), "num_labels 5");
  EXPECT_EQ(regression.at("logits").shape, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(five.at("logits").shape, (std::vector<int64_t>{4, 5}));
}

TEST_F(XlnetSwitchTest, PaddingInvariance) {
  // Each row alone gives the real tokens and logits it gives in the padded batches, padded on
  // the right (the engine's batches) and on the left (XLNet's tokenizer), for bi and uni.
  for (const char* attn : {"bi", "uni"}) {
    const std::string dir = Create(std::string("padding_") + attn, {{"attn_type", attn}}, 3);
    const PaddedBatch left = ToLeftPadding(pairs_);
    const EngineOutputs right_out = Run(dir, pairs_);
    const EngineOutputs left_out = Run(dir, left);
    for (int64_t b = 0; b < pairs_.batch; ++b) {
      const EngineOutputs alone = Run(dir, Row(pairs_, b));
      const std::vector<float> want = RealTokensOfRow(alone.at("last_hidden_state"), Row(pairs_, b), 0);
      for (const auto& [out, batch] : {std::pair<const EngineOutputs*, const PaddedBatch*>{&right_out, &pairs_},
                                       {&left_out, &left}}) {
        const std::vector<float> got = RealTokensOfRow(out->at("last_hidden_state"), *batch, b);
        ASSERT_EQ(got.size(), want.size());
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, testing::AbsDiff(static_cast<double>(got[i]), want[i]));
        EXPECT_LE(worst, kTolerance) << attn << " row " << b << (batch == &left ? " left" : " right");
        for (int64_t k = 0; k < 3; ++k) {
          EXPECT_NEAR(out->at("logits").data[b * 3 + k], alone.at("logits").data[k], kTolerance)
              << attn << " row " << b << (batch == &left ? " left" : " right");
        }
      }
    }
  }
}

TEST_F(XlnetSwitchTest, ServingPathPassesTokenTypes) {
  // Engine::Run pads its batches on the right itself and hands the token types to the model
  // as segment ids (XLNet has no token-type embeddings): each sequence's token states and
  // logits are the port's for it alone.
  const std::string dir = Create("serving", json::object(), 3);
  auto engine = Engine::Load(dir, TestEngineOptions());
  ASSERT_TRUE(engine.ok()) << engine.status();
  for (const bool with_types : {true, false}) {
    std::vector<SequenceInput> inputs;
    for (int64_t b = 0; b < pairs_.batch; ++b) {
      const PaddedBatch row = Row(pairs_, b);
      SequenceInput in;
      in.input_ids.assign(row.input_ids.begin(), row.input_ids.end());
      if (with_types) in.token_type_ids.assign(row.token_type_ids.begin(), row.token_type_ids.end());
      inputs.push_back(std::move(in));
    }
    auto out = (*engine)->Run(inputs, kOutputTokenStates | kOutputLogits);
    ASSERT_TRUE(out.ok()) << out.status();
    double worst_states = 0, worst_logits = 0;
    for (int64_t b = 0; b < pairs_.batch; ++b) {
      PaddedBatch row = Row(pairs_, b);
      if (!with_types) row.token_type_ids.clear();
      const naive::Outputs want = RunNaive(dir, row);
      const std::vector<double>& states = want.at("last_hidden_state").data;
      ASSERT_EQ((*out)[b].token_states.size(), states.size());
      for (size_t i = 0; i < states.size(); ++i) {
        worst_states = std::max(worst_states, testing::AbsDiff((*out)[b].token_states[i], states[i]));
      }
      for (size_t k = 0; k < 3; ++k) {
        worst_logits = std::max(worst_logits, testing::AbsDiff((*out)[b].logits[k], want.at("logits").data[k]));
      }
    }
    EXPECT_LE(worst_states, kTolerance) << "token types " << with_types;
    EXPECT_LE(worst_logits, kTolerance) << "token types " << with_types;
  }
}

TEST_F(XlnetSwitchTest, OtherArchitecturesLoadAsTheBackbone) {
  // XLNetLMHeadModel (the published base checkpoints): the backbone under "transformer.",
  // lm_loss ignored.
  const auto base = Check(Create("base", json::object()), "XLNetModel");
  const auto lm = Check(Create("lm", json::object(), 0,
                               [](json& c, F32Map& w) {
                                 c["architectures"] = {"XLNetLMHeadModel"};
                                 F32Map renamed;
                                 for (auto& [name, t] : w) renamed["transformer." + name] = t;
                                 renamed["lm_loss.weight"] = F32Tensor{{kVocab, 32}, std::vector<float>(kVocab * 32, 0.5f)};
                                 renamed["lm_loss.bias"] = F32Tensor{{kVocab}, std::vector<float>(kVocab, 0.5f)};
                                 w = std::move(renamed);
                               }),
                        "XLNetLMHeadModel");
  EXPECT_LE(Diff(base, lm, pairs_), kTolerance);
  EXPECT_EQ(lm.count("logits"), 0u);
  // An XLNetForSequenceClassification checkpoint named XLNetModel: its head is ignored.
  const auto classifier = Check(Create("classifier", json::object(), 3), "XLNetForSequenceClassification");
  const auto backbone = Check(Create("classifier_as_model", json::object(), 3,
                                     [](json& c, F32Map&) { c["architectures"] = {"XLNetModel"}; }),
                              "classifier checkpoint as XLNetModel");
  EXPECT_LE(Diff(classifier, backbone, pairs_), kTolerance);
  EXPECT_EQ(backbone.count("logits"), 0u);
}

TEST_F(XlnetSwitchTest, BiDataRefused) {
  try {
    Run(Create("bi_data", json::object(), 0, [](json& c, F32Map&) { c["bi_data"] = true; }), pairs_);
    ADD_FAILURE() << "bi_data true loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("\"bi_data\" is true"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace relserve
