// The bfloat16 GEMM in AMX tiles against the same product in float64 from the same bfloat16
// values, rounded once to bfloat16: on shapes that exercise every row block (1-16 rows, 17-32,
// several blocks and tasks of rows), partial panels, strided inputs and outputs, with and
// without bias; and against LibTorch's own bfloat16 linear (oneDNN).
#include "server/model/kernels/amx_gemm.h"

#include <cmath>
#include <limits>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"

namespace relserve {
namespace {

const uint16_t* Bits(const at::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>()); }

// The exact product of the bfloat16 values, plus the bias, in float64.
at::Tensor Exact(const at::Tensor& a, const at::Tensor& w, const at::Tensor& bias) {
  at::Tensor out = at::matmul(a.to(at::kDouble), w.to(at::kDouble).t());
  return bias.defined() ? out + bias.to(at::kDouble) : out;
}

// Whether `got` (bfloat16) is the exact result rounded once to bfloat16 (half a unit in the last
// place: at most 2^-8 of its magnitude), give or take the float32 sum's own rounding (2^-20 of the sum of the
// products' magnitudes, for k up to a few thousand). A misplaced weight or row is off by O(1).
::testing::AssertionResult RoundedOnce(const at::Tensor& got, const at::Tensor& a, const at::Tensor& w,
                                       const at::Tensor& bias) {
  const at::Tensor exact = Exact(a, w, bias);
  at::Tensor scale = at::matmul(a.to(at::kDouble).abs(), w.to(at::kDouble).abs().t());
  if (bias.defined()) scale = scale + bias.to(at::kDouble).abs();
  const at::Tensor excess = (got.to(at::kDouble) - exact).abs() - (exact.abs() * std::ldexp(1.0, -8) + scale * std::ldexp(1.0, -20));
  const double worst = excess.max().item<double>();
  if (worst <= 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "off by " << worst << " beyond one rounding";
}

// a [m, k] bfloat16 may be a strided view; c is written into a wider buffer, so that ldc > n.
at::Tensor Gemm(const at::Tensor& a, const at::Tensor& w, const at::Tensor& bias, int64_t extra_c_columns = 0) {
  auto packed = PackedBFloat16Weights::Pack(Bits(w), w.size(0), w.size(1), w.stride(0));
  at::Tensor c = at::full({a.size(0), w.size(0) + extra_c_columns}, 7.0f, at::kBFloat16);
  AmxGemmBFloat16(Bits(a), a.size(0), a.size(0) > 1 ? a.stride(0) : a.size(1), *packed,
                  bias.defined() ? Bits(bias) : nullptr, reinterpret_cast<uint16_t*>(c.data_ptr<at::BFloat16>()),
                  c.stride(0));
  if (extra_c_columns > 0) {
    // Columns past n are never written.
    EXPECT_TRUE(at::all(c.narrow(1, w.size(0), extra_c_columns) == 7.0f).item<bool>());
  }
  return c.narrow(1, 0, w.size(0));
}

at::Tensor RandomBFloat16(std::initializer_list<int64_t> sizes) { return at::randn(sizes).to(at::kBFloat16); }

TEST(AmxGemmTest, MatchesTheExactProductOnEveryBlockAndPanelEdge) {
  if (!PackedBFloat16Weights::Supported()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or not permitted)";
  c10::InferenceMode guard;
  at::manual_seed(3);
  for (int64_t m : {1, 2, 15, 16, 17, 31, 32, 33, 48, 100, 255, 256, 257, 530}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 32}, {7, 64}, {16, 32}, {31, 96}, {32, 128}, {33, 256},
                        {50, 320}, {96, 768}}) {
      at::Tensor a = RandomBFloat16({m, k}), w = RandomBFloat16({n, k}), bias = RandomBFloat16({n});
      EXPECT_TRUE(RoundedOnce(Gemm(a, w, bias), a, w, bias)) << m << "x" << n << "x" << k;
      EXPECT_TRUE(RoundedOnce(Gemm(a, w, at::Tensor()), a, w, at::Tensor())) << m << "x" << n << "x" << k;
    }
  }
}

TEST(AmxGemmTest, StridedRowsAndWiderOutput) {
  if (!PackedBFloat16Weights::Supported()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or not permitted)";
  c10::InferenceMode guard;
  at::manual_seed(4);
  at::Tensor wide = RandomBFloat16({37, 300});
  at::Tensor a = wide.narrow(1, 20, 256);        // rows 300 values apart
  at::Tensor w_wide = RandomBFloat16({70, 280});
  at::Tensor w = w_wide.narrow(1, 5, 256);       // weight rows 280 apart
  at::Tensor bias = RandomBFloat16({70});
  EXPECT_TRUE(RoundedOnce(Gemm(a, w, bias, /*extra_c_columns=*/9), a, w, bias));
}

TEST(AmxGemmTest, ZerosInAndInfinitiesCarry) {
  if (!PackedBFloat16Weights::Supported()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or not permitted)";
  c10::InferenceMode guard;
  at::Tensor a = at::zeros({20, 64}, at::kBFloat16), w = RandomBFloat16({40, 64}), bias = RandomBFloat16({40});
  // Zero rows give exactly the bias.
  EXPECT_TRUE(at::equal(Gemm(a, w, bias), bias.expand({20, 40})));
  a[3][5] = std::numeric_limits<float>::infinity();
  w.fill_(1.0);
  const at::Tensor c = Gemm(a, w, at::Tensor());
  EXPECT_TRUE(at::all(at::isinf(c[3])).item<bool>());
  EXPECT_TRUE(at::all(c[2] == 0).item<bool>());
}

TEST(AmxGemmTest, CloseToLibTorchsBFloat16LinearAndTheSameOnOneOrTwoThreads) {
  if (!PackedBFloat16Weights::Supported()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or not permitted)";
  c10::InferenceMode guard;
  at::manual_seed(5);
  at::Tensor a = RandomBFloat16({300, 768}), w = RandomBFloat16({3072, 768}), bias = RandomBFloat16({3072});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor one = Gemm(a, w, bias);
  at::set_num_threads(2);
  const at::Tensor two = Gemm(a, w, bias);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(one, two));
  EXPECT_TRUE(RoundedOnce(one, a, w, bias));
  // LibTorch's rounds its own float32 sums once too: the two differ by about a unit at most.
  const at::Tensor libtorch = at::linear(a, w, bias);
  EXPECT_TRUE(RoundedOnce(libtorch, a, w, bias));
  const at::Tensor apart = (one.to(at::kDouble) - libtorch.to(at::kDouble)).abs();
  EXPECT_LE((apart - libtorch.to(at::kDouble).abs() * std::ldexp(1.0, -7)).max().item<double>(), 0.05);
}

// k that is not a multiple of the tiles' 32: the weight is padded with zeros, and the last columns
// of a are copied out before the tiles read them (never past a row's end: NaN past it stays out).
TEST(AmxGemmTest, DepthsThatAreNotAMultipleOf32) {
  if (!PackedBFloat16Weights::Supported()) GTEST_SKIP() << "no AMX-BF16 on this CPU (or not permitted)";
  c10::InferenceMode guard;
  at::manual_seed(7);
  for (int64_t m : {1, 16, 20, 33, 300}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{5, 1}, {32, 17}, {40, 48}, {70, 100}, {64, 312}}) {
      // Each row of a is followed by NaN, which a read past the row's end would carry into c.
      at::Tensor wide = at::full({m, k + 8}, std::numeric_limits<float>::quiet_NaN(), at::kBFloat16);
      at::Tensor a = wide.narrow(1, 0, k);
      a.copy_(RandomBFloat16({m, k}));
      at::Tensor w = RandomBFloat16({n, k}), bias = RandomBFloat16({n});
      const at::Tensor c = Gemm(a, w, bias);
      EXPECT_FALSE(at::any(at::isnan(c)).item<bool>()) << m << "x" << n << "x" << k;
      EXPECT_TRUE(RoundedOnce(c, a, w, bias)) << m << "x" << n << "x" << k;
      auto packed = PackedBFloat16Weights::Pack(Bits(w), n, k, k);
      EXPECT_EQ(packed->padded_k() % PackedBFloat16Weights::kDepthStep, 0);
      EXPECT_GE(packed->padded_k(), k);
    }
  }
}

}  // namespace
}  // namespace relserve
