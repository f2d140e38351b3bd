#include "server/model/runtime/cpu_tensor_allocator.h"

#include <atomic>
#include <mutex>

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/util/log.h"

namespace relserve {
namespace {

// LibTorch's allocator interface hands deleters around as plain function pointers (and ideep
// frees through raw_deleter() with the data pointer alone), so the allocator is a process-wide
// object that is never destroyed: tensors may be freed during exit.
class CachingCpuAllocator final : public c10::Allocator {
 public:
  explicit CachingCpuAllocator(c10::Allocator* fallback)
      : fallback_(fallback), fallback_delete_(fallback->raw_deleter()) {}

// LibTorch 2.3 made allocate() non-const and added copy_data().
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  c10::DataPtr allocate(size_t n) override { return Allocate(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
#else
  c10::DataPtr allocate(size_t n) const override { return Allocate(n); }
#endif

  // Data and context are the same pointer for cached and fallback blocks alike, so one deleter
  // that asks the cache first serves both (raw_allocate / raw_deallocate included).
  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }

  BufferCacheStats Stats() const { return cache_.Stats(); }
  void Clear() { cache_.Clear(); }

 private:
  c10::DataPtr Allocate(size_t n) const {
    if (n < kMinCachedTensorBytes) return fallback_->allocate(n);
    void* data = cache_.Acquire(n);
    // "out of memory" is what the engine maps to RESOURCE_EXHAUSTED (a batch split in halves).
    TORCH_CHECK(data != nullptr, "CPU tensor buffer cache: out of memory allocating ", n, " bytes");
    return {data, data, &Delete, c10::Device(c10::DeviceType::CPU)};
  }
  static void Delete(void* data);

  c10::Allocator* fallback_;
  c10::DeleterFnPtr fallback_delete_;
  mutable BufferCache cache_;
};

std::atomic<CachingCpuAllocator*> g_allocator{nullptr};

void CachingCpuAllocator::Delete(void* data) {
  if (data == nullptr) return;
  CachingCpuAllocator* self = g_allocator.load(std::memory_order_acquire);
  if (!self->cache_.Release(data)) self->fallback_delete_(data);
}

}  // namespace

void UseBufferCacheForCpuTensors() {
  static std::once_flag once;
  std::call_once(once, [] {
    c10::Allocator* fallback = c10::GetCPUAllocator();
    if (fallback == nullptr || fallback->raw_deleter() == nullptr) {
      LogWarning("LibTorch's CPU allocator has no raw deleter: tensors keep it, without the buffer cache");
      return;
    }
    auto* allocator = new CachingCpuAllocator(fallback);  // never destroyed (see above)
    g_allocator.store(allocator, std::memory_order_release);
    // Above the default allocator's priority (0), so that no later default registration wins.
    c10::SetCPUAllocator(allocator, /*priority=*/100);
    if (c10::GetCPUAllocator() != allocator) {
      LogWarning("LibTorch kept another CPU allocator registered with a higher priority: no buffer cache");
    }
  });
}

std::optional<BufferCacheStats> CpuTensorCacheStats() {
  CachingCpuAllocator* a = g_allocator.load(std::memory_order_acquire);
  if (a == nullptr) return std::nullopt;
  return a->Stats();
}

void ClearCpuTensorCache() {
  CachingCpuAllocator* a = g_allocator.load(std::memory_order_acquire);
  if (a != nullptr) a->Clear();
}

}  // namespace relserve
