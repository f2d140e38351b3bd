// The engine against the naive port of transformers' modeling_bert.py, modeling_roberta.py,
// modeling_xlm_roberta.py and modeling_electra.py (naive_reference.h, itself checked against
// transformers in naive_reference_test), one test per configuration switch those models
// honour. Each test builds tiny random models that flip the switch, requires every hidden state
// (and the logits) to match the port within 1e-4 at the unpadded positions of a padded batch
// (rows of 70, 33, 17 and 1 tokens) and of an unpadded one, and shows that the switch matters:
// the outputs with the switch flipped differ by more than 100x the tolerance.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/model/engine.h"
#include "server/tools/model_creator.h"
#include "tests/model/naive_reference.h"
#include "tests/model/reference_fixture.h"
#include "tests/model/switch_test_support.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using namespace testing;  // NOLINT: the switch-test helpers

const std::vector<std::string> kVariants = {"bert", "roberta", "xlm-roberta", "electra"};
const std::vector<std::string> kPositionTypes = {"absolute", "relative_key", "relative_key_query"};

class BertSwitchTest : public SwitchTestBase {
 protected:
  static CreateModelOptions Options(const std::string& family, const json& overrides, int labels = 0) {
    CreateModelOptions o = TinyOptions(family, overrides);
    o.num_labels = labels;
    return o;
  }
  std::string Create(const std::string& name, const std::string& family, const json& overrides,
                     const Edit& edit = nullptr) {
    return CreateFrom(name, Options(family, overrides), edit);
  }

  static absl::Status LoadStatus(const std::string& dir, EngineOptions options = EngineOptions{}) {
    return Engine::Load(dir, options).status();
  }
};

// ---------------------------------------------------------------------------------------------
// Positions.

TEST_F(BertSwitchTest, PositionEmbeddingTypesOfEveryVariant) {
  for (const std::string& family : kVariants) {
    std::map<std::string, EngineOutputs> out;
    for (const std::string& type : kPositionTypes) {
      out[type] = Check(Create(family + "_" + type, family, {{"position_embedding_type", type}}),
                        family + " position_embedding_type " + type);
    }
    EXPECT_GT(Diff(out["absolute"], out["relative_key"], batch_), kMatters) << family;
    EXPECT_GT(Diff(out["relative_key"], out["relative_key_query"], batch_), kMatters) << family;
    EXPECT_GT(Diff(out["absolute"], out["relative_key_query"], batch_), kMatters) << family;
  }
}

TEST_F(BertSwitchTest, RelativeTermsReadTheDistanceTableByQueryMinusKey) {
  // Reversing each layer's distance table (row r <-> 2M - 2 - r) turns i - j into j - i: the port
  // and the engine must both follow, and the result must change.
  for (const std::string type : {"relative_key", "relative_key_query"}) {
    const json o = {{"position_embedding_type", type}};
    const auto plain = Check(Create(std::string("plain_") + type, "bert", o), type);
    const auto reversed = Check(Create(std::string("reversed_") + type, "bert", o,
                                       [](json&, F32Map& w) {
                                         for (int l = 0; l < 2; ++l) {
                                           F32Tensor& t = w.at("encoder.layer." + std::to_string(l) +
                                                               ".attention.self.distance_embedding.weight");
                                           const int64_t rows = t.shape[0], d = t.shape[1];
                                           std::vector<float> copy = t.data;
                                           for (int64_t r = 0; r < rows; ++r) {
                                             std::copy(copy.begin() + (rows - 1 - r) * d,
                                                       copy.begin() + (rows - r) * d, t.data.begin() + r * d);
                                           }
                                         }
                                       }),
                                std::string(type) + ", distance table reversed");
    EXPECT_GT(Diff(plain, reversed, batch_), kMatters) << type;
  }
}

TEST_F(BertSwitchTest, RobertaPositionsStartAfterPaddingIdx) {
  // create_position_ids_from_input_ids: non-pad tokens count from pad_token_id + 1, and a pad
  // id inside a row (attended to) sits at padding_idx without advancing the count.
  PaddedBatch with_pads = batch_;
  for (int64_t t : {3, 4, 20}) with_pads.input_ids[t] = 1;         // row 0, pad_token_id 1
  with_pads.input_ids[1 * with_pads.length + 5] = 1;               // row 1
  const std::string one = Create("pad1", "roberta", json::object());
  const auto pad1 = Check(one, with_pads, "roberta, pad ids inside rows");
  Check(one, "roberta");
  // pad_token_id 5 on the same input: positions start at 6, ids 1 are tokens (the same weights).
  const auto pad5 = Check(Create("pad5", "roberta", {{"pad_token_id", 5}}), with_pads, "roberta, pad_token_id 5");
  EXPECT_GT(Diff(pad1, pad5, with_pads), kMatters);
  // XLM-RoBERTa counts the same way.
  Check(Create("xlmr", "xlm-roberta", json::object()), with_pads, "xlm-roberta, pad ids inside rows");
  // BERT and ELECTRA count from 0 whatever pad_token_id is: a pad id inside a row is a token.
  Check(Create("bert_pad", "bert", {{"pad_token_id", 3}}), with_pads, "bert, pad_token_id 3");
  Check(Create("electra_pad", "electra", {{"pad_token_id", 3}}), with_pads, "electra, pad_token_id 3");
}

TEST_F(BertSwitchTest, MaxLengthFollowsThePositionTables) {
  struct Case {
    std::string family, type;
    int limit;  // with max_position_embeddings 40
  };
  for (const Case& c : {Case{"bert", "absolute", 40}, Case{"electra", "absolute", 40},
                        Case{"roberta", "absolute", 38},  // 40 - pad_token_id 1 - 1
                        Case{"xlm-roberta", "absolute", 38}, Case{"bert", "relative_key", 40},
                        Case{"roberta", "relative_key_query", 40}}) {
    const std::string label = c.family + " " + c.type;
    const std::string dir = Create(c.family + "_" + c.type + "_40", c.family,
                                   {{"max_position_embeddings", 40}, {"position_embedding_type", c.type}});
    auto engine = Engine::Load(dir, TestEngineOptions());
    ASSERT_TRUE(engine.ok()) << label << ": " << engine.status();
    EXPECT_EQ((*engine)->info().max_length, c.limit) << label;
    Check(dir, MakeBatch({c.limit, 7}, kVocab, 3), label + " at the limit");
    auto over = (*engine)->ForwardPadded(MakeBatch({c.limit + 1}, kVocab, 3), false);
    EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument) << label;
    EXPECT_THAT(std::string(over.status().message()), HasSubstr("max_position_embeddings 40")) << label;
    SequenceInput too_long;
    too_long.input_ids.assign(c.limit + 1, 5);
    EXPECT_EQ((*engine)->Validate(too_long).code(), absl::StatusCode::kInvalidArgument) << label;
    EngineOptions longer = TestEngineOptions();
    longer.max_length = c.limit + 1;
    const absl::Status refused = LoadStatus(dir, longer);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << label;
    EXPECT_THAT(std::string(refused.message()), HasSubstr("max_position_embeddings 40")) << label;
  }
}

// ---------------------------------------------------------------------------------------------
// Token types.

TEST_F(BertSwitchTest, TokenTypesFedOrNot) {
  const PaddedBatch pairs = MakeBatch({70, 33, 17, 1}, kVocab, 11, /*pairs=*/true);
  PaddedBatch zeros = batch_;
  zeros.token_type_ids.assign(zeros.input_ids.size(), 0);
  for (const std::string& family : kVariants) {
    const std::string dir = Create("types_" + family, family, {{"type_vocab_size", 2}});
    const auto absent = Check(dir, family + ", no token_type_ids");
    const auto fed = Check(dir, pairs, family + ", token types 0 then 1");
    const auto fed_zeros = Check(dir, zeros, family + ", token types all 0");
    // Absent token_type_ids are the all-zeros buffer: row 0 of the table for every token.
    EXPECT_LE(Diff(absent, fed_zeros, batch_), kTolerance) << family;
    EXPECT_GT(Diff(absent, fed, batch_), kMatters) << family;
  }
}

TEST_F(BertSwitchTest, TypeVocabSizeOneAndZero) {
  const std::string one = Create("types1", "roberta", {{"type_vocab_size", 1}});
  Check(one, "type_vocab_size 1");
  auto engine = Engine::Load(one, TestEngineOptions());
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->info().type_vocab_size, 1);
  // A token type the table lacks is refused, naming the position and the range.
  const PaddedBatch pairs = MakeBatch({9}, kVocab, 2, /*pairs=*/true);
  auto out = (*engine)->ForwardPadded(pairs, false);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("token_type_ids[0][4] = 1 is outside [0, 1)"));
  SequenceInput s{{5, 6, 7}, {0, 0, 1}};
  EXPECT_EQ((*engine)->Validate(s).code(), absl::StatusCode::kInvalidArgument);
  // type_vocab_size 0: transformers builds an empty table and fails every forward looking up
  // type 0 in it; the config is refused naming the key.
  const std::string zero = Create("types0", "bert", json::object(), [](json& c, F32Map& w) {
    c["type_vocab_size"] = 0;
    w["embeddings.token_type_embeddings.weight"] = F32Tensor{{0, 32}, {}};
  });
  const absl::Status s0 = LoadStatus(zero);
  EXPECT_EQ(s0.code(), absl::StatusCode::kInvalidArgument) << s0;
  EXPECT_THAT(std::string(s0.message()), HasSubstr("\"type_vocab_size\" is 0"));
  // Three types: each row of the table is used.
  const PaddedBatch three = [&] {
    PaddedBatch b = batch_;
    for (int64_t i = 0; i < b.batch * b.length; ++i) b.token_type_ids.push_back(i % 3);
    return b;
  }();
  Check(Create("types3", "bert", {{"type_vocab_size", 3}}), three, "type_vocab_size 3, types 0, 1, 2");
}

// ---------------------------------------------------------------------------------------------
// Activations, norms, ELECTRA's embedding size.

TEST_F(BertSwitchTest, HiddenActVariants) {
  std::map<std::string, EngineOutputs> out;
  for (const std::string& act : AllActivations()) {
    out[act] = Check(Create("act_" + act, "bert", {{"hidden_act", act}}), "hidden_act " + act);
  }
  for (const std::string& act : AllActivations()) {
    if (act == "gelu" || CloseToGelu(act)) continue;
    EXPECT_GT(Diff(out[act], out["gelu"], batch_), kMatters) << act;
  }
  EXPECT_LE(Diff(out["silu"], out["swish"], batch_), kTolerance);
}

TEST_F(BertSwitchTest, LayerNormEps) {
  for (const std::string family : {"bert", "electra"}) {
    const auto small = Check(Create(family + "_eps_small", family, {{"layer_norm_eps", 1e-12}}), family + " 1e-12");
    const auto large = Check(Create(family + "_eps_large", family, {{"layer_norm_eps", 0.5}}), family + " 0.5");
    EXPECT_GT(Diff(small, large, batch_), kMatters) << family;
  }
}

TEST_F(BertSwitchTest, ElectraEmbeddingSize) {
  // embedding_size 16 != hidden_size 32: the embeddings (and their LayerNorm) are 16 wide and
  // embeddings_project takes them to 32 before the first layer (hidden_state_0 is after it).
  for (const std::string type : {"absolute", "relative_key_query"}) {
    CreateModelOptions o = Options("electra", {{"position_embedding_type", type}});
    o.embedding_size = 16;
    const auto narrow = Check(CreateFrom(std::string("narrow_") + type, o), std::string("embedding_size 16, ") + type);
    ASSERT_EQ(narrow.at("hidden_state_0").shape, (std::vector<int64_t>{4, 70, 32}));
    const auto scaled = Check(CreateFrom(std::string("scaled_") + type, o,
                                         [](json&, F32Map& w) { Scale(&w, "embeddings_project.weight", -1.5f); }),
                              std::string("embeddings_project * -1.5, ") + type);
    EXPECT_GT(Diff(narrow, scaled, batch_, "hidden_state_0"), kMatters) << type;
  }
  // embedding_size = hidden_size: no projection in the checkpoint.
  const std::string same = Create("same", "electra", json::object());
  Check(same, "embedding_size 32");
  EXPECT_EQ(ReadWeights(same).count("embeddings_project.weight"), 0u);
  // Other variants have no embedding_size.
  CreateModelOptions bad = Options("bert", json::object());
  bad.embedding_size = 16;
  EXPECT_EQ(BuildModelConfig(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Heads.

TEST_F(BertSwitchTest, SequenceClassificationHeads) {
  // BERT: pooler (dense + tanh on [CLS]) + classifier; RoBERTa / XLM-R: dense, tanh, out_proj;
  // ELECTRA: dense, gelu (whatever hidden_act is), out_proj. Logits compared too.
  for (const std::string& family : kVariants) {
    for (const std::string type : {"absolute", "relative_key"}) {
      const std::string label = family + " classifier, " + type;
      const std::string dir = CreateFrom(family + "_cls_" + type, Options(family, {{"position_embedding_type", type},
                                                                              {"hidden_act", "relu"}}, 3));
      const auto out = Check(dir, label);
      ASSERT_EQ(out.at("logits").shape, (std::vector<int64_t>{4, 3})) << label;
      // The head reads token 0 only: a different token 0 in row 0 changes row 0's logits.
      PaddedBatch other = batch_;
      other.input_ids[0] = other.input_ids[0] == 5 ? 6 : 5;
      const auto changed = Check(dir, other, label + ", token 0 changed");
      EXPECT_GT(Diff(changed, out, batch_, "logits"), kMatters) << label;
    }
  }
}

TEST_F(BertSwitchTest, RegressionAndLabelsFromConfig) {
  for (const std::string& family : kVariants) {
    // num_labels 1: a regression head whose raw logit is the score.
    const std::string dir = CreateFrom(family + "_regression", Options(family, json::object(), 1));
    const auto out = Check(dir, family + " num_labels 1");
    EXPECT_EQ(out.at("logits").shape, (std::vector<int64_t>{4, 1})) << family;
    auto engine = Engine::Load(dir, TestEngineOptions());
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->info().problem_type, ProblemType::kRegression) << family;
    EXPECT_EQ((*engine)->info().labels, (std::vector<std::string>{"LABEL_0"})) << family;
  }
  // id2label names and problem_type come from config.json; num_labels alone sizes the head.
  const std::string named = CreateFrom("named", Options("roberta", json::object(), 2), [](json& c, F32Map&) {
    c["id2label"] = {{"0", "negative"}, {"1", "positive"}};
    c["problem_type"] = "multi_label_classification";
  });
  auto engine = Engine::Load(named, TestEngineOptions());
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->info().labels, (std::vector<std::string>{"negative", "positive"}));
  EXPECT_EQ((*engine)->info().problem_type, ProblemType::kMultiLabel);
  Check(CreateFrom("by_count", Options("electra", json::object(), 4), [](json& c, F32Map&) {
          c.erase("id2label");
          c.erase("label2id");
          c["num_labels"] = 4;
        }),
        "electra, num_labels 4 without id2label");
}

TEST_F(BertSwitchTest, ClassifierCheckpointLoadedAsBaseModel) {
  // A *ForSequenceClassification checkpoint ("bert." / "roberta." / "electra." keys and the
  // head) with architectures *Model: from_pretrained strips the prefix and drops the head.
  const std::map<std::string, std::string> base_arch = {
      {"bert", "BertModel"}, {"roberta", "RobertaModel"}, {"xlm-roberta", "XLMRobertaModel"}, {"electra", "ElectraModel"}};
  for (const std::string& family : kVariants) {
    const CreateModelOptions o = Options(family, json::object(), 3);
    const auto cls = Check(CreateFrom(family + "_cls", o), family + " classifier");
    const std::string arch = base_arch.at(family);
    const auto base = Check(CreateFrom(family + "_as_base", o, [&](json& c, F32Map&) { c["architectures"] = {arch}; }),
                            family + " classifier checkpoint as " + arch);
    EXPECT_EQ(base.count("logits"), 0u) << family;
    EXPECT_LE(Diff(base, cls, batch_), kTolerance) << family;
  }
}

// ---------------------------------------------------------------------------------------------
// Padding and the checkpoint.

TEST_F(BertSwitchTest, PaddingInvariance) {
  // Each row gives the same token states alone as padded in a batch (through Run, the server's
  // path, which pads with pad_token_id), for every variant and position type.
  for (const std::string& family : kVariants) {
    for (const std::string& type : kPositionTypes) {
      const std::string label = family + " " + type;
      const std::string dir =
          Create(family + "_pad_" + type, family, {{"position_embedding_type", type}, {"type_vocab_size", 2}});
      auto engine = Engine::Load(dir, TestEngineOptions());
      ASSERT_TRUE(engine.ok()) << label << ": " << engine.status();
      std::vector<SequenceInput> rows;
      for (int64_t b = 0; b < batch_.batch; ++b) {
        SequenceInput s;
        for (int64_t t = 0; t < batch_.length && batch_.attention_mask[b * batch_.length + t]; ++t) {
          s.input_ids.push_back(static_cast<int32_t>(batch_.input_ids[b * batch_.length + t]));
          s.token_type_ids.push_back(t % 2);
        }
        rows.push_back(s);
      }
      auto together = (*engine)->Run(rows, kOutputTokenStates | kOutputPooled);
      ASSERT_TRUE(together.ok()) << label << ": " << together.status();
      for (size_t r = 0; r < rows.size(); ++r) {
        auto alone = (*engine)->Run({rows[r]}, kOutputTokenStates | kOutputPooled);
        ASSERT_TRUE(alone.ok()) << label;
        const std::vector<float>& a = (*alone)[0].token_states;
        const std::vector<float>& b = (*together)[r].token_states;
        ASSERT_EQ(a.size(), b.size()) << label;
        double worst = 0;
        for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, testing::AbsDiff(static_cast<double>(a[i]), b[i]));
        EXPECT_LE(worst, kTolerance) << label << " row " << r;
      }
    }
  }
}

TEST_F(BertSwitchTest, CheckpointProblemsNameTheTensor) {
  const json rel = {{"position_embedding_type", "relative_key"}};
  // Heads of other architectures are ignored, as transformers drops them.
  const std::string extra = Create("extra", "bert", rel, [](json&, F32Map& w) {
    w["cls.predictions.bias"] = F32Tensor{{kVocab}, std::vector<float>(kVocab, 0.f)};
    w["lm_head.dense.weight"] = F32Tensor{{2, 2}, std::vector<float>(4, 0.f)};
    w["embeddings.position_ids"] = F32Tensor{{1, 512}, std::vector<float>(512, 0.f)};
  });
  EXPECT_TRUE(LoadStatus(extra).ok()) << LoadStatus(extra);
  // An unknown tensor is an error naming it.
  const std::string unknown = Create("unknown", "bert", rel, [](json&, F32Map& w) {
    w["encoder.layer.0.attention.self.surprise"] = F32Tensor{{2}, {0.f, 0.f}};
  });
  EXPECT_THAT(std::string(LoadStatus(unknown).message()), HasSubstr("encoder.layer.0.attention.self.surprise"));
  // A missing distance table names the tensor and its shape.
  const std::string missing = Create("missing", "bert", rel, [](json&, F32Map& w) {
    w.erase("encoder.layer.1.attention.self.distance_embedding.weight");
  });
  const absl::Status m = LoadStatus(missing);
  EXPECT_EQ(m.code(), absl::StatusCode::kNotFound) << m;
  EXPECT_THAT(std::string(m.message()), HasSubstr("encoder.layer.1.attention.self.distance_embedding.weight"));
  EXPECT_THAT(std::string(m.message()), HasSubstr("[1023, 8]"));
  // A distance table of the wrong size names max_position_embeddings.
  const std::string misshaped = Create("misshaped", "bert", rel, [](json& c, F32Map&) { c["max_position_embeddings"] = 256; });
  const absl::Status s = LoadStatus(misshaped);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_position_embeddings"));
  // A distance table under absolute positions disagrees with the config.
  const std::string stray = Create("stray", "bert", rel, [](json& c, F32Map&) { c["position_embedding_type"] = "absolute"; });
  EXPECT_THAT(std::string(LoadStatus(stray).message()), HasSubstr("position_embedding_type"));
  // The classifier's pooler is required under BertForSequenceClassification.
  const std::string no_pooler = CreateFrom("no_pooler", Options("bert", json::object(), 2), [](json&, F32Map& w) {
    w.erase("bert.pooler.dense.weight");
  });
  EXPECT_THAT(std::string(LoadStatus(no_pooler).message()), HasSubstr("bert.pooler.dense.weight"));
}

TEST_F(BertSwitchTest, RefusedConfigsNameTheKey) {
  struct Case {
    json overrides;
    std::string key;
  };
  for (const Case& c : {Case{{{"position_embedding_type", "relative"}}, "position_embedding_type"},
                        Case{{{"is_decoder", true}}, "is_decoder"},
                        Case{{{"add_cross_attention", true}}, "add_cross_attention"},
                        Case{{{"num_attention_heads", 3}}, "num_attention_heads"},
                        Case{{{"hidden_act", "swiglu"}}, "hidden_act"},
                        Case{{{"layer_norm_eps", 0}}, "layer_norm_eps"},
                        Case{{{"pad_token_id", 128}}, "pad_token_id"}}) {
    const std::string dir = Create("refused_" + c.key, "bert", json::object(),
                                   [&](json& config, F32Map&) { config.update(c.overrides); });
    const absl::Status s = LoadStatus(dir);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.key << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.key)) << s;
  }
  // RoBERTa's positions start after padding_idx, which must leave room in the table.
  const std::string dir = Create("roberta_pad", "roberta", json::object(),
                                 [](json& config, F32Map&) { config["pad_token_id"] = 513; });
  EXPECT_THAT(std::string(LoadStatus(dir).message()), HasSubstr("pad_token_id"));
}

}  // namespace
}  // namespace relserve
