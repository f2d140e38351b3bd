#include "server/batching/length_buckets.h"

namespace relserve {
namespace {

// Calls visit(bound) with the default bounds in ascending order until it returns false.
template <typename Visit>
void ForEachDefaultBound(Visit visit) {
  int64_t step = 8;
  for (int64_t bound = 8;; bound += step) {
    if (!visit(bound)) return;
    if (bound >= 64 && bound == 8 * step) step *= 2;  // 8 apart to 64, 16 to 128, 32 to 256, ...
  }
}

}  // namespace

std::vector<int32_t> DefaultLengthBuckets(int max_length) {
  std::vector<int32_t> bounds;
  ForEachDefaultBound([&](int64_t bound) {
    if (bound >= max_length) return false;
    bounds.push_back(static_cast<int32_t>(bound));
    return true;
  });
  bounds.push_back(max_length);
  return bounds;
}

size_t DefaultLengthBucket(int32_t length) {
  size_t index = 0;
  ForEachDefaultBound([&](int64_t bound) {
    if (bound >= length) return false;
    ++index;
    return true;
  });
  return index;
}

}  // namespace relserve
