// The shapes a GPU batch runs at (device_shapes.h).
#include "server/backend/device_shapes.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::ElementsAre;

TEST(DeviceShapesTest, BatchSizesRoundUpToAFewSizes) {
  EXPECT_THAT(DeviceBatchSizes(64), ElementsAre(1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64));
  EXPECT_THAT(DeviceBatchSizes(50), ElementsAre(1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 50));
  EXPECT_THAT(DeviceBatchSizes(1), ElementsAre(1));
  const int kAny = std::numeric_limits<int>::max();
  const std::pair<int, int> cases[] = {{1, 1}, {3, 3}, {5, 6}, {7, 8}, {9, 12}, {13, 16}, {17, 24},
                                       {25, 32}, {33, 48}, {49, 64}, {64, 64}, {65, 96}, {97, 128}};
  for (const auto& [batch, rounded] : cases) EXPECT_EQ(DeviceBatchSize(batch, kAny), rounded) << batch;
  // Never past the largest batch, never below the batch.
  EXPECT_EQ(DeviceBatchSize(49, 50), 50);
  EXPECT_EQ(DeviceBatchSize(60, 50), 60);
  // Each size is in the set, and at most 1.5 times the batch above 4.
  for (int batch = 1; batch <= 200; ++batch) {
    const int size = DeviceBatchSize(batch, kAny);
    EXPECT_GE(size, batch);
    if (batch > 4) EXPECT_LE(size * 2, batch * 3) << batch;
  }
}

TEST(DeviceShapesTest, LengthsRoundAsBefore) {
  EXPECT_EQ(DeviceBatchLength(1, 512), 16);
  EXPECT_EQ(DeviceBatchLength(17, 512), 32);
  EXPECT_EQ(DeviceBatchLength(257, 512), 320);
  EXPECT_EQ(DeviceBatchLength(500, 512), 512);
  EXPECT_EQ(DeviceBatchLength(1025, 4096), 1280);
  EXPECT_EQ(DeviceBatchLength(20, 18), 20);  // never below the length
  const std::vector<int> lengths = DeviceBatchLengths(512);
  EXPECT_EQ(lengths.size(), 20u);
  EXPECT_EQ(lengths.front(), 16);
  EXPECT_EQ(lengths.back(), 512);
  for (int length = 1; length <= 512; ++length) {
    EXPECT_NE(std::find(lengths.begin(), lengths.end(), DeviceBatchLength(length, 512)), lengths.end()) << length;
  }
  EXPECT_THAT(DeviceBatchLengths(8), ElementsAre(8));
}

}  // namespace
}  // namespace relserve
