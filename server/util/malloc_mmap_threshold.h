#ifndef RELSERVE_SERVER_UTIL_MALLOC_MMAP_THRESHOLD_H_
#define RELSERVE_SERVER_UTIL_MALLOC_MMAP_THRESHOLD_H_

#include <cstddef>

namespace relserve {

// The size from which glibc's malloc maps a block on its own (M_MMAP_THRESHOLD), fixed by
// TuneProcessForInference under RELSERVE_ALLOCATOR=cache. Large short-lived blocks (request
// bodies, parsed JSON, answers of long texts) are mapped and go back to the system when freed;
// smaller ones are reused from the arenas. It is 1 MiB so that what the forward pass's libraries
// allocate and free on every call stays in the arenas: OpenBLAS's threaded GEMM allocates a
// 516 KiB job array (MAX_CPU_NUMBER 64, Debian 12's build) on every call, and at 128 KiB each of
// a base-sized float32 model's 2,300 attention products a batch of 8 x 128 was a mapping of its
// own, faulted in and unmapped (about 5% of T5-base's time at that shape, docs/PERFORMANCE.md).
inline constexpr size_t kMallocMmapThresholdBytes = size_t{1} << 20;

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_MALLOC_MMAP_THRESHOLD_H_
