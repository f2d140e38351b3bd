#include "server/model/kernels/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <ATen/Parallel.h>

#include "gtest/gtest.h"

namespace relserve {
namespace {

// LibTorch's intra-op thread count for one test, restored after it.
class ParallelForTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = at::get_num_threads(); }
  void TearDown() override { at::set_num_threads(saved_); }
  int saved_ = 1;
};

// The chunks run on as many threads as LibTorch has (one chunk each here), as at::parallel_for
// from a file built without OpenMP does not: it ran them all on thread 0.
TEST_F(ParallelForTest, ChunksRunOnEveryThread) {
  at::set_num_threads(2);
  std::mutex mu;
  std::set<int> threads;
  ParallelFor(0, 2, 1, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mu);
    threads.insert(at::get_thread_num());
  });
  EXPECT_EQ(threads, (std::set<int>{0, 1}));
}

// Every item in exactly one chunk, and no more chunks than threads or than grains in the range.
TEST_F(ParallelForTest, EveryItemOnce) {
  for (int threads : {1, 2, 3}) {
    at::set_num_threads(threads);
    for (int64_t grain : {1, 7, 100}) {
      std::vector<std::atomic<int>> seen(250);
      std::atomic<int> chunks{0};
      ParallelFor(10, 260, grain, [&](int64_t b, int64_t e) {
        chunks.fetch_add(1);
        for (int64_t i = b; i < e; ++i) seen[i - 10].fetch_add(1);
      });
      for (int64_t i = 0; i < 250; ++i) EXPECT_EQ(seen[i].load(), 1) << "item " << i + 10 << " grain " << grain;
      EXPECT_LE(chunks.load(), std::min<int64_t>(threads, (250 + grain - 1) / grain)) << "grain " << grain;
    }
  }
}

// Called from a chunk, it runs inline on that chunk's thread (no nested pool), where
// at::get_thread_num() reads 0 until it returns; an empty range calls nothing.
TEST_F(ParallelForTest, NestedRunsInlineAndEmptyRunsNothing) {
  at::set_num_threads(2);
  std::atomic<int> elsewhere{0}, nested_ids{0}, restored{0}, calls{0};
  ParallelFor(0, 2, 1, [&](int64_t, int64_t) {
    const std::thread::id outer = std::this_thread::get_id();
    const int id = at::get_thread_num();
    ParallelFor(0, 8, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() != outer) elsewhere.fetch_add(1);
      nested_ids.fetch_add(at::get_thread_num());
    });
    if (at::get_thread_num() == id) restored.fetch_add(1);
  });
  EXPECT_EQ(elsewhere.load(), 0);
  EXPECT_EQ(nested_ids.load(), 0);
  EXPECT_EQ(restored.load(), 2);
  ParallelFor(5, 5, 1, [&](int64_t, int64_t) { calls.fetch_add(1); });
  EXPECT_EQ(calls.load(), 0);
}

}  // namespace
}  // namespace relserve
