#include "server/model/runtime/buffer_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace relserve {
namespace {

size_t PageSize() {
  static const size_t page = [] {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

void* MapBlock(size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

BufferCache::~BufferCache() { Clear(); }

int64_t BufferCache::Limit(int64_t peak) { return peak + peak / kSlackDivisor; }

size_t BufferCache::BlockSize(size_t bytes) {
  const size_t page = PageSize();
  return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
}

void* BufferCache::Acquire(size_t bytes) {
  const size_t size = BlockSize(bytes);
  std::vector<Block*> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cached_by_size_.lower_bound(size);
    if (it != cached_by_size_.end() && it->first <= size + size / 4) {
      Block* b = it->second;
      cached_by_size_.erase(it);
      cached_by_age_.erase(b->by_age);
      in_use_.emplace(b->data, b);
      stats_.cached_bytes -= static_cast<int64_t>(b->size);
      stats_.in_use_bytes += static_cast<int64_t>(b->size);
      stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
      ++stats_.hits;
      return b->data;
    }
    // Make room first, so that mapped memory never runs past the peak by more than races allow:
    // the new block will be in use, and the cache keeps only what the peak leaves over.
    const int64_t after = stats_.in_use_bytes + static_cast<int64_t>(size);
    evicted = EvictLocked(Limit(std::max(stats_.peak_in_use_bytes, after)) - static_cast<int64_t>(size));
  }
  Unmap(evicted);
  void* data = MapBlock(size);
  if (data == nullptr) {
    Clear();  // the cached blocks may be what the system lacks
    data = MapBlock(size);
    if (data == nullptr) return nullptr;
  }
  auto* block = new Block{data, size, {}, {}};
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_.emplace(data, block);
    stats_.in_use_bytes += static_cast<int64_t>(size);
    stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
    ++stats_.misses;
    stats_.mapped_bytes_total += static_cast<int64_t>(size);
    // Other threads may have cached blocks meanwhile.
    evicted = EvictLocked(Limit(stats_.peak_in_use_bytes));
  }
  Unmap(evicted);
  return data;
}

bool BufferCache::Release(void* data) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_use_.find(data);
  if (it == in_use_.end()) return false;
  Block* b = it->second;
  in_use_.erase(it);
  b->by_size = cached_by_size_.emplace(b->size, b);
  b->by_age = cached_by_age_.insert(cached_by_age_.end(), b);
  stats_.in_use_bytes -= static_cast<int64_t>(b->size);
  stats_.cached_bytes += static_cast<int64_t>(b->size);
  return true;
}

void BufferCache::Clear() {
  std::vector<Block*> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    evicted = EvictLocked(stats_.in_use_bytes);
  }
  Unmap(evicted);
}

BufferCacheStats BufferCache::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<BufferCache::Block*> BufferCache::EvictLocked(int64_t limit) {
  std::vector<Block*> evicted;
  while (!cached_by_age_.empty() && stats_.in_use_bytes + stats_.cached_bytes > limit) {
    Block* b = cached_by_age_.front();
    cached_by_age_.pop_front();
    cached_by_size_.erase(b->by_size);
    stats_.cached_bytes -= static_cast<int64_t>(b->size);
    ++stats_.evicted_blocks;
    evicted.push_back(b);
  }
  return evicted;
}

void BufferCache::Unmap(const std::vector<Block*>& blocks) {
  for (Block* b : blocks) {
    munmap(b->data, b->size);
    delete b;
  }
}

}  // namespace relserve
