// Linear on weights packed at load (server/model/layers/packed_linear.h): inputs up to the row
// limit take the packed weights, longer ones the weight as loaded; shapes and strides as
// at::linear takes them; what PackLinearsFloat32 packs and leaves.
#include "server/model/layers/packed_linear.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/kernels/packed_gemm.h"
#include "server/model/layers/int8_linear.h"
#include "server/model/layers/layers.h"
#include "tests/testing/tensor_max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

class PackedLinearTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  }
  c10::InferenceMode guard_;
};

// AVX-512's tiles take 192 rows by default on Intel CPUs (OpenBLAS is ahead past about 240 on a
// Sapphire Rapids) and every input on AMD ones (ahead of OpenBLAS at every shape on a Zen 4);
// AVX2's every input on both. Plain numbers: no CPU needed.
TEST(PackedLinearDefaultsTest, EachKernelsRowBound) {
  EXPECT_EQ(DefaultPackedLinearMaxRows(Float32Kernel::kAvx512, /*amd_cpu=*/false), kPackedLinearMaxRows);
  EXPECT_EQ(DefaultPackedLinearMaxRows(Float32Kernel::kAvx512, /*amd_cpu=*/true), kPackedLinearEveryRow);
  EXPECT_EQ(kPackedLinearMaxRows, 192);
  EXPECT_EQ(DefaultPackedLinearMaxRows(Float32Kernel::kAvx2, false), kPackedLinearEveryRow);
  EXPECT_EQ(DefaultPackedLinearMaxRows(Float32Kernel::kAvx2, true), kPackedLinearEveryRow);
  EXPECT_EQ(kPackedLinearEveryRow, std::numeric_limits<int64_t>::max());
}

// This CPU's default follows its vendor, as /proc/cpuinfo names it.
TEST(PackedLinearDefaultsTest, ThisCpusVendor) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string text((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
  if (text.empty()) GTEST_SKIP() << "no /proc/cpuinfo";
  EXPECT_EQ(ThisCpuIsAmd(), text.find("AuthenticAMD") != std::string::npos);
  EXPECT_EQ(DefaultPackedLinearMaxRows(Float32Kernel::kAvx512),
            DefaultPackedLinearMaxRows(Float32Kernel::kAvx512, ThisCpuIsAmd()));
}

// Where every input takes the packed weights, the weight as loaded is released (its memory goes
// back when nothing else holds it), and the layer still answers at::linear's and knows its width.
TEST_F(PackedLinearTest, EveryRowReleasesTheWeightAsLoaded) {
  at::manual_seed(4);
  const at::Tensor w = at::randn({40, 24}), b = at::randn({40});
  Linear every{w.clone(), b, nullptr, nullptr}, bounded{w.clone(), b, nullptr, nullptr};
  ASSERT_TRUE(PackLinearsFloat32({&every}, kPackedLinearEveryRow).ok());
  ASSERT_TRUE(PackLinearsFloat32({&bounded}, /*max_rows=*/10).ok());
  EXPECT_FALSE(every.weight.defined());
  EXPECT_TRUE(bounded.weight.defined());
  EXPECT_TRUE(every.defined());
  EXPECT_EQ(every.out_features(), 40);
  EXPECT_EQ(bounded.out_features(), 40);
  for (const at::Tensor& x : {at::randn({3, 24}), at::randn({300, 24}), at::randn({2, 100, 24})}) {
    EXPECT_LT(MaxAbsDiff(every(x), at::linear(x, w, b)), 1e-4) << x.sizes();
  }
  // Packed again: left as it is.
  const auto first = every.packed;
  ASSERT_TRUE(PackLinearsFloat32({&every}, kPackedLinearEveryRow).ok());
  EXPECT_EQ(every.packed, first);
}

TEST_F(PackedLinearTest, RowLimitChoosesThePackedWeights) {
  at::manual_seed(1);
  Linear l{at::randn({40, 24}), at::randn({40}), nullptr, nullptr};
  ASSERT_TRUE(PackLinearsFloat32({&l}, /*max_rows=*/10).ok());
  ASSERT_NE(l.packed, nullptr);
  ASSERT_TRUE(l.weight.defined());  // longer inputs still take it
  // Packed weights of another matrix show which path ran.
  const at::Tensor other = at::randn({40, 24});
  auto swapped = std::make_shared<PackedLinear>(*l.packed);
  swapped->weights = PackedWeights::Pack(other.data_ptr<float>(), 40, 24, 24);
  l.packed = swapped;
  const at::Tensor short_x = at::randn({2, 5, 24}), long_x = at::randn({11, 24});
  EXPECT_LT(MaxAbsDiff(l(short_x), at::linear(short_x, other, l.bias)), 1e-5);   // 10 rows: packed
  EXPECT_LT(MaxAbsDiff(l(long_x), at::linear(long_x, l.weight, l.bias)), 1e-5);  // 11 rows: as loaded
}

TEST_F(PackedLinearTest, MatchesLinearOnLeadingDimensionsAndStrides) {
  at::manual_seed(2);
  const at::Tensor w = at::randn({70, 48}), b = at::randn({70});
  Linear with_bias{w, b, nullptr, nullptr}, without_bias{w, at::Tensor(), nullptr, nullptr};
  ASSERT_TRUE(PackLinearsFloat32({&with_bias, &without_bias}).ok());
  const at::Tensor x = at::randn({3, 7, 48});
  const at::Tensor strided = at::randn({9, 60}).narrow(1, 4, 48);  // rows 60 floats apart
  const at::Tensor transposed = at::randn({48, 6}).t();             // not contiguous in its last dimension
  for (const at::Tensor& in : {x, strided, transposed}) {
    const at::Tensor got = with_bias(in);
    ASSERT_EQ(got.sizes(), at::linear(in, w, b).sizes());
    EXPECT_LT(MaxAbsDiff(got, at::linear(in, w, b)), 1e-4);
    EXPECT_LT(MaxAbsDiff(without_bias(in), at::linear(in, w)), 1e-4);
  }
  // One row, one vector, and no rows.
  const at::Tensor row = at::randn({1, 48}), vector = at::randn({48});
  EXPECT_LT(MaxAbsDiff(with_bias(row), at::linear(row, w, b)), 1e-4);
  ASSERT_EQ(with_bias(vector).sizes(), (std::vector<int64_t>{70}));
  EXPECT_LT(MaxAbsDiff(with_bias(vector), at::linear(vector, w, b)), 1e-4);
  EXPECT_EQ(with_bias(at::randn({0, 48})).sizes(), (std::vector<int64_t>{0, 70}));
}

TEST_F(PackedLinearTest, PackLeavesQuantizedUndefinedAndPackedLayersAlone) {
  at::manual_seed(3);
  Linear plain{at::randn({8, 16}), at::randn({8}), nullptr, nullptr};
  Linear undefined;
  ASSERT_TRUE(EnableInt8Engine().ok());
  Linear quantized{at::randn({8, 16}), at::randn({8}), nullptr, nullptr};
  ASSERT_TRUE(QuantizeLinearsInt8({&quantized}, Int8Gemm::kOneDnn).ok());
  ASSERT_TRUE(PackLinearsFloat32({&plain, &undefined, &quantized, nullptr}).ok());
  EXPECT_NE(plain.packed, nullptr);
  EXPECT_EQ(undefined.packed, nullptr);
  EXPECT_EQ(quantized.packed, nullptr);
  const auto first = plain.packed;
  ASSERT_TRUE(PackLinearsFloat32({&plain}).ok());
  EXPECT_EQ(plain.packed, first);
}

TEST_F(PackedLinearTest, RefusesWeightsItCannotPack) {
  Linear half{at::randn({8, 16}).to(at::kBFloat16), at::Tensor(), nullptr, nullptr};
  const absl::Status st = PackLinearsFloat32({&half});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("BFloat16"), std::string::npos) << st;
}

// Linear(x, act, residual) is act(Linear(x)) + residual whichever way it runs: in the GEMM's
// epilogue where x takes the packed weights and act is one the epilogue applies (ReLU to the bit,
// GELU within erf's error), LibTorch's operators after the GEMM elsewhere (another activation, a
// residual of another dtype or layout, the weight as loaded).
TEST_F(PackedLinearTest, ActivationAndResidualInTheEpilogueOrAfter) {
  at::manual_seed(8);
  const at::Tensor w = at::randn({40, 24}), b = at::randn({40});
  Linear packed{w.clone(), b, nullptr, nullptr}, loaded{w.clone(), b, nullptr, nullptr};
  ASSERT_TRUE(PackLinearsFloat32({&packed}, kPackedLinearEveryRow).ok());
  const at::Tensor x = at::randn({2, 5, 24}), r = at::randn({2, 5, 40});
  const at::Tensor y = packed(x);
  EXPECT_TRUE(at::equal(packed(x, Activation::kLinear, r), r + y));
  EXPECT_TRUE(at::equal(packed(x, Activation::kRelu), at::relu(y)));
  EXPECT_TRUE(at::equal(packed(x, Activation::kRelu, r), r + at::relu(y)));
  EXPECT_LT(MaxAbsDiff(packed(x, Activation::kGelu), at::gelu(y)), 1e-5);
  EXPECT_LT(MaxAbsDiff(packed(x, Activation::kGelu, r), r + at::gelu(y)), 1e-5);
  EXPECT_TRUE(at::equal(packed(x, Activation::kSilu, r), r + at::silu(y)));
  EXPECT_TRUE(at::equal(loaded(x, Activation::kRelu, r), r + at::relu(loaded(x))));
  const at::Tensor wide = r.to(at::kDouble), strided = at::randn({2, 40, 5}).transpose(1, 2);
  EXPECT_TRUE(at::equal(packed(x, Activation::kRelu, wide), wide + at::relu(y)));
  EXPECT_TRUE(at::equal(packed(x, Activation::kRelu, strided), strided + at::relu(y)));
  // A residual of the wrong size fails as LibTorch's addition fails, not with a read past its end.
  EXPECT_ANY_THROW(packed(x, Activation::kRelu, at::randn({2, 4, 40})));
}

// bfloat16 (PackLinearsBFloat16, kernels/amx_gemm.h): every input takes the packed weights, the
// weight as loaded is released, a width the tiles do not take is left to LibTorch.
class PackedBFloat16LinearTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PackedBFloat16Weights::Supported()) GTEST_SKIP() << "neither AMX-BF16 nor AVX512-BF16 on this CPU";
  }
  c10::InferenceMode guard_;
};

at::Tensor BFloat16Randn(std::initializer_list<int64_t> sizes) { return at::randn(sizes).to(at::kBFloat16); }

const uint16_t* Bits(const at::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>()); }

// Within a unit in bfloat16's last place (2^-7 of the magnitude) of each other, elementwise: two
// float32 sums each rounded once. Another weight's product is off by whole units.
bool WithinAUnit(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  return at::all((g - w).abs() <= w.abs() * (1.0 / 128) + 1e-2).item<bool>();
}

TEST_F(PackedBFloat16LinearTest, EveryInputTakesThePackedWeights) {
  at::manual_seed(5);
  const at::Tensor w = BFloat16Randn({40, 64}), b = BFloat16Randn({40});
  Linear l{w, b, nullptr, nullptr};
  ASSERT_TRUE(PackLinearsBFloat16({&l}).ok());
  ASSERT_NE(l.packed, nullptr);
  ASSERT_NE(l.packed->bfloat16, nullptr);
  EXPECT_EQ(l.packed->weights, nullptr);
  EXPECT_FALSE(l.weight.defined());  // released: nothing takes it
  EXPECT_TRUE(l.defined());
  for (const at::Tensor& x : {BFloat16Randn({2, 5, 64}), BFloat16Randn({300, 64}), BFloat16Randn({64})}) {
    const at::Tensor got = l(x), want = at::linear(x, w, b);
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_EQ(got.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(WithinAUnit(got, want));
  }
  // Packed weights of another matrix show that the packed path ran, at any length.
  const at::Tensor other = BFloat16Randn({40, 64});
  auto swapped = std::make_shared<PackedLinear>(*l.packed);
  swapped->bfloat16 = PackedBFloat16Weights::Pack(Bits(other), 40, 64, 64);
  l.packed = swapped;
  for (const at::Tensor& x : {BFloat16Randn({3, 64}), BFloat16Randn({1000, 64})}) {
    EXPECT_TRUE(WithinAUnit(l(x), at::linear(x, other, b)));
    EXPECT_FALSE(WithinAUnit(l(x), at::linear(x, w, b)));
  }
  // A float32 input is taken in bfloat16 and answered in float32.
  const at::Tensor x32 = at::randn({4, 64});
  const at::Tensor got32 = l(x32);
  EXPECT_EQ(got32.scalar_type(), at::kFloat);
  EXPECT_TRUE(WithinAUnit(got32, at::linear(x32.to(at::kBFloat16), other, b)));
}

// In bfloat16 each step is rounded as LibTorch's bfloat16 operators round: the same bits for ReLU
// and the residual, GELU within a unit. A float32 input (answered in float32) takes the operators.
TEST_F(PackedBFloat16LinearTest, ActivationAndResidualRoundedAsLibTorchsOperators) {
  at::manual_seed(9);
  Linear l{BFloat16Randn({40, 64}), BFloat16Randn({40}), nullptr, nullptr};
  ASSERT_TRUE(PackLinearsBFloat16({&l}).ok());
  const at::Tensor x = BFloat16Randn({3, 7, 64}), r = BFloat16Randn({3, 7, 40});
  const at::Tensor y = l(x);
  EXPECT_TRUE(at::equal(l(x, Activation::kLinear, r), r + y));
  EXPECT_TRUE(at::equal(l(x, Activation::kRelu, r), r + at::relu(y)));
  const at::Tensor gelu = l(x, Activation::kGelu);
  EXPECT_EQ(gelu.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(WithinAUnit(gelu, at::gelu(y)));
  EXPECT_TRUE(at::equal(l(x, Activation::kGelu, r), r + gelu));
  const at::Tensor x32 = at::randn({4, 64}), r32 = at::randn({4, 40});
  const at::Tensor got32 = l(x32, Activation::kRelu, r32);
  EXPECT_EQ(got32.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(got32, r32 + at::relu(l(x32))));
}

TEST_F(PackedBFloat16LinearTest, StridedInputsWithoutBias) {
  at::manual_seed(6);
  const at::Tensor w = BFloat16Randn({70, 96});
  Linear l{w, at::Tensor(), nullptr, nullptr};
  ASSERT_TRUE(PackLinearsBFloat16({&l}).ok());
  const at::Tensor strided = BFloat16Randn({9, 120}).narrow(1, 4, 96);  // rows 120 apart
  const at::Tensor transposed = BFloat16Randn({96, 6}).t();
  for (const at::Tensor& in : {strided, transposed}) {
    EXPECT_TRUE(WithinAUnit(l(in), at::linear(in, w)));
  }
  EXPECT_EQ(l(BFloat16Randn({0, 96})).sizes(), (std::vector<int64_t>{0, 70}));
}

TEST_F(PackedBFloat16LinearTest, PacksAnyWidthAndRefusesOtherTypes) {
  at::manual_seed(7);
  const at::Tensor w = BFloat16Randn({8, 48});  // 48: not a multiple of the tiles' 32
  Linear narrow{w, at::Tensor(), nullptr, nullptr};
  Linear undefined;
  Linear float32{at::randn({8, 64}), at::Tensor(), nullptr, nullptr};
  ASSERT_TRUE(PackLinearsBFloat16({&narrow, &undefined, nullptr}).ok());
  ASSERT_NE(narrow.packed, nullptr);
  EXPECT_EQ(undefined.packed, nullptr);
  const at::Tensor x = BFloat16Randn({5, 48});
  EXPECT_TRUE(WithinAUnit(narrow(x), at::linear(x, w)));
  const absl::Status st = PackLinearsBFloat16({&float32});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("Float"), std::string::npos) << st;
}

}  // namespace
}  // namespace relserve
