// The fused residual + LayerNorm kernel against ATen's layer_norm of the float64 sum.
#include "server/model/kernels/layer_norm_kernel.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"
#include "tests/testing/tensor_max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

at::Tensor Reference(const at::Tensor& x, const at::Tensor& r, const at::Tensor& w, const at::Tensor& b, double eps) {
  at::Tensor sum = r.defined() ? x.to(at::kDouble) + r.to(at::kDouble) : x.to(at::kDouble);
  return at::layer_norm(sum, {w.size(0)}, w.to(at::kDouble), b.to(at::kDouble), eps);
}

TEST(AddLayerNormTest, Float32MatchesWithAndWithoutResidual) {
  c10::InferenceMode guard;
  at::manual_seed(1);
  for (int64_t H : {1, 7, 384, 1030}) {
    at::Tensor x = at::randn({3, 5, H}), r = at::randn({3, 5, H});
    at::Tensor w = at::randn({H}), b = at::randn({H});
    EXPECT_LT(MaxAbsDiff(AddLayerNorm(x, r, w, b, 1e-7), Reference(x, r, w, b, 1e-7)), 1e-5) << H;
    EXPECT_LT(MaxAbsDiff(AddLayerNorm(x, at::Tensor(), w, b, 1e-5), Reference(x, at::Tensor(), w, b, 1e-5)), 1e-5) << H;
  }
}

TEST(AddLayerNormTest, ResidualAndAffineMatter) {
  c10::InferenceMode guard;
  at::manual_seed(2);
  at::Tensor x = at::randn({4, 64}), r = at::randn({4, 64}), w = at::randn({64}), b = at::randn({64});
  at::Tensor out = AddLayerNorm(x, r, w, b, 1e-7);
  EXPECT_GT(MaxAbsDiff(out, Reference(x, at::Tensor(), w, b, 1e-7)), 0.1);
  EXPECT_GT(MaxAbsDiff(out, Reference(x, r, at::ones({64}), b, 1e-7)), 0.1);
  EXPECT_GT(MaxAbsDiff(out, Reference(x, r, w, at::zeros({64}), 1e-7)), 0.1);
}

TEST(AddLayerNormTest, LargeMeanKeepsPrecision) {
  // A two-pass variance: a mean of 1000 with unit spread loses nothing.
  c10::InferenceMode guard;
  at::manual_seed(3);
  at::Tensor x = at::randn({8, 768}) + 1000, w = at::ones({768}), b = at::zeros({768});
  EXPECT_LT(MaxAbsDiff(AddLayerNorm(x, at::Tensor(), w, b, 1e-12), Reference(x, at::Tensor(), w, b, 1e-12)), 2e-4);
}

TEST(AddLayerNormTest, VeryLargeMeanKeepsPrecision) {
  // A float mean of the values themselves loses the spread's digits at this offset (and at
  // 1000 already where the sum is not vectorized, as in sanitizer builds); the kernel works
  // relative to each row's first value instead.
  c10::InferenceMode guard;
  at::manual_seed(5);
  at::Tensor x = at::randn({8, 768}) + 1e5, w = at::ones({768}), b = at::zeros({768});
  EXPECT_LT(MaxAbsDiff(AddLayerNorm(x, at::Tensor(), w, b, 1e-12), Reference(x, at::Tensor(), w, b, 1e-12)), 2e-4);
}

TEST(AddLayerNormTest, ReducedPrecisionWithinOutputRounding) {
  c10::InferenceMode guard;
  at::manual_seed(4);
  for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    at::Tensor x = at::randn({16, 384}).to(dtype), r = at::randn({16, 384}).to(dtype);
    at::Tensor w = at::randn({384}).to(dtype), b = at::randn({384}).to(dtype);
    at::Tensor out = AddLayerNorm(x, r, w, b, 1e-7);
    ASSERT_EQ(out.scalar_type(), dtype);
    at::Tensor expected = Reference(x, r, w, b, 1e-7);
    const double rel = dtype == at::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;  // half an ulp, relative
    at::Tensor err = (out.to(at::kDouble) - expected).abs() / (expected.abs() + 1e-3);
    EXPECT_LT(err.max().item<double>(), rel * 1.01) << dtype;
  }
}

TEST(AddLayerNormTest, RejectsMismatchedResidual) {
  c10::InferenceMode guard;
  at::Tensor x = at::randn({2, 8}), w = at::ones({8}), b = at::zeros({8});
  EXPECT_THROW(AddLayerNorm(x, at::randn({2, 9}), w, b, 1e-5), c10::Error);
  EXPECT_THROW(AddLayerNorm(x, x, at::ones({7}), b, 1e-5), c10::Error);
}

// transformers' T5LayerNorm, op for op.
at::Tensor T5Reference(const at::Tensor& x, const at::Tensor& w, double eps) {
  at::Tensor variance = x.to(at::kFloat).pow(2).mean(-1, true);
  at::Tensor normed = x * at::rsqrt(variance + eps);
  if (w.scalar_type() != at::kFloat) normed = normed.to(w.scalar_type());
  return w * normed;
}

TEST(RmsNormTest, MatchesT5LayerNormInEveryDtype) {
  c10::InferenceMode guard;
  at::manual_seed(5);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    for (int64_t H : {1, 9, 512, 1030}) {
      at::Tensor x = (at::randn({6, H}) * 3).to(dtype), w = (at::rand({H}) + 0.5).to(dtype);
      at::Tensor got = RmsNorm(x, w, 1e-6), expected = T5Reference(x, w, 1e-6);
      ASSERT_EQ(got.scalar_type(), dtype);
      // float32: rounding only; reduced precision: at most one ulp where the float32 mean differs
      const double tol = dtype == at::kFloat ? 1e-5 : dtype == at::kBFloat16 ? 2.0 / 128 : 2.0 / 1024;
      at::Tensor err = (got.to(at::kDouble) - expected.to(at::kDouble)).abs() / (expected.to(at::kDouble).abs() + 1e-3);
      EXPECT_LT(err.max().item<double>(), tol) << dtype << " H " << H;
    }
  }
}

TEST(RmsNormTest, NoMeanIsSubtracted) {
  // A LayerNorm would map a constant row to 0; T5's norm maps it to the weight.
  c10::InferenceMode guard;
  at::Tensor x = at::full({2, 16}, 4.0), w = at::arange(16, at::kFloat);
  EXPECT_LT((RmsNorm(x, w, 0.0) - w).abs().max().item<double>(), 1e-6);
}

}  // namespace
}  // namespace relserve
