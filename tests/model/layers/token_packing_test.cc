// TokenPacking against the padded layouts it stands for.
#include "server/model/layers/token_packing.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"

namespace relserve {
namespace {

TEST(TokenPackingTest, PacksRealTokensInBatchMajorOrderAndUnpacksWithZeros) {
  c10::InferenceMode guard;
  at::Tensor mask = at::tensor({1, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1}, at::kLong).view({3, 4});
  TokenPacking packing(mask);
  ASSERT_EQ(packing.tokens(), 8);
  EXPECT_TRUE(at::equal(packing.rows(), at::tensor({0, 1, 2, 4, 8, 9, 10, 11}, at::kLong)));
  at::Tensor x = at::randn({3, 4, 5});
  at::Tensor packed = packing.Pack(x);
  ASSERT_EQ(packed.sizes(), (std::vector<int64_t>{8, 5}));
  EXPECT_TRUE(at::equal(packed[3], x[1][0]));
  EXPECT_TRUE(at::equal(packed[7], x[2][3]));
  at::Tensor back = packing.Unpack(packed);
  ASSERT_EQ(back.sizes(), x.sizes());
  at::Tensor keep = mask.to(at::kFloat).unsqueeze(2);
  EXPECT_TRUE(at::equal(back, x * keep));  // real positions restored, padded ones 0
}

TEST(TokenPackingTest, HeadsLayoutsMatchThePaddedPermutes) {
  c10::InferenceMode guard;
  const int64_t B = 3, L = 5, heads = 2, D = 4;
  at::Tensor mask = at::ones({B, L}, at::kLong);
  mask[0].narrow(0, 3, 2).zero_();
  mask[2].narrow(0, 1, 4).zero_();
  TokenPacking packing(mask);
  at::Tensor keep = mask.to(at::kFloat);

  // [B, L, 3 * heads * D] rows -> [3, heads, B, L, D], as view + permute would give.
  at::Tensor qkv = at::randn({B, L, 3 * heads * D}) * keep.unsqueeze(2);
  at::Tensor expected = qkv.view({B, L, 3, heads, D}).permute({2, 3, 0, 1, 4});
  EXPECT_TRUE(at::equal(packing.UnpackHeads(packing.Pack(qkv), 3, heads), expected));

  // [heads, B, L, D] -> [N, heads * D], the real rows of permute + reshape.
  at::Tensor per_head = at::randn({heads, B, L, D});
  at::Tensor rows = per_head.permute({1, 2, 0, 3}).reshape({B, L, heads * D});
  EXPECT_TRUE(at::equal(packing.PackHeads(per_head), packing.Pack(rows)));
}

}  // namespace
}  // namespace relserve
