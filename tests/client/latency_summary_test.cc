#include "client/latency_summary.h"

#include <algorithm>
#include <random>

#include "gtest/gtest.h"

namespace relserve::client {
namespace {

TEST(LatencySummaryTest, NearestRankPercentilesOfOneToHundred) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  std::shuffle(v.begin(), v.end(), std::mt19937(1));
  const LatencySummary s = Summarize(v);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.p50, 50);
  EXPECT_DOUBLE_EQ(s.p90, 90);
  EXPECT_DOUBLE_EQ(s.p99, 99);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
}

TEST(LatencySummaryTest, SmallSamples) {
  EXPECT_DOUBLE_EQ(Percentile({7}, 0.5), 7);
  EXPECT_DOUBLE_EQ(Percentile({7}, 0.0), 7);
  EXPECT_DOUBLE_EQ(Percentile({1, 2}, 0.5), 1);
  EXPECT_DOUBLE_EQ(Percentile({1, 2}, 0.51), 2);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.99), 10);  // one slow request in ten is p99
  const LatencySummary empty = Summarize({});
  EXPECT_EQ(empty.count, 0u);
  EXPECT_DOUBLE_EQ(empty.p99, 0);
  EXPECT_DOUBLE_EQ(empty.max, 0);
}

TEST(LatencySummaryTest, TailDominatedSample) {
  std::vector<double> v(980, 1.0);
  v.insert(v.end(), 20, 500.0);  // 2% slow
  const LatencySummary s = Summarize(v);
  EXPECT_DOUBLE_EQ(s.p50, 1);
  EXPECT_DOUBLE_EQ(s.p90, 1);
  EXPECT_DOUBLE_EQ(s.p99, 500);
  EXPECT_DOUBLE_EQ(s.max, 500);
  EXPECT_NEAR(s.mean, (980 + 20 * 500) / 1000.0, 1e-9);
}

}  // namespace
}  // namespace relserve::client
