#ifndef RELSERVE_SERVER_MODEL_RUNTIME_CPU_TENSOR_ALLOCATOR_H_
#define RELSERVE_SERVER_MODEL_RUNTIME_CPU_TENSOR_ALLOCATOR_H_

#include <cstddef>
#include <optional>

#include "server/model/runtime/buffer_cache.h"

namespace relserve {

// CPU tensors of at least this size come from the buffer cache; smaller ones (token ids,
// pooled outputs, the short sequences' activations) stay with LibTorch's allocator (glibc),
// where they neither take a mapping each nor fragment much.
inline constexpr size_t kMinCachedTensorBytes = size_t{256} << 10;

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
