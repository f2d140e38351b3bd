#ifndef RELSERVE_SERVER_MODEL_RUNTIME_CPU_TENSOR_ALLOCATOR_H_
#define RELSERVE_SERVER_MODEL_RUNTIME_CPU_TENSOR_ALLOCATOR_H_

#include <cstddef>
#include <optional>

#include "server/model/runtime/buffer_cache.h"
#include "server/util/malloc_mmap_threshold.h"

namespace relserve {

// CPU tensors of at least this size come from the buffer cache; smaller ones (token ids,
// pooled outputs, the shortest sequences' activations) stay with LibTorch's allocator (glibc),
// where they neither take a mapping each nor fragment much. At most glibc's own threshold for
// mapping a block (malloc_mmap_threshold.h): with 256 KiB here and 128 KiB there, tensors in
// between (a 128-token sequence's bfloat16 hidden states, a 64-token one's float32) were mapped,
// faulted in and unmapped by glibc on every forward pass, about 20 MiB of fresh pages per pass
// of a base-sized model in bfloat16 at 1 x 128.
inline constexpr size_t kMinCachedTensorBytes = size_t{128} << 10;
static_assert(kMinCachedTensorBytes <= kMallocMmapThresholdBytes,
              "a tensor glibc would map on its own must come from the cache");

// Makes LibTorch's CPU allocator route tensors of kMinCachedTensorBytes and more through one
// process-wide BufferCache (see buffer_cache.h for why). Process-wide and idempotent; the
// engine calls it before loading weights unless RELSERVE_ALLOCATOR says otherwise
// (server/util/process_tuning.h). Tensors allocated before keep their own deleters.
void UseBufferCacheForCpuTensors();

// The cache's counters; nullopt until UseBufferCacheForCpuTensors ran.
std::optional<BufferCacheStats> CpuTensorCacheStats();

// Unmaps the blocks the cache holds released (BufferCache::Clear); blocks in use stay. The engine
// calls it once its weights are loaded and packed, so that what loading freed (copies converted
// to another type, weights whose packed copy every batch takes) goes back to the system instead
// of waiting in the cache. Nothing before UseBufferCacheForCpuTensors ran.
void ClearCpuTensorCache();

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_RUNTIME_CPU_TENSOR_ALLOCATOR_H_
