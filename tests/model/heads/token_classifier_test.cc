// The token classifiers of *ForTokenClassification checkpoints (kOutputTokenLogits through
// Engine::Run), for every family relserve serves, against transformers 4.40.2's classes read
// from their modeling files: BertForTokenClassification, RobertaForTokenClassification,
// XLMRobertaForTokenClassification, ElectraForTokenClassification,
// DebertaV2ForTokenClassification, MPNetForTokenClassification (each: the backbone under its
// prefix without a pooler, dropout, then `classifier` = nn.Linear(hidden_size, num_labels) on
// the last hidden state) and XLNetForTokenClassification (`transformer.`, then `classifier` on
// every token; no sequence summary). The logits are checked against that Linear written out in
// double over the engine's own token states (the backbones are proven against transformers by
// reference_parity_test and the switch tests; tests/serving/token_classification_reference_test
// runs two of these heads against the pipeline's answers end to end).
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model/kernels/packed_gemm.h"
#include "server/tools/model_creator.h"
#include "tests/model/switch_test_support.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using testing::F32Map;
using testing::ScratchDir;
using nlohmann::json;

constexpr int64_t kVocab = 128;
constexpr int64_t kHidden = 32;

struct HeadCase {
  const char* variant;       // relserve-model create --family
  const char* architecture;  // transformers' class
  const char* backbone;      // a tensor of the backbone, under the class's prefix
  const char* pooler;        // the backbone's pooler, which the class builds without ("" none)
};

const HeadCase kCases[] = {
    {"bert", "BertForTokenClassification", "bert.embeddings.word_embeddings.weight", "bert.pooler.dense.weight"},
    {"roberta", "RobertaForTokenClassification", "roberta.embeddings.word_embeddings.weight",
     "roberta.pooler.dense.weight"},
    {"xlm-roberta", "XLMRobertaForTokenClassification", "roberta.embeddings.word_embeddings.weight",
     "roberta.pooler.dense.weight"},
    {"electra", "ElectraForTokenClassification", "electra.embeddings.word_embeddings.weight", ""},
    {"deberta-v3", "DebertaV2ForTokenClassification", "deberta.embeddings.word_embeddings.weight", "pooler.dense.weight"},
    {"mpnet", "MPNetForTokenClassification", "mpnet.embeddings.word_embeddings.weight", "mpnet.pooler.dense.weight"},
    {"xlnet", "XLNetForTokenClassification", "transformer.word_embedding.weight", "sequence_summary.summary.weight"},
};

const std::vector<std::string> kLabels = {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"};

json Overrides(const HeadCase& c) {
  json id2label = json::object(), label2id = json::object();
  for (size_t i = 0; i < kLabels.size(); ++i) {
    id2label[std::to_string(i)] = kLabels[i];
    label2id[kLabels[i]] = i;
  }
  return {{"architectures", {c.architecture}}, {"id2label", id2label}, {"label2id", label2id}};
}

std::vector<SequenceInput> Sequences(const std::vector<int>& lengths, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(3, kVocab - 1);
  std::vector<SequenceInput> batch;
  for (int n : lengths) {
    SequenceInput s;
    for (int t = 0; t < n; ++t) s.input_ids.push_back(id(rng));
    batch.push_back(std::move(s));
  }
  return batch;
}

class TokenClassifierTest : public ::testing::Test {
 protected:
  // A created *ForTokenClassification model with random biases and norm weights.
  std::string Create(const HeadCase& c, const json& overrides) {
    const std::string dir = scratch_.Path(c.variant);
    CreateModelOptions o;
    o.family = c.variant;
    o.hidden = kHidden;
    o.layers = 2;
    o.heads = 4;
    o.intermediate = 64;
    o.vocab = kVocab;
    o.seed = 5;
    o.init_std = 0.2f;
    o.config_overrides = overrides;
    auto st = CreateModelDirectory(o, dir);
    if (!st.ok()) throw std::runtime_error("CreateModelDirectory: " + std::string(st.message()));
    F32Map weights = testing::ReadWeights(dir);
    testing::RandomizeVectors(&weights, 5);
    testing::WriteWeights(dir, weights);
    return dir;
  }

  ScratchDir scratch_;
};

TEST_F(TokenClassifierTest, EveryFamilysClassifierRunsOnTheLastHiddenState) {
  const std::vector<SequenceInput> batch = Sequences({11, 30, 1, 6}, 3);
  for (const HeadCase& c : kCases) {
    SCOPED_TRACE(c.architecture);
    const std::string dir = Create(c, Overrides(c));
    const F32Map weights = testing::ReadWeights(dir);
    // The layout transformers saves for the class: the backbone under its prefix, the
    // classifier at the top, no pooler.
    ASSERT_EQ(weights.count(c.backbone), 1u);
    if (*c.pooler != '\0') {
      EXPECT_EQ(weights.count(c.pooler), 0u);
    }
    ASSERT_EQ(weights.count("classifier.weight"), 1u);
    const std::vector<float>& w = weights.at("classifier.weight").data;
    const std::vector<float>& bias = weights.at("classifier.bias").data;
    ASSERT_EQ(weights.at("classifier.weight").shape, (std::vector<int64_t>{5, kHidden}));

    auto engine = Engine::Load(dir, testing::TestEngineOptions());
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->info().token_labels, kLabels);
    EXPECT_TRUE((*engine)->info().labels.empty()) << "no sequence labels";
    EXPECT_EQ((*engine)->info().architecture, c.architecture);
    auto out = (*engine)->Run(batch, kOutputTokenStates | kOutputTokenLogits);
    ASSERT_TRUE(out.ok()) << out.status();
    double worst = 0;
    for (size_t b = 0; b < batch.size(); ++b) {
      const SequenceOutput& o = (*out)[b];
      ASSERT_EQ(o.token_logits.size(), batch[b].input_ids.size() * kLabels.size());
      for (int32_t t = 0; t < o.num_tokens; ++t) {
        for (size_t j = 0; j < kLabels.size(); ++j) {
          double want = bias[j];
          for (int64_t k = 0; k < kHidden; ++k) want += double(w[j * kHidden + k]) * o.token_states[t * kHidden + k];
          worst = std::max(worst, testing::AbsDiff(want, o.token_logits[t * kLabels.size() + j]));
        }
      }
    }
    EXPECT_LE(worst, 1e-4);
    // A token classifier has no sequence head.
    auto logits = (*engine)->Run(batch, kOutputLogits);
    EXPECT_EQ(logits.status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

// In float32 on a CPU the packed GEMM runs on, the classifier is packed with the encoder's
// projections (so that a forward asking for token logits wakes no BLAS thread), and answers as
// LibTorch's linear does; --float32-gemm blas packs nothing.
TEST_F(TokenClassifierTest, TheClassifierRunsOnThePackedGemmWithTheEncoder) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  const HeadCase& c = kCases[4];  // DeBERTa-v3
  const std::string dir = Create(c, Overrides(c));
  const std::vector<SequenceInput> batch = Sequences({9, 23, 2}, 8);
  const testing::PackedAndBlasEngines engines = testing::LoadPackedAndBlas(dir);
  EXPECT_EQ(engines.packed->info().packed_float32_heads, 1);
  EXPECT_EQ(engines.blas->info().packed_float32_heads, 0);
  auto got = engines.packed->Run(batch, kOutputTokenLogits);
  auto want = engines.blas->Run(batch, kOutputTokenLogits);
  ASSERT_TRUE(got.ok() && want.ok());
  for (size_t b = 0; b < batch.size(); ++b) {
    ASSERT_EQ((*got)[b].token_logits.size(), batch[b].input_ids.size() * kLabels.size());
    EXPECT_LE(testing::MaxAbsDiff((*got)[b].token_logits, (*want)[b].token_logits), 1e-4) << b;
  }
}

TEST_F(TokenClassifierTest, ModelsWithoutTheHeadRefuseTokenLogits) {
  const HeadCase& c = kCases[0];
  json overrides = Overrides(c);
  overrides["architectures"] = {"BertModel"};
  const std::string dir = Create(c, overrides);
  auto engine = Engine::Load(dir, testing::TestEngineOptions());
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE((*engine)->info().token_labels.empty());
  auto out = (*engine)->Run(Sequences({4}, 1), kOutputTokenLogits);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(), HasSubstr("no token-classification head"));
}

TEST_F(TokenClassifierTest, AClassifierThatDisagreesWithTheLabelsIsRefusedAtLoad) {
  const HeadCase& c = kCases[4];  // DeBERTa-v3
  const std::string dir = Create(c, Overrides(c));
  F32Map weights = testing::ReadWeights(dir);
  // Three rows for five labels.
  weights["classifier.weight"].shape = {3, kHidden};
  weights["classifier.weight"].data.resize(3 * kHidden);
  weights["classifier.bias"].shape = {3};
  weights["classifier.bias"].data.resize(3);
  testing::WriteWeights(dir, weights);
  auto engine = Engine::Load(dir, testing::TestEngineOptions());
  ASSERT_FALSE(engine.ok());
  EXPECT_THAT(engine.status().message(), HasSubstr("token classifier"));
  EXPECT_THAT(engine.status().message(), HasSubstr("classifier.weight"));

  // And one without a classifier at all.
  weights.erase("classifier.weight");
  weights.erase("classifier.bias");
  testing::WriteWeights(dir, weights);
  engine = Engine::Load(dir, testing::TestEngineOptions());
  ASSERT_FALSE(engine.ok());
  EXPECT_THAT(engine.status().message(), HasSubstr("classifier.weight"));
}

}  // namespace
}  // namespace relserve
