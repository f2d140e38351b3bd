// The engine against the naive port of transformers' modeling_mpnet.py (naive_mpnet_reference.h,
// itself checked against transformers in naive_reference_test), one test per configuration
// switch transformers 4.40.2's MPNet honours: relative_attention_num_buckets (which only sizes
// the bias table: compute_position_bias always uses 32 buckets and distance 128), hidden_act,
// layer_norm_eps, pad_token_id and the positions counted after padding_idx 1, log buckets and
// distances past max_distance, the classification head, the checkpoint layouts of the MPNet
// classes, token types, padding invariance and the length limit. Every hidden state (and the
// logits) must match the port within 1e-4 at the unpadded positions of a padded batch (rows of
// 70, 33, 17 and 1 tokens whose ids include padding_idx 1) and of an unpadded one, and each
// switch is shown to matter: the outputs with it flipped differ by more than 100x the tolerance.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/model/engine.h"
#include "server/tools/model_creator.h"
#include "server/util/json_util.h"
#include "tests/model/families/mpnet/naive_mpnet_reference.h"
#include "tests/model/reference_fixture.h"
#include "tests/model/switch_test_support.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using nlohmann::json;
using namespace testing;  // NOLINT: the switch-test helpers

constexpr char kBias[] = "encoder.relative_attention_bias.weight";

class MpnetSwitchTest : public SwitchTestBase {
 protected:
  // MPNetModel as all-mpnet-base-v2 is laid out (max_position_embeddings 514, 32 buckets,
  // layer_norm_eps 1e-5), hidden 32, 4 heads. `overrides` are merged into config.json (null
  // removes a key); the weights follow the final config.
  static CreateModelOptions Options(const json& overrides) { return TinyOptions("mpnet", overrides); }
  // A relative bias of std 1 (not 0.2), so that a wrong bucket shows.
  void AdjustWeights(F32Map* weights) override {
    for (auto& [name, t] : *weights) {
      if (EndsWith(name, kBias)) Scale(weights, name, 5.0f);
    }
  }
  std::string Create(const std::string& name, const json& overrides = json::object(), const Edit& edit = nullptr) {
    return CreateFrom(name, Options(overrides), edit);
  }
  std::unique_ptr<Engine> Load(const std::string& dir, EngineOptions options = TestEngineOptions()) {
    auto engine = Engine::Load(dir, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? std::move(*engine) : nullptr;
  }
  // Only the rows of `batch` listed in `rows` count in a comparison.
  static PaddedBatch OnlyRows(PaddedBatch batch, const std::vector<int64_t>& rows) {
    for (int64_t b = 0; b < batch.batch; ++b) {
      if (std::find(rows.begin(), rows.end(), b) != rows.end()) continue;
      for (int64_t t = 0; t < batch.length; ++t) batch.attention_mask[b * batch.length + t] = 0;
    }
    return batch;
  }
  // batch_ with every real id 1 (padding_idx) replaced by 3.
  PaddedBatch WithoutPaddingIdx() const {
    PaddedBatch b = batch_;
    for (size_t i = 0; i < b.input_ids.size(); ++i) {
      if (b.attention_mask[i] != 0 && b.input_ids[i] == 1) b.input_ids[i] = 3;
    }
    return b;
  }
};

// ---------------------------------------------------------------------------------------------

TEST_F(MpnetSwitchTest, TheBatchesHoldWhatTheTestsNeed) {
  // Real tokens with id 1 (positions skip them), and rows past the exact buckets (8).
  int64_t ones = 0;
  for (size_t i = 0; i < batch_.input_ids.size(); ++i) ones += batch_.attention_mask[i] != 0 && batch_.input_ids[i] == 1;
  EXPECT_GT(ones, 0);
  EXPECT_GT(batch_.length, 16);
}

TEST_F(MpnetSwitchTest, RelativeAttentionNumBucketsOnlySizesTheTable) {
  const std::string b32_dir = Create("b32");
  const auto b32 = Check(b32_dir, "relative_attention_num_buckets 32");
  // 40 rows whose first 32 are the 32-row model's: compute_position_bias still buckets into 32,
  // so rows 32..39 are never read, however large.
  const F32Map b32_weights = ReadWeights(b32_dir);
  const auto b40 = Check(Create("b40", {{"relative_attention_num_buckets", 40}},
                                [&](json&, F32Map& w) {
                                  F32Tensor& t = w.at(kBias);
                                  ASSERT_EQ(t.shape, (std::vector<int64_t>{40, 4}));
                                  const std::vector<float>& src = b32_weights.at(kBias).data;
                                  std::copy(src.begin(), src.end(), t.data.begin());
                                  for (size_t i = src.size(); i < t.data.size(); ++i) t.data[i] = 1000.0f;
                                }),
                         "relative_attention_num_buckets 40");
  EXPECT_LE(Diff(b40, b32, batch_), kTolerance);
  // The table matters, and one table serves every layer: scaling it changes each layer's output.
  const auto scaled = Check(Create("b32_scaled", json::object(), [](json&, F32Map& w) { Scale(&w, kBias, -1.0f); }),
                            "relative_attention_num_buckets 32, bias * -1");
  EXPECT_GT(Diff(scaled, b32, batch_, "hidden_state_1"), kMatters);
  EXPECT_GT(Diff(scaled, b32, batch_, "hidden_state_2"), kMatters);
  EXPECT_LE(Diff(scaled, b32, batch_, "hidden_state_0"), kTolerance);
  // Fewer than 32 rows: transformers fails on the first bucket past them; the engine refuses the
  // model, naming the key.
  const std::string b16 = Create("b16", json::object(), [](json& c, F32Map& w) {
    c["relative_attention_num_buckets"] = 16;
    F32Tensor& t = w.at(kBias);
    t.shape = {16, 4};
    t.data.resize(16 * 4);
  });
  auto engine = Engine::Load(b16, EngineOptions{});
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(engine.status().message().find("\"relative_attention_num_buckets\""), std::string::npos) << engine.status();
}

TEST_F(MpnetSwitchTest, LogBucketsAndDistancesPastMaxDistance) {
  // Rows of 300 and 129 tokens: distances past max_distance 128 share the last bucket of their
  // direction (15 keys before, 31 keys after), which distances of 91 and more reach.
  const PaddedBatch long_batch = MakeBatch({300, 129, 40, 1}, kVocab, 13);
  const std::string dir = Create("long");
  const auto base = Check(dir, long_batch, "rows of 300, 129, 40 and 1 tokens");
  auto edit_rows = [](std::vector<int64_t> rows) {
    return [rows](json&, F32Map& w) {
      F32Tensor& t = w.at(kBias);
      for (int64_t r : rows) {
        for (int64_t h = 0; h < 4; ++h) t.data[r * 4 + h] += 3.0f;
      }
    };
  };
  const auto saturated = Check(Create("long_15_31", json::object(), edit_rows({15, 31})), long_batch,
                               "buckets 15 and 31 changed");
  EXPECT_GT(Diff(saturated, base, OnlyRows(long_batch, {0, 1})), kMatters);
  EXPECT_LE(Diff(saturated, base, OnlyRows(long_batch, {2, 3})), kTolerance);  // nothing 91 apart
  // A log bucket below the last (9: distances 12 .. 15) reaches the rows of 40 tokens too.
  const auto log_bucket = Check(Create("long_9", json::object(), edit_rows({9})), long_batch, "bucket 9 changed");
  EXPECT_GT(Diff(log_bucket, base, OnlyRows(long_batch, {2})), kMatters);
  EXPECT_LE(Diff(log_bucket, base, OnlyRows(long_batch, {3})), kTolerance);
}

TEST_F(MpnetSwitchTest, HiddenActVariants) {
  std::map<std::string, EngineOutputs> out;
  for (const std::string& act : AllActivations()) {
    out[act] = Check(Create("act_" + act, {{"hidden_act", act}}), "hidden_act " + act);
  }
  for (const std::string& act : AllActivations()) {
    if (act == "gelu" || CloseToGelu(act)) continue;
    EXPECT_GT(Diff(out[act], out["gelu"], batch_), kMatters) << act;
  }
  EXPECT_LE(Diff(out["silu"], out["swish"], batch_), kTolerance);
  // The intermediate dense scaled up: gelu_10 and relu6 clip, and the tanh approximations leave
  // the 1e-4 band of gelu; the engine stays at least 10x closer to its own activation.
  const auto big = [](json&, F32Map& w) {
    for (int l = 0; l < 2; ++l) Scale(&w, "encoder.layer." + std::to_string(l) + ".intermediate.dense.weight", 10.0f);
  };
  std::map<std::string, EngineOutputs> wide;
  std::map<std::string, naive::Outputs> wide_naive;
  for (const char* name : {"gelu", "gelu_10", "gelu_new", "gelu_fast", "relu", "relu6"}) {
    const std::string act = name;
    const std::string dir = Create("wide_" + act, {{"hidden_act", act}}, big);
    wide[act] = Check(dir, "hidden_act " + act + ", wide pre-activations");
    wide_naive[act] = RunNaive(dir, batch_);
  }
  EXPECT_GT(Diff(wide["gelu_10"], wide["gelu"], batch_), kMatters);
  EXPECT_GT(Diff(wide["relu6"], wide["relu"], batch_), kMatters);
  for (const char* name : {"gelu_new", "gelu_fast"}) {
    const double to_own = Diff(wide[name], wide_naive[name], batch_);
    const double to_gelu = Diff(wide[name], wide_naive["gelu"], batch_);
    EXPECT_GT(to_gelu, 10 * std::max(to_own, 1e-6)) << name << ": " << to_gelu << " vs " << to_own;
  }
  // Unsupported names are refused at load, naming the key.
  auto engine = Engine::Load(Create("act_bad", json::object(), [](json& c, F32Map&) { c["hidden_act"] = "gelu_13"; }),
                             EngineOptions{});
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("\"hidden_act\""), std::string::npos) << engine.status();
}

TEST_F(MpnetSwitchTest, LayerNormEps) {
  const auto small = Check(Create("eps_small"), "layer_norm_eps 1e-5");
  const auto large = Check(Create("eps_large", {{"layer_norm_eps", 0.5}}), "layer_norm_eps 0.5");
  EXPECT_GT(Diff(small, large, batch_), kMatters);
  // Absent: MPNetConfig's 1e-12 (every norm: embeddings, attention and output).
  Check(Create("eps_default", {{"layer_norm_eps", nullptr}}), "layer_norm_eps absent");
}

TEST_F(MpnetSwitchTest, PositionsCountTokensOtherThanPaddingIdxWhateverPadTokenId) {
  // Id 1 reads position row 1 and is not counted, pad_token_id or not: a model whose row 1 of
  // the position table is changed gives other outputs on rows holding id 1 and the same on rows
  // without it.
  const std::string dir = Create("pad1");
  const auto base = Check(dir, "pad_token_id 1");
  const PaddedBatch no_ones = WithoutPaddingIdx();
  const auto base_no_ones = Check(dir, no_ones, "pad_token_id 1, no id 1");
  const auto row1 = [](json&, F32Map& w) {
    F32Tensor& t = w.at("embeddings.position_embeddings.weight");
    for (int64_t k = 0; k < 32; ++k) t.data[1 * 32 + k] += k % 2 == 0 ? 2.0f : -1.5f;  // not a constant, which LayerNorm removes
  };
  const std::string changed_dir = Create("pad1_row1", json::object(), row1);
  EXPECT_GT(Diff(Check(changed_dir, "position row 1 changed"), base, batch_), kMatters);
  EXPECT_LE(Diff(Check(changed_dir, no_ones, "position row 1 changed, no id 1"), base_no_ones, no_ones), kTolerance);
  // pad_token_id 0: the same positions (padding_idx stays 1), the same outputs.
  const auto pad0 = Check(Create("pad0", {{"pad_token_id", 0}}), "pad_token_id 0");
  EXPECT_LE(Diff(pad0, base, batch_), kTolerance);
}

TEST_F(MpnetSwitchTest, ClassifierHead) {
  // MPNetForSequenceClassification: out_proj(tanh(dense(<s>))), 3 labels from id2label and 1
  // (regression); the backbone under "mpnet.", no pooler.
  CreateModelOptions three = Options(json::object());
  three.num_labels = 3;
  const std::string three_dir = CreateFrom("cls3", three);
  const auto out3 = Check(three_dir, "3 labels");
  ASSERT_EQ(out3.at("logits").shape, (std::vector<int64_t>{4, 3}));
  CreateModelOptions one = Options(json::object());
  one.num_labels = 1;
  const auto out1 = Check(CreateFrom("cls1", one), "1 label");
  ASSERT_EQ(out1.at("logits").shape, (std::vector<int64_t>{4, 1}));
  auto engine = Load(scratch_.Path("cls1"));
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->info().problem_type, ProblemType::kRegression);
  EXPECT_EQ(engine->info().labels.size(), 1u);
  // num_labels without id2label sizes the head; problem_type is read as given.
  const auto by_count = Check(CreateFrom("cls_num_labels", three,
                                         [](json& c, F32Map&) {
                                           c.erase("id2label");
                                           c.erase("label2id");
                                           c["num_labels"] = 3;
                                           c["problem_type"] = "multi_label_classification";
                                         }),
                              "num_labels 3 without id2label");
  EXPECT_LE(Diff(by_count, out3, batch_, "logits"), kTolerance);
  engine = Load(scratch_.Path("cls_num_labels"));
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->info().problem_type, ProblemType::kMultiLabel);
  EXPECT_EQ(engine->info().labels, (std::vector<std::string>{"LABEL_0", "LABEL_1", "LABEL_2"}));
  // The head reads the first token only: another first token in row 0 changes row 0's logits.
  PaddedBatch other = batch_;
  other.input_ids[0] = other.input_ids[0] == 5 ? 6 : 5;
  EXPECT_GT(Diff(Check(three_dir, other, "3 labels, token 0 changed"), out3, OnlyRows(batch_, {0}), "logits"),
            kMatters);
  // Both of its layers take part.
  const auto dense = Check(CreateFrom("cls3_dense", three, [](json&, F32Map& w) { Scale(&w, "classifier.dense.weight", 3.0f); }),
                           "3 labels, classifier.dense * 3");
  EXPECT_GT(Diff(dense, out3, batch_, "logits"), kMatters);
  EXPECT_LE(Diff(dense, out3, batch_), kTolerance);
  // A head whose size disagrees with the labels is refused, naming num_labels.
  auto bad = Engine::Load(CreateFrom("cls3_bad", three, [](json& c, F32Map&) {
                            c.erase("id2label");
                            c.erase("label2id");
                            c["num_labels"] = 2;
                          }),
                          EngineOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"num_labels\""), std::string::npos) << bad.status();
}

TEST_F(MpnetSwitchTest, CheckpointLayoutsOfTheMpnetClasses) {
  CreateModelOptions cls = Options(json::object());
  cls.num_labels = 3;
  const auto with_head = Check(CreateFrom("cls", cls), "MPNetForSequenceClassification");
  // The same checkpoint as MPNetModel: from_pretrained strips "mpnet." and drops the head.
  const auto as_model = Check(CreateFrom("cls_as_model", cls, [](json& c, F32Map&) { c["architectures"] = {"MPNetModel"}; }),
                              "MPNetForSequenceClassification checkpoint as MPNetModel");
  EXPECT_EQ(as_model.count("logits"), 0u);
  EXPECT_LE(Diff(as_model, with_head, batch_), kTolerance);
  // MPNetForMaskedLM (microsoft/mpnet-base's layout): "mpnet." and lm_head, run as the encoder;
  // the prefixed weights are the ones read.
  const std::string plain_dir = Create("plain");
  const auto plain = Check(plain_dir, "MPNetModel");
  const auto as_masked_lm = [](float scale) {
    return [scale](json& c, F32Map& w) {
      c["architectures"] = {"MPNetForMaskedLM"};
      F32Map renamed;
      for (auto& [name, t] : w) {
        if (name.rfind("pooler.", 0) == 0) continue;
        renamed["mpnet." + name] = t;
      }
      renamed["lm_head.dense.weight"] = F32Tensor{{32, 32}, std::vector<float>(32 * 32, 0.5f)};
      renamed["lm_head.dense.bias"] = F32Tensor{{32}, std::vector<float>(32, 0.5f)};
      renamed["lm_head.layer_norm.weight"] = F32Tensor{{32}, std::vector<float>(32, 1.0f)};
      renamed["lm_head.layer_norm.bias"] = F32Tensor{{32}, std::vector<float>(32, 0.0f)};
      renamed["lm_head.decoder.weight"] = F32Tensor{{kVocab, 32}, std::vector<float>(kVocab * 32, 0.1f)};
      renamed["lm_head.bias"] = F32Tensor{{kVocab}, std::vector<float>(kVocab, 0.0f)};
      w = std::move(renamed);
      if (scale != 1.0f) Scale(&w, "mpnet.encoder.layer.1.output.dense.weight", scale);
    };
  };
  EXPECT_LE(Diff(Check(Create("masked_lm", json::object(), as_masked_lm(1.0f)), "MPNetForMaskedLM"), plain, batch_),
            kTolerance);
  EXPECT_GT(Diff(Check(Create("masked_lm_scaled", json::object(), as_masked_lm(2.0f)), "MPNetForMaskedLM, scaled"),
                 plain, batch_),
            kMatters);
  // MPNetModel's pooler is optional (transformers initialises a missing one; its output is not
  // served), the saved position_ids buffer of older checkpoints is accepted, and a pooler whose
  // shape disagrees with hidden_size is refused as transformers refuses it.
  const auto no_pooler = Check(Create("no_pooler", json::object(),
                                      [](json&, F32Map& w) {
                                        w.erase("pooler.dense.weight");
                                        w.erase("pooler.dense.bias");
                                        std::vector<float> ids(514);
                                        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<float>(i);
                                        w["embeddings.position_ids"] = F32Tensor{{1, 514}, ids};
                                      }),
                               "MPNetModel without pooler, with position_ids");
  EXPECT_LE(Diff(no_pooler, plain, batch_), kTolerance);
  auto bad = Engine::Load(Create("bad_pooler", json::object(),
                                 [](json&, F32Map& w) {
                                   w["pooler.dense.weight"] = F32Tensor{{16, 32}, std::vector<float>(16 * 32, 0.0f)};
                                 }),
                          EngineOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("pooler.dense.weight"), std::string::npos) << bad.status();
  // A tensor of no MPNet class is refused by name.
  auto extra = Engine::Load(Create("extra", json::object(),
                                   [](json&, F32Map& w) {
                                     w["encoder.layer.0.attention.attn.r.weight"] = F32Tensor{{2}, {1.0f, 2.0f}};
                                   }),
                            EngineOptions{});
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("encoder.layer.0.attention.attn.r.weight"), std::string::npos)
      << extra.status();
}

TEST_F(MpnetSwitchTest, TokenTypeIdsAreIgnored) {
  // MPNet has no token types: MPNetModel.forward swallows token_type_ids in **kwargs.
  const std::string dir = Create("types");
  const PaddedBatch pairs = MakeBatch({70, 33, 17, 1}, kVocab, 11, /*pairs=*/true);
  const auto with_types = Check(dir, pairs, "token_type_ids given");
  EXPECT_LE(Diff(with_types, Check(dir, "no token_type_ids"), batch_), kTolerance);
  auto engine = Load(dir);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->info().type_vocab_size, 0);
  EXPECT_TRUE(engine->Validate(SequenceInput{{0, 5, 2, 2, 7, 2}, {0, 0, 0, 1, 1, 1}}).ok());
}

TEST_F(MpnetSwitchTest, RowsAloneEqualRowsInAPaddedBatch) {
  // Engine::Run pads with pad_token_id (1 here, 0 in the second model): each row's token states
  // alone and in a batch of rows of other lengths agree, and agree with the port.
  for (const int pad : {1, 0}) {
    const std::string dir = Create("pad_" + std::to_string(pad), {{"pad_token_id", pad}});
    auto engine = Load(dir);
    ASSERT_NE(engine, nullptr);
    std::vector<SequenceInput> rows;
    for (int64_t b = 0; b < batch_.batch; ++b) {
      SequenceInput s;
      for (int64_t t = 0; t < batch_.length; ++t) {
        if (batch_.attention_mask[b * batch_.length + t] != 0) {
          s.input_ids.push_back(static_cast<int32_t>(batch_.input_ids[b * batch_.length + t]));
        }
      }
      rows.push_back(s);
    }
    auto together = engine->Run(rows, kOutputTokenStates);
    ASSERT_TRUE(together.ok()) << together.status();
    const naive::Outputs want = RunNaive(dir, batch_);
    const naive::Tensor& last = want.at("last_hidden_state");
    for (size_t b = 0; b < rows.size(); ++b) {
      auto alone = engine->Run({rows[b]}, kOutputTokenStates);
      ASSERT_TRUE(alone.ok()) << alone.status();
      const std::vector<float>& a = (*alone)[0].token_states;
      const std::vector<float>& t = (*together)[b].token_states;
      ASSERT_EQ(a.size(), t.size());
      double worst = 0, to_port = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        worst = std::max(worst, testing::AbsDiff(static_cast<double>(a[i]), t[i]));
        to_port = std::max(to_port, testing::AbsDiff(t[i], last.data[b * batch_.length * 32 + i]));
      }
      EXPECT_LE(worst, 1e-5) << "pad " << pad << ", row " << b;
      EXPECT_LE(to_port, kTolerance) << "pad " << pad << ", row " << b;
    }
  }
}

TEST_F(MpnetSwitchTest, MaxLengthIsMaxPositionEmbeddingsAfterPaddingIdx) {
  // 514 position rows: 512 tokens (positions 2 .. 513).
  auto engine = Load(Create("max514"));
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->info().max_length, 512);
  SequenceInput longest;
  longest.input_ids.assign(512, 5);
  EXPECT_TRUE(engine->Validate(longest).ok());
  longest.input_ids.push_back(5);
  const absl::Status too_long = engine->Validate(longest);
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("maximum of 512"), std::string::npos) << too_long;
  const PaddedBatch padded_too_long = MakeBatch({513}, kVocab, 5);
  auto forward = engine->ForwardPadded(padded_too_long, false);
  ASSERT_FALSE(forward.ok());
  EXPECT_EQ(forward.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(forward.status().message().find("max_position_embeddings"), std::string::npos) << forward.status();
  // --max-length beyond the positions is refused; below, it is the limit.
  EngineOptions options;
  options.max_length = 513;
  auto refused = Engine::Load(scratch_.Path("max514"), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("max_position_embeddings"), std::string::npos) << refused.status();
  options.max_length = 100;
  engine = Load(scratch_.Path("max514"), options);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->info().max_length, 100);
  // 66 rows: 64 tokens, the last reading the last row; the engine matches the port there.
  const std::string small = Create("max66", {{"max_position_embeddings", 66}});
  engine = Load(small);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->info().max_length, 64);
  Check(small, MakeBatch({64, 63, 2}, kVocab, 17), "max_position_embeddings 66, rows of 64");
}

TEST_F(MpnetSwitchTest, SentenceTransformersPooling) {
  // all-mpnet-base-v2's modules: mean pooling over the real tokens, then Normalize.
  CreateModelOptions o = Options(json::object());
  o.sentence_transformers = true;
  const std::string dir = CreateFrom("st", o);
  auto engine = Load(dir);
  ASSERT_NE(engine, nullptr);
  EXPECT_TRUE(engine->info().pooling.normalize);
  const naive::Outputs want = RunNaive(dir, batch_);
  const naive::Tensor& last = want.at("last_hidden_state");
  for (int64_t b = 0; b < batch_.batch; ++b) {
    SequenceInput s;
    for (int64_t t = 0; t < batch_.length; ++t) {
      if (batch_.attention_mask[b * batch_.length + t] != 0) {
        s.input_ids.push_back(static_cast<int32_t>(batch_.input_ids[b * batch_.length + t]));
      }
    }
    auto out = engine->Run({s}, kOutputPooled);
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float>& pooled = (*out)[0].pooled;
    ASSERT_EQ(pooled.size(), 32u);
    std::vector<double> mean(32, 0.0);
    const size_t n = s.input_ids.size();
    for (size_t t = 0; t < n; ++t) {
      for (size_t k = 0; k < 32; ++k) mean[k] += last.data[(b * batch_.length + t) * 32 + k] / n;
    }
    double norm = 0;
    for (double v : mean) norm += v * v;
    norm = std::sqrt(norm);
    for (size_t k = 0; k < 32; ++k) EXPECT_NEAR(pooled[k], mean[k] / norm, kTolerance) << "row " << b << ", " << k;
  }
}
}  // namespace
}  // namespace relserve
