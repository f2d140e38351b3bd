#include "server/model/runtime/buffer_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace relserve {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// in use + cached never exceeds the peak in use: the cache's whole promise.
void ExpectWithinPeak(const BufferCache& cache) {
  const BufferCacheStats s = cache.Stats();
  EXPECT_LE(s.in_use_bytes + s.cached_bytes, BufferCache::Limit(s.peak_in_use_bytes));
}

TEST(BufferCacheTest, BlocksArePageAlignedWritableAndPageRounded) {
  BufferCache cache;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(BufferCache::BlockSize(1), page);
  EXPECT_EQ(BufferCache::BlockSize(page), page);
  EXPECT_EQ(BufferCache::BlockSize(page + 1), 2 * page);
  void* p = cache.Acquire(3 * page + 5);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % page, 0u);
  std::memset(p, 0xab, 3 * page + 5);
  EXPECT_EQ(cache.Stats().in_use_bytes, static_cast<int64_t>(4 * page));
  EXPECT_TRUE(cache.Release(p));
}

TEST(BufferCacheTest, AReleasedBlockIsReusedWithItsContents) {
  BufferCache cache;
  void* a = cache.Acquire(kMiB);
  static_cast<char*>(a)[123] = 42;  // reuse means no fresh (zero-filled) pages
  ASSERT_TRUE(cache.Release(a));
  EXPECT_EQ(cache.Stats().cached_bytes, static_cast<int64_t>(kMiB));
  void* b = cache.Acquire(kMiB);
  EXPECT_EQ(b, a);
  EXPECT_EQ(static_cast<char*>(b)[123], 42);
  const BufferCacheStats s = cache.Stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.mapped_bytes_total, static_cast<int64_t>(kMiB));
  EXPECT_EQ(s.cached_bytes, 0);
  cache.Release(b);
}

TEST(BufferCacheTest, ACachedBlockServesRequestsUpToAQuarterSmaller) {
  BufferCache cache;
  void* a = cache.Acquire(4 * kMiB);
  cache.Release(a);
  void* b = cache.Acquire(4 * kMiB - 4 * kMiB / 5);  // 3.2 MiB: 4 MiB is 1.25x, still a fit
  EXPECT_EQ(b, a);
  cache.Release(b);
  void* c = cache.Acquire(3 * kMiB);  // 4 MiB would be 1.33x: a new block
  EXPECT_NE(c, a);
  void* d = cache.Acquire(5 * kMiB);  // larger than any cached block: a new block
  EXPECT_NE(d, a);
  EXPECT_EQ(cache.Stats().misses, 3);
  cache.Release(c);
  cache.Release(d);
}

TEST(BufferCacheTest, TheSmallestFittingBlockIsTaken) {
  BufferCache cache;
  void* big = cache.Acquire(5 * kMiB);
  void* small = cache.Acquire(4 * kMiB);
  cache.Release(big);
  cache.Release(small);
  EXPECT_EQ(cache.Acquire(4 * kMiB), small);
  EXPECT_EQ(cache.Acquire(4 * kMiB + 1), big);
  cache.Release(small);
  cache.Release(big);
}

TEST(BufferCacheTest, ForeignAndDoubleReleasesAreRefused) {
  BufferCache cache;
  int local = 0;
  EXPECT_FALSE(cache.Release(&local));
  void* a = cache.Acquire(kMiB);
  EXPECT_TRUE(cache.Release(a));
  EXPECT_FALSE(cache.Release(a));
  EXPECT_EQ(cache.Stats().cached_bytes, static_cast<int64_t>(kMiB));
}

// The regression this cache exists for: batches of ever new shapes. A heap that keeps every
// freed block grows towards one peak per shape; here a new shape's blocks replace the least
// recently released ones, so mapped memory stays within the largest batch's working set (times
// the quarter a block may exceed its request).
TEST(BufferCacheTest, MixedShapesStayWithinThePeakOfOneBatch) {
  BufferCache cache;
  std::mt19937_64 rng(5);
  int64_t largest_demand = 0;  // bytes requested and live at once, page-rounded
  int64_t total_requested = 0;
  for (int batch = 0; batch < 300; ++batch) {
    // A forward pass: each layer allocates its outputs while its inputs are live, then frees
    // the inputs; the activation size follows the batch's shape.
    const size_t unit = (64 + rng() % 4096) * 1024;  // 64 KiB to 4 MiB
    std::vector<std::pair<void*, size_t>> live;
    for (int layer = 0; layer < 6; ++layer) {
      std::vector<std::pair<void*, size_t>> outputs;
      for (size_t k : {size_t{1}, size_t{4}, size_t{1}}) {
        void* p = cache.Acquire(k * unit);
        ASSERT_NE(p, nullptr);
        outputs.emplace_back(p, k * unit);
        total_requested += static_cast<int64_t>(k * unit);
      }
      int64_t demand = 0;
      for (const auto* set : {&live, &outputs}) {
        for (const auto& [p, bytes] : *set) demand += static_cast<int64_t>(BufferCache::BlockSize(bytes));
      }
      largest_demand = std::max(largest_demand, demand);
      for (const auto& [p, bytes] : live) ASSERT_TRUE(cache.Release(p));
      live = outputs;
      ExpectWithinPeak(cache);
    }
    for (const auto& [p, bytes] : live) ASSERT_TRUE(cache.Release(p));
    ExpectWithinPeak(cache);
  }
  const BufferCacheStats s = cache.Stats();
  EXPECT_EQ(s.in_use_bytes, 0);
  EXPECT_LE(s.peak_in_use_bytes, largest_demand * 5 / 4);
  EXPECT_LE(s.cached_bytes, BufferCache::Limit(s.peak_in_use_bytes));
  EXPECT_GT(s.evicted_blocks, 0);
  EXPECT_GT(s.hits, s.misses);                         // layers of a batch reuse each other's blocks
  EXPECT_LT(s.mapped_bytes_total, total_requested / 2);  // so most requests touch no fresh page
}

// The same batch shape again maps nothing: every block its layers ask for is found cached.
// Without room above the peak, a request that a cached block fits only loosely (or not at
// all) made the cache unmap blocks the next layer needed, mapping fresh zero-filled pages on
// every pass of a base-sized model.
TEST(BufferCacheTest, ARepeatedShapeMapsNothingAfterItsFirstPass) {
  BufferCache cache;
  void* weights = cache.Acquire(64 * kMiB);  // long-lived, as a model's weights are
  const size_t unit = 3 * kMiB;
  auto pass = [&] {
    void* x = cache.Acquire(unit);
    for (int layer = 0; layer < 4; ++layer) {
      void* qkv = cache.Acquire(3 * unit);
      void* scores = cache.Acquire(unit * 7 / 4);
      void* context = cache.Acquire(unit);
      cache.Release(scores);
      cache.Release(qkv);
      void* attended = cache.Acquire(unit);
      cache.Release(context);
      cache.Release(x);
      void* inner = cache.Acquire(4 * unit);
      void* out = cache.Acquire(unit + kMiB / 2);
      cache.Release(inner);
      cache.Release(attended);
      x = out;
    }
    cache.Release(x);
  };
  pass();
  const BufferCacheStats first = cache.Stats();
  for (int i = 0; i < 5; ++i) pass();
  const BufferCacheStats after = cache.Stats();
  EXPECT_EQ(after.misses, first.misses);
  EXPECT_EQ(after.mapped_bytes_total, first.mapped_bytes_total);
  EXPECT_EQ(after.evicted_blocks, first.evicted_blocks);
  EXPECT_GT(after.hits, first.hits);
  ExpectWithinPeak(cache);
  cache.Release(weights);
}

TEST(BufferCacheTest, EvictsTheLeastRecentlyReleasedFirst) {
  BufferCache cache;
  void* a = cache.Acquire(2 * kMiB);
  void* b = cache.Acquire(3 * kMiB);
  cache.Release(a);  // released first
  cache.Release(b);
  // Peak 5 MiB (the limit a quarter more), 5 MiB cached: a 1.5 MiB block that fits neither
  // must make room, and a goes.
  void* c = cache.Acquire(kMiB * 3 / 2);
  BufferCacheStats s = cache.Stats();
  EXPECT_EQ(s.evicted_blocks, 1);
  EXPECT_EQ(s.cached_bytes, static_cast<int64_t>(3 * kMiB));
  EXPECT_EQ(cache.Acquire(3 * kMiB), b);
  ExpectWithinPeak(cache);
  cache.Release(b);
  cache.Release(c);
}

TEST(BufferCacheTest, ClearUnmapsEveryCachedBlock) {
  BufferCache cache;
  void* a = cache.Acquire(kMiB);
  void* b = cache.Acquire(2 * kMiB);
  cache.Release(a);
  cache.Clear();
  BufferCacheStats s = cache.Stats();
  EXPECT_EQ(s.cached_bytes, 0);
  EXPECT_EQ(s.in_use_bytes, static_cast<int64_t>(2 * kMiB));
  EXPECT_TRUE(cache.Release(b));  // blocks in use are untouched
}

TEST(BufferCacheTest, ThreadsNeverShareABlock) {
  BufferCache cache;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, &wrong, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      for (int i = 0; i < 300; ++i) {
        const size_t bytes = (256 + rng() % 2048) * 1024;
        auto* p = static_cast<unsigned char*>(cache.Acquire(bytes));
        if (p == nullptr) {
          ++wrong;
          continue;
        }
        std::memset(p, t + 1, bytes);
        std::this_thread::yield();
        for (size_t k = 0; k < bytes; k += 4096) {
          if (p[k] != t + 1) ++wrong;
        }
        if (!cache.Release(p)) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  const BufferCacheStats s = cache.Stats();
  EXPECT_EQ(s.in_use_bytes, 0);
  EXPECT_LE(s.cached_bytes, BufferCache::Limit(s.peak_in_use_bytes));
}

}  // namespace
}  // namespace relserve
