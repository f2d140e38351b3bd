// The GEMMs' epilogue (server/model/kernels/gemm_epilogue.h): PackedGemm's and GemmBFloat16's
// results with an activation and a residual against the same GEMM without them followed by
// LibTorch's operators, which the epilogue stands for: ReLU and the residual's addition to the
// bit, in float32 and in bfloat16 (each step rounded); GELU's erf form within its approximation's
// error. Shapes cover partial panels, several blocks of rows, inputs long enough to run in chunks,
// and outputs and residuals wider than the product (columns past n never written or read).
#include "server/model/kernels/gemm_epilogue.h"

#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/kernels/packed_gemm.h"

namespace relserve {
namespace {

// GELU's erf form in float64 (std::erf).
double ExactGelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

TEST(EpilogueGeluTest, FollowsTheErfFormWithinTheApproximationsError) {
  double worst = 0;
  for (int i = -24000; i <= 24000; ++i) {
    const float x = static_cast<float>(i) / 2000.0f;  // [-12, 12]
    const double want = ExactGelu(x);
    // erf's absolute error (1.5e-7, and exp's 2e-7 relative to a term below 1) scaled by x / 2, and
    // the float32 steps' rounding.
    const double bound = 0.5 * std::fabs(x) * 2.5e-7 + std::fabs(want) * 4e-7 + 1e-30;
    worst = std::max(worst, std::fabs(EpilogueGelu(x) - want) / bound);
  }
  EXPECT_LE(worst, 1.0);
  // The tanh approximation is off by up to about 5e-4 near |x| = 2: far outside the bound.
  const float x = 2.0f;
  const double tanh_form = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  EXPECT_GT(std::fabs(tanh_form - ExactGelu(x)), 100 * std::fabs(EpilogueGelu(x) - ExactGelu(x)));
  EXPECT_TRUE(std::isnan(EpilogueGelu(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(EpilogueGelu(0.0f), 0.0f);
  EXPECT_EQ(EpilogueGelu(-30.0f), 0.0f);
  EXPECT_EQ(EpilogueGelu(30.0f), 30.0f);
}

// GELU's results against LibTorch's at::gelu on the same inputs: within erf's error (float32), or
// at most one unit in the last place and mostly equal (bfloat16).
::testing::AssertionResult CloseToAtenGelu(const at::Tensor& got, const at::Tensor& in) {
  const at::Tensor want = at::gelu(in.to(at::kFloat));
  const at::Tensor diff = (got.to(at::kFloat) - want).abs();
  if (got.scalar_type() == at::kFloat) {
    const at::Tensor bound = in.abs() * 1e-7 + want.abs() * 1e-6 + 1e-7;
    if (at::all(diff <= bound).item<bool>()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "float32 GELU off by up to " << diff.max().item<float>();
  }
  // bfloat16 in and out, contiguous as a Linear's output is: LibTorch 1.13 computes it in float32
  // (oneDNN) and rounds once; on a strided view it takes a coarser path (45% of the values one unit
  // apart).
  const at::Tensor aten = at::gelu(in.contiguous());
  const at::Tensor ulp = aten.to(at::kFloat).abs() * std::ldexp(1.0, -7) + 1e-30;
  const at::Tensor off = (got.to(at::kFloat) - aten.to(at::kFloat)).abs();
  const double unequal = (off > 0).to(at::kFloat).mean().item<double>();
  if (at::all(off <= ulp).item<bool>() && unequal <= 0.01) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "bfloat16 GELU: largest difference " << off.max().item<float>() << ", "
                                       << unequal * 100 << "% of the values differ";
}

// (rows, k, n): one row; a partial panel; several blocks of rows and passes over k (PackedGemm's
// 256); past PackedGemm's 768-row chunk.
using Shape = std::tuple<int64_t, int64_t, int64_t>;
const Shape kShapes[] = {{1, 24, 40}, {13, 64, 32}, {130, 300, 72}, {800, 40, 40}};

class PackedGemmEpilogueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  }
  c10::InferenceMode guard_;
};

// c (n of its n + 3 columns) = a · wᵀ + bias with `e`; the residual, where there is one, is the
// first n columns of r (n + 5 columns).
at::Tensor FloatGemm(const at::Tensor& a, const PackedWeights& w, const at::Tensor& bias, EpilogueActivation act,
                     const at::Tensor& r) {
  at::Tensor c = at::full({a.size(0), w.n() + 3}, 7.0f);
  GemmEpilogue e;
  e.activation = act;
  if (r.defined()) e.residual = r.data_ptr<float>(), e.ldr = r.stride(0);
  PackedGemm(a.data_ptr<float>(), a.size(0), a.stride(0), w, bias.data_ptr<float>(), c.data_ptr<float>(),
             c.stride(0), e);
  EXPECT_TRUE(at::all(c.narrow(1, w.n(), 3) == 7.0f).item<bool>()) << "columns past n written";
  return c.narrow(1, 0, w.n());
}

// On each kernel's tiles this CPU runs (AVX-512's whole panels, AVX2's half panels).
TEST_F(PackedGemmEpilogueTest, ActivationAndResidualAsLibTorchsOperatorsAfterTheGemm) {
  at::manual_seed(3);
  for (const Float32Kernel kernel : {Float32Kernel::kAvx512, Float32Kernel::kAvx2}) {
    if (!PackedWeights::Supports(kernel)) continue;
    for (const auto& [m, k, n] : kShapes) {
      SCOPED_TRACE(testing::Message() << Float32KernelName(kernel) << ": " << m << " x " << k << " x " << n);
      const at::Tensor a = at::randn({m, k}), wt = at::randn({n, k}) / 4, bias = at::randn({n});
      const auto w = PackedWeights::Pack(wt.data_ptr<float>(), n, k, k, kernel);
      const at::Tensor r_wide = at::randn({m, n + 5}), r = r_wide.narrow(1, 0, n);
      const at::Tensor plain = FloatGemm(a, *w, bias, EpilogueActivation::kNone, at::Tensor());
      // The bias-added sums are the GEMM's own, whatever the epilogue.
      EXPECT_TRUE(at::equal(FloatGemm(a, *w, bias, EpilogueActivation::kNone, r_wide), plain + r));
      EXPECT_TRUE(at::equal(FloatGemm(a, *w, bias, EpilogueActivation::kRelu, at::Tensor()), at::relu(plain)));
      EXPECT_TRUE(at::equal(FloatGemm(a, *w, bias, EpilogueActivation::kRelu, r_wide), at::relu(plain) + r));
      EXPECT_TRUE(CloseToAtenGelu(FloatGemm(a, *w, bias, EpilogueActivation::kGelu, at::Tensor()), plain));
      const at::Tensor gelu_r = FloatGemm(a, *w, bias, EpilogueActivation::kGelu, r_wide);
      EXPECT_LT((gelu_r - (at::gelu(plain) + r)).abs().max().item<float>(), 1e-5);
    }
  }
}

TEST_F(PackedGemmEpilogueTest, ReluKeepsNaN) {
  const int64_t m = 2, k = 4, n = 32;
  at::Tensor a = at::ones({m, k}), wt = at::ones({n, k}), bias = at::zeros({n});
  a[1][2] = std::numeric_limits<float>::quiet_NaN();
  const auto w = PackedWeights::Pack(wt.data_ptr<float>(), n, k, k);
  const at::Tensor c = FloatGemm(a, *w, bias, EpilogueActivation::kRelu, at::Tensor());
  EXPECT_TRUE(at::all(c[0] == 4.0f).item<bool>());
  EXPECT_TRUE(at::all(at::isnan(c[1])).item<bool>());
}

const uint16_t* Bits(const at::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>()); }

class BFloat16GemmEpilogueTest : public ::testing::TestWithParam<BFloat16Kernel> {
 protected:
  void SetUp() override {
    if (!PackedBFloat16Weights::Supports(GetParam())) {
      GTEST_SKIP() << "this CPU does not run " << BFloat16KernelName(GetParam()) << " (or it is not permitted)";
    }
  }
  at::Tensor Gemm(const at::Tensor& a, const PackedBFloat16Weights& w, const at::Tensor& bias, EpilogueActivation act,
                  const at::Tensor& r) const {
    at::Tensor c = at::full({a.size(0), w.n() + 3}, 7.0f, at::kBFloat16);
    GemmEpilogue e;
    e.activation = act;
    if (r.defined()) e.residual = Bits(r), e.ldr = r.stride(0);
    GemmBFloat16(Bits(a), a.size(0), a.stride(0), w, Bits(bias), reinterpret_cast<uint16_t*>(c.data_ptr<at::BFloat16>()),
                 c.stride(0), GetParam(), e);
    EXPECT_TRUE(at::all(c.narrow(1, w.n(), 3) == 7.0f).item<bool>()) << "columns past n written";
    return c.narrow(1, 0, w.n());
  }
  c10::InferenceMode guard_;
};

TEST_P(BFloat16GemmEpilogueTest, EachStepRoundedAsLibTorchsBFloat16Operators) {
  at::manual_seed(5);
  for (const auto& [m, k, n] : kShapes) {
    SCOPED_TRACE(testing::Message() << m << " x " << k << " x " << n);
    const at::Tensor a = at::randn({m, k}).to(at::kBFloat16), wt = (at::randn({n, k}) / 4).to(at::kBFloat16);
    const at::Tensor bias = at::randn({n}).to(at::kBFloat16);
    const auto w = PackedBFloat16Weights::Pack(Bits(wt), n, k, k);
    const at::Tensor r_wide = at::randn({m, n + 5}).to(at::kBFloat16), r = r_wide.narrow(1, 0, n);
    const at::Tensor plain = Gemm(a, *w, bias, EpilogueActivation::kNone, at::Tensor());
    // bfloat16 + bfloat16 in LibTorch: the float32 sum rounded once, as the epilogue's.
    EXPECT_TRUE(at::equal(Gemm(a, *w, bias, EpilogueActivation::kNone, r_wide), plain + r));
    EXPECT_TRUE(at::equal(Gemm(a, *w, bias, EpilogueActivation::kRelu, at::Tensor()), at::relu(plain)));
    EXPECT_TRUE(at::equal(Gemm(a, *w, bias, EpilogueActivation::kRelu, r_wide), at::relu(plain) + r));
    const at::Tensor gelu = Gemm(a, *w, bias, EpilogueActivation::kGelu, at::Tensor());
    EXPECT_TRUE(CloseToAtenGelu(gelu, plain));
    // GELU's result is rounded before the residual is added: the sum of the rounded values.
    EXPECT_TRUE(at::equal(Gemm(a, *w, bias, EpilogueActivation::kGelu, r_wide), gelu + r));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryKernel, BFloat16GemmEpilogueTest,
                         ::testing::Values(BFloat16Kernel::kAmx, BFloat16Kernel::kAvx512),
                         [](const ::testing::TestParamInfo<BFloat16Kernel>& info) {
                           return info.param == BFloat16Kernel::kAmx ? std::string("Amx") : std::string("Avx512");
                         });

}  // namespace
}  // namespace relserve
