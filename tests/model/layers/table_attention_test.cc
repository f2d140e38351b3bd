// The table path (table_attention.h) run by the CUDA kernel's host twin, against the CPU's
// fused relative attention (itself checked against float64 in relative_attention_test): the
// kernel's contract, tiles, online softmax and masking, without a GPU.
#include "server/model/layers/table_attention.h"

#include <algorithm>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"
#include "server/model/layers/biased_attention.h"
#include "server/model/layers/relative_attention.h"
#include "server/model/runtime/device.h"
#include "tests/testing/tensor_max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

constexpr int64_t kHeads = 3, kBatch = 4, kDim = 16;

struct Shape {
  int64_t length;
  int64_t rc, rp;  // 0: no c2p or p2c term
};

// DeBERTa-like inputs: relative rows picked at random through the tables, right padding of a
// different amount in each row (none in row 0), and scores large enough for the softmax to
// be peaked.
RelativeAttentionInputs Make(const Shape& shape, at::ScalarType dtype, uint64_t seed, double scale = 1.5,
                             int64_t dim = kDim) {
  at::manual_seed(seed);
  const int64_t L = shape.length;
  auto randn = [&](at::IntArrayRef sizes) { return (at::randn(sizes, at::kDouble) * scale).to(dtype); };
  RelativeAttentionInputs in;
  in.q = randn({kHeads, kBatch, L, dim});
  in.k = randn({kHeads, kBatch, L, dim});
  in.v = randn({kHeads, kBatch, L, dim});
  if (shape.rc > 0) {
    in.pos_key = randn({kHeads, shape.rc, dim});
    in.c2p_index = at::randint(0, shape.rc, {2 * L - 1}, at::kInt);
  }
  if (shape.rp > 0) {
    in.pos_query = randn({kHeads, shape.rp, dim});
    in.p2c_index = at::randint(0, shape.rp, {2 * L - 1}, at::kInt);
  }
  at::Tensor mask = at::ones({kBatch, L}, at::kLong);
  for (int64_t b = 1; b < kBatch; ++b) mask[b].narrow(0, L - (L * b) / 5, (L * b) / 5).zero_();
  in.attention_mask = mask;
  in.zero_padded_queries = true;
  return in;
}

// The same attention in float32 by the CPU's fused path (checked against float64 in
// relative_attention_test), the yardstick of both half-precision paths.
at::Tensor Float32Reference(const RelativeAttentionInputs& in) {
  RelativeAttentionInputs f = in;
  for (at::Tensor* t : {&f.q, &f.k, &f.v, &f.pos_key, &f.pos_query}) {
    if (t->defined()) *t = t->to(at::kCPU).to(at::kFloat);
  }
  if (f.attention_mask.defined()) f.attention_mask = f.attention_mask.to(at::kCPU);
  f.c2p_table = f.p2c_table = at::Tensor();
  return RelativeAttention(f);
}

// How far `got` is from the float32 reference, against how far the biased path's answer is:
// in half precision neither path is exact, and the table path must be about as close as the
// path it replaces (twice its error, or `floor` where both are tiny).
void ExpectAsAccurateAsTheBiasedPath(const at::Tensor& got, const at::Tensor& biased, const at::Tensor& reference,
                                     double floor, const std::string& what) {
  const double error = MaxAbsDiff(got, reference), biased_error = MaxAbsDiff(biased, reference);
  EXPECT_LT(error, std::max(floor, 2 * biased_error)) << what << ": table path " << error << ", biased path "
                                                      << biased_error << " from float32";
}

class TableAttentionTest : public ::testing::Test {
 protected:
  c10::InferenceMode guard_;
};

// One tile (19), exactly one (64), and three with a partial last one (150); c2p and p2c
// together, each alone, and a c2p term narrower than the offsets.
TEST_F(TableAttentionTest, MatchesTheFusedPathAcrossTiles) {
  for (const Shape& shape : {Shape{19, 12, 12}, Shape{64, 40, 9}, Shape{150, 60, 60}, Shape{150, 299, 0},
                             Shape{150, 0, 17}, Shape{70, 5, 0}}) {
    RelativeAttentionInputs in = Make(shape, at::kFloat, static_cast<uint64_t>(shape.length + shape.rc));
    ASSERT_TRUE(TableAttentionSupports(in));
    at::Tensor fused = RelativeAttention(in);
    at::Tensor tables = TableAttention(in);
    ASSERT_EQ(tables.sizes(), in.q.sizes());
    EXPECT_LT(MaxAbsDiff(tables, fused), 2e-5) << "L " << shape.length << " rc " << shape.rc << " rp " << shape.rp;
  }
}

// T5-style rows: padded queries are computed (over the real keys), not zeroed; and no padding.
TEST_F(TableAttentionTest, PaddedQueriesAndNoPadding) {
  RelativeAttentionInputs in = Make({100, 30, 30}, at::kFloat, 7);
  in.zero_padded_queries = false;
  at::Tensor computed = TableAttention(in);
  EXPECT_LT(MaxAbsDiff(computed, RelativeAttention(in)), 2e-5);
  EXPECT_GT(computed.select(1, kBatch - 1).select(1, 99).abs().max().item<double>(), 0.01);
  in.zero_padded_queries = true;
  EXPECT_EQ(TableAttention(in).select(1, kBatch - 1).select(1, 99).abs().max().item<double>(), 0.0);
  in.attention_mask = at::Tensor();
  EXPECT_LT(MaxAbsDiff(TableAttention(in), RelativeAttention(in)), 2e-5);
}

// XLNet's position term alone: c2p from a query of its own.
TEST_F(TableAttentionTest, OwnQueryForTheC2pTerm) {
  RelativeAttentionInputs in = Make({90, 179, 0}, at::kFloat, 11);
  in.c2p_query = at::randn({kHeads, kBatch, 90, kDim}, at::kFloat);
  at::Tensor with_own = TableAttention(in);
  EXPECT_LT(MaxAbsDiff(with_own, RelativeAttention(in)), 2e-5);
  RelativeAttentionInputs same = in;
  same.c2p_query = at::Tensor();
  EXPECT_GT(MaxAbsDiff(TableAttention(same), with_own), 0.05);
}

// Half precision (the probabilities rounded before they multiply v, as the kernel does) against
// the same inputs in float32: within what rounding the inputs and products to 8 (bfloat16) or
// 11 (float16) significant bits allows for scores of magnitude ~3. bfloat16's bound is a little
// over one step of bfloat16 at the outputs' largest magnitudes (4-8: 0.03125), the rounding of the
// output itself, which differs by one step between CPUs (how LibTorch converts and sums bfloat16
// with and without AVX512-BF16).
TEST_F(TableAttentionTest, HalfPrecisionCloseToFloat) {
  for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    RelativeAttentionInputs in = Make({130, 50, 50}, dtype, 5, /*scale=*/0.7);
    RelativeAttentionInputs as_float = in;
    for (at::Tensor* t : {&as_float.q, &as_float.k, &as_float.v, &as_float.pos_key, &as_float.pos_query}) {
      *t = t->to(at::kFloat);
    }
    at::Tensor got = TableAttention(in);
    ASSERT_EQ(got.scalar_type(), dtype);
    const double tolerance = dtype == at::kBFloat16 ? 0.04 : 0.004;
    EXPECT_LT(MaxAbsDiff(got, RelativeAttention(as_float)), tolerance) << c10::toString(dtype);
    if (dtype == at::kBFloat16) {  // the CPU has no float16 path of its own
      EXPECT_LT(MaxAbsDiff(got, RelativeAttention(in)), tolerance);
    }
  }
}

// The tables on the device, where given, are the ones read.
TEST_F(TableAttentionTest, ReadsTheDeviceTablesWhereGiven) {
  RelativeAttentionInputs in = Make({40, 20, 20}, at::kFloat, 3);
  at::Tensor expected = TableAttention(in);
  RelativeAttentionInputs given = in;
  given.c2p_table = in.c2p_index.clone();
  given.p2c_table = in.p2c_index.clone();
  EXPECT_LT(MaxAbsDiff(TableAttention(given), expected), 1e-6);
  given.c2p_table = (in.c2p_index + 1).remainder(20).to(at::kInt);
  EXPECT_GT(MaxAbsDiff(TableAttention(given), expected), 0.05);
}

// Inputs with terms the table path does not read go to the biased path.
TEST_F(TableAttentionTest, SupportsDebertaTermsOnly) {
  RelativeAttentionInputs in = Make({30, 10, 10}, at::kFloat, 1);
  EXPECT_TRUE(TableAttentionSupports(in));
  RelativeAttentionInputs none = in;
  none.pos_key = none.pos_query = at::Tensor();
  EXPECT_FALSE(TableAttentionSupports(none));
  RelativeAttentionInputs t5 = in;
  t5.position_bias = at::zeros({kHeads, 59}, at::kFloat);
  EXPECT_FALSE(TableAttentionSupports(t5));
  RelativeAttentionInputs causal = in;
  causal.causal = true;
  EXPECT_FALSE(TableAttentionSupports(causal));
  RelativeAttentionInputs segments = in;
  segments.segment_scores = at::zeros({kHeads, kBatch, 30, 2}, at::kFloat);
  segments.segment_ids = at::zeros({kBatch, 30}, at::kInt);
  EXPECT_FALSE(TableAttentionSupports(segments));
  RelativeAttentionInputs doubles = in;
  for (at::Tensor* t : {&doubles.q, &doubles.k, &doubles.v}) *t = t->to(at::kDouble);
  EXPECT_FALSE(TableAttentionSupports(doubles));
}

// RelativeAttention takes the table path off the CPU (here: the CPU standing in for a device)
// when its inputs' path says tables and the inputs allow it, and the biased path otherwise; the
// stats count each call under the path that ran it.
TEST_F(TableAttentionTest, RelativeAttentionDispatch) {
  RelativeAttentionInputs in = Make({50, 20, 20}, at::kFloat, 2);
  in.kernels.device_path_on_cpu = true;
  AttentionStats stats;
  in.stats = &stats;
  in.kernels.path = DeviceAttention::kTables;
  EXPECT_TRUE(at::equal(RelativeAttention(in), TableAttention(in)));
  EXPECT_EQ(stats.table_calls.load(), 1);
  EXPECT_EQ(stats.bias_calls.load(), 0);
  RelativeAttentionInputs t5 = in;
  t5.pos_key = t5.pos_query = at::Tensor();
  t5.position_bias = at::randn({kHeads, 99}, at::kFloat);
  EXPECT_TRUE(at::equal(RelativeAttention(t5), BiasedAttention(t5)));
  EXPECT_EQ(stats.table_calls.load(), 1);
  EXPECT_EQ(stats.bias_calls.load(), 1);
  in.kernels.path = DeviceAttention::kBias;
  EXPECT_TRUE(at::equal(RelativeAttention(in), BiasedAttention(in)));
  EXPECT_EQ(stats.bias_calls.load(), 2);
  EXPECT_GT(stats.host_nanoseconds.load(), 0);
  in.kernels.device_path_on_cpu = false;
  RelativeAttention(in);
  EXPECT_EQ(stats.cpu_calls.load(), 1);
  EXPECT_EQ(stats.table_calls.load() + stats.bias_calls.load(), 3);
}

// In bfloat16 the host twin (the kernel's roundings) is about as close to float32 as the biased
// path is, at the GPU test's shapes (measured here: 0.018-0.038 against 0.041-0.076; LibTorch's
// CPU kernels have no float16 matrix product, so float16 is checked on the GPU only).
TEST_F(TableAttentionTest, HalfPrecisionAsAccurateAsTheBiasedPath) {
  uint64_t seed = 100;
  for (at::ScalarType dtype : {at::kBFloat16}) {
    for (const Shape& shape : {Shape{19, 12, 12}, Shape{64, 40, 9}, Shape{150, 299, 299}}) {
      RelativeAttentionInputs in = Make(shape, dtype, ++seed, /*scale=*/0.7, /*kDim=*/64);
      in.kernels.device_path_on_cpu = true;
      const std::string what = std::string(c10::toString(dtype)) + " L " + std::to_string(shape.length);
      ExpectAsAccurateAsTheBiasedPath(TableAttention(in), BiasedAttention(in), Float32Reference(in),
                                      0.03, what);
    }
  }
}

// On a GPU with the CUDA kernel built (skipped elsewhere): the kernel against its host twin, and as
// close to float32 as the biased path is; head size 64, one to eight tiles, each term alone, both half types,
// the offset tables on the host (copied per call) and on the device.
TEST(TableAttentionGpuTest, KernelMatchesTheHostTwinAndTheBiasedPath) {
  if (!TableAttentionKernelCompiledIn() || CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA kernel or no GPU";
  c10::InferenceMode guard;
  const c10::Device gpu(c10::kCUDA, 0);
  uint64_t seed = 100;
  for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    for (const Shape& shape : {Shape{19, 12, 12}, Shape{64, 40, 9}, Shape{150, 299, 299}, Shape{512, 512, 512},
                               Shape{130, 0, 17}, Shape{70, 5, 0}}) {
      RelativeAttentionInputs in = Make(shape, dtype, ++seed, /*scale=*/0.7, /*kDim=*/64);
      const at::Tensor host = TableAttention(in);
      RelativeAttentionInputs dev = in;
      for (at::Tensor* t : {&dev.q, &dev.k, &dev.v, &dev.pos_key, &dev.pos_query, &dev.attention_mask}) {
        if (t->defined()) *t = t->to(gpu);
      }
      ASSERT_TRUE(TableAttentionSupports(dev));
      const at::Tensor got = TableAttention(dev).cpu();
      const double tolerance = dtype == at::kBFloat16 ? 0.03 : 0.005;
      const std::string what = std::string(c10::toString(dtype)) + " L " + std::to_string(shape.length) + " rc " +
                               std::to_string(shape.rc) + " rp " + std::to_string(shape.rp);
      EXPECT_FALSE(got.isnan().any().item<bool>()) << what;
      EXPECT_LT(MaxAbsDiff(got, host), tolerance) << what;
      ExpectAsAccurateAsTheBiasedPath(got, BiasedAttention(dev).cpu(), Float32Reference(in), tolerance, what);
      if (dev.pos_key.defined()) dev.c2p_table = dev.c2p_index.to(gpu);
      if (dev.pos_query.defined()) dev.p2c_table = dev.p2c_index.to(gpu);
      EXPECT_TRUE(at::equal(TableAttention(dev).cpu(), got)) << what;
    }
  }
}

TEST(DeviceAttentionTest, ParsesTheVariable) {
  EXPECT_EQ(*ParseDeviceAttention(""), DeviceAttention::kBias);
  EXPECT_EQ(*ParseDeviceAttention("bias"), DeviceAttention::kBias);
  EXPECT_EQ(*ParseDeviceAttention("tables"), DeviceAttention::kTables);
  absl::StatusOr<DeviceAttention> bad = ParseDeviceAttention("Tables");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("\"Tables\""), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("\"bias\" or \"tables\""), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace relserve
