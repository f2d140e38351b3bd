#include "client/arrival_schedule.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace relserve::client {
namespace {

TEST(ArrivalScheduleTest, ConstantIsEvenlySpacedFromZero) {
  ArrivalSchedule s(4, "constant", 1);
  EXPECT_DOUBLE_EQ(s.Next(), 0);
  EXPECT_DOUBLE_EQ(s.Next(), 0.25);
  EXPECT_DOUBLE_EQ(s.Next(), 0.5);
  for (int i = 3; i < 100000; ++i) s.Next();
  EXPECT_DOUBLE_EQ(s.Next(), 25000);  // no drift after many slots
}

// Poisson arrivals: exponential gaps, so their mean is 1 / rate and their standard deviation
// equals their mean (a constant schedule would have none), and counts in one-second windows
// have variance equal to their mean.
TEST(ArrivalScheduleTest, PoissonGapsAreExponentialWithTheRate) {
  const double rate = 50;
  ArrivalSchedule s(rate, "poisson", 7);
  const int n = 50000;
  std::vector<double> times(n);
  for (double& t : times) t = s.Next();
  double sum = 0, sum2 = 0, prev = 0;
  for (double t : times) {
    ASSERT_GT(t, prev);
    sum += t - prev;
    sum2 += (t - prev) * (t - prev);
    prev = t;
  }
  const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
  EXPECT_NEAR(mean, 1 / rate, 0.02 / rate);
  EXPECT_NEAR(sd / mean, 1.0, 0.03);

  std::vector<int> per_second(static_cast<size_t>(times.back()) + 1, 0);
  for (double t : times) ++per_second[static_cast<size_t>(t)];
  per_second.pop_back();  // the last second is partial
  double m = 0, v = 0;
  for (int c : per_second) m += c;
  m /= per_second.size();
  for (int c : per_second) v += (c - m) * (c - m);
  v /= per_second.size();
  EXPECT_NEAR(m, rate, 1.0);
  EXPECT_NEAR(v / m, 1.0, 0.25);  // Poisson dispersion
}

TEST(ArrivalScheduleTest, SameSeedSameScheduleOtherSeedAnother) {
  ArrivalSchedule a(10, "poisson", 3), b(10, "poisson", 3), c(10, "poisson", 4);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const double x = a.Next();
    EXPECT_DOUBLE_EQ(x, b.Next());
    differs |= x != c.Next();
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace relserve::client
