// Relative attention, batched and sliced, against plain float64 ATen: the scores with every
// relative term as an [L, L] tensor, the mask, softmax and the product with v.
#include "server/model/layers/relative_attention.h"

#include "server/model/layers/biased_attention.h"

#include <limits>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/kernels/packed_gemm.h"
#include "tests/testing/tensor_max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

constexpr int64_t kHeads = 3, kBatch = 5, kLen = 19, kDim = 8, kRows = 12;
// AttentionKernels::cpu_tiled_max_tokens for every batch.
constexpr int64_t kAlwaysTiled = std::numeric_limits<int64_t>::max();

at::Tensor Expand(const at::Tensor& table, int64_t L) {
  at::Tensor i = at::arange(L, at::kLong).unsqueeze(1), j = at::arange(L, at::kLong).unsqueeze(0);
  return table.to(at::kLong).index({j - i + (L - 1)});  // [L, L]: table[j - i + L - 1]
}

struct Fixture {
  RelativeAttentionInputs in;
  at::Tensor mask;
};

Fixture Make(bool deberta, at::ScalarType dtype) {
  at::manual_seed(deberta ? 1 : 2);
  Fixture f;
  auto randn = [&](at::IntArrayRef shape) { return at::randn(shape, at::kDouble).to(dtype); };
  f.in.q = randn({kHeads, kBatch, kLen, kDim});
  f.in.k = randn({kHeads, kBatch, kLen, kDim});
  f.in.v = randn({kHeads, kBatch, kLen, kDim});
  if (deberta) {
    f.in.pos_key = randn({kHeads, kRows, kDim});
    f.in.pos_query = randn({kHeads, kRows, kDim});
    f.in.c2p_index = at::randint(0, kRows, {2 * kLen - 1}, at::kInt);
    f.in.p2c_index = at::randint(0, kRows, {2 * kLen - 1}, at::kInt);
    f.in.zero_padded_queries = true;
  } else {
    f.in.position_bias = at::randn({kHeads, 2 * kLen - 1}, at::kFloat);
  }
  f.mask = at::ones({kBatch, kLen}, at::kLong);
  for (int64_t b = 1; b < kBatch; ++b) f.mask[b].narrow(0, kLen - 3 * b, 3 * b).zero_();
  f.in.attention_mask = f.mask;
  return f;
}

at::Tensor Reference(const Fixture& f) {
  const RelativeAttentionInputs& in = f.in;
  at::Tensor q = in.q.to(at::kDouble), k = in.k.to(at::kDouble), v = in.v.to(at::kDouble);
  at::Tensor s = at::matmul(q, k.transpose(-1, -2));  // [H, B, L, L]
  if (in.pos_key.defined()) {
    at::Tensor rows = in.pos_key.to(at::kDouble).index({at::indexing::Slice(), Expand(in.c2p_index, kLen)});  // [H, L, L, D]
    at::Tensor cq = in.c2p_query.defined() ? in.c2p_query.to(at::kDouble) : q;
    s = s + at::einsum("hbid,hijd->hbij", {cq, rows});
  }
  if (in.pos_query.defined()) {
    // p2c[i][j] = k_j . pos_query[index(j - i)]
    at::Tensor rows = in.pos_query.to(at::kDouble).index({at::indexing::Slice(), Expand(in.p2c_index, kLen)});
    s = s + at::einsum("hbjd,hijd->hbij", {k, rows});
  }
  if (in.position_bias.defined()) {
    s = s + in.position_bias.to(at::kDouble).index({at::indexing::Slice(), Expand(at::arange(2 * kLen - 1), kLen)}).unsqueeze(1);
  }
  if (in.segment_scores.defined()) {
    at::Tensor seg = in.segment_scores.to(at::kDouble);  // [H, B, L, 2]
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t i = 0; i < kLen; ++i) {
        for (int64_t j = 0; j < kLen; ++j) {
          const bool same = in.segment_ids[b][i].item<int>() == in.segment_ids[b][j].item<int>();
          s.select(1, b).select(1, i).select(1, j).add_(seg.select(1, b).select(1, i).select(1, same ? 0 : 1));
        }
      }
    }
  }
  at::Tensor keys = f.mask.to(at::kDouble).view({1, kBatch, 1, kLen});
  if (in.causal) {
    at::Tensor future = at::arange(kLen).view({1, kLen}).gt(at::arange(kLen).view({kLen, 1}));
    s = s.masked_fill(future.view({1, 1, kLen, kLen}), -1e300);
  }
  at::Tensor p = at::softmax(s + (1 - keys) * -1e300, -1);
  if (in.zero_padded_queries) p = p * f.mask.to(at::kDouble).view({1, kBatch, kLen, 1});
  return at::matmul(p, v);
}

class RelativeAttentionTest : public ::testing::TestWithParam<bool> {
 protected:
  c10::InferenceMode guard_;
};

TEST_P(RelativeAttentionTest, BatchedAndSlicedMatchFloat64) {
  Fixture f = Make(GetParam(), at::kFloat);
  at::Tensor expected = Reference(f);
  // ATen's products (OpenBLAS) in slices of the memory budget: budgets that give one sequence per
  // slice, uneven slices of two, and everything at once.
  at::Tensor batched = RelativeAttention(f.in);
  EXPECT_EQ(batched.sizes(), f.in.q.sizes());
  EXPECT_LT(MaxAbsDiff(batched, expected), 1e-5);
  const int64_t per_sequence = kLen * kLen * 4;
  for (int64_t budget : {int64_t{1}, 2 * per_sequence + 1, 3 * per_sequence, int64_t{1} << 40}) {
    f.in.slice_bytes = budget;
    at::Tensor sliced = RelativeAttention(f.in);
    EXPECT_LT(MaxAbsDiff(sliced, expected), 1e-5) << "budget " << budget;
    EXPECT_LT(MaxAbsDiff(sliced, batched), 1e-6) << "budget " << budget;
  }
}

// float32 on AVX-512: each head of each sequence a task, its products in relserve's tiles
// (AttentionKernels::cpu_tiled_max_tokens; 0, never, by default here) against ATen's products:
// both within 1e-5 of float64, each counted on its own path (the option reaches the products).
// The bits may agree: on an AMD Zen 4, OpenBLAS's kernel sums these short products in the tiles'
// order, FMA for FMA.
TEST_P(RelativeAttentionTest, TiledProductsMatchAtenProducts) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  Fixture f = Make(GetParam(), at::kFloat);
  const at::Tensor expected = Reference(f);
  AttentionStats stats;
  f.in.stats = &stats;
  ASSERT_EQ(f.in.kernels.cpu_tiled_max_tokens, 0);
  f.in.kernels.cpu_tiled_max_tokens = kAlwaysTiled;
  const at::Tensor tiled = RelativeAttention(f.in);
  EXPECT_EQ(stats.cpu_tiled_calls.load(), 1);
  f.in.kernels.cpu_tiled_max_tokens = 0;
  const at::Tensor aten = RelativeAttention(f.in);
  EXPECT_EQ(stats.cpu_calls.load(), 2);
  EXPECT_EQ(stats.cpu_tiled_calls.load(), 1);
  EXPECT_LT(MaxAbsDiff(tiled, expected), 1e-5);
  EXPECT_LT(MaxAbsDiff(aten, expected), 1e-5);
  // A c2p query of its own (DeBERTa's share_att_key=False layout) and a mask of another dtype.
  if (f.in.pos_key.defined()) {
    f.in.c2p_query = f.in.q * 0.5;
    f.in.attention_mask = f.in.attention_mask.to(at::kFloat);
    const at::Tensor aten_own = RelativeAttention(f.in);
    f.in.kernels.cpu_tiled_max_tokens = kAlwaysTiled;
    EXPECT_LT(MaxAbsDiff(RelativeAttention(f.in), aten_own), 1e-5);
    EXPECT_GT(MaxAbsDiff(aten_own, aten), 1e-3);
  }
}

// cpu_tiled_max_tokens bounds the batch (batch x length, padding included) that the tiles take:
// at the batch's size exactly, tiled (and counted so); one token fewer, ATen's products. Other
// precisions never take the tiles, whatever the bound.
TEST_P(RelativeAttentionTest, TiledUpToTheBatchBound) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  Fixture f = Make(GetParam(), at::kFloat);
  const at::Tensor expected = Reference(f);
  AttentionStats stats;
  f.in.stats = &stats;
  f.in.kernels.cpu_tiled_max_tokens = kBatch * kLen;
  const at::Tensor at_bound = RelativeAttention(f.in);
  EXPECT_EQ(stats.cpu_calls.load(), 1);
  EXPECT_EQ(stats.cpu_tiled_calls.load(), 1);
  f.in.kernels.cpu_tiled_max_tokens = kBatch * kLen - 1;
  const at::Tensor past_bound = RelativeAttention(f.in);
  EXPECT_EQ(stats.cpu_calls.load(), 2);
  EXPECT_EQ(stats.cpu_tiled_calls.load(), 1);
  EXPECT_LT(MaxAbsDiff(at_bound, expected), 1e-5);
  EXPECT_LT(MaxAbsDiff(past_bound, expected), 1e-5);  // two paths (the counts), the bits may agree
  Fixture half = Make(GetParam(), at::kBFloat16);
  half.in.stats = &stats;
  half.in.kernels.cpu_tiled_max_tokens = kAlwaysTiled;
  RelativeAttention(half.in);
  EXPECT_EQ(stats.cpu_calls.load(), 3);
  EXPECT_EQ(stats.cpu_tiled_calls.load(), 1);
}

// bfloat16 on a CPU with AVX512-BF16: each head of each sequence a task, its products in
// relserve's AVX512-BF16 registers (AttentionKernels::cpu_tiled_bfloat16_max_tokens; 0, never, by
// default here) against ATen's batched products (oneDNN). Both sum in float32 and round the scores,
// terms and context to bfloat16, so they agree to those roundings, and both are as close to float64
// as bfloat16 allows. The bound is the batch's tokens: at it, the tiles (counted so); one fewer,
// ATen's. float32 inputs never take these tiles.
TEST_P(RelativeAttentionTest, BFloat16TiledProductsMatchAtenProducts) {
  if (!PackedBFloat16Weights::Avx512Supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  Fixture f = Make(GetParam(), at::kBFloat16);
  const at::Tensor expected = Reference(f);
  AttentionStats stats;
  f.in.stats = &stats;
  ASSERT_EQ(f.in.kernels.cpu_tiled_bfloat16_max_tokens, 0);
  const at::Tensor aten = RelativeAttention(f.in);
  EXPECT_EQ(stats.cpu_calls.load(), 1);
  EXPECT_EQ(stats.cpu_tiled_calls.load(), 0);
  f.in.kernels.cpu_tiled_bfloat16_max_tokens = kBatch * kLen;
  const at::Tensor tiled = RelativeAttention(f.in);
  EXPECT_EQ(stats.cpu_calls.load(), 2);
  EXPECT_EQ(stats.cpu_tiled_calls.load(), 1);
  ASSERT_EQ(tiled.scalar_type(), at::kBFloat16);
  EXPECT_EQ(tiled.sizes(), f.in.q.sizes());
  EXPECT_LT(MaxAbsDiff(tiled, expected), 0.1);  // bfloat16 scores of magnitude ~10, as below
  EXPECT_LT(MaxAbsDiff(aten, expected), 0.1);
  EXPECT_LT(MaxAbsDiff(tiled, aten), 0.1);
  // The mean difference is far below the worst: a misplaced key, head or term would move it by O(1).
  EXPECT_LT((tiled.to(at::kDouble) - expected).abs().mean().item<double>(), 0.01);
  f.in.kernels.cpu_tiled_bfloat16_max_tokens = kBatch * kLen - 1;
  RelativeAttention(f.in);
  EXPECT_EQ(stats.cpu_calls.load(), 3);
  EXPECT_EQ(stats.cpu_tiled_calls.load(), 1);
  // A c2p query of its own (DeBERTa's share_att_key=False layout) and a mask of another dtype.
  if (f.in.pos_key.defined()) {
    f.in.c2p_query = (f.in.q.to(at::kFloat) * 0.5).to(at::kBFloat16);
    f.in.attention_mask = f.in.attention_mask.to(at::kFloat);
    const at::Tensor aten_own = RelativeAttention(f.in);
    f.in.kernels.cpu_tiled_bfloat16_max_tokens = kAlwaysTiled;
    const at::Tensor tiled_own = RelativeAttention(f.in);
    EXPECT_EQ(stats.cpu_tiled_calls.load(), 2);
    EXPECT_LT(MaxAbsDiff(tiled_own, aten_own), 0.1);
    EXPECT_LT((tiled_own.to(at::kDouble) - aten_own.to(at::kDouble)).abs().mean().item<double>(), 0.01);
    EXPECT_GT(MaxAbsDiff(aten_own, aten), 0.1);
  }
  Fixture single = Make(GetParam(), at::kFloat);
  single.in.stats = &stats;
  single.in.kernels.cpu_tiled_bfloat16_max_tokens = kAlwaysTiled;
  const int64_t tiled_before = stats.cpu_tiled_calls.load();
  RelativeAttention(single.in);
  EXPECT_EQ(stats.cpu_tiled_calls.load(), tiled_before);
}

TEST_P(RelativeAttentionTest, BFloat16CloseToFloat64) {
  Fixture f = Make(GetParam(), at::kBFloat16);
  at::Tensor expected = Reference(f);
  for (int64_t budget : {int64_t{1}, kAttentionSliceBytes}) {
    f.in.slice_bytes = budget;
    at::Tensor got = RelativeAttention(f.in);
    ASSERT_EQ(got.scalar_type(), at::kBFloat16);
    EXPECT_LT(MaxAbsDiff(got, expected), 0.1) << "budget " << budget;  // bfloat16 scores of magnitude ~10
  }
}

// float32 operands with cpu_products_in_bfloat16 (--dtype int8's --int8-attention bfloat16): the
// answer comes back in float32, as close to float64 as the bfloat16 path's, and is not float32's.
TEST_P(RelativeAttentionTest, Float32InputsWithBFloat16Products) {
  Fixture f = Make(GetParam(), at::kFloat);
  at::Tensor expected = Reference(f);
  at::Tensor exact = RelativeAttention(f.in);
  f.in.kernels.cpu_products_in_bfloat16 = true;
  for (int64_t budget : {int64_t{1}, kAttentionSliceBytes}) {
    f.in.slice_bytes = budget;
    at::Tensor got = RelativeAttention(f.in);
    ASSERT_EQ(got.scalar_type(), at::kFloat);
    EXPECT_EQ(got.sizes(), f.in.q.sizes());
    EXPECT_LT(MaxAbsDiff(got, expected), 0.1) << "budget " << budget;
    EXPECT_GT(MaxAbsDiff(got, exact), 1e-4) << "budget " << budget << ": the products stayed float32";
  }
}

TEST_P(RelativeAttentionTest, TermsAndMaskChangeTheResult) {
  Fixture f = Make(GetParam(), at::kFloat);
  at::Tensor full = RelativeAttention(f.in);
  RelativeAttentionInputs plain = f.in;
  plain.pos_key = plain.pos_query = plain.position_bias = at::Tensor();
  EXPECT_GT(MaxAbsDiff(RelativeAttention(plain), full), 0.05);
  RelativeAttentionInputs unmasked = f.in;
  unmasked.attention_mask = at::Tensor();
  EXPECT_GT(MaxAbsDiff(RelativeAttention(unmasked), full), 0.05);
}

// The path of other devices (biased_attention.h), run on the CPU: the relative terms as one
// additive bias, into the fused kernel where LibTorch has it and into plain ATen ops otherwise.
TEST_P(RelativeAttentionTest, BiasedPathMatchesFloat64) {
  for (bool fused : {true, false}) {
    Fixture f = Make(GetParam(), at::kFloat);
    f.in.kernels.fused = fused;
    at::Tensor expected = Reference(f);
    at::Tensor got = BiasedAttention(f.in);
    ASSERT_EQ(got.sizes(), f.in.q.sizes());
    EXPECT_LT(MaxAbsDiff(got, expected), 1e-5) << "fused " << fused;
    EXPECT_LT(MaxAbsDiff(got, RelativeAttention(f.in)), 1e-5) << "fused " << fused;
    // Without padding, and without any term (the mask alone).
    RelativeAttentionInputs unmasked = f.in;
    unmasked.attention_mask = at::Tensor();
    EXPECT_LT(MaxAbsDiff(BiasedAttention(unmasked), RelativeAttention(unmasked)), 1e-5) << "fused " << fused;
    RelativeAttentionInputs plain = f.in;
    plain.pos_key = plain.pos_query = plain.position_bias = at::Tensor();
    EXPECT_LT(MaxAbsDiff(BiasedAttention(plain), RelativeAttention(plain)), 1e-5) << "fused " << fused;
  }
}

TEST_P(RelativeAttentionTest, BiasedPathBFloat16CloseToFloat64) {
  Fixture f = Make(GetParam(), at::kBFloat16);
  at::Tensor got = BiasedAttention(f.in);
  ASSERT_EQ(got.scalar_type(), at::kBFloat16);
  EXPECT_LT(MaxAbsDiff(got, Reference(f)), 0.1);
}

// The index matrices and the position-bias matrix a model keeps per length give the same result
// as the ones derived from the tables, and a shared position-bias matrix is never written.
TEST_P(RelativeAttentionTest, BiasedPathPrecomputedMatrices) {
  Fixture f = Make(GetParam(), at::kFloat);
  const auto cpu = c10::Device(c10::kCPU);
  RelativeAttentionInputs pre = f.in;
  if (pre.pos_key.defined()) {
    pre.c2p_gather = OffsetIndexMatrix(pre.c2p_index, kLen, false, cpu);
    pre.p2c_gather = OffsetIndexMatrix(pre.p2c_index, kLen, false, cpu);
    EXPECT_EQ(pre.c2p_gather[2][7].item<int64_t>(), pre.c2p_index[7 - 2 + kLen - 1].item<int>());
    EXPECT_EQ(pre.p2c_gather[2][7].item<int64_t>(), pre.p2c_index[7 - 2 + kLen - 1].item<int>());
    EXPECT_EQ(OffsetIndexMatrix(pre.p2c_index, kLen, true, cpu)[7][2].item<int64_t>(),
              pre.p2c_index[7 - 2 + kLen - 1].item<int>());
  } else {
    pre.position_bias_matrix =
        pre.position_bias.index({at::indexing::Slice(), OffsetIndexMatrix(at::arange(2 * kLen - 1, at::kInt), kLen, false, cpu)})
            .contiguous();
    pre.position_bias = at::Tensor();
  }
  const at::Tensor matrix_before = pre.position_bias_matrix.defined() ? pre.position_bias_matrix.clone() : at::Tensor();
  EXPECT_LT(MaxAbsDiff(BiasedAttention(pre), Reference(f)), 1e-5);
  // A batch of one, where the masked bias has the matrix's shape.
  RelativeAttentionInputs one = pre;
  for (at::Tensor* t : {&one.q, &one.k, &one.v}) *t = t->narrow(1, kBatch - 1, 1).contiguous();
  one.attention_mask = f.mask.narrow(0, kBatch - 1, 1);
  RelativeAttentionInputs one_tables = f.in;
  for (at::Tensor* t : {&one_tables.q, &one_tables.k, &one_tables.v}) *t = t->narrow(1, kBatch - 1, 1).contiguous();
  one_tables.attention_mask = one.attention_mask;
  EXPECT_LT(MaxAbsDiff(BiasedAttention(one), RelativeAttention(one_tables)), 1e-5);
  if (matrix_before.defined()) {
    EXPECT_TRUE(at::equal(pre.position_bias_matrix, matrix_before));
  }
}

// XLNet's terms: the position term through c2p with its own query, the segment term, and
// attn_type "uni"'s causal mask, on every path.
Fixture MakeXlnet(bool causal) {
  at::manual_seed(causal ? 3 : 4);
  Fixture f;
  auto randn = [&](at::IntArrayRef shape) { return at::randn(shape, at::kDouble).to(at::kFloat); };
  f.in.q = randn({kHeads, kBatch, kLen, kDim});
  f.in.k = randn({kHeads, kBatch, kLen, kDim});
  f.in.v = randn({kHeads, kBatch, kLen, kDim});
  f.in.c2p_query = randn({kHeads, kBatch, kLen, kDim});
  f.in.pos_key = randn({kHeads, 2 * kLen - 1, kDim});
  f.in.c2p_index = at::arange(2 * kLen - 1, at::kInt).flip(0).contiguous();  // row of i - j
  f.in.segment_scores = randn({kHeads, kBatch, kLen, 2}) * 2;
  f.in.segment_ids = at::randint(0, 3, {kBatch, kLen}, at::kInt);
  f.in.causal = causal;
  // Right padding in some rows, left padding in others: real queries keep a real key either way.
  f.mask = at::ones({kBatch, kLen}, at::kLong);
  for (int64_t b = 1; b < kBatch; ++b) f.mask[b].narrow(0, b % 2 ? kLen - 3 * b : 0, 3 * b).zero_();
  f.in.attention_mask = f.mask;
  return f;
}

// Largest difference over the real queries (a padded query's row is not defined alike by every path).
double MaxDiffRealQueries(const at::Tensor& a, const at::Tensor& b, const at::Tensor& mask) {
  at::Tensor keep = mask.ne(0).view({1, kBatch, kLen, 1});
  return MaxAbsDiff(a.masked_select(keep), b.masked_select(keep));
}

TEST(RelativeAttentionXlnetTest, EveryPathMatchesFloat64) {
  c10::InferenceMode guard;
  for (bool causal : {false, true}) {
    Fixture f = MakeXlnet(causal);
    at::Tensor expected = Reference(f);
    const int64_t per_sequence = kLen * (3 * kLen - 1) * 4;
    for (bool tiled : {true, false}) {
      f.in.kernels.cpu_tiled_max_tokens = tiled ? kAlwaysTiled : 0;
      for (int64_t budget : {int64_t{1}, 2 * per_sequence + 1, int64_t{1} << 40}) {
        f.in.slice_bytes = budget;
        EXPECT_LT(MaxDiffRealQueries(RelativeAttention(f.in), expected, f.mask), 1e-5)
            << "causal " << causal << " budget " << budget << " tiled " << tiled;
      }
    }
    f.in.kernels.cpu_tiled_max_tokens = 0;
    for (bool fused : {true, false}) {
      RelativeAttentionInputs in = f.in;
      in.kernels.fused = fused;
      at::Tensor biased = BiasedAttention(in);
      EXPECT_FALSE(biased.isnan().any().item<bool>()) << "causal " << causal << " fused " << fused;
      EXPECT_LT(MaxDiffRealQueries(biased, expected, f.mask), 1e-5) << "causal " << causal << " fused " << fused;
    }
  }
}

TEST(RelativeAttentionXlnetTest, EachTermChangesTheResult) {
  c10::InferenceMode guard;
  Fixture f = MakeXlnet(false);
  at::Tensor full = RelativeAttention(f.in);
  RelativeAttentionInputs same_query = f.in;
  same_query.c2p_query = at::Tensor();
  EXPECT_GT(MaxDiffRealQueries(RelativeAttention(same_query), full, f.mask), 0.05);
  RelativeAttentionInputs no_segment = f.in;
  no_segment.segment_scores = no_segment.segment_ids = at::Tensor();
  EXPECT_GT(MaxDiffRealQueries(RelativeAttention(no_segment), full, f.mask), 0.05);
  RelativeAttentionInputs causal = f.in;
  causal.causal = true;
  EXPECT_GT(MaxDiffRealQueries(RelativeAttention(causal), full, f.mask), 0.05);
}

// XLNet's own query for the position term and its segment term under bfloat16 products.
TEST(RelativeAttentionXlnetTest, BFloat16ProductsStayClose) {
  c10::InferenceMode guard;
  Fixture f = MakeXlnet(false);
  at::Tensor expected = Reference(f);
  f.in.kernels.cpu_products_in_bfloat16 = true;
  at::Tensor got = RelativeAttention(f.in);
  ASSERT_EQ(got.scalar_type(), at::kFloat);
  EXPECT_LT(MaxDiffRealQueries(got, expected, f.mask), 0.1);
}

INSTANTIATE_TEST_SUITE_P(Families, RelativeAttentionTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "DeBERTa" : "T5"; });

}  // namespace
}  // namespace relserve
