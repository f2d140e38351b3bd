// The engine against transformers 4.40.2 (tests/data/reference): every hidden state and the
// logits within 1e-4 at every unpadded position.
#include <cstring>
#include <map>

#include "gtest/gtest.h"
#include "server/model/layers/biased_attention.h"
#include "server/model/layers/table_attention.h"
#include "server/model/engine.h"
#include "server/model/kernels/packed_gemm.h"
#include "server/safetensors/safetensors_file.h"
#include "tests/model/reference_fixture.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiffMasked;
using testing::FloatData;
using testing::ReadReferenceInputs;
using testing::ReferenceDir;

constexpr double kTolerance = 1e-4;

// `counts`, where given, receives the engine's attention calls by path after the forward.
void CheckAgainstReference(const std::string& name, int expected_tensors,
                           const EngineOptions& options = testing::TestEngineOptions(),
                           Engine::AttentionCounts* counts = nullptr) {
  const std::string dir = ReferenceDir(name);
  auto engine = Engine::Load(dir, options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  PaddedBatch batch = ReadReferenceInputs(dir + "/inputs.json");
  auto outputs = (*engine)->ForwardPadded(batch, /*all_hidden_states=*/true);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  if (counts != nullptr) *counts = (*engine)->attention_counts();
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : *outputs) by_name[t.name] = &t;

  auto expected = SafetensorsFile::Open(dir + "/expected.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status();
  int compared = 0;
  for (const TensorView& want : (*expected)->tensors()) {
    ASSERT_EQ(want.dtype, StDType::kF32);
    auto it = by_name.find(want.name);
    ASSERT_NE(it, by_name.end()) << "engine gave no " << want.name;
    const double diff = MaxAbsDiffMasked(*it->second, FloatData(want), want.shape, batch);
    EXPECT_LE(diff, kTolerance) << name << " " << want.name;
    ++compared;
  }
  EXPECT_EQ(compared, expected_tensors);
}

TEST(ReferenceParityTest, DebertaV3Backbone) {
  // last_hidden_state + hidden_state_0..3
  CheckAgainstReference("deberta_v3_like", 5);
}

TEST(ReferenceParityTest, DebertaV3SequenceClassification) {
  CheckAgainstReference("deberta_v3_cls", 6);
}

TEST(ReferenceParityTest, T5V10Encoder) {
  // last_hidden_state + hidden_state_0..2 (the last with the final layer norm)
  CheckAgainstReference("t5_v1_0", 4);
}

TEST(ReferenceParityTest, BertAbsolutePositions) {
  // last_hidden_state + hidden_state_0..2; no token_type_ids: row 0 of the table for every token
  CheckAgainstReference("bert_absolute", 4);
}

TEST(ReferenceParityTest, BertRelativeKey) {
  // Shaw-style relative keys (distance_embedding per layer), token types fed
  CheckAgainstReference("bert_relative_key", 4);
}

TEST(ReferenceParityTest, MpnetModel) {
  // positions after padding_idx 1, the bucketed relative bias shared by both layers, a row of
  // 160 tokens past the exact buckets and max_distance: last_hidden_state + hidden_state_0..2
  CheckAgainstReference("mpnet_like", 4);
}

TEST(ReferenceParityTest, XlnetLeftPaddedPairs) {
  // Left-padded pairs (token types 0, 1, 2; 3 on padding): last_hidden_state + hidden_state_0..2
  CheckAgainstReference("xlnet_like", 4);
}

// float32's GEMM on weights packed at load (kernels/packed_gemm.h) for every row of every batch
// (the reference batches have more tokens than the default limit, so by default they take
// OpenBLAS), OpenBLAS alone, and the packed GEMM with attention's products in its tiles: all within
// the same tolerance of transformers.
TEST(ReferenceParityTest, PackedAndBlasGemmsOnEveryFamily) {
  const std::vector<std::pair<const char*, int>> families = {
      {"deberta_v3_like", 5}, {"deberta_v3_cls", 6}, {"t5_v1_0", 4},   {"bert_absolute", 4},
      {"bert_relative_key", 4}, {"mpnet_like", 4},  {"xlnet_like", 4}};
  EngineOptions packed = testing::TestEngineOptions();
  packed.kernels.packed_gemm_max_rows = int64_t{1} << 40;
  EngineOptions blas = testing::TestEngineOptions();
  blas.kernels.packed_float32_gemm = false;
  // Attention's products in the same tiles, head by head, at every length (by default only
  // where the packed GEMM runs the projections), and never.
  EngineOptions tiled = packed;
  tiled.kernels.tiled_attention = TiledAttention::kAlways;
  EngineOptions untiled = packed;
  untiled.kernels.tiled_attention = TiledAttention::kNever;
  for (const auto& [name, tensors] : families) {
    SCOPED_TRACE(name);
    CheckAgainstReference(name, tensors, packed);
    CheckAgainstReference(name, tensors, blas);
    CheckAgainstReference(name, tensors, tiled);
    CheckAgainstReference(name, tensors, untiled);
  }
  // The option reaches the layers: the two GEMMs sum in different orders, so their last hidden
  // states differ in the last bits (where AVX-512 or AVX2 runs the packed one).
  if (!PackedWeights::Supported()) return;
  const std::string dir = ReferenceDir("deberta_v3_like");
  const PaddedBatch batch = ReadReferenceInputs(dir + "/inputs.json");
  std::vector<std::vector<float>> states;
  for (const EngineOptions& options : {packed, blas}) {
    auto engine = Engine::Load(dir, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    auto outputs = (*engine)->ForwardPadded(batch, /*all_hidden_states=*/false);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    states.push_back(outputs->at(0).data);
  }
  const double diff = testing::MaxAbsDiff(states[0], states[1]);
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff, kTolerance);
}

// Which batches run attention's products in the tiles (EngineKernels::tiled_attention,
// tiled_attention.h): with kWithPackedGemm those the packed float32 GEMM takes (packed_gemm_max_rows
// tokens, here the reference batch's padded size exactly, then one fewer), with
// kWithPackedProjections every batch of an engine whose projections are packed, never with
// OpenBLAS's projections, by default (kAuto) the one or the other as the tiles are AVX-512's or
// AVX2's, and every or none when asked; every layer alike, each within the reference's tolerance.
TEST(ReferenceParityTest, TiledAttentionWhereThePackedGemmRuns) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  const EngineOptions base = testing::TestEngineOptions();
  if (base.device != "cpu" || base.kernels.gpu_attention_on_cpu) GTEST_SKIP() << "the CPU's own attention path only";
  EXPECT_EQ(EngineKernels{}.tiled_attention, TiledAttention::kAuto);
  const bool avx2_tiles = PackedWeights::Best() == Float32Kernel::kAvx2;
  const std::string dir = ReferenceDir("deberta_v3_like");
  const PaddedBatch batch = ReadReferenceInputs(dir + "/inputs.json");
  const int64_t tokens = batch.batch * batch.length;
  struct Case {
    const char* what;
    bool packed;
    int64_t max_rows;
    TiledAttention tiled;
    bool expect_tiled;
  };
  const Case cases[] = {
      {"with the packed GEMM, the batch at its bound", true, tokens, TiledAttention::kWithPackedGemm, true},
      {"with the packed GEMM, the batch past the bound", true, tokens - 1, TiledAttention::kWithPackedGemm, false},
      {"with the packed GEMM, OpenBLAS's projections", false, tokens, TiledAttention::kWithPackedGemm, false},
      {"with packed projections, the batch past the bound", true, tokens - 1, TiledAttention::kWithPackedProjections,
       true},
      {"with packed projections, OpenBLAS's projections", false, tokens, TiledAttention::kWithPackedProjections,
       false},
      {"default, the batch at the bound", true, tokens, TiledAttention::kAuto, true},
      {"default, the batch past the bound: the tiles where they are AVX2's", true, tokens - 1, TiledAttention::kAuto,
       avx2_tiles},
      {"never", true, tokens, TiledAttention::kNever, false},
      {"always, with OpenBLAS's projections", false, tokens, TiledAttention::kAlways, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EngineOptions options = base;
    options.kernels.packed_float32_gemm = c.packed;
    options.kernels.packed_gemm_max_rows = c.max_rows;
    options.kernels.tiled_attention = c.tiled;
    Engine::AttentionCounts counts;
    CheckAgainstReference("deberta_v3_like", 5, options, &counts);
    EXPECT_EQ(counts.cpu, 3);  // one call per layer
    EXPECT_EQ(counts.cpu_tiled, c.expect_tiled ? 3 : 0);
  }
}

// The attention path of GPUs (every relative term as one additive bias, biased_attention.h),
// run on the CPU against the same references.
TEST(ReferenceParityTest, BiasedAttentionPath) {
  EngineOptions biased = testing::TestEngineOptions();
  biased.kernels.gpu_attention_on_cpu = true;
  CheckAgainstReference("deberta_v3_like", 5, biased);
  CheckAgainstReference("deberta_v3_cls", 6, biased);
  CheckAgainstReference("t5_v1_0", 4, biased);
  CheckAgainstReference("bert_absolute", 4, biased);
  CheckAgainstReference("bert_relative_key", 4, biased);
  CheckAgainstReference("mpnet_like", 4, biased);
  CheckAgainstReference("xlnet_like", 4, biased);
}

// The table path of GPUs (DeBERTa's and Shaw's terms read through their index tables,
// table_attention.h), run on the CPU by the kernel's host twin against the same references.
TEST(ReferenceParityTest, TableAttentionPath) {
  EngineOptions tables = testing::TestEngineOptions();
  // The references are float32, which the CUDA kernel does not take (bfloat16 and float16 only):
  // on a GPU every call would rightly keep the biased path. The kernel's own GPU test is
  // TableAttentionGpuTest.
  if (tables.device != "cpu" && !tables.device.empty()) GTEST_SKIP() << "the table path takes float32 on the CPU only";
  tables.kernels.gpu_attention_on_cpu = true;
  tables.gpu_attention.path = DeviceAttention::kTables;
  // The table path is really taken, in every layer: a silent fall-back to the biased path would
  // pass the comparisons (both paths match the references).
  Engine::AttentionCounts counts;
  CheckAgainstReference("deberta_v3_like", 5, tables, &counts);
  EXPECT_EQ(counts.tables, 3);
  EXPECT_EQ(counts.bias, 0);
  EXPECT_EQ(counts.cpu, 0);
  CheckAgainstReference("deberta_v3_cls", 6, tables, &counts);
  EXPECT_EQ(counts.tables, 3);
  EXPECT_EQ(counts.bias, 0);
  CheckAgainstReference("bert_relative_key", 4, tables, &counts);
  EXPECT_EQ(counts.tables, 2);
  EXPECT_EQ(counts.bias, 0);
  // Asked for the biased path, the same engine takes it in every layer.
  EngineOptions biased = testing::TestEngineOptions();
  biased.kernels.gpu_attention_on_cpu = true;
  CheckAgainstReference("deberta_v3_cls", 6, biased, &counts);
  EXPECT_EQ(counts.tables, 0);
  EXPECT_EQ(counts.bias, 3);
}

// A wrong term must show: perturbing one input token changes the output well beyond the
// tolerance, so the comparison above is not vacuous.
TEST(ReferenceParityTest, ComparisonDetectsAChangedInput) {
  const std::string dir = ReferenceDir("deberta_v3_like");
  auto engine = Engine::Load(dir, EngineOptions{});
  ASSERT_TRUE(engine.ok()) << engine.status();
  PaddedBatch batch = ReadReferenceInputs(dir + "/inputs.json");
  batch.input_ids[5] = (batch.input_ids[5] + 1) % 1000;
  auto outputs = (*engine)->ForwardPadded(batch, false);
  ASSERT_TRUE(outputs.ok());
  auto expected = SafetensorsFile::Open(dir + "/expected.safetensors");
  ASSERT_TRUE(expected.ok());
  const TensorView* want = (*expected)->Find("last_hidden_state");
  ASSERT_NE(want, nullptr);
  EXPECT_GT(MaxAbsDiffMasked((*outputs)[0], FloatData(*want), want->shape, batch), 100 * kTolerance);
}

}  // namespace
}  // namespace relserve
