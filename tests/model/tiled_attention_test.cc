// Which batches run attention's products in the tiles, for each choice and both kinds of tiles.
#include "server/model/tiled_attention.h"

#include <limits>

#include "gtest/gtest.h"

namespace relserve {
namespace {

constexpr int64_t kEvery = std::numeric_limits<int64_t>::max();

TEST(TiledAttentionTest, EachChoiceOnBothKindsOfTiles) {
  for (bool avx2 : {false, true}) {
    SCOPED_TRACE(avx2 ? "AVX2 tiles" : "AVX-512 tiles");
    // The engine's projections packed, up to 192 tokens.
    EXPECT_EQ(TiledAttentionMaxTokens(TiledAttention::kNever, 192, avx2), 0);
    EXPECT_EQ(TiledAttentionMaxTokens(TiledAttention::kWithPackedGemm, 192, avx2), 192);
    EXPECT_EQ(TiledAttentionMaxTokens(TiledAttention::kWithPackedProjections, 192, avx2), kEvery);
    EXPECT_EQ(TiledAttentionMaxTokens(TiledAttention::kAlways, 192, avx2), kEvery);
    // OpenBLAS's projections: only kAlways tiles.
    EXPECT_EQ(TiledAttentionMaxTokens(TiledAttention::kWithPackedGemm, 0, avx2), 0);
    EXPECT_EQ(TiledAttentionMaxTokens(TiledAttention::kWithPackedProjections, 0, avx2), 0);
    EXPECT_EQ(TiledAttentionMaxTokens(TiledAttention::kAuto, 0, avx2), 0);
    EXPECT_EQ(TiledAttentionMaxTokens(TiledAttention::kAlways, 0, avx2), kEvery);
  }
}

// The default follows the tiles: the packed GEMM's batches with AVX-512's, every batch with AVX2's.
TEST(TiledAttentionTest, AutoFollowsTheTiles) {
  EXPECT_EQ(TiledAttentionMaxTokens(TiledAttention::kAuto, 192, /*avx2_tiles=*/false), 192);
  EXPECT_EQ(TiledAttentionMaxTokens(TiledAttention::kAuto, 192, /*avx2_tiles=*/true), kEvery);
}

// bfloat16's tiles: short batches by default, none or every batch when asked.
TEST(TiledAttentionTest, BFloat16Choices) {
  EXPECT_EQ(BFloat16TiledAttentionMaxTokens(BFloat16TiledAttention::kAuto), kBFloat16TiledAttentionMaxTokens);
  EXPECT_EQ(kBFloat16TiledAttentionMaxTokens, 192);
  EXPECT_EQ(BFloat16TiledAttentionMaxTokens(BFloat16TiledAttention::kNever), 0);
  EXPECT_EQ(BFloat16TiledAttentionMaxTokens(BFloat16TiledAttention::kAlways), kEvery);
}

}  // namespace
}  // namespace relserve
