// bfloat16 on the CPU with its projections on weights packed once in AMX tiles
// (kernels/amx_gemm.h, EngineKernels::packed_bfloat16_gemm) and through LibTorch's oneDNN linear:
// both as close to float32 on every reference family, and the option really reaching the layers.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/model/engine.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/kernels/packed_gemm.h"
#include "server/tools/model_creator.h"
#include "tests/model/reference_fixture.h"
#include "tests/model/switch_test_support.h"

namespace relserve {
namespace {

using testing::Cosine;
using testing::ReferenceDir;
using testing::ReferenceSequences;

std::vector<SequenceOutput> RunOrDie(const std::string& dir, const EngineOptions& options,
                                   const std::vector<SequenceInput>& seqs) {
  auto engine = Engine::Load(dir, options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  const uint32_t logits = (*engine)->info().labels.empty() ? 0u : static_cast<uint32_t>(kOutputLogits);
  auto out = (*engine)->Run(seqs, kOutputPooled | kOutputTokenStates | logits);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? std::move(*out) : std::vector<SequenceOutput>{};
}

EngineOptions BFloat16(bool packed) {
  EngineOptions options;
  options.dtype = DType::kBFloat16;
  options.kernels.packed_bfloat16_gemm = packed;
  return options;
}

TEST(BFloat16GemmTest, EveryFamilyStaysCloseToFloat32EitherWay) {
  for (const char* name : {"deberta_v3_like", "deberta_v3_cls", "t5_v1_0", "bert_absolute", "bert_relative_key",
                           "mpnet_like", "xlnet_like"}) {
    SCOPED_TRACE(name);
    const auto seqs = ReferenceSequences(name);
    const auto want = RunOrDie(ReferenceDir(name), EngineOptions{}, seqs);
    for (bool packed : {true, false}) {
      const auto got = RunOrDie(ReferenceDir(name), BFloat16(packed), seqs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < seqs.size(); ++i) {
        EXPECT_GT(Cosine(want[i].pooled, got[i].pooled), 0.99) << (packed ? "packed " : "oneDNN ") << i;
        EXPECT_GT(Cosine(want[i].token_states, got[i].token_states), 0.99) << (packed ? "packed " : "oneDNN ") << i;
        // The classifier heads (packed too, HeadLinears) land where float32's do.
        ASSERT_EQ(got[i].logits.size(), want[i].logits.size());
        for (size_t l = 0; l < want[i].logits.size(); ++l) {
          EXPECT_NEAR(got[i].logits[l], want[i].logits[l], 0.05 + 0.02 * std::abs(want[i].logits[l])) << i;
        }
      }
    }
  }
}

// The option chooses what runs the projections (which Linear then takes: packed_linear_test),
// with the same answer: oneDNN's bfloat16 matmul sums in float32 and rounds once too (in AMX tiles
// where relserve's GEMM uses them, in the same order), so the two agree to the bit or nearly.
TEST(BFloat16GemmTest, TheOptionChoosesTheProjections) {
  if (!PackedBFloat16Weights::Supported()) GTEST_SKIP() << "neither AMX-BF16 nor AVX512-BF16 on this CPU";
  testing::ScratchDir scratch;
  CreateModelOptions o;
  o.family = "deberta-v3";
  o.hidden = 256;
  o.layers = 2;
  o.heads = 4;
  o.intermediate = 512;
  o.vocab = 300;
  const std::string dir = scratch.Path("wide");
  ASSERT_TRUE(CreateModelDirectory(o, dir).ok());
  std::vector<SequenceInput> seqs(3);
  seqs[0].input_ids = {1, 5, 9, 2};
  for (int i = 0; i < 70; ++i) seqs[1].input_ids.push_back(1 + (i * 37) % 290);
  seqs[2].input_ids = {1, 7, 7, 7, 7, 7, 2};
  for (bool packed : {true, false}) {
    auto engine = Engine::Load(dir, BFloat16(packed));
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->info().projections,
              packed ? std::string("relserve-") + BFloat16KernelName(PackedBFloat16Weights::Best()) : "libtorch");
  }
  EngineOptions float32;
  EXPECT_EQ((*Engine::Load(dir, float32))->info().projections,
            PackedWeights::Supported() ? std::string("relserve-") + Float32KernelName(PackedWeights::Best())
                                       : std::string("libtorch"));
  float32.kernels.packed_float32_gemm = false;
  EXPECT_EQ((*Engine::Load(dir, float32))->info().projections, "libtorch");
  const auto want = RunOrDie(dir, EngineOptions{}, seqs);
  const auto packed = RunOrDie(dir, BFloat16(true), seqs);
  const auto onednn = RunOrDie(dir, BFloat16(false), seqs);
  ASSERT_EQ(packed.size(), 3u);
  ASSERT_EQ(onednn.size(), 3u);
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_GT(Cosine(packed[i].token_states, onednn[i].token_states), 0.9999) << i;
    EXPECT_GT(Cosine(want[i].token_states, packed[i].token_states), 0.99) << i;
  }
}

}  // namespace
}  // namespace relserve
