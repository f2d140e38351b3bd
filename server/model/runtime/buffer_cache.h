#ifndef RELSERVE_SERVER_MODEL_RUNTIME_BUFFER_CACHE_H_
#define RELSERVE_SERVER_MODEL_RUNTIME_BUFFER_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace relserve {

struct BufferCacheStats {
  int64_t in_use_bytes = 0;       // blocks handed out and not yet released
  int64_t cached_bytes = 0;       // released blocks kept mapped for reuse
  int64_t peak_in_use_bytes = 0;  // the most ever in use at once; in use + cached stay within Limit() of it
  int64_t hits = 0;               // requests served by a cached block
  int64_t misses = 0;             // requests that mapped a new block
  int64_t mapped_bytes_total = 0; // bytes of every block ever mapped (fresh pages the kernel zero-fills)
  int64_t evicted_blocks = 0;     // cached blocks unmapped to stay within the limit
};

// Large buffers for the tensors of a forward pass: every block is its own anonymous mapping,
// released blocks are kept for reuse, and the cache gives mapped memory back so that in use +
// cached stays within the peak ever in use at once and a quarter more (Limit).
//
// Why: a forward pass allocates and frees the same few large activations layer after layer.
// Mapping them anew each time makes the kernel zero-fill every page again (a quarter of the
// time of a base model at batch 32 x 128), so they must be reused; but keeping them in glibc's
// heap (mallopt(M_MMAP_MAX, 0)) lets a mix of batch shapes fragment the worker threads' arenas
// around small long-lived allocations, and the resident size then climbs towards one peak per
// shape and is never returned. Separate mappings cannot fragment, and bounding the cache by
// the peak demand holds the process near its largest batch's working set, whatever the mix.
// The quarter above the peak is what lets the same shape run again without mapping: blocks
// fit requests only loosely (below), and with the cache held to the peak itself a layer's
// loose fit made room by unmapping a block the next layer needed, so that a base-sized model
// mapped (and the kernel zero-filled) about 190 MiB every batch of 8 x 128.
//
// A request is served by the smallest cached block that holds it if that block is at most a
// quarter larger (page-rounded); otherwise a new block is mapped and the least recently
// released blocks are unmapped until in use + cached is back within the limit. Thread-safe:
// blocks may be released on any thread. System calls run outside the lock.
class BufferCache {
 public:
  BufferCache() = default;
  ~BufferCache();  // unmaps cached blocks; blocks still in use stay mapped
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;

  // A page-aligned block of at least `bytes` (> 0) bytes, or nullptr when the system refuses
  // the memory even after every cached block has been unmapped.
  void* Acquire(size_t bytes);
  // Returns a block from Acquire to the cache; false (and nothing done) when `data` is not a
  // block of this cache in use.
  bool Release(void* data);
  // Unmaps every cached block.
  void Clear();

  BufferCacheStats Stats() const;
  // The size a request for `bytes` occupies: rounded up to whole pages.
  static size_t BlockSize(size_t bytes);
  // What in use + cached may reach: the peak and a quarter of it more.
  static int64_t Limit(int64_t peak);
  static constexpr int64_t kSlackDivisor = 4;

 private:
  struct Block {
    void* data = nullptr;
    size_t size = 0;
    std::multimap<size_t, Block*>::iterator by_size;  // valid while cached
    std::list<Block*>::iterator by_age;               // valid while cached
  };

  // Takes cached blocks out, least recently released first, until in use + cached <= limit;
  // returns them for unmapping outside the lock.
  std::vector<Block*> EvictLocked(int64_t limit);
  static void Unmap(const std::vector<Block*>& blocks);

  mutable std::mutex mu_;
  std::unordered_map<void*, Block*> in_use_;  // guarded by mu_
  std::multimap<size_t, Block*> cached_by_size_;  // guarded by mu_
  std::list<Block*> cached_by_age_;  // guarded by mu_; front = least recently released
  BufferCacheStats stats_;  // guarded by mu_
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_RUNTIME_BUFFER_CACHE_H_
