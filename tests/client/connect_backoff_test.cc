#include "client/connect_backoff.h"

#include <set>

#include "gtest/gtest.h"

namespace relserve::client {
namespace {

using std::chrono::milliseconds;

TEST(ConnectBackoffTest, DoublesFromFiftyMillisecondsWithinTheJitter) {
  ConnectBackoff backoff(1);
  const double bases[] = {50, 100, 200, 400, 800};
  for (double base : bases) {
    const milliseconds d = backoff.NextDelay();
    EXPECT_GE(d.count(), 0.8 * base - 1) << "base " << base;
    EXPECT_LE(d.count(), 1.2 * base + 1) << "base " << base;
  }
  EXPECT_EQ(backoff.consecutive_failures(), 5);
}

TEST(ConnectBackoffTest, NeverWaitsLongerThanTheCap) {
  ConnectBackoff backoff(2);
  for (int i = 0; i < 5; ++i) backoff.NextDelay();
  // From the sixth failure on the base is the cap (1 s); jitter may shorten it, never lengthen it.
  for (int i = 0; i < 2000; ++i) {
    const milliseconds d = backoff.NextDelay();
    EXPECT_GE(d.count(), 800);
    EXPECT_LE(d.count(), 1000);
  }
}

TEST(ConnectBackoffTest, AnAnswerStartsTheScheduleAgain) {
  ConnectBackoff backoff(3);
  for (int i = 0; i < 8; ++i) backoff.NextDelay();
  backoff.Reset();
  EXPECT_EQ(backoff.consecutive_failures(), 0);
  const milliseconds d = backoff.NextDelay();
  EXPECT_GE(d.count(), 40);
  EXPECT_LE(d.count(), 60);
}

TEST(ConnectBackoffTest, CallersWithDifferentSeedsDoNotRetryInLockstep) {
  std::set<int64_t> first_delays;
  for (uint64_t seed = 0; seed < 16; ++seed) first_delays.insert(ConnectBackoff(seed).NextDelay().count());
  EXPECT_GT(first_delays.size(), 8u);
  // The same seed gives the same schedule (a run is reproducible).
  ConnectBackoff a(7), b(7);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.NextDelay(), b.NextDelay());
}

TEST(ConnectBackoffTest, OtherPolicies) {
  ConnectBackoff backoff(4, {milliseconds(10), 3, milliseconds(100), 0});
  EXPECT_EQ(backoff.NextDelay(), milliseconds(10));
  EXPECT_EQ(backoff.NextDelay(), milliseconds(30));
  EXPECT_EQ(backoff.NextDelay(), milliseconds(90));
  EXPECT_EQ(backoff.NextDelay(), milliseconds(100));
  for (int i = 0; i < 5000; ++i) backoff.NextDelay();  // the count saturates; the delay stays capped
  EXPECT_EQ(backoff.NextDelay(), milliseconds(100));
}

TEST(ConnectionFailureTest, UnavailableWithoutAConnectionOnly) {
  EXPECT_TRUE(IsConnectionFailure(grpc::StatusCode::UNAVAILABLE, GRPC_CHANNEL_TRANSIENT_FAILURE));
  EXPECT_TRUE(IsConnectionFailure(grpc::StatusCode::UNAVAILABLE, GRPC_CHANNEL_CONNECTING));
  EXPECT_TRUE(IsConnectionFailure(grpc::StatusCode::UNAVAILABLE, GRPC_CHANNEL_IDLE));
  EXPECT_TRUE(IsConnectionFailure(grpc::StatusCode::UNAVAILABLE, GRPC_CHANNEL_SHUTDOWN));
  // A connected server that answers UNAVAILABLE (shutting down) is a server error.
  EXPECT_FALSE(IsConnectionFailure(grpc::StatusCode::UNAVAILABLE, GRPC_CHANNEL_READY));
  EXPECT_FALSE(IsConnectionFailure(grpc::StatusCode::RESOURCE_EXHAUSTED, GRPC_CHANNEL_TRANSIENT_FAILURE));
  EXPECT_FALSE(IsConnectionFailure(grpc::StatusCode::DEADLINE_EXCEEDED, GRPC_CHANNEL_CONNECTING));
}

}  // namespace
}  // namespace relserve::client
