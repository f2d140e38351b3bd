// First-token forwards (EncoderInputs::first_token_only, EngineKernels::first_token_forwards): where
// a batch's outputs read each sequence's first token alone (a classifier's logits, CLS pooling), the
// families that can run their last layer's projection and feed-forward on those tokens only. The
// model then returns one row per sequence, the same as its first row from every token; the engine's
// answers are the same either way, in every family (those that cannot ignore the request), padded
// or not, with tokens computed but not attended to, and in every dtype.
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"
#include "server/checkpoint/safetensors_checkpoint.h"
#include "server/model/engine.h"
#include "server/model/families/family_models.h"
#include "server/model/families/family_registry.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/layers/weight_loader.h"
#include "server/model_config/model_config.h"
#include "server/tools/model_creator.h"
#include "tests/model/switch_test_support.h"
#include "tests/testing/tensor_max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

struct Variant {
  const char* family;  // CreateModelOptions::family
  int layers;
  bool keeps_first_tokens;  // EncoderModel::RunsFirstTokenOnly
};

std::string VariantName(const Variant& v) {
  std::string name = std::string(v.family) + "_" + std::to_string(v.layers) + "_layers";
  for (char& c : name) c = (c == '-' || c == '.') ? '_' : c;
  return name;
}

class FirstTokenForwardTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    const Variant v = GetParam();
    CreateModelOptions o;
    o.family = v.family;
    o.hidden = 32;
    o.layers = v.layers;
    o.heads = 4;
    o.intermediate = 64;
    o.vocab = 200;
    o.init_std = 0.2f;  // large weights: a wrong row would show
    o.num_labels = std::string(v.family).rfind("t5", 0) == 0 ? 0 : 3;
    dir_ = scratch_.Path(VariantName(v));
    ASSERT_TRUE(CreateModelDirectory(o, dir_).ok());
  }

  // Mixed lengths (padding, and a sequence of one token), and one every token long.
  static std::vector<std::vector<SequenceInput>> Batches() {
    std::vector<std::vector<SequenceInput>> batches;
    auto seq = [](int n, int salt) {
      SequenceInput s;
      for (int t = 0; t < n; ++t) s.input_ids.push_back(5 + (t * 31 + salt * 17) % 190);
      return s;
    };
    batches.push_back({seq(5, 1), seq(17, 2), seq(1, 3), seq(40, 4)});
    batches.push_back({seq(12, 5), seq(12, 6), seq(12, 7)});
    std::vector<SequenceInput> unattended = {seq(20, 8), seq(9, 9)};
    unattended[0].attended_length = 14;  // tokens computed, not attended to: every position kept
    batches.push_back(unattended);
    return batches;
  }

  testing::ScratchDir scratch_;
  std::string dir_;
};

// The model alone: with first_token_only a family that runs it returns [B, 1, H], equal to the
// first row of the forward over every token; a family that cannot returns every token.
TEST_P(FirstTokenForwardTest, TheModelKeepsTheFirstTokensItsLastLayerRan) {
  const Variant v = GetParam();
  c10::InferenceMode guard;
  auto config = LoadModelConfig(dir_);
  ASSERT_TRUE(config.ok()) << config.status();
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(dir_);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  WeightLoader weights(**checkpoint, at::kFloat);
  auto model = LoadFamilyModel(*config, weights);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->RunsFirstTokenOnly(), v.keeps_first_tokens);
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{7, 30, 1, 12}, std::vector<int64_t>{16, 16}}) {
    const PaddedBatch b = testing::MakeBatch(lengths, 200, 3);
    EncoderInputs in;
    in.input_ids = at::tensor(b.input_ids, at::kLong).view({b.batch, b.length});
    in.attention_mask = at::tensor(b.attention_mask, at::kLong).view({b.batch, b.length});
    in.has_padding = in.attention_mask.eq(0).any().item<bool>();
    const EncoderOutputs every = (*model)->Forward(in, /*all_hidden_states=*/false);
    in.first_token_only = true;
    const EncoderOutputs first = (*model)->Forward(in, /*all_hidden_states=*/false);
    SCOPED_TRACE(::testing::Message() << "batch " << b.batch << " x " << b.length);
    if (v.keeps_first_tokens) {
      ASSERT_EQ(first.last_hidden_state.sizes(), (std::vector<int64_t>{b.batch, 1, every.last_hidden_state.size(2)}));
      EXPECT_LE(MaxAbsDiff(first.last_hidden_state, every.last_hidden_state.narrow(1, 0, 1)), 1e-5);
    } else {
      EXPECT_TRUE(at::equal(first.last_hidden_state, every.last_hidden_state));
    }
    if (every.logits.defined()) {
      EXPECT_LE(MaxAbsDiff(first.logits, every.logits), 1e-5);
    }
    // Every hidden state asked for: the request is ignored.
    const EncoderOutputs all = (*model)->Forward(in, /*all_hidden_states=*/true);
    EXPECT_EQ(all.last_hidden_state.sizes(), every.last_hidden_state.sizes());
  }
}

// The engine: logits and CLS pooling the same with first-token forwards as without, and mean
// pooling (which reads every token) too, in float32, int8 and (where the CPU has it) bfloat16; the
// engine counts the forwards that kept only the first tokens.
TEST_P(FirstTokenForwardTest, TheEngineAnswersAsFromEveryToken) {
  std::vector<DType> dtypes = {DType::kFloat32, DType::kInt8};
  if (PackedBFloat16Weights::Supported()) dtypes.push_back(DType::kBFloat16);
  for (DType dtype : dtypes) {
    for (const char* pooling : {"cls", "mean"}) {
      SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " pooling " << pooling);
      std::vector<std::unique_ptr<Engine>> engines;
      for (bool first_tokens : {true, false}) {
        EngineOptions options;
        options.dtype = dtype;
        options.pooling = pooling;
        options.kernels.first_token_forwards = first_tokens;
        auto engine = Engine::Load(dir_, options);
        ASSERT_TRUE(engine.ok()) << engine.status();
        engines.push_back(std::move(*engine));
      }
      const bool has_logits = !engines[0]->info().labels.empty();
      const bool keeps = GetParam().keeps_first_tokens;
      for (uint32_t outputs : {uint32_t{kOutputLogits}, uint32_t{kOutputPooled | kOutputPooledUnnormalized},
                               uint32_t{kOutputLogits | kOutputPooled}, uint32_t{kOutputPooled | kOutputTokenStates}}) {
        if ((outputs & kOutputLogits) && !has_logits) continue;
        // Reading only first tokens: logits alone, or with CLS pooling.
        const bool first_only = (outputs & kOutputTokenStates) == 0 &&
                                ((outputs & kOutputPooled) == 0 || std::string(pooling) == "cls");
        for (const auto& batch : Batches()) {
          const int64_t before = engines[0]->first_token_forwards();
          auto first = engines[0]->Run(batch, outputs);
          auto every = engines[1]->Run(batch, outputs);
          ASSERT_TRUE(first.ok()) << first.status();
          ASSERT_TRUE(every.ok()) << every.status();
          EXPECT_EQ(engines[0]->first_token_forwards() - before, keeps && first_only ? 1 : 0);
          EXPECT_EQ(engines[1]->first_token_forwards(), 0);
          for (size_t s = 0; s < batch.size(); ++s) {
            EXPECT_LE(MaxAbsDiff((*first)[s].logits, (*every)[s].logits), 1e-5) << "sequence " << s;
            EXPECT_LE(MaxAbsDiff((*first)[s].pooled, (*every)[s].pooled), 1e-5) << "sequence " << s;
            EXPECT_LE(MaxAbsDiff((*first)[s].pooled_unnormalized, (*every)[s].pooled_unnormalized), 1e-5)
                << "sequence " << s;
            EXPECT_EQ((*first)[s].logits.size(), (*every)[s].logits.size());
            EXPECT_EQ((*first)[s].pooled.size(), (*every)[s].pooled.size());
            EXPECT_EQ((*first)[s].token_states, (*every)[s].token_states);
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FirstTokenForwardTest,
                         ::testing::Values(Variant{"deberta-v3", 2, true}, Variant{"deberta-v2", 2, true},
                                           Variant{"deberta-v2", 1, false}, Variant{"bert", 2, true},
                                           Variant{"roberta", 1, true}, Variant{"electra", 2, true},
                                           Variant{"mpnet", 2, true}, Variant{"t5", 2, false},
                                           Variant{"xlnet", 2, false}),
                         [](const ::testing::TestParamInfo<Variant>& info) { return VariantName(info.param); });

}  // namespace
}  // namespace relserve
