#include "server/model/kernels/prefetch_spread.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace relserve {
namespace {

// The lines [0, lines) each step of each tile prefetches, as the GEMM's tiles do.
std::vector<bool> LinesTouched(const PrefetchSpread& spread, int64_t tiles, int64_t steps, int64_t lines) {
  std::vector<bool> touched(static_cast<size_t>(lines), false);
  for (int64_t t = 0; t < tiles; ++t) {
    for (int64_t kk = 0; kk < steps; ++kk) {
      const int64_t line = (t * spread.share + kk * spread.stride) / kCacheLineBytes;
      if (line < lines) touched[static_cast<size_t>(line)] = true;
    }
  }
  return touched;
}

// Every line of the next slice is prefetched by some tile of the pass, for the slices and tile
// counts the AVX2 GEMM meets (a panel's 256-step slice of 32 KiB or a shorter last one; 1-64
// tiles of rows, one half panel or two), wherever the tiles' steps are enough for its lines.
TEST(PrefetchSpreadTest, TheTilesCoverEveryLineOfTheNextSlice) {
  for (const int64_t steps : {1, 7, 64, 200, 256}) {
    const int64_t bytes = steps * 32 * 4;  // kc steps of a 32-feature panel
    const int64_t lines = bytes / kCacheLineBytes;
    for (int64_t tiles = 1; tiles <= 64; ++tiles) {
      SCOPED_TRACE(testing::Message() << steps << " steps, " << tiles << " tiles");
      const PrefetchSpread spread = SpreadPrefetch(bytes, tiles, steps);
      EXPECT_GE(spread.stride, 1);
      EXPECT_LE(spread.stride, kCacheLineBytes);
      EXPECT_EQ(spread.share, spread.stride * steps);
      const std::vector<bool> touched = LinesTouched(spread, tiles, steps, lines);
      // With one line a step, tiles * steps lines at most.
      const int64_t reachable = std::min(lines, tiles * steps);
      for (int64_t line = 0; line < reachable; ++line) EXPECT_TRUE(touched[static_cast<size_t>(line)]) << line;
    }
  }
}

// The slice is shared evenly: no tile prefetches much more than its part, so the lines arrive
// through the pass, not all in its first tiles.
TEST(PrefetchSpreadTest, EachTilesShareIsAboutAnEvenPart) {
  const int64_t bytes = 256 * 32 * 4;
  for (int64_t tiles : {2, 8, 22, 44, 64}) {
    const PrefetchSpread spread = SpreadPrefetch(bytes, tiles, 256);
    EXPECT_GE(spread.share * tiles, bytes) << tiles;
    EXPECT_LT(spread.share, bytes / tiles + 256) << tiles;  // rounded up by less than a byte a step
  }
}

TEST(PrefetchSpreadTest, NothingToSpreadGivesNoStride) {
  EXPECT_EQ(SpreadPrefetch(0, 4, 256).stride, 0);
  EXPECT_EQ(SpreadPrefetch(4096, 0, 256).stride, 0);
  EXPECT_EQ(SpreadPrefetch(4096, 4, 0).stride, 0);
}

}  // namespace
}  // namespace relserve
