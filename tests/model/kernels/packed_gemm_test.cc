// The packed float32 GEMM against ATen's linear in float64, on shapes that exercise every row
// tile (1-12 rows and several blocks), partial panels, k not a multiple of the pass length,
// strided inputs and outputs, with and without bias.
#include "server/model/kernels/packed_gemm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"
#include "tests/testing/tensor_max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

at::Tensor Reference(const at::Tensor& a, const at::Tensor& w, const at::Tensor& bias) {
  at::Tensor out = at::matmul(a.to(at::kDouble), w.to(at::kDouble).t());
  return bias.defined() ? out + bias.to(at::kDouble) : out;
}

// a [m, k] may be a strided view; c is written into a wider buffer, so that ldc > n.
at::Tensor Gemm(const at::Tensor& a, const at::Tensor& w, const at::Tensor& bias, int64_t extra_c_columns = 0) {
  auto packed = PackedWeights::Pack(w.data_ptr<float>(), w.size(0), w.size(1), w.stride(0));
  at::Tensor c = at::full({a.size(0), w.size(0) + extra_c_columns}, 7.0f);
  PackedGemm(a.data_ptr<float>(), a.size(0), a.size(0) > 1 ? a.stride(0) : a.size(1), *packed,
             bias.defined() ? bias.data_ptr<float>() : nullptr, c.data_ptr<float>(), c.stride(0));
  if (extra_c_columns > 0) {
    // Columns past n are never written.
    EXPECT_TRUE(at::all(c.narrow(1, w.size(0), extra_c_columns) == 7.0f).item<bool>());
  }
  return c.narrow(1, 0, w.size(0));
}

TEST(PackedGemmTest, MatchesLinearOnEveryTileAndPanelEdge) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "no AVX-512F on this CPU";
  c10::InferenceMode guard;
  at::manual_seed(3);
  for (int64_t m : {1, 2, 5, 11, 12, 13, 25, 191, 192, 193, 400}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {16, 17}, {31, 64}, {32, 255}, {33, 256},
                        {50, 257}, {96, 600}}) {
      at::Tensor a = at::randn({m, k}), w = at::randn({n, k}), bias = at::randn({n});
      EXPECT_LT(MaxAbsDiff(Gemm(a, w, bias), Reference(a, w, bias)), 2e-4) << m << "x" << n << "x" << k;
      EXPECT_LT(MaxAbsDiff(Gemm(a, w, at::Tensor()), Reference(a, w, at::Tensor())), 2e-4) << m << "x" << n << "x" << k;
    }
  }
}

TEST(PackedGemmTest, StridedRowsAndWiderOutput) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "no AVX-512F on this CPU";
  c10::InferenceMode guard;
  at::manual_seed(4);
  at::Tensor wide = at::randn({37, 300});
  at::Tensor a = wide.narrow(1, 20, 260);        // rows 300 floats apart
  at::Tensor w_wide = at::randn({70, 280});
  at::Tensor w = w_wide.narrow(1, 5, 260);       // weight rows 280 apart
  at::Tensor bias = at::randn({70});
  EXPECT_LT(MaxAbsDiff(Gemm(a, w, bias, /*extra_c_columns=*/9), Reference(a, w, bias)), 2e-4);
}

TEST(PackedGemmTest, ZeroDepthGivesTheBias) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "no AVX-512F on this CPU";
  c10::InferenceMode guard;
  at::Tensor a = at::empty({3, 0}), w = at::empty({5, 0}), bias = at::arange(5, at::kFloat);
  auto packed = PackedWeights::Pack(w.data_ptr<float>(), 5, 0, 0);
  at::Tensor c = at::full({3, 5}, 7.0f);
  PackedGemm(a.data_ptr<float>(), 3, 0, *packed, bias.data_ptr<float>(), c.data_ptr<float>(), 5);
  EXPECT_TRUE(at::equal(c, bias.expand({3, 5})));
}

TEST(PackedGemmTest, ThreadsGiveTheSameBits) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "no AVX-512F on this CPU";
  c10::InferenceMode guard;
  at::manual_seed(5);
  at::Tensor a = at::randn({500, 384}), w = at::randn({1000, 384}), bias = at::randn({1000});
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  at::Tensor one = Gemm(a, w, bias).clone();
  at::set_num_threads(2);
  at::Tensor two = Gemm(a, w, bias).clone();
  at::set_num_threads(before);
  // Each result is one thread's sum in a fixed order, whoever computes it.
  EXPECT_TRUE(at::equal(one, two));
  EXPECT_LT(MaxAbsDiff(one, Reference(a, w, bias)), 5e-4);
}

}  // namespace
}  // namespace relserve
