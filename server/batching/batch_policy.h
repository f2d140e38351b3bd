#ifndef RELSERVE_SERVER_BATCHING_BATCH_POLICY_H_
#define RELSERVE_SERVER_BATCHING_BATCH_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace relserve {

// The batching decision, as a pure function of the pending sequences and the time. The model
// batcher calls it under its queue lock whenever a worker is free; tests call it with explicit
// times. Modelled on Triton's dynamic batcher (a batch goes when it is full or when its oldest
// member has waited the maximum queue delay) and text-embeddings-inference's queue (a token
// budget per batch).
//
// Cost. A batch is padded to its longest member, so its cost is
//   padded tokens = number of sequences x longest length in the batch.
// Every batch obeys count <= max_batch_size and padded tokens <= max_batch_tokens, except that
// a single sequence longer than max_batch_tokens is sent in a batch of its own.
//
// Length buckets (length_bucketing = true). Each sequence belongs to the bucket of the first
// bound >= its length (bucket_bounds, sorted ascending; lengths above the last bound share one
// overflow bucket). With no bounds given, the bounds are the one default of length_buckets.h,
// 8, 16, ..., 64, 80, ..., 128, 160, ..., 256, 320, ..., with no upper end (DefaultLengthBucket);
// a model host gives DefaultLengthBuckets(the model's max length), the same bounds ending at its
// max length, which put every length the model accepts in the same bucket. Then, in this order:
//   1. Oldest overdue. If the oldest pending sequence has waited max_queue_delay
//      (now >= enqueued + max_queue_delay), a batch is formed from its bucket: the oldest first,
//      then the bucket's other sequences in arrival order, each taken if it still fits the
//      budget and the count. This rule comes first, so that long sequences never starve behind
//      a stream of short ones: nothing waits past max_queue_delay while a worker is free.
//   2. Full bucket. Otherwise, a bucket that can fill a batch (its sequences' padded cost,
//      count x longest, reaches max_batch_tokens, or its count reaches max_batch_size) is sent
//      at once; among several, the one holding the oldest sequence. Its batch is formed as in 1,
//      starting from the bucket's oldest sequence.
//   3. Otherwise nothing is sent, and wake_at is the earliest of the oldest sequence's
//      enqueued + max_queue_delay and the nearest deadline of any pending sequence.
//   In 1 and 2, a batch with room left is topped up from the adjacent shorter bucket (the
//   bucket just below, in arrival order) while the padded cost stays within max_batch_tokens;
//   those sequences are shorter than every member, so they add no padding to the others, and
//   padded/real stays bounded by the ratio between a bucket's upper bound and the lower bound
//   of the bucket below it (below 2 with the default buckets, lengths above 16).
//
// First come, first served (length_bucketing = false), a baseline for benchmarks. The batch is
// the longest prefix of the queue that fits the budget and the count. It is sent when it is
// full (count reaches max_batch_size, its padded cost reaches max_batch_tokens, or the next
// pending sequence does not fit) or when the head has waited max_queue_delay; otherwise wake_at
// is as in 3.
//
// Both modes: a batch's indices are in arrival order (ascending). Deadlines are not enforced
// here: the caller drops expired sequences (deadline <= now) before deciding; the deadlines
// only bring wake_at forward so that the caller wakes to drop them. With max_queue_delay = 0
// every decision sends (nothing waits for company).
struct BatchPolicyConfig {
  int64_t max_batch_tokens = 16384;  // padded cost: batch size x longest length in the batch
  int max_batch_size = 64;
  absl::Duration max_queue_delay = absl::Microseconds(2000);  // how long a lone sequence waits for company
  std::vector<int32_t> bucket_bounds;  // upper bounds of length buckets (sorted); empty = the default, 8,16,...,64,80,...
  bool length_bucketing = true;        // false: first-come-first-served batches (a baseline for benchmarks)
};

// INVALID_ARGUMENT unless max_batch_tokens >= 1, max_batch_size >= 1, max_queue_delay is finite
// and >= 0, and bucket_bounds is strictly ascending and positive.
absl::Status ValidateBatchPolicyConfig(const BatchPolicyConfig& config);

struct PendingSequence {
  int32_t length = 0;  // tokens; lengths below 1 cost as 1
  absl::Time enqueued;
  absl::Time deadline = absl::InfiniteFuture();  // absl::InfiniteFuture() if none
};

struct BatchDecision {
  bool send = false;            // true: form a batch of `indices` now
  std::vector<size_t> indices;  // into the pending vector, the batch's members, ascending
  absl::Time wake_at = absl::InfiniteFuture();  // when !send: when to decide again (absent new arrivals)
};

// `pending` is in arrival order (enqueued non-decreasing). The config must be valid.
BatchDecision DecideBatch(const std::vector<PendingSequence>& pending, absl::Time now,
                          const BatchPolicyConfig& config);

// The bucket index of `length` under `config`'s bounds (0 = shortest bucket); bucket i + 1
// holds longer sequences than bucket i. Meaningful whatever length_bucketing says.
size_t LengthBucket(int32_t length, const BatchPolicyConfig& config);

// count x longest length, the cost of running `lengths` as one batch.
int64_t PaddedTokens(const std::vector<int32_t>& lengths);

}  // namespace relserve

#endif  // RELSERVE_SERVER_BATCHING_BATCH_POLICY_H_
