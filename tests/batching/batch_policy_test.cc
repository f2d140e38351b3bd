#include "server/batching/batch_policy.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::ElementsAre;

// A fake clock is just a time passed to DecideBatch.
const absl::Time kT0 = absl::UnixEpoch() + absl::Seconds(1000);

PendingSequence Seq(int32_t length, absl::Time enqueued,
                    absl::Time deadline = absl::InfiniteFuture()) {
  PendingSequence p;
  p.length = length;
  p.enqueued = enqueued;
  p.deadline = deadline;
  return p;
}

BatchPolicyConfig Config(int64_t max_tokens, int max_size, absl::Duration delay,
                         bool bucketing = true) {
  BatchPolicyConfig config;
  config.max_batch_tokens = max_tokens;
  config.max_batch_size = max_size;
  config.max_queue_delay = delay;
  config.length_bucketing = bucketing;
  return config;
}

// Bounds of the tests' own, powers of two, so that the buckets the tests name ((16, 32], (32, 64],
// ...) are theirs whatever the default (length_buckets.h) is.
BatchPolicyConfig PowerOfTwoBuckets(BatchPolicyConfig config) {
  config.bucket_bounds = {16, 32, 64, 128, 256, 512, 1024};
  return config;
}

int64_t Padded(const std::vector<PendingSequence>& pending, const std::vector<size_t>& indices) {
  int64_t longest = 0;
  for (size_t i : indices) longest = std::max<int64_t>(longest, std::max(1, pending[i].length));
  return static_cast<int64_t>(indices.size()) * longest;
}

int64_t Real(const std::vector<PendingSequence>& pending, const std::vector<size_t>& indices) {
  int64_t sum = 0;
  for (size_t i : indices) sum += pending[i].length;
  return sum;
}

std::vector<PendingSequence> RemoveIndices(const std::vector<PendingSequence>& pending,
                                           const std::vector<size_t>& indices) {
  std::vector<PendingSequence> rest;
  for (size_t i = 0; i < pending.size(); ++i) {
    if (std::find(indices.begin(), indices.end(), i) == indices.end()) rest.push_back(pending[i]);
  }
  return rest;
}

TEST(BatchPolicyConfigTest, Validation) {
  EXPECT_TRUE(ValidateBatchPolicyConfig(BatchPolicyConfig{}).ok());
  BatchPolicyConfig config;
  config.max_batch_tokens = 0;
  EXPECT_EQ(ValidateBatchPolicyConfig(config).code(), absl::StatusCode::kInvalidArgument);
  config = BatchPolicyConfig{};
  config.max_batch_size = 0;
  EXPECT_EQ(ValidateBatchPolicyConfig(config).code(), absl::StatusCode::kInvalidArgument);
  config = BatchPolicyConfig{};
  config.max_queue_delay = absl::Milliseconds(-1);
  EXPECT_EQ(ValidateBatchPolicyConfig(config).code(), absl::StatusCode::kInvalidArgument);
  config = BatchPolicyConfig{};
  config.max_queue_delay = absl::InfiniteDuration();
  EXPECT_EQ(ValidateBatchPolicyConfig(config).code(), absl::StatusCode::kInvalidArgument);
  config = BatchPolicyConfig{};
  config.bucket_bounds = {32, 32, 64};
  EXPECT_EQ(ValidateBatchPolicyConfig(config).code(), absl::StatusCode::kInvalidArgument);
  config.bucket_bounds = {0, 64};
  EXPECT_EQ(ValidateBatchPolicyConfig(config).code(), absl::StatusCode::kInvalidArgument);
  config.bucket_bounds = {32, 64, 512};
  EXPECT_TRUE(ValidateBatchPolicyConfig(config).ok());
}

TEST(BatchPolicyTest, LengthBuckets) {
  // No bounds: the default (length_buckets.h), 8 apart to 64, then 16 apart to 128, 32 to 256, ...
  BatchPolicyConfig config;
  EXPECT_EQ(LengthBucket(1, config), 0u);
  EXPECT_EQ(LengthBucket(8, config), 0u);
  EXPECT_EQ(LengthBucket(9, config), 1u);
  EXPECT_EQ(LengthBucket(16, config), 1u);
  EXPECT_EQ(LengthBucket(17, config), 2u);
  EXPECT_EQ(LengthBucket(64, config), 7u);
  EXPECT_EQ(LengthBucket(65, config), 8u);
  EXPECT_EQ(LengthBucket(80, config), 8u);
  EXPECT_EQ(LengthBucket(81, config), 9u);
  EXPECT_EQ(LengthBucket(512, config), 19u);
  EXPECT_EQ(LengthBucket(513, config), 20u);
  config.bucket_bounds = {100, 200};
  EXPECT_EQ(LengthBucket(1, config), 0u);
  EXPECT_EQ(LengthBucket(100, config), 0u);
  EXPECT_EQ(LengthBucket(101, config), 1u);
  EXPECT_EQ(LengthBucket(200, config), 1u);
  EXPECT_EQ(LengthBucket(201, config), 2u);  // overflow bucket
  EXPECT_EQ(LengthBucket(100000, config), 2u);
  EXPECT_EQ(PaddedTokens({3, 10, 7}), 30);
  EXPECT_EQ(PaddedTokens({}), 0);
}

TEST(BatchPolicyTest, EmptyQueueWaitsForever) {
  const BatchDecision d = DecideBatch({}, kT0, BatchPolicyConfig{});
  EXPECT_FALSE(d.send);
  EXPECT_EQ(d.wake_at, absl::InfiniteFuture());
}

TEST(BatchPolicyTest, LoneSequenceWaitsThenGoesAtExactlyMaxQueueDelay) {
  for (bool bucketing : {true, false}) {
    SCOPED_TRACE(bucketing);
    const auto config = Config(1024, 16, absl::Milliseconds(2), bucketing);
    const std::vector<PendingSequence> pending = {Seq(10, kT0)};

    BatchDecision d = DecideBatch(pending, kT0, config);
    EXPECT_FALSE(d.send);
    EXPECT_EQ(d.wake_at, kT0 + absl::Milliseconds(2));

    d = DecideBatch(pending, kT0 + absl::Milliseconds(2) - absl::Nanoseconds(1), config);
    EXPECT_FALSE(d.send);
    EXPECT_EQ(d.wake_at, kT0 + absl::Milliseconds(2));

    d = DecideBatch(pending, kT0 + absl::Milliseconds(2), config);
    EXPECT_TRUE(d.send);
    EXPECT_THAT(d.indices, ElementsAre(0u));
  }
}

TEST(BatchPolicyTest, ZeroDelaySendsAtOnce) {
  const auto config = Config(1024, 16, absl::ZeroDuration());
  const BatchDecision d = DecideBatch({Seq(10, kT0), Seq(12, kT0)}, kT0, config);
  EXPECT_TRUE(d.send);
  EXPECT_THAT(d.indices, ElementsAre(0u, 1u));
}

TEST(BatchPolicyTest, SendsAtOnceWhenABucketFillsByTokens) {
  // Bucket (32, 64]: four sequences of 64 tokens cost 256, the budget.
  const auto config = PowerOfTwoBuckets(Config(256, 64, absl::Milliseconds(2)));
  std::vector<PendingSequence> pending = {Seq(64, kT0), Seq(10, kT0), Seq(50, kT0),
                                          Seq(60, kT0)};
  BatchDecision d = DecideBatch(pending, kT0, config);
  EXPECT_FALSE(d.send) << "three of the bucket cost 192 < 256";
  EXPECT_EQ(d.wake_at, kT0 + absl::Milliseconds(2));

  pending.push_back(Seq(40, kT0 + absl::Microseconds(5)));
  d = DecideBatch(pending, kT0 + absl::Microseconds(5), config);
  ASSERT_TRUE(d.send);
  // The (32, 64] bucket, in arrival order; the short one is in bucket 0, not adjacent.
  EXPECT_THAT(d.indices, ElementsAre(0u, 2u, 3u, 4u));
  EXPECT_LE(Padded(pending, d.indices), 256);
}

TEST(BatchPolicyTest, SendsAtOnceWhenABucketFillsByCount) {
  const auto config = Config(100000, 4, absl::Milliseconds(2));
  std::vector<PendingSequence> pending = {Seq(5, kT0), Seq(6, kT0), Seq(7, kT0)};
  EXPECT_FALSE(DecideBatch(pending, kT0, config).send);
  pending.push_back(Seq(8, kT0));
  pending.push_back(Seq(9, kT0));
  const BatchDecision d = DecideBatch(pending, kT0, config);
  ASSERT_TRUE(d.send);
  EXPECT_THAT(d.indices, ElementsAre(0u, 1u, 2u, 3u));
}

TEST(BatchPolicyTest, FullBucketGoesBeforeTheOldestIsDue) {
  const auto config = PowerOfTwoBuckets(Config(100000, 3, absl::Milliseconds(2)));
  // The oldest (a long one) is not due yet; the short bucket is full by count.
  const std::vector<PendingSequence> pending = {
      Seq(300, kT0), Seq(8, kT0 + absl::Microseconds(1)), Seq(9, kT0 + absl::Microseconds(2)),
      Seq(10, kT0 + absl::Microseconds(3))};
  const BatchDecision d = DecideBatch(pending, kT0 + absl::Microseconds(3), config);
  ASSERT_TRUE(d.send);
  EXPECT_THAT(d.indices, ElementsAre(1u, 2u, 3u));
}

TEST(BatchPolicyTest, SingleOverBudgetSequenceGoesAlone) {
  for (bool bucketing : {true, false}) {
    SCOPED_TRACE(bucketing);
    const auto config = Config(100, 16, absl::Milliseconds(2), bucketing);
    const std::vector<PendingSequence> pending = {Seq(150, kT0), Seq(150, kT0), Seq(10, kT0)};
    // Over budget: a bucket (or FIFO head) that is full by itself goes at once, alone.
    BatchDecision d = DecideBatch(pending, kT0, config);
    ASSERT_TRUE(d.send);
    EXPECT_THAT(d.indices, ElementsAre(0u));
    d = DecideBatch(RemoveIndices(pending, d.indices), kT0, config);
    ASSERT_TRUE(d.send);
    EXPECT_THAT(d.indices, ElementsAre(0u));
  }
}

TEST(BatchPolicyTest, NeverExceedsBudgetOrCount) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> length(1, 300);
  for (bool bucketing : {true, false}) {
    const auto config = Config(1000, 8, absl::Milliseconds(1), bucketing);
    std::vector<PendingSequence> pending;
    for (int i = 0; i < 500; ++i) pending.push_back(Seq(length(rng), kT0));
    const absl::Time late = kT0 + absl::Seconds(1);  // everything is due
    while (!pending.empty()) {
      const BatchDecision d = DecideBatch(pending, late, config);
      ASSERT_TRUE(d.send);
      ASSERT_FALSE(d.indices.empty());
      EXPECT_LE(d.indices.size(), 8u);
      EXPECT_LE(Padded(pending, d.indices), 1000);
      EXPECT_TRUE(std::is_sorted(d.indices.begin(), d.indices.end()));
      pending = RemoveIndices(pending, d.indices);
    }
  }
}

TEST(BatchPolicyTest, OldestOverdueBucketIsToppedUpFromTheAdjacentShorterBucket) {
  const auto config = PowerOfTwoBuckets(Config(640, 64, absl::Milliseconds(2)));
  const std::vector<PendingSequence> pending = {
      Seq(60, kT0),                              // (32, 64], the oldest
      Seq(10, kT0 + absl::Microseconds(1)),      // (0, 16]: not adjacent
      Seq(20, kT0 + absl::Microseconds(2)),      // (16, 32]: adjacent
      Seq(100, kT0 + absl::Microseconds(3)),     // (64, 128]: longer
      Seq(33, kT0 + absl::Microseconds(4)),      // (32, 64]
      Seq(30, kT0 + absl::Microseconds(5)),      // (16, 32]
  };
  const BatchDecision d = DecideBatch(pending, kT0 + absl::Milliseconds(2), config);
  ASSERT_TRUE(d.send);
  EXPECT_THAT(d.indices, ElementsAre(0u, 2u, 4u, 5u));
}

TEST(BatchPolicyTest, TopUpStaysWithinBudget) {
  const auto config = PowerOfTwoBuckets(Config(200, 64, absl::Milliseconds(2)));
  const std::vector<PendingSequence> pending = {Seq(64, kT0), Seq(30, kT0), Seq(30, kT0),
                                                Seq(30, kT0)};
  const BatchDecision d = DecideBatch(pending, kT0 + absl::Milliseconds(2), config);
  ASSERT_TRUE(d.send);
  EXPECT_THAT(d.indices, ElementsAre(0u, 1u, 2u));  // 3 x 64 = 192 <= 200 < 256
}

TEST(BatchPolicyTest, LongSequenceDoesNotStarveBehindShortArrivals) {
  // One long sequence, then a short one every 50us, forever filling short batches.
  const auto config = Config(4096, 8, absl::Milliseconds(2));
  std::vector<PendingSequence> pending = {Seq(500, kT0)};
  absl::Time now = kT0;
  absl::Time next_arrival = kT0;
  absl::Time long_sent = absl::InfiniteFuture();
  int short_batches = 0;
  while (now < kT0 + absl::Milliseconds(10)) {
    while (next_arrival <= now) {
      pending.push_back(Seq(12, next_arrival));
      next_arrival += absl::Microseconds(50);
    }
    while (true) {
      const BatchDecision d = DecideBatch(pending, now, config);
      if (!d.send) {
        now = std::min(d.wake_at, next_arrival);
        break;
      }
      for (size_t i : d.indices) {
        if (pending[i].length == 500) long_sent = now;
      }
      if (pending[d.indices[0]].length == 12) ++short_batches;
      pending = RemoveIndices(pending, d.indices);
    }
  }
  EXPECT_GT(short_batches, 10);
  EXPECT_EQ(long_sent, kT0 + absl::Milliseconds(2));
}

// Sends everything in `pending` (all due), returning padded / real over all batches and the
// worst batch.
std::pair<double, double> DrainPaddingRatio(std::vector<PendingSequence> pending,
                                            const BatchPolicyConfig& config) {
  int64_t padded = 0;
  int64_t real = 0;
  double worst = 0;
  const absl::Time late = kT0 + absl::Seconds(1);
  while (!pending.empty()) {
    const BatchDecision d = DecideBatch(pending, late, config);
    if (!d.send) break;
    const int64_t p = Padded(pending, d.indices);
    const int64_t r = Real(pending, d.indices);
    padded += p;
    real += r;
    worst = std::max(worst, static_cast<double>(p) / r);
    pending = RemoveIndices(pending, d.indices);
  }
  EXPECT_TRUE(pending.empty());
  return {static_cast<double>(padded) / real, worst};
}

TEST(BatchPolicyTest, BucketsKeepPaddingLow) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> length(17, 512);
  std::vector<PendingSequence> pending;
  for (int i = 0; i < 400; ++i) pending.push_back(Seq(length(rng), kT0));

  const auto [bucketed_total, bucketed_worst] =
      DrainPaddingRatio(pending, Config(8192, 64, absl::Milliseconds(2), true));
  const auto [fifo_total, fifo_worst] =
      DrainPaddingRatio(pending, Config(8192, 64, absl::Milliseconds(2), false));
  // Power-of-two buckets topped up from the bucket below: longest / shortest < 512 / 128.
  EXPECT_LT(bucketed_worst, 4.0);
  EXPECT_LT(bucketed_total, 1.5);
  EXPECT_LT(bucketed_total, fifo_total);
  EXPECT_GT(fifo_worst, bucketed_worst);
}

TEST(BatchPolicyTest, FifoTakesAPrefixAndSendsWhenTheNextDoesNotFit) {
  const auto config = Config(200, 16, absl::Milliseconds(2), /*bucketing=*/false);
  std::vector<PendingSequence> pending = {Seq(10, kT0), Seq(10, kT0)};
  BatchDecision d = DecideBatch(pending, kT0, config);
  EXPECT_FALSE(d.send);
  EXPECT_EQ(d.wake_at, kT0 + absl::Milliseconds(2));

  // 3 x 100 > 200: the prefix is full, sent at once, and the short one after it waits.
  pending = {Seq(10, kT0), Seq(10, kT0), Seq(100, kT0), Seq(10, kT0)};
  d = DecideBatch(pending, kT0, config);
  ASSERT_TRUE(d.send);
  EXPECT_THAT(d.indices, ElementsAre(0u, 1u));

  // Head due: the prefix goes.
  pending = {Seq(100, kT0), Seq(10, kT0 + absl::Milliseconds(1))};
  d = DecideBatch(pending, kT0 + absl::Milliseconds(2), config);
  ASSERT_TRUE(d.send);
  EXPECT_THAT(d.indices, ElementsAre(0u, 1u));
}

TEST(BatchPolicyTest, FifoFullByCount) {
  const auto config = Config(100000, 3, absl::Milliseconds(2), /*bucketing=*/false);
  const std::vector<PendingSequence> pending = {Seq(400, kT0), Seq(10, kT0), Seq(20, kT0),
                                                Seq(30, kT0)};
  const BatchDecision d = DecideBatch(pending, kT0, config);
  ASSERT_TRUE(d.send);
  EXPECT_THAT(d.indices, ElementsAre(0u, 1u, 2u));
}

TEST(BatchPolicyTest, WakeAtHonoursTheNearestDeadline) {
  for (bool bucketing : {true, false}) {
    SCOPED_TRACE(bucketing);
    const auto config = Config(1024, 16, absl::Milliseconds(2), bucketing);
    const std::vector<PendingSequence> pending = {
        Seq(10, kT0, kT0 + absl::Milliseconds(5)),
        Seq(300, kT0 + absl::Microseconds(100), kT0 + absl::Microseconds(700)),
        Seq(20, kT0 + absl::Microseconds(200))};
    BatchDecision d = DecideBatch(pending, kT0 + absl::Microseconds(200), config);
    EXPECT_FALSE(d.send);
    EXPECT_EQ(d.wake_at, kT0 + absl::Microseconds(700));

    // A deadline after the oldest is due does not matter.
    d = DecideBatch({pending[0], pending[2]}, kT0 + absl::Microseconds(200), config);
    EXPECT_FALSE(d.send);
    EXPECT_EQ(d.wake_at, kT0 + absl::Milliseconds(2));
  }
}

// Simulated time over random arrival streams: the queue drops expired sequences, calls
// DecideBatch until it stops sending, then advances to the decision's wake_at or the next
// arrival, whichever is first.
TEST(BatchPolicyPropertyTest, InvariantsOverRandomArrivalStreams) {
  std::mt19937 rng(20240611);
  int checked_batches = 0;
  for (int round = 0; round < 200; ++round) {
    BatchPolicyConfig config;
    config.max_batch_tokens = std::vector<int64_t>{64, 512, 2048, 16384}[rng() % 4];
    config.max_batch_size = std::vector<int>{1, 3, 8, 64}[rng() % 4];
    config.max_queue_delay =
        std::vector<absl::Duration>{absl::ZeroDuration(), absl::Microseconds(300),
                                    absl::Milliseconds(2)}[rng() % 3];
    config.length_bucketing = rng() % 4 != 0;
    if (rng() % 3 == 0) config.bucket_bounds = {24, 100, 256};
    SCOPED_TRACE(testing::Message()
                 << "round " << round << " tokens " << config.max_batch_tokens << " size "
                 << config.max_batch_size << " delay " << config.max_queue_delay
                 << " bucketing " << config.length_bucketing);

    struct Arrival {
      PendingSequence seq;
      int id;
    };
    std::vector<Arrival> arrivals;
    absl::Time t = kT0;
    const int count = 50 + static_cast<int>(rng() % 250);
    const int mean_gap_us = std::vector<int>{5, 50, 400}[rng() % 3];
    for (int i = 0; i < count; ++i) {
      t += absl::Microseconds(rng() % (2 * mean_gap_us + 1));
      const int32_t length =
          rng() % 10 == 0 ? static_cast<int32_t>(1 + rng() % 3000) : static_cast<int32_t>(1 + rng() % 300);
      const absl::Time deadline =
          rng() % 5 == 0 ? t + absl::Microseconds(rng() % 3000) : absl::InfiniteFuture();
      arrivals.push_back({Seq(length, t, deadline), i});
    }

    std::vector<PendingSequence> pending;
    std::vector<int> ids;  // parallel to pending
    std::vector<int> sent_or_dropped(count, 0);
    size_t next = 0;
    absl::Time now = arrivals[0].seq.enqueued;
    int steps = 0;
    while (true) {
      ASSERT_LT(++steps, 100000);
      while (next < arrivals.size() && arrivals[next].seq.enqueued <= now) {
        pending.push_back(arrivals[next].seq);
        ids.push_back(arrivals[next].id);
        ++next;
      }
      // The queue's part: drop the expired.
      for (size_t i = 0; i < pending.size();) {
        if (pending[i].deadline <= now) {
          ++sent_or_dropped[ids[i]];
          pending.erase(pending.begin() + i);
          ids.erase(ids.begin() + i);
        } else {
          ++i;
        }
      }
      absl::Time wake = absl::InfiniteFuture();
      while (true) {
        const BatchDecision d = DecideBatch(pending, now, config);
        if (!d.send) {
          wake = d.wake_at;
          break;
        }
        ++checked_batches;
        ASSERT_FALSE(d.indices.empty());
        ASSERT_TRUE(std::is_sorted(d.indices.begin(), d.indices.end()));
        ASSERT_TRUE(std::adjacent_find(d.indices.begin(), d.indices.end()) == d.indices.end());
        ASSERT_LT(d.indices.back(), pending.size());
        ASSERT_LE(d.indices.size(), static_cast<size_t>(config.max_batch_size));
        if (d.indices.size() > 1) {
          ASSERT_LE(Padded(pending, d.indices), config.max_batch_tokens);
        }
        for (size_t i : d.indices) {
          ASSERT_LE(now, pending[i].enqueued + config.max_queue_delay)
              << "sequence " << ids[i] << " waited past max_queue_delay";
          ++sent_or_dropped[ids[i]];
        }
        std::vector<int> remaining_ids;
        for (size_t i = 0; i < ids.size(); ++i) {
          if (!std::binary_search(d.indices.begin(), d.indices.end(), i)) {
            remaining_ids.push_back(ids[i]);
          }
        }
        pending = RemoveIndices(pending, d.indices);
        ids = remaining_ids;
      }
      if (pending.empty() && next == arrivals.size()) break;
      if (!pending.empty()) {
        ASSERT_GT(wake, now) << "a decision that does not send must wake later";
        ASSERT_LE(wake, pending[0].enqueued + config.max_queue_delay);
      }
      absl::Time next_time = wake;
      if (next < arrivals.size()) next_time = std::min(next_time, arrivals[next].seq.enqueued);
      now = next_time;
    }
    for (int i = 0; i < count; ++i) ASSERT_EQ(sent_or_dropped[i], 1) << "sequence " << i;
  }
  EXPECT_GT(checked_batches, 1000);
}

}  // namespace
}  // namespace relserve
