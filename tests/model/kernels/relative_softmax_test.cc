// The fused relative-attention softmax against the computation it replaces, written with plain
// ATen ops in float64: [L, L] gathers of the relative terms, an additive mask of the dtype's
// most negative value, softmax, and zeroed rows for padded queries where DeBERTa asks for them.
#include "server/model/kernels/relative_softmax.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"
#include "tests/testing/tensor_max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

struct Case {
  int64_t heads = 2, batch = 3, length = 7;
  int64_t c2p_cols = 5, p2c_cols = 4;
  bool c2p = true, p2c = true, position_bias = false, mask = false, zero_padded_queries = true;
  bool segment = false, causal = false;  // XLNet
  at::ScalarType dtype = at::kFloat;
  double score_scale = 3.0;
  bool avx512 = true;  // RelativeScoreTerms::avx512
};

struct Inputs {
  at::Tensor scores, mask;
  RelativeScoreTerms terms;
};

Inputs MakeInputs(const Case& c, uint64_t seed) {
  at::manual_seed(seed);
  const int64_t G = c.heads * c.batch, L = c.length;
  Inputs in;
  in.scores = (at::randn({G, L, L}, at::kDouble) * c.score_scale).to(c.dtype);
  if (c.c2p) {
    in.terms.c2p = at::randn({G, L, c.c2p_cols}, at::kDouble).to(c.dtype);
    in.terms.c2p_index = at::randint(0, c.c2p_cols, {2 * L - 1}, at::kInt);
  }
  if (c.p2c) {
    in.terms.p2c = at::randn({G, L, c.p2c_cols}, at::kDouble).to(c.dtype);
    in.terms.p2c_index = at::randint(0, c.p2c_cols, {2 * L - 1}, at::kInt);
  }
  if (c.position_bias) in.terms.position_bias = at::randn({c.heads, 2 * L - 1}, at::kFloat);
  if (c.segment) {
    in.terms.segment = at::randn({G, L, 2}, at::kFloat) * 2;
    in.terms.segment_ids = at::randint(0, 4, {c.batch, L}, at::kInt);
  }
  in.terms.causal = c.causal;
  if (c.mask) {
    // Row b keeps its first L - b tokens (right padding); the last row also has a hole.
    in.mask = at::ones({c.batch, L}, at::kLong);
    for (int64_t b = 0; b < c.batch; ++b) in.mask[b].narrow(0, L - std::min(b, L - 1), std::min(b, L - 1)).zero_();
    if (L > 2) in.mask[c.batch - 1][1] = 0;
    in.terms.attention_mask = in.mask;
  }
  in.terms.zero_padded_queries = c.zero_padded_queries;
  in.terms.avx512 = c.avx512;
  return in;
}

// [L, L] from a [2L - 1] table: m[i][j] = table[j - i + L - 1].
at::Tensor Expand(const at::Tensor& table, int64_t L) {
  at::Tensor i = at::arange(L, at::kLong).unsqueeze(1), j = at::arange(L, at::kLong).unsqueeze(0);
  return table.to(at::kLong).index({j - i + (L - 1)});
}

at::Tensor Reference(const Case& c, const Inputs& in) {
  const int64_t G = c.heads * c.batch, L = c.length;
  at::Tensor rel = at::zeros({G, L, L}, at::kDouble);
  if (c.c2p) {
    at::Tensor idx = Expand(in.terms.c2p_index, L).expand({G, L, L});
    rel = rel + at::gather(in.terms.c2p.to(at::kDouble), 2, idx);
  }
  if (c.p2c) {
    // term[i][j] = p2c[j][index(j - i)]: gather along the keys' rows, then transpose.
    at::Tensor idx = Expand(in.terms.p2c_index, L).t().expand({G, L, L});
    rel = rel + at::gather(in.terms.p2c.to(at::kDouble), 2, idx).transpose(1, 2);
  }
  if (c.position_bias) {
    at::Tensor pb = in.terms.position_bias.to(at::kDouble).index({at::indexing::Slice(), Expand(at::arange(2 * L - 1), L)});
    rel = rel + pb.repeat_interleave(c.batch, 0);  // group g = head * batch + b
  }
  if (c.segment) {
    // group g = head * batch + b: segment[g, i, ids[b][i] == ids[b][j] ? 0 : 1]
    at::Tensor ids = in.terms.segment_ids.to(at::kLong);
    at::Tensor same = ids.unsqueeze(2).eq(ids.unsqueeze(1)).repeat({c.heads, 1, 1});  // [G, L, L]
    at::Tensor seg = in.terms.segment.to(at::kDouble);
    rel = rel + at::where(same, seg.narrow(2, 0, 1), seg.narrow(2, 1, 1));
  }
  at::Tensor s = in.scores.to(at::kDouble) + rel;
  if (c.causal) {
    at::Tensor future = at::arange(L).view({1, L}).gt(at::arange(L).view({L, 1}));
    s = s.masked_fill(future.unsqueeze(0), -3.4e38);
  }
  if (c.mask) {
    at::Tensor keys = in.mask.to(at::kDouble).repeat({c.heads, 1}).unsqueeze(1);  // [G, 1, L]
    s = s + (1 - keys) * -3.4e38;
  }
  at::Tensor p = at::softmax(s, -1);
  if (c.mask && c.zero_padded_queries) {
    p = p * in.mask.to(at::kDouble).repeat({c.heads, 1}).unsqueeze(2);
  }
  return p;
}

// Every case runs twice: with the AVX-512 gathers where the CPU has them, and with the
// portable loops.
class RelativeSoftmaxTest : public ::testing::TestWithParam<bool> {
 protected:
  // A case whose terms ask for the AVX-512 gathers or the portable ones, as the parameter says.
  Case ForParam() const {
    Case c;
    c.avx512 = GetParam();
    return c;
  }
  c10::InferenceMode guard_;
};

TEST_P(RelativeSoftmaxTest, EveryTermCombinationMatchesFloat64InFloat32) {
  for (bool c2p : {false, true}) {
    for (bool p2c : {false, true}) {
      for (bool bias : {false, true}) {
        for (bool mask : {false, true}) {
          Case c = ForParam();
          c.c2p = c2p, c.p2c = p2c, c.position_bias = bias, c.mask = mask;
          Inputs in = MakeInputs(c, 7);
          at::Tensor expected = Reference(c, in);
          at::Tensor got = in.scores.clone();
          RelativeSoftmaxInPlace(got, c.batch, in.terms);
          EXPECT_LT(MaxAbsDiff(got, expected), 1e-6) << "c2p " << c2p << " p2c " << p2c << " bias " << bias << " mask " << mask;
        }
      }
    }
  }
}

TEST_P(RelativeSoftmaxTest, AtenOpsPathAgrees) {
  // The path for devices without the CPU kernel, run here on the CPU.
  for (bool mask : {false, true}) {
    for (bool zero_rows : {false, true}) {
      Case c = ForParam();
      c.mask = mask, c.position_bias = true, c.zero_padded_queries = zero_rows;
      Inputs in = MakeInputs(c, 13);
      at::Tensor got = in.scores.clone();
      RelativeSoftmaxWithAtenOps(got, c.batch, in.terms);
      EXPECT_LT(MaxAbsDiff(got, Reference(c, in)), 1e-6) << "mask " << mask << " zero rows " << zero_rows;
    }
  }
}

TEST_P(RelativeSoftmaxTest, SegmentTermAndCausalMaskMatchFloat64) {
  // XLNet's terms, alone and with the others, in float32 and through the ATen path.
  for (bool causal : {false, true}) {
    for (bool others : {false, true}) {
      for (int64_t L : {1, 7, 37}) {
        Case c = ForParam();
        c.length = L;
        c.c2p = c.p2c = c.position_bias = others;
        c.c2p_cols = 2 * L - 1;
        c.segment = true, c.causal = causal, c.mask = true, c.zero_padded_queries = false;
        Inputs in = MakeInputs(c, 31 + L);
        at::Tensor expected = Reference(c, in);
        at::Tensor got = in.scores.clone();
        RelativeSoftmaxInPlace(got, c.batch, in.terms);
        // A padded query whose keys up to itself are all padded has no defined row: compare
        // the rows that keep a key.
        at::Tensor keep = in.mask.ne(0).repeat({c.heads, 1}).unsqueeze(2).to(at::kDouble);
        EXPECT_LT(MaxAbsDiff(got * keep, expected * keep), 1e-6) << "causal " << causal << " others " << others << " L " << L;
        at::Tensor aten = in.scores.clone();
        RelativeSoftmaxWithAtenOps(aten, c.batch, in.terms);
        EXPECT_LT(MaxAbsDiff(aten * keep, expected * keep), 1e-6) << "aten causal " << causal << " L " << L;
        if (causal && L > 1) {
          // Above the diagonal is exactly 0.
          at::Tensor future = at::arange(L).view({1, L}).gt(at::arange(L).view({L, 1})).unsqueeze(0);
          EXPECT_EQ(got.masked_select(future.expand_as(got)).abs().max().item<float>(), 0.0f);
        }
      }
    }
  }
}

TEST_P(RelativeSoftmaxTest, SegmentTermAndCausalMaskMoveTheResult) {
  Case c = ForParam();
  c.segment = true;
  Inputs in = MakeInputs(c, 17);
  at::Tensor full = in.scores.clone();
  RelativeSoftmaxInPlace(full, c.batch, in.terms);
  RelativeScoreTerms t = in.terms;
  t.segment = t.segment_ids = at::Tensor();
  at::Tensor no_segment = in.scores.clone();
  RelativeSoftmaxInPlace(no_segment, c.batch, t);
  EXPECT_GT(MaxAbsDiff(no_segment, full), 1e-2);
  t = in.terms;
  t.causal = true;
  at::Tensor causal = in.scores.clone();
  RelativeSoftmaxInPlace(causal, c.batch, t);
  EXPECT_GT(MaxAbsDiff(causal, full), 1e-2);
}

TEST_P(RelativeSoftmaxTest, EachTermMovesTheResult) {
  // The comparison above could not fail if a term were ignored and tiny: here each term alone
  // changes the probabilities by far more than the tolerance.
  Case c = ForParam();
  c.mask = true;
  c.position_bias = true;
  Inputs in = MakeInputs(c, 11);
  at::Tensor full = in.scores.clone();
  RelativeSoftmaxInPlace(full, c.batch, in.terms);
  for (int drop = 0; drop < 4; ++drop) {
    RelativeScoreTerms t = in.terms;
    if (drop == 0) t.c2p = at::Tensor();
    if (drop == 1) t.p2c = at::Tensor();
    if (drop == 2) t.position_bias = at::Tensor();
    if (drop == 3) t.attention_mask = at::Tensor();
    at::Tensor got = in.scores.clone();
    RelativeSoftmaxInPlace(got, c.batch, t);
    EXPECT_GT(MaxAbsDiff(got, full), 1e-2) << "term " << drop;
  }
}

TEST_P(RelativeSoftmaxTest, LongRowsAndLargeScores) {
  // Lengths past every vector width and a tail, scores spanning e^-80..e^80.
  for (int64_t L : {1, 2, 17, 64, 131}) {
    Case c = ForParam();
    c.length = L;
    c.c2p_cols = 2 * L;
    c.p2c_cols = L + 1;
    c.mask = true;
    c.score_scale = 30.0;
    Inputs in = MakeInputs(c, 100 + L);
    at::Tensor expected = Reference(c, in);
    at::Tensor got = in.scores.clone();
    RelativeSoftmaxInPlace(got, c.batch, in.terms);
    // Summing logits near 100 in float32 rounds them by up to ~1e-5 (an ulp at 100 is 7.6e-6),
    // and a probability moves by about as much: the float32 bound, not the kernel's.
    EXPECT_LT(MaxAbsDiff(got, expected), 2e-5) << "L " << L;
  }
}

TEST_P(RelativeSoftmaxTest, PaddedQueriesZeroedOnlyWhenAsked) {
  Case c = ForParam();
  c.mask = true;
  c.zero_padded_queries = false;  // T5
  Inputs in = MakeInputs(c, 3);
  at::Tensor got = in.scores.clone();
  RelativeSoftmaxInPlace(got, c.batch, in.terms);
  EXPECT_LT(MaxAbsDiff(got, Reference(c, in)), 1e-6);
  // Row 2 of batch 1 (group 1) is a padded query: it still sums to 1.
  EXPECT_NEAR(got[1][c.length - 1].sum().item<double>(), 1.0, 1e-6);
  c.zero_padded_queries = true;
  in.terms.zero_padded_queries = true;
  got = in.scores.clone();
  RelativeSoftmaxInPlace(got, c.batch, in.terms);
  EXPECT_EQ(got[1][c.length - 1].abs().sum().item<double>(), 0.0);
  EXPECT_LT(MaxAbsDiff(got, Reference(c, in)), 1e-6);
}

TEST_P(RelativeSoftmaxTest, RowWithEveryKeyPaddedIsUniform) {
  Case c = ForParam();
  c.batch = 1;
  c.zero_padded_queries = false;
  Inputs in = MakeInputs(c, 5);
  in.terms.attention_mask = at::zeros({1, c.length}, at::kLong);
  at::Tensor got = in.scores.clone();
  RelativeSoftmaxInPlace(got, c.batch, in.terms);
  EXPECT_LT(MaxAbsDiff(got, at::full_like(got, 1.0 / c.length)), 1e-7);
}

// The exponential across its whole range, on every vector width and the tail: each key's score
// below the row's largest by 0 to 97.5 (the -87 cut included, on both sides of it). Within the
// cut, every probability within 1e-6 relative of float64's; past it, exactly 0.
TEST_P(RelativeSoftmaxTest, ExponentialAcrossItsRangeAndExactlyZeroPastTheCut) {
  const int64_t L = 41;
  at::Tensor scores = at::empty({1, L, L}, at::kFloat);
  float* s = scores.data_ptr<float>();
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t j = 0; j < L; ++j) s[i * L + j] = -2.4375f * static_cast<float>((i + j) % L);
  }
  s[0] = 0.0f, s[1] = -87.0f, s[2] = std::nextafter(-87.0f, -100.0f), s[3] = -86.99f;  // row 0: the cut
  RelativeScoreTerms terms;
  terms.avx512 = GetParam();
  at::Tensor expected = at::softmax(scores.to(at::kDouble), -1);
  at::Tensor got = scores.clone();
  RelativeSoftmaxInPlace(got, 1, terms);
  const double* e = expected.data_ptr<double>();
  const float* g = got.data_ptr<float>();
  int64_t zeros = 0, kept = 0;
  for (int64_t i = 0; i < L; ++i) {
    float max = s[i * L];
    for (int64_t j = 1; j < L; ++j) max = std::max(max, s[i * L + j]);
    for (int64_t j = 0; j < L; ++j) {
      const int64_t k = i * L + j;
      if (s[k] - max < -87.0f) {
        EXPECT_EQ(g[k], 0.0f) << "row " << i << " key " << j << " at " << s[k] - max;
        ++zeros;
      } else {
        EXPECT_NEAR(g[k], e[k], 1e-6 * e[k]) << "row " << i << " key " << j << " at " << s[k] - max;
        ++kept;
      }
    }
  }
  EXPECT_GT(g[1], 0.0f);                   // exactly -87: kept
  EXPECT_EQ(g[2], 0.0f);                   // just below: cut
  EXPECT_GT(zeros, L) << "the cut is reached in many rows";
  EXPECT_GT(kept, L * 20) << "and most keys are within it";
}

TEST_P(RelativeSoftmaxTest, ReducedPrecisionWithinRounding) {
  for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    Case c = ForParam();
    c.dtype = dtype;
    c.mask = true;
    c.position_bias = true;
    c.length = 40;
    c.c2p_cols = 30;
    c.p2c_cols = 50;
    Inputs in = MakeInputs(c, 9);
    at::Tensor expected = Reference(c, in);  // from the same rounded inputs, in float64
    at::Tensor got = in.scores.clone();
    RelativeSoftmaxInPlace(got, c.batch, in.terms);
    ASSERT_EQ(got.scalar_type(), dtype);
    // Only the output rounding: half an ulp of a probability <= 1.
    const double ulp = dtype == at::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
    EXPECT_LE(MaxAbsDiff(got, expected), ulp / 2 + 1e-6) << dtype;
  }
}

TEST_P(RelativeSoftmaxTest, ReducedPrecisionReadsTheFirstElementOfEachTerm) {
  // Index tables that point at column 0 everywhere: the first row reads element 0 of the c2p
  // and p2c allocations for every key.
  Case c = ForParam();
  c.dtype = at::kBFloat16;
  c.length = 33;
  Inputs in = MakeInputs(c, 21);
  in.terms.c2p_index = at::zeros({2 * c.length - 1}, at::kInt);
  in.terms.p2c_index = at::zeros({2 * c.length - 1}, at::kInt);
  at::Tensor got = in.scores.clone();
  RelativeSoftmaxInPlace(got, c.batch, in.terms);
  EXPECT_LE(MaxAbsDiff(got, Reference(c, in)), 1.0 / 256 + 1e-6);
}

TEST_P(RelativeSoftmaxTest, RejectsBadShapesAndIndices) {
  Case c = ForParam();
  Inputs in = MakeInputs(c, 1);
  at::Tensor s = in.scores.clone();
  RelativeScoreTerms bad = in.terms;
  bad.c2p_index = bad.c2p_index.clone();
  bad.c2p_index[3] = static_cast<int>(c.c2p_cols);
  EXPECT_THROW(RelativeSoftmaxInPlace(s, c.batch, bad), c10::Error);
  bad = in.terms;
  bad.p2c_index = bad.p2c_index.narrow(0, 0, 2 * c.length - 2).contiguous();
  EXPECT_THROW(RelativeSoftmaxInPlace(s, c.batch, bad), c10::Error);
  EXPECT_THROW(RelativeSoftmaxInPlace(s, 4, in.terms), c10::Error);  // 6 groups, batch 4
  at::Tensor half = in.scores.to(at::kHalf);
  EXPECT_THROW(RelativeSoftmaxInPlace(half, c.batch, in.terms), c10::Error);  // terms in float32
}

INSTANTIATE_TEST_SUITE_P(Gathers, RelativeSoftmaxTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Native" : "Portable"; });

TEST(ToeplitzTableTest, ReadsEveryDiagonal) {
  c10::InferenceMode guard;
  const int64_t L = 6;
  at::Tensor i = at::arange(L, at::kLong).unsqueeze(1), j = at::arange(L, at::kLong).unsqueeze(0);
  at::Tensor m = (j - i) * (j - i) * 3 + (j - i);  // distinct per diagonal
  at::Tensor table = ToeplitzTable(m);
  ASSERT_EQ(table.numel(), 2 * L - 1);
  EXPECT_TRUE(at::equal(Expand(table, L), m));
  EXPECT_EQ(table.scalar_type(), at::kInt);
}

// RelativeTermColumns against the columns the softmax reads, found by walking every (query, key)
// pair: DeBERTa-v3's log buckets (whose band narrows past the middle), a table that clamps (BERT's
// relative_key) and one out of order, at lengths 1 to 300.
TEST(RelativeTermColumnsTest, EveryRowsColumnsAreTheOnesItsPairsRead) {
  c10::InferenceMode guard;
  at::manual_seed(5);
  for (int64_t L : {1, 2, 7, 128, 300}) {
    const at::Tensor d = at::arange(2 * L - 1, at::kLong) - (L - 1);  // j - i
    std::vector<at::Tensor> tables = {
        (at::clamp(d, -64, 63) + 64).to(at::kInt),                                   // clamped
        (at::sign(d) * at::ceil(at::log1p(at::abs(d).to(at::kDouble)) * 9) + 60).to(at::kInt),  // log-like
        at::randint(0, 50, {2 * L - 1}, at::kInt),                                  // any order
    };
    for (const at::Tensor& table : tables) {
      const int32_t* t = table.data_ptr<int32_t>();
      for (bool rows_are_keys : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "L " << L << (rows_are_keys ? " p2c" : " c2p"));
        std::vector<int32_t> first(L), end(L);
        RelativeTermColumns(table, L, rows_are_keys, first.data(), end.data());
        for (int64_t r = 0; r < L; ++r) {
          int32_t lo = INT32_MAX, hi = INT32_MIN;
          for (int64_t other = 0; other < L; ++other) {
            const int64_t i = rows_are_keys ? other : r, j = rows_are_keys ? r : other;
            lo = std::min(lo, t[j - i + L - 1]);
            hi = std::max(hi, t[j - i + L - 1]);
          }
          ASSERT_EQ(first[r], lo) << "row " << r;
          ASSERT_EQ(end[r], hi + 1) << "row " << r;
        }
      }
    }
  }
  std::vector<int32_t> first(3), end(3);
  EXPECT_THROW(RelativeTermColumns(at::zeros({4}, at::kInt), 3, false, first.data(), end.data()), c10::Error);
  EXPECT_THROW(RelativeTermColumns(at::zeros({5}, at::kLong), 3, false, first.data(), end.data()), c10::Error);
}

}  // namespace
}  // namespace relserve
