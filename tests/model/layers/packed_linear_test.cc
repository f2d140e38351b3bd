// Linear on weights packed at load (server/model/layers/packed_linear.h): inputs up to the row
// limit take the packed weights, longer ones the weight as loaded; shapes and strides as
// at::linear takes them; what PackLinearsFloat32 packs and leaves.
#include "server/model/layers/packed_linear.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"
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
    if (!PackedWeights::Supported()) GTEST_SKIP() << "no AVX-512F on this CPU";
  }
  c10::InferenceMode guard_;
};

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
  ASSERT_TRUE(QuantizeLinearsInt8({&quantized}).ok());
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

}  // namespace
}  // namespace relserve
