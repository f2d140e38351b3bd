#include "server/batching/batch_policy.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/batching/length_buckets.h"

namespace relserve {
namespace {

int64_t Cost(int32_t length) { return std::max<int64_t>(1, length); }

// A batch being formed: members in the order they were taken, and its longest length.
struct Forming {
  std::vector<size_t> indices;
  int64_t longest = 0;

  // Adds `index` if the batch stays within the count and the token budget.
  bool TryAdd(size_t index, int64_t length, const BatchPolicyConfig& config) {
    if (static_cast<int64_t>(indices.size()) >= config.max_batch_size) return false;
    const int64_t longest_after = std::max(longest, length);
    if (static_cast<int64_t>(indices.size() + 1) * longest_after > config.max_batch_tokens) {
      return false;
    }
    indices.push_back(index);
    longest = longest_after;
    return true;
  }
};

absl::Time WakeAt(const std::vector<PendingSequence>& pending, size_t oldest,
                  const BatchPolicyConfig& config) {
  absl::Time wake = pending[oldest].enqueued + config.max_queue_delay;
  for (const PendingSequence& p : pending) wake = std::min(wake, p.deadline);
  return wake;
}

BatchDecision Send(std::vector<size_t> indices) {
  std::sort(indices.begin(), indices.end());
  BatchDecision decision;
  decision.send = true;
  decision.indices = std::move(indices);
  return decision;
}

BatchDecision DecideFifo(const std::vector<PendingSequence>& pending, size_t oldest,
                         bool overdue, const BatchPolicyConfig& config) {
  Forming batch;
  // The head always goes, alone if it is over the budget.
  batch.indices.push_back(0);
  batch.longest = Cost(pending[0].length);
  size_t next = 1;
  while (next < pending.size() && batch.TryAdd(next, Cost(pending[next].length), config)) ++next;
  const bool full = static_cast<int64_t>(batch.indices.size()) >= config.max_batch_size ||
                    static_cast<int64_t>(batch.indices.size()) * batch.longest >=
                        config.max_batch_tokens ||
                    next < pending.size();
  if (full || overdue) return Send(std::move(batch.indices));
  BatchDecision wait;
  wait.wake_at = WakeAt(pending, oldest, config);
  return wait;
}

}  // namespace

absl::Status ValidateBatchPolicyConfig(const BatchPolicyConfig& config) {
  if (config.max_batch_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_tokens must be >= 1, got ", config.max_batch_tokens));
  }
  if (config.max_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_size must be >= 1, got ", config.max_batch_size));
  }
  if (config.max_queue_delay < absl::ZeroDuration() ||
      config.max_queue_delay == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_queue_delay must be finite and >= 0, got ",
        absl::FormatDuration(config.max_queue_delay)));
  }
  for (size_t i = 0; i < config.bucket_bounds.size(); ++i) {
    if (config.bucket_bounds[i] < 1 ||
        (i > 0 && config.bucket_bounds[i] <= config.bucket_bounds[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bucket_bounds must be positive and strictly ascending; bound ", i, " is ",
          config.bucket_bounds[i]));
    }
  }
  return absl::OkStatus();
}

size_t LengthBucket(int32_t length, const BatchPolicyConfig& config) {
  if (!config.bucket_bounds.empty()) {
    return static_cast<size_t>(
        std::lower_bound(config.bucket_bounds.begin(), config.bucket_bounds.end(), length) -
        config.bucket_bounds.begin());
  }
  return DefaultLengthBucket(length);
}

int64_t PaddedTokens(const std::vector<int32_t>& lengths) {
  int64_t longest = 0;
  for (int32_t length : lengths) longest = std::max(longest, Cost(length));
  return static_cast<int64_t>(lengths.size()) * longest;
}

BatchDecision DecideBatch(const std::vector<PendingSequence>& pending, absl::Time now,
                          const BatchPolicyConfig& config) {
  if (pending.empty()) return BatchDecision{};

  // The oldest pending sequence (the first in arrival order, unless the caller's times say
  // otherwise).
  size_t oldest = 0;
  for (size_t i = 1; i < pending.size(); ++i) {
    if (pending[i].enqueued < pending[oldest].enqueued) oldest = i;
  }
  const bool overdue = now >= pending[oldest].enqueued + config.max_queue_delay;

  if (!config.length_bucketing) return DecideFifo(pending, oldest, overdue, config);

  // Group by bucket, each in arrival order.
  std::vector<size_t> bucket_of(pending.size());
  size_t num_buckets = 0;
  for (size_t i = 0; i < pending.size(); ++i) {
    bucket_of[i] = LengthBucket(pending[i].length, config);
    num_buckets = std::max(num_buckets, bucket_of[i] + 1);
  }
  struct Bucket {
    std::vector<size_t> members;
    int64_t longest = 0;
    size_t oldest = 0;  // valid when members is not empty
  };
  std::vector<Bucket> buckets(num_buckets);
  for (size_t i = 0; i < pending.size(); ++i) {
    Bucket& bucket = buckets[bucket_of[i]];
    if (bucket.members.empty() || pending[i].enqueued < pending[bucket.oldest].enqueued) {
      bucket.oldest = i;
    }
    bucket.members.push_back(i);
    bucket.longest = std::max(bucket.longest, Cost(pending[i].length));
  }

  // Rule 1, then rule 2: which bucket goes now, if any.
  size_t chosen = num_buckets;
  if (overdue) {
    chosen = bucket_of[oldest];
  } else {
    for (size_t b = 0; b < num_buckets; ++b) {
      const Bucket& bucket = buckets[b];
      if (bucket.members.empty()) continue;
      const int64_t count = static_cast<int64_t>(bucket.members.size());
      const bool full =
          count >= config.max_batch_size || count * bucket.longest >= config.max_batch_tokens;
      if (!full) continue;
      if (chosen == num_buckets ||
          pending[bucket.oldest].enqueued < pending[buckets[chosen].oldest].enqueued) {
        chosen = b;
      }
    }
  }
  if (chosen == num_buckets) {
    BatchDecision wait;
    wait.wake_at = WakeAt(pending, oldest, config);
    return wait;
  }

  const Bucket& bucket = buckets[chosen];
  Forming batch;
  // The bucket's oldest always goes, alone if it is over the budget.
  batch.indices.push_back(bucket.oldest);
  batch.longest = Cost(pending[bucket.oldest].length);
  for (size_t i : bucket.members) {
    if (i != bucket.oldest) batch.TryAdd(i, Cost(pending[i].length), config);
  }
  // Top up from the adjacent shorter bucket.
  if (chosen > 0) {
    for (size_t i : buckets[chosen - 1].members) {
      if (static_cast<int64_t>(batch.indices.size()) >= config.max_batch_size) break;
      batch.TryAdd(i, Cost(pending[i].length), config);
    }
  }
  return Send(std::move(batch.indices));
}

}  // namespace relserve
