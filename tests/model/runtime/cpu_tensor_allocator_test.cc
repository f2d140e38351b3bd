#include "server/model/runtime/cpu_tensor_allocator.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include "gtest/gtest.h"
#include "server/util/malloc_mmap_threshold.h"

namespace relserve {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

class CpuTensorAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override { UseBufferCacheForCpuTensors(); }
  static BufferCacheStats Stats() {
    auto s = CpuTensorCacheStats();
    EXPECT_TRUE(s.has_value());
    return s.value_or(BufferCacheStats{});
  }
};

TEST_F(CpuTensorAllocatorTest, LargeTensorsComeFromTheCacheAndAreReused) {
  const BufferCacheStats before = Stats();
  void* first = nullptr;
  {
    at::Tensor t = at::empty({kMiB}, at::kFloat);  // 4 MiB
    first = t.data_ptr();
    EXPECT_EQ(Stats().in_use_bytes - before.in_use_bytes, 4 * kMiB);
    t.fill_(1.5f);
    EXPECT_FLOAT_EQ(t.sum().item<float>(), 1.5f * static_cast<float>(kMiB));
  }
  EXPECT_EQ(Stats().in_use_bytes, before.in_use_bytes);
  at::Tensor again = at::empty({kMiB}, at::kFloat);
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_GT(Stats().hits, before.hits);
}

// ClearCpuTensorCache unmaps what was released (the engine calls it once loaded), and leaves
// tensors in use as they are.
TEST_F(CpuTensorAllocatorTest, ClearingUnmapsReleasedBlocksOnly) {
  at::Tensor kept = at::full({kMiB}, 2.f, at::kFloat);  // 4 MiB in use
  { at::Tensor released = at::empty({2 * kMiB}, at::kFloat); }  // 8 MiB released
  EXPECT_GE(Stats().cached_bytes, 8 * kMiB);
  const int64_t in_use = Stats().in_use_bytes;
  ClearCpuTensorCache();
  EXPECT_EQ(Stats().cached_bytes, 0);
  EXPECT_EQ(Stats().in_use_bytes, in_use);
  EXPECT_FLOAT_EQ(kept.sum().item<float>(), 2.f * static_cast<float>(kMiB));
}

TEST_F(CpuTensorAllocatorTest, SmallTensorsKeepLibTorchsAllocator) {
  const BufferCacheStats before = Stats();
  at::Tensor small = at::ones({1000}, at::kFloat);  // 4 KB
  const BufferCacheStats after = Stats();
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(after.hits + after.misses, before.hits + before.misses);
  EXPECT_FLOAT_EQ(small.sum().item<float>(), 1000.0f);
}

// Tensors from kMinCachedTensorBytes up come from the cache, one byte less stays with glibc's
// heap, and the cache starts no higher than glibc's mapping threshold: no tensor is left for
// glibc to map and unmap on every call. (A block may serve a request up to a quarter smaller.)
TEST_F(CpuTensorAllocatorTest, TensorsFromTheThresholdUpComeFromTheCache) {
  static_assert(kMinCachedTensorBytes <= kMallocMmapThresholdBytes);
  const int64_t threshold = static_cast<int64_t>(kMinCachedTensorBytes);
  const BufferCacheStats before = Stats();
  {
    at::Tensor below = at::empty({threshold - 1}, at::kByte);
    EXPECT_EQ(Stats().in_use_bytes, before.in_use_bytes);
    at::Tensor at_threshold = at::empty({threshold}, at::kByte);
    const int64_t one = Stats().in_use_bytes - before.in_use_bytes;
    EXPECT_GE(one, threshold);
    EXPECT_LE(one, threshold + threshold / BufferCache::kSlackDivisor);
    // A 128-token sequence's hidden states of a base-sized model in bfloat16 (192 KiB).
    at::Tensor hidden = at::empty({1, 128, 768}, at::kBFloat16);
    EXPECT_GE(Stats().in_use_bytes - before.in_use_bytes, one + 192 * 1024);
  }
  EXPECT_EQ(Stats().in_use_bytes, before.in_use_bytes);
}

// ideep (oneDNN) allocates through raw_allocate and frees with raw_deleter() given the data
// pointer alone, for large and small blocks alike.
TEST_F(CpuTensorAllocatorTest, RawAllocationsOfBothKindsAreFreed) {
  c10::Allocator* allocator = c10::GetCPUAllocator();
  const BufferCacheStats before = Stats();
  void* big = allocator->raw_allocate(8 * kMiB);
  void* small = allocator->raw_allocate(100);
  ASSERT_NE(big, nullptr);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(Stats().in_use_bytes - before.in_use_bytes, 8 * kMiB);
  allocator->raw_deallocate(big);
  allocator->raw_deallocate(small);
  EXPECT_EQ(Stats().in_use_bytes, before.in_use_bytes);
}

TEST_F(CpuTensorAllocatorTest, ComputationOverManyShapesStaysWithinThePeak) {
  for (int64_t rows : {64, 200, 37, 512, 128, 300, 64, 512}) {
    at::Tensor x = at::randn({rows, 384});
    at::Tensor w = at::randn({384, 1536});
    at::Tensor y = at::gelu(at::matmul(x, w));
    at::Tensor z = at::matmul(y, w.t());
    EXPECT_EQ(z.sizes(), (c10::IntArrayRef{rows, 384}));
    const BufferCacheStats s = Stats();
    EXPECT_LE(s.in_use_bytes + s.cached_bytes, BufferCache::Limit(s.peak_in_use_bytes));
  }
  EXPECT_GT(Stats().hits, 0);
}

}  // namespace
}  // namespace relserve
