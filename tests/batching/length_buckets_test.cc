#include "server/batching/length_buckets.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "server/batching/batch_policy.h"

namespace relserve {
namespace {

TEST(LengthBucketsTest, DefaultLengthBucketsAreAboutTwelvePercentApart) {
  EXPECT_EQ(DefaultLengthBuckets(512), (std::vector<int32_t>{8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160,
                                                             192, 224, 256, 320, 384, 448, 512}));
  EXPECT_EQ(DefaultLengthBuckets(20), (std::vector<int32_t>{8, 16, 20}));
  EXPECT_EQ(DefaultLengthBuckets(8), (std::vector<int32_t>{8}));
}

// The policy's own default (no bounds) and a model's bounds (ending at its max length) put
// every length the model accepts in the same bucket: one default, whoever applies it.
TEST(LengthBucketsTest, ThePolicyWithoutBoundsBucketsAsTheModelsDefault) {
  for (int max_length : {20, 128, 300, 512, 4096}) {
    SCOPED_TRACE(max_length);
    BatchPolicyConfig bounded;
    bounded.bucket_bounds = DefaultLengthBuckets(max_length);
    const BatchPolicyConfig unbounded;
    for (int32_t length = 1; length <= max_length; ++length) {
      ASSERT_EQ(LengthBucket(length, unbounded), LengthBucket(length, bounded)) << length;
      ASSERT_EQ(DefaultLengthBucket(length), LengthBucket(length, bounded)) << length;
    }
  }
  // Past the last bound the unbounded default keeps going where the model's has its overflow.
  EXPECT_EQ(DefaultLengthBucket(513), 20u);
  EXPECT_EQ(DefaultLengthBucket(640), 20u);
  EXPECT_EQ(DefaultLengthBucket(641), 21u);
}

}  // namespace
}  // namespace relserve
