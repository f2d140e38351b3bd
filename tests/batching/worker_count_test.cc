// How many workers a model gets, and with how many threads each (server/batching/worker_count.h).
#include "server/batching/worker_count.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

TEST(WorkerCountTest, WorkersAndThreadsShareOutTheCpus) {
  struct Case {
    int cpus, workers, threads;
    int want_workers, want_threads;
  };
  for (const Case& c : std::vector<Case>{
           {1, 0, 0, 1, 1},    // both automatic: a single-threaded worker per CPU...
           {2, 0, 0, 2, 1},
           {4, 0, 0, 4, 1},
           {16, 0, 0, 4, 4},   // ...at most 4, sharing the CPUs
           {6, 0, 0, 4, 1},
           {8, 2, 0, 2, 4},    // workers given: the threads divide the CPUs
           {3, 4, 0, 4, 1},    // never below one thread
           {8, 0, 2, 4, 2},    // threads given: the workers divide the CPUs
           {2, 0, 4, 1, 4},
           {2, 3, 3, 3, 3},    // both given: as they are, even oversubscribed
           {0, 0, 0, 1, 1},    // an unknown CPU count counts as one
       }) {
    const auto r = ResolveCpuWorkers(c.cpus, c.workers, c.threads, DType::kFloat32);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->workers, c.want_workers) << c.cpus << " " << c.workers << " " << c.threads;
    EXPECT_EQ(r->threads, c.want_threads) << c.cpus << " " << c.workers << " " << c.threads;
  }
}

// int8, both automatic: one worker over every CPU; workers or threads asked for are taken as in
// float32 (int8 batches side by side give one-at-a-time's answers: concurrent_batches_test).
TEST(WorkerCountTest, Int8RunsOneWorkerUnlessAskedForMore) {
  auto a = ResolveCpuWorkers(8, 0, 0, DType::kInt8);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->workers, 1);
  EXPECT_EQ(a->threads, 8);
  auto two = ResolveCpuWorkers(8, 2, 0, DType::kInt8);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->workers, 2);
  EXPECT_EQ(two->threads, 4);
  auto by_threads = ResolveCpuWorkers(2, 0, 1, DType::kInt8);
  ASSERT_TRUE(by_threads.ok()) << by_threads.status();
  EXPECT_EQ(by_threads->workers, 2);
  EXPECT_EQ(by_threads->threads, 1);
}

// bfloat16 through LibTorch's oneDNN linear, and float16, run one worker over every CPU (two
// bfloat16 batches at once through oneDNN crashed a server); asking for more workers is refused,
// naming the flags.
TEST(WorkerCountTest, HalfPrecisionRunsOneWorker) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    auto a = ResolveCpuWorkers(8, 0, 0, dtype);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->workers, 1);
    EXPECT_EQ(a->threads, 8);
    auto t = ResolveCpuWorkers(8, 1, 4, dtype);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->workers, 1);
    EXPECT_EQ(t->threads, 4);
    auto by_threads = ResolveCpuWorkers(2, 0, 1, dtype);
    ASSERT_TRUE(by_threads.ok());
    EXPECT_EQ(by_threads->workers, 1);
    EXPECT_EQ(by_threads->threads, 1);
    auto bad = ResolveCpuWorkers(8, 2, 0, dtype);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--workers-per-device 2 with --dtype"));
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("float32 and int8 take several"));
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("AMX-BF16"));
  }
}

// bfloat16 whose projections run in relserve's AMX GEMM takes float32's rules: single-thread
// workers side by side, as many as asked for, and CPU copies; float16 keeps one worker.
TEST(WorkerCountTest, BFloat16OnItsOwnKernelsRunsSideBySide) {
  for (int cpus : {1, 2, 8}) {
    auto own = ResolveCpuWorkers(cpus, 0, 0, DType::kBFloat16, /*own_projections=*/true);
    auto f32 = ResolveCpuWorkers(cpus, 0, 0, DType::kFloat32);
    ASSERT_TRUE(own.ok() && f32.ok());
    EXPECT_EQ(own->workers, f32->workers) << cpus;
    EXPECT_EQ(own->threads, f32->threads) << cpus;
  }
  auto two = ResolveCpuWorkers(8, 2, 0, DType::kBFloat16, true);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->workers, 2);
  EXPECT_EQ(two->threads, 4);
  auto copies = ResolveWorkersPerCopy(16, {"cpu", "cpu"}, 0, 0, DType::kBFloat16, true);
  ASSERT_TRUE(copies.ok()) << copies.status();
  EXPECT_EQ(copies->workers, 4);
  EXPECT_EQ(copies->threads, 2);
  EXPECT_FALSE(ResolveCpuWorkers(8, 2, 0, DType::kFloat16, true).ok());
  EXPECT_TRUE(OneBatchAtATimeOnCpu(DType::kBFloat16, false));
  EXPECT_FALSE(OneBatchAtATimeOnCpu(DType::kBFloat16, true));
  EXPECT_TRUE(OneBatchAtATimeOnCpu(DType::kFloat16, true));
}

// int8 whose projections run in relserve's AMX int8 GEMM takes float32's rules too (automatic:
// single-thread workers side by side); through oneDNN it keeps one worker over every CPU.
TEST(WorkerCountTest, Int8OnItsOwnKernelsRunsSideBySide) {
  for (int cpus : {1, 2, 8}) {
    auto own = ResolveCpuWorkers(cpus, 0, 0, DType::kInt8, /*own_projections=*/true);
    auto f32 = ResolveCpuWorkers(cpus, 0, 0, DType::kFloat32);
    auto onednn = ResolveCpuWorkers(cpus, 0, 0, DType::kInt8, false);
    ASSERT_TRUE(own.ok() && f32.ok() && onednn.ok());
    EXPECT_EQ(own->workers, f32->workers) << cpus;
    EXPECT_EQ(own->threads, f32->threads) << cpus;
    EXPECT_EQ(onednn->workers, 1) << cpus;
    EXPECT_EQ(onednn->threads, cpus) << cpus;
  }
  EXPECT_FALSE(OneBatchAtATimeOnCpu(DType::kInt8, true));
  EXPECT_FALSE(OneBatchAtATimeOnCpu(DType::kInt8, false));
}

// A GPU: --workers-per-device or two workers, sharing the CPUs' threads; no dtype rule there.
TEST(WorkerCountTest, GpuWorkersShareTheCpus) {
  auto auto_workers = ResolveWorkers(8, "cuda:0", 0, 0, DType::kBFloat16);
  ASSERT_TRUE(auto_workers.ok());
  EXPECT_EQ(auto_workers->workers, kAutoGpuWorkers);
  EXPECT_EQ(auto_workers->threads, 8 / kAutoGpuWorkers);
  auto given = ResolveWorkers(8, "cuda", 3, 1, DType::kFloat16);
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->workers, 3);
  EXPECT_EQ(given->threads, 1);
  auto cpu = ResolveWorkers(8, "cpu", 2, 0, DType::kInt8);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->workers, 2);
  EXPECT_EQ(cpu->threads, 4);
}

// A copy of the model per device: the CPUs shared out among the copies, each copy's workers
// as ResolveWorkers gives them, whatever the dtype.
TEST(WorkerCountTest, CopiesShareTheCpus) {
  auto gpus = ResolveWorkersPerCopy(16, {"cuda:0", "cuda:1"}, 0, 0, DType::kFloat16);
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  EXPECT_EQ(gpus->workers, kAutoGpuWorkers);
  EXPECT_EQ(gpus->threads, 16 / 2 / kAutoGpuWorkers);
  auto one = ResolveWorkersPerCopy(16, {"cpu"}, 0, 0, DType::kFloat32);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->workers, 4);
  EXPECT_EQ(one->threads, 4);
  auto two = ResolveWorkersPerCopy(16, {"cpu", "cpu"}, 0, 0, DType::kFloat32);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->workers, 4);
  EXPECT_EQ(two->threads, 2);
  auto few = ResolveWorkersPerCopy(1, {"cuda:0", "cuda:0", "cuda:1"}, 0, 0, DType::kFloat32);
  ASSERT_TRUE(few.ok());
  EXPECT_EQ(few->threads, 1);  // never below one thread
  auto int8 = ResolveWorkersPerCopy(16, {"cpu", "cpu"}, 0, 0, DType::kInt8);
  ASSERT_TRUE(int8.ok()) << int8.status();
  EXPECT_EQ(int8->workers, 1);  // one worker over the copy's CPUs, as ResolveCpuWorkers
  EXPECT_EQ(int8->threads, 8);
  // Two CPU copies would run two bfloat16 batches at once.
  auto bf16 = ResolveWorkersPerCopy(16, {"cpu", "cpu"}, 0, 0, DType::kBFloat16);
  EXPECT_EQ(bf16.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bf16.status().message()), HasSubstr("--device cpu,cpu with --dtype bfloat16"));
  auto gpu_bf16 = ResolveWorkersPerCopy(16, {"cuda:0", "cuda:1"}, 0, 0, DType::kBFloat16);
  EXPECT_TRUE(gpu_bf16.ok()) << gpu_bf16.status();
  EXPECT_EQ(ResolveWorkersPerCopy(16, {}, 0, 0, DType::kFloat32).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace relserve
