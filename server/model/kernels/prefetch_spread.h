#ifndef RELSERVE_SERVER_MODEL_KERNELS_PREFETCH_SPREAD_H_
#define RELSERVE_SERVER_MODEL_KERNELS_PREFETCH_SPREAD_H_

#include <algorithm>
#include <cstdint>

namespace relserve {

// How a pass of register tiles brings the next slice of weights (`bytes` long) into the cache
// while it works: each of its `tiles` tiles prefetches one line a step over its `steps` steps,
// tile t at t * share + step * stride. The slice is shared evenly among the tiles, so that its
// lines arrive throughout the pass rather than all at its start, where they would push out the
// slice the pass is reading (the AVX2 GEMMs' short batches, float32's and int8's, ran 1.1-1.2
// times as fast, docs/PERFORMANCE.md). The stride is at most a line, so no line of a share is
// skipped; where the tiles' steps are fewer than the slice's lines, the first tiles * steps lines
// are covered.
struct PrefetchSpread {
  int64_t share = 0;   // bytes of the slice per tile
  int64_t stride = 0;  // bytes between one step's line and the next (1-64)
};

inline constexpr int64_t kCacheLineBytes = 64;

inline PrefetchSpread SpreadPrefetch(int64_t bytes, int64_t tiles, int64_t steps) {
  PrefetchSpread spread;
  if (bytes <= 0 || tiles <= 0 || steps <= 0) return spread;
  spread.stride = std::min(kCacheLineBytes, ((bytes + tiles - 1) / tiles + steps - 1) / steps);
  spread.share = spread.stride * steps;
  return spread;
}

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_PREFETCH_SPREAD_H_
