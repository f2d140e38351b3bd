#ifndef RELSERVE_SERVER_BATCHING_LENGTH_BUCKETS_H_
#define RELSERVE_SERVER_BATCHING_LENGTH_BUCKETS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace relserve {

// The one default of the length buckets batches are formed from (batch_policy.h), the bounds
// every model runs with unless --length-buckets says otherwise:
//   8, 16, 24, ..., 64 (8 apart), 80, ..., 128 (16 apart), 160, ..., 256 (32 apart), 320, ...
// The step doubles every eight bounds from 64 up, so that consecutive bounds are 1/8 to 1/4
// apart and a batch from one bucket pads little.

// The default bounds below `max_length`, then `max_length` itself: every sequence a model with
// that maximum accepts falls in one of them.
std::vector<int32_t> DefaultLengthBuckets(int max_length);

// The default bucket of `length` (0 = the shortest, lengths up to 8) with no upper end: the
// bucket BatchPolicyConfig gives when it has no bucket_bounds. Lengths up to a max length fall
// in the same bucket as under DefaultLengthBuckets(max length).
size_t DefaultLengthBucket(int32_t length);

}  // namespace relserve

#endif  // RELSERVE_SERVER_BATCHING_LENGTH_BUCKETS_H_
