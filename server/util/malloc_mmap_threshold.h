#ifndef RELSERVE_SERVER_UTIL_MALLOC_MMAP_THRESHOLD_H_
#define RELSERVE_SERVER_UTIL_MALLOC_MMAP_THRESHOLD_H_

#include <cstddef>

namespace relserve {

// The size from which glibc's malloc maps a block on its own (M_MMAP_THRESHOLD), fixed by
// TuneProcessForInference under RELSERVE_ALLOCATOR=cache, and the size from which LibTorch's CPU
// tensors come from relserve's buffer cache (kMinCachedTensorBytes) instead. The two are one
// number: a tensor between them would be mapped and unmapped by glibc every time it is
// allocated, so that the kernel zero-fills its pages again on every forward pass (with
// bfloat16, a 128-token sequence's hidden states, 192 KiB, were such tensors).
inline constexpr size_t kMallocMmapThresholdBytes = size_t{128} << 10;

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_MALLOC_MMAP_THRESHOLD_H_
