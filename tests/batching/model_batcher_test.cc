#include "server/batching/model_batcher.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// How long a test waits for an event before failing (never reached when things work).
constexpr absl::Duration kEventTimeout = absl::Seconds(20);
// A queue delay long enough that nothing goes for want of company during a test.
constexpr absl::Duration kLongDelay = absl::Seconds(60);

// A backend whose outputs are derived from the inputs: pooled = {sum of ids, length},
// token_states = the ids, logits = {first id}. It records every call, and can be told to fail,
// to run out of memory above a batch size, or to block until released.
class FakeBackend : public InferenceBackend {
 public:
  const ModelInfo& info() const override { return info_; }
  absl::Status Validate(const SequenceInput&) const override { return absl::OkStatus(); }

  absl::StatusOr<std::vector<SequenceOutput>> Run(const std::vector<SequenceInput>& batch,
                                                  uint32_t outputs) override {
    absl::MutexLock lock(&mu_);
    std::vector<int32_t> first_ids;
    for (const SequenceInput& s : batch) first_ids.push_back(s.input_ids[0]);
    calls_.push_back(first_ids);
    flags_.push_back(outputs);
    ++entered_;
    mu_.Await(absl::Condition(
        +[](FakeBackend* b) { return !b->blocked_; },
        this));
    if (fail_next_ > 0) {
      --fail_next_;
      return absl::InternalError("boom");
    }
    if (oom_above_ >= 0 && static_cast<int>(batch.size()) > oom_above_) {
      return absl::ResourceExhaustedError("out of memory");
    }
    std::vector<SequenceOutput> results;
    for (const SequenceInput& s : batch) {
      SequenceOutput out;
      out.num_tokens = static_cast<int32_t>(s.input_ids.size());
      float sum = 0;
      for (int32_t id : s.input_ids) sum += static_cast<float>(id);
      if (outputs & kOutputPooled) out.pooled = {sum, static_cast<float>(out.num_tokens)};
      if (outputs & kOutputTokenStates) {
        out.token_states.assign(s.input_ids.begin(), s.input_ids.end());
      }
      if (outputs & kOutputLogits) out.logits = {static_cast<float>(s.input_ids[0])};
      results.push_back(std::move(out));
    }
    return results;
  }

  void Block() {
    absl::MutexLock lock(&mu_);
    blocked_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    blocked_ = false;
  }
  void FailNext(int n) {
    absl::MutexLock lock(&mu_);
    fail_next_ = n;
  }
  void OomAbove(int k) {
    absl::MutexLock lock(&mu_);
    oom_above_ = k;
  }
  // Waits until Run has been entered `n` times in all.
  bool WaitForEntered(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() {
      mu_.AssertReaderHeld();
      return entered_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kEventTimeout);
  }
  std::vector<std::vector<int32_t>> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  std::vector<uint32_t> flags() {
    absl::MutexLock lock(&mu_);
    return flags_;
  }
  void set_max_length(int n) { info_.max_length = n; }

 private:
  ModelInfo info_;
  absl::Mutex mu_;
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;
  int fail_next_ ABSL_GUARDED_BY(mu_) = 0;
  int oom_above_ ABSL_GUARDED_BY(mu_) = -1;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<int32_t>> calls_ ABSL_GUARDED_BY(mu_);  // first id of each sequence
  std::vector<uint32_t> flags_ ABSL_GUARDED_BY(mu_);
};

// Collects done callbacks by task id.
class Results {
 public:
  std::function<void(absl::StatusOr<SequenceOutput>, const TaskTiming&)> For(int id) {
    return [this, id](absl::StatusOr<SequenceOutput> result, const TaskTiming& timing) {
      absl::MutexLock lock(&mu_);
      ++calls_[id];
      results_.insert_or_assign(id, std::move(result));
      timings_[id] = timing;
    };
  }
  bool WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() {
      mu_.AssertReaderHeld();
      return calls_.size() >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kEventTimeout);
  }
  bool WaitForId(int id) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, id]() {
      mu_.AssertReaderHeld();
      return calls_.count(id) > 0;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kEventTimeout);
  }
  size_t size() {
    absl::MutexLock lock(&mu_);
    return calls_.size();
  }
  int calls(int id) {
    absl::MutexLock lock(&mu_);
    auto it = calls_.find(id);
    return it == calls_.end() ? 0 : it->second;
  }
  absl::StatusOr<SequenceOutput> result(int id) {
    absl::MutexLock lock(&mu_);
    auto it = results_.find(id);
    if (it == results_.end()) return absl::NotFoundError("no result");
    return it->second;
  }
  TaskTiming timing(int id) {
    absl::MutexLock lock(&mu_);
    return timings_[id];
  }

 private:
  absl::Mutex mu_;
  std::map<int, int> calls_ ABSL_GUARDED_BY(mu_);
  std::map<int, absl::StatusOr<SequenceOutput>> results_ ABSL_GUARDED_BY(mu_);
  std::map<int, TaskTiming> timings_ ABSL_GUARDED_BY(mu_);
};

class RecordingObserver : public BatchObserver {
 public:
  void OnBatch(const BatchStats& stats) override {
    absl::MutexLock lock(&mu_);
    batches.push_back(stats);
  }
  void OnDropped(DropReason reason) override {
    absl::MutexLock lock(&mu_);
    ++dropped[reason];
  }
  void OnQueueDepth(size_t sequences) override {
    absl::MutexLock lock(&mu_);
    last_depth = sequences;
    ++depth_reports;
  }
  void OnInFlight(int64_t delta) override {
    absl::MutexLock lock(&mu_);
    in_flight += delta;
    max_in_flight = std::max(max_in_flight, in_flight);
  }

  absl::Mutex mu_;
  std::vector<BatchStats> batches ABSL_GUARDED_BY(mu_);
  std::map<DropReason, int> dropped ABSL_GUARDED_BY(mu_);
  size_t last_depth ABSL_GUARDED_BY(mu_) = 0;
  int depth_reports ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_in_flight ABSL_GUARDED_BY(mu_) = 0;
};

// A task whose ids are {id, id + 1, ...} (length ids), so results identify their inputs.
SequenceTask MakeTask(int id, int length, Results* results,
                      uint32_t outputs = kOutputPooled) {
  SequenceTask task;
  for (int i = 0; i < length; ++i) task.input.input_ids.push_back(id + i);
  task.outputs = outputs;
  task.done = results->For(id);
  return task;
}

float ExpectedSum(int id, int length) {
  float sum = 0;
  for (int i = 0; i < length; ++i) sum += static_cast<float>(id + i);
  return sum;
}

BatcherConfig MakeConfig(int workers, absl::Duration delay, int max_batch_size = 64,
                         int64_t max_batch_tokens = 16384) {
  BatcherConfig config;
  config.num_workers = workers;
  config.policy.max_queue_delay = delay;
  config.policy.max_batch_size = max_batch_size;
  config.policy.max_batch_tokens = max_batch_tokens;
  return config;
}

std::unique_ptr<ModelBatcher> MustCreate(InferenceBackend* backend, BatcherConfig config,
                                         BatchObserver* observer = nullptr) {
  auto batcher = ModelBatcher::Create(backend, std::move(config), observer);
  EXPECT_TRUE(batcher.ok()) << batcher.status();
  return batcher.ok() ? std::move(batcher).value() : nullptr;
}

TEST(ModelBatcherTest, CreateRefusesBadConfigs) {
  FakeBackend backend;
  EXPECT_EQ(ModelBatcher::Create(nullptr, BatcherConfig{}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  BatcherConfig config;
  config.policy.max_batch_tokens = 0;
  EXPECT_EQ(ModelBatcher::Create(&backend, config, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  config = BatcherConfig{};
  config.num_workers = 0;
  EXPECT_EQ(ModelBatcher::Create(&backend, config, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  config = BatcherConfig{};
  config.max_queue_sequences = 0;
  EXPECT_EQ(ModelBatcher::Create(&backend, config, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// One queue, several copies of a model (one per device): each backend gets num_workers workers,
// and both run batches at the same time.
TEST(ModelBatcherTest, SeveralBackendsShareOneQueue) {
  FakeBackend first, second;
  Results results;
  std::atomic<int> started{0};
  BatcherConfig config = MakeConfig(1, absl::ZeroDuration(), /*max_batch_size=*/1);
  config.on_worker_start = [&started] { started.fetch_add(1); };
  auto created = ModelBatcher::Create({&first, &second}, config, nullptr);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<ModelBatcher> batcher = std::move(created).value();
  first.Block();
  second.Block();
  std::vector<SequenceTask> tasks;
  for (int id = 0; id < 6; ++id) tasks.push_back(MakeTask(id * 100, 3, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  // Each backend holds one batch at once: neither waits for the other.
  ASSERT_TRUE(first.WaitForEntered(1));
  ASSERT_TRUE(second.WaitForEntered(1));
  first.Release();
  second.Release();
  ASSERT_TRUE(results.WaitFor(6));
  for (int id = 0; id < 6; ++id) {
    auto result = results.result(id * 100);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(result->pooled, ElementsAre(ExpectedSum(id * 100, 3), 3));
  }
  EXPECT_EQ(first.calls().size() + second.calls().size(), 6u);
  batcher->Stop(absl::Seconds(5));
  EXPECT_EQ(started.load(), 2);
}

TEST(ModelBatcherTest, SeveralBackendsMustBeCopiesOfOneModel) {
  FakeBackend first, second;
  EXPECT_EQ(ModelBatcher::Create(std::vector<InferenceBackend*>{}, BatcherConfig{}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelBatcher::Create({&first, nullptr}, BatcherConfig{}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  first.set_max_length(128);
  second.set_max_length(512);
  auto mismatched = ModelBatcher::Create({&first, &second}, BatcherConfig{}, nullptr);
  EXPECT_EQ(mismatched.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mismatched.status().message()), HasSubstr("max_length 512 vs 128"));
}

TEST(ModelBatcherTest, EachWorkerRunsOnWorkerStartFirst) {
  FakeBackend backend;
  std::atomic<int> started{0};
  BatcherConfig config = MakeConfig(3, absl::ZeroDuration());
  config.on_worker_start = [&started] { started.fetch_add(1); };
  auto batcher = MustCreate(&backend, config);
  batcher->Stop(absl::Seconds(5));
  EXPECT_EQ(started.load(), 3);
}

TEST(ModelBatcherTest, SubmitRefusesMalformedTasks) {
  FakeBackend backend;
  Results results;
  auto batcher = MustCreate(&backend, MakeConfig(1, absl::ZeroDuration()));
  std::vector<SequenceTask> tasks;
  tasks.push_back(MakeTask(1, 3, &results));
  tasks.push_back(MakeTask(2, 3, &results));
  tasks[1].done = nullptr;
  EXPECT_EQ(batcher->Submit(std::move(tasks)).code(), absl::StatusCode::kInvalidArgument);
  tasks.clear();
  tasks.push_back(MakeTask(3, 0, &results));
  EXPECT_EQ(batcher->Submit(std::move(tasks)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(batcher->Submit({}).ok());
  batcher->Stop(absl::Seconds(5));
  EXPECT_EQ(results.size(), 0u);
}

TEST(ModelBatcherTest, EveryTaskCompletesOnceWithItsOwnResult) {
  FakeBackend backend;
  Results results;
  auto batcher = MustCreate(&backend, MakeConfig(2, absl::Milliseconds(1), 8, 512));
  std::vector<SequenceTask> tasks;
  for (int id = 0; id < 100; ++id) tasks.push_back(MakeTask(id * 1000, 1 + id % 37, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitFor(100));
  for (int id = 0; id < 100; ++id) {
    const int length = 1 + id % 37;
    auto result = results.result(id * 1000);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->num_tokens, length);
    EXPECT_THAT(result->pooled, ElementsAre(ExpectedSum(id * 1000, length), length));
    EXPECT_EQ(results.calls(id * 1000), 1);
    const TaskTiming timing = results.timing(id * 1000);
    EXPECT_GE(timing.batch_size, 1);
    EXPECT_LE(timing.batch_size, 8);
    EXPECT_LE(timing.batch_padded_tokens, 512);
  }
  for (const auto& call : backend.calls()) EXPECT_LE(call.size(), 8u);
  batcher->Stop(absl::Seconds(5));
  for (int id = 0; id < 100; ++id) EXPECT_EQ(results.calls(id * 1000), 1);
}

TEST(ModelBatcherTest, ConcurrentSubmittersGetTheirOwnResults) {
  FakeBackend backend;
  Results results;
  auto batcher = MustCreate(&backend, MakeConfig(3, absl::Microseconds(200), 16, 1024));
  constexpr int kThreads = 4;
  constexpr int kPerThread = 60;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; i += 3) {
        std::vector<SequenceTask> tasks;
        for (int j = i; j < i + 3; ++j) {
          const int id = (t * kPerThread + j) * 100;
          tasks.push_back(MakeTask(id, 1 + j % 50, &results));
        }
        EXPECT_TRUE(batcher->Submit(std::move(tasks)).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_TRUE(results.WaitFor(kThreads * kPerThread));
  for (int t = 0; t < kThreads; ++t) {
    for (int j = 0; j < kPerThread; ++j) {
      const int id = (t * kPerThread + j) * 100;
      auto result = results.result(id);
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_THAT(result->pooled, ElementsAre(ExpectedSum(id, 1 + j % 50), 1 + j % 50));
      EXPECT_EQ(results.calls(id), 1);
    }
  }
  EXPECT_EQ(batcher->queue_depth(), 0u);
}

TEST(ModelBatcherTest, QueueFullRefusesAllOrNothing) {
  FakeBackend backend;
  Results results;
  RecordingObserver observer;
  BatcherConfig config = MakeConfig(1, kLongDelay, 64);
  config.max_queue_sequences = 4;
  config.policy.max_queue_delay = absl::ZeroDuration();
  auto batcher = MustCreate(&backend, config, &observer);

  // Occupy the only worker.
  backend.Block();
  ASSERT_TRUE(batcher->Submit([&] {
                std::vector<SequenceTask> t;
                t.push_back(MakeTask(0, 4, &results));
                return t;
              }()).ok());
  ASSERT_TRUE(backend.WaitForEntered(1));

  std::vector<SequenceTask> three;
  for (int id = 1; id <= 3; ++id) three.push_back(MakeTask(id, 4, &results));
  ASSERT_TRUE(batcher->Submit(std::move(three)).ok());
  EXPECT_EQ(batcher->queue_depth(), 3u);

  std::vector<SequenceTask> two;
  for (int id = 10; id <= 11; ++id) two.push_back(MakeTask(id, 4, &results));
  const absl::Status refused = batcher->Submit(std::move(two));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("max_queue_sequences"));
  EXPECT_EQ(batcher->queue_depth(), 3u);

  // More sequences than the queue can ever hold: not retryable, whatever the queue holds now.
  std::vector<SequenceTask> five;
  for (int id = 20; id <= 24; ++id) five.push_back(MakeTask(id, 4, &results));
  const absl::Status never = batcher->Submit(std::move(five));
  EXPECT_EQ(never.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(never.message()), HasSubstr("5 sequences, more than the queue holds (max_queue_sequences=4)"));
  EXPECT_EQ(batcher->queue_depth(), 3u);

  std::vector<SequenceTask> one;
  one.push_back(MakeTask(4, 4, &results));
  ASSERT_TRUE(batcher->Submit(std::move(one)).ok());
  EXPECT_EQ(batcher->queue_depth(), 4u);

  backend.Release();
  ASSERT_TRUE(results.WaitFor(5));
  batcher->Stop(absl::Seconds(5));
  for (int id = 0; id <= 4; ++id) EXPECT_TRUE(results.result(id).ok()) << id;
  EXPECT_EQ(results.calls(10), 0);
  EXPECT_EQ(results.calls(20), 0);
  EXPECT_EQ(results.calls(11), 0);
  EXPECT_EQ(results.size(), 5u);
  absl::MutexLock lock(&observer.mu_);
  EXPECT_EQ(observer.dropped[DropReason::kQueueFull], 2);
}

TEST(ModelBatcherTest, DeadlinePassedWhileQueuedNeverReachesTheBackend) {
  FakeBackend backend;
  Results results;
  RecordingObserver observer;
  auto batcher = MustCreate(&backend, MakeConfig(1, kLongDelay), &observer);
  std::vector<SequenceTask> tasks;
  tasks.push_back(MakeTask(1, 5, &results));
  tasks[0].deadline = absl::Now() + absl::Milliseconds(20);
  tasks.push_back(MakeTask(2, 5, &results));
  tasks[1].deadline = absl::Now() - absl::Milliseconds(1);  // already past
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitFor(2));
  EXPECT_EQ(results.result(1).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(results.result(2).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(backend.calls().empty());
  EXPECT_EQ(batcher->queue_depth(), 0u);
  batcher->Stop(absl::Seconds(5));
  EXPECT_TRUE(backend.calls().empty());
  EXPECT_EQ(results.calls(1), 1);
  absl::MutexLock lock(&observer.mu_);
  EXPECT_EQ(observer.dropped[DropReason::kDeadlineExceeded], 2);
  EXPECT_TRUE(observer.batches.empty());
}

TEST(ModelBatcherTest, CancelledWhileQueuedIsDropped) {
  FakeBackend backend;
  Results results;
  RecordingObserver observer;
  auto batcher = MustCreate(&backend, MakeConfig(1, kLongDelay), &observer);

  // Cancelled before it is looked at.
  auto gone = std::make_shared<std::atomic<bool>>(true);
  std::vector<SequenceTask> tasks;
  tasks.push_back(MakeTask(1, 5, &results));
  tasks[0].cancelled = gone;
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitForId(1));
  EXPECT_EQ(results.result(1).status().code(), absl::StatusCode::kCancelled);

  // Cancelled while waiting for company; the next arrival wakes the worker.
  auto leaving = std::make_shared<std::atomic<bool>>(false);
  tasks.clear();
  tasks.push_back(MakeTask(2, 5, &results));
  tasks[0].cancelled = leaving;
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  leaving->store(true);
  tasks.clear();
  tasks.push_back(MakeTask(3, 5, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitForId(2));
  EXPECT_EQ(results.result(2).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(batcher->queue_depth(), 1u);

  batcher->Stop(absl::Seconds(5));  // drains task 3 without waiting for the delay
  EXPECT_TRUE(results.result(3).ok());
  ASSERT_EQ(backend.calls().size(), 1u);
  EXPECT_THAT(backend.calls()[0], ElementsAre(3));
  absl::MutexLock lock(&observer.mu_);
  EXPECT_EQ(observer.dropped[DropReason::kCancelled], 2);
}

TEST(ModelBatcherTest, FailingBatchFailsOnlyItsTasks) {
  FakeBackend backend;
  Results results;
  RecordingObserver observer;
  // Batches of two go at once (full by count).
  auto batcher = MustCreate(&backend, MakeConfig(1, kLongDelay, 2), &observer);
  backend.FailNext(1);
  std::vector<SequenceTask> tasks;
  tasks.push_back(MakeTask(1, 3, &results));
  tasks.push_back(MakeTask(2, 3, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitFor(2));
  for (int id : {1, 2}) {
    const absl::Status status = results.result(id).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(std::string(status.message()), HasSubstr("batch failed: boom"));
  }
  tasks.clear();
  tasks.push_back(MakeTask(3, 3, &results));
  tasks.push_back(MakeTask(4, 3, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitFor(4));
  EXPECT_TRUE(results.result(3).ok());
  EXPECT_TRUE(results.result(4).ok());
  batcher->Stop(absl::Seconds(5));
  absl::MutexLock lock(&observer.mu_);
  ASSERT_EQ(observer.batches.size(), 2u);
  EXPECT_EQ(observer.batches[0].status, absl::StatusCode::kInternal);
  EXPECT_EQ(observer.batches[1].status, absl::StatusCode::kOk);
}

TEST(ModelBatcherTest, OutOfMemorySplitsAndRetries) {
  FakeBackend backend;
  Results results;
  RecordingObserver observer;
  auto batcher = MustCreate(&backend, MakeConfig(1, kLongDelay, 8), &observer);
  backend.OomAbove(2);
  std::vector<SequenceTask> tasks;
  for (int id = 1; id <= 8; ++id) tasks.push_back(MakeTask(id * 10, 4, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitFor(8));
  for (int id = 1; id <= 8; ++id) {
    auto result = results.result(id * 10);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_THAT(result->pooled, ElementsAre(ExpectedSum(id * 10, 4), 4));
    EXPECT_EQ(results.timing(id * 10).batch_size, 2);
  }
  std::vector<size_t> sizes;
  for (const auto& call : backend.calls()) sizes.push_back(call.size());
  EXPECT_THAT(sizes, ElementsAre(8u, 4u, 2u, 2u, 4u, 2u, 2u));
  EXPECT_THAT(backend.calls()[2], ElementsAre(10, 20));
  EXPECT_THAT(backend.calls()[6], ElementsAre(70, 80));
  batcher->Stop(absl::Seconds(5));
  absl::MutexLock lock(&observer.mu_);
  ASSERT_EQ(observer.batches.size(), 7u);
  EXPECT_EQ(observer.batches[0].status, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(observer.batches[2].status, absl::StatusCode::kOk);
}

TEST(ModelBatcherTest, OutOfMemoryOnASingleSequenceFailsIt) {
  FakeBackend backend;
  Results results;
  auto batcher = MustCreate(&backend, MakeConfig(1, kLongDelay, 2));
  backend.OomAbove(0);
  std::vector<SequenceTask> tasks;
  tasks.push_back(MakeTask(1, 4, &results));
  tasks.push_back(MakeTask(2, 4, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitFor(2));
  for (int id : {1, 2}) {
    const absl::Status status = results.result(id).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(status.message()), HasSubstr("batch failed: "));
  }
  EXPECT_EQ(backend.calls().size(), 3u);  // 2, then 1 and 1
}

TEST(ModelBatcherTest, OutputsKeepOnlyWhatEachTaskAskedFor) {
  FakeBackend backend;
  Results results;
  auto batcher = MustCreate(&backend, MakeConfig(1, kLongDelay, 2));
  std::vector<SequenceTask> tasks;
  tasks.push_back(MakeTask(1, 3, &results, kOutputPooled));
  tasks.push_back(MakeTask(2, 3, &results, kOutputTokenStates | kOutputLogits));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitFor(2));
  ASSERT_THAT(backend.flags(), ElementsAre(kOutputPooled | kOutputTokenStates | kOutputLogits));
  auto first = results.result(1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->pooled.size(), 2u);
  EXPECT_TRUE(first->token_states.empty());
  EXPECT_TRUE(first->logits.empty());
  auto second = results.result(2);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->pooled.empty());
  EXPECT_THAT(second->token_states, ElementsAre(2, 3, 4));
  EXPECT_THAT(second->logits, ElementsAre(2));
}

TEST(ModelBatcherTest, StopDrainsQueuedWorkAndThenRefusesSubmit) {
  FakeBackend backend;
  Results results;
  RecordingObserver observer;
  auto batcher = MustCreate(&backend, MakeConfig(1, kLongDelay), &observer);
  std::vector<SequenceTask> tasks;
  for (int id = 1; id <= 3; ++id) tasks.push_back(MakeTask(id, 4, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  EXPECT_EQ(batcher->queue_depth(), 3u);  // waiting for company (a minute)

  const absl::Time start = absl::Now();
  batcher->Stop(absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "queued work goes at once when stopping";
  ASSERT_EQ(results.size(), 3u);
  for (int id = 1; id <= 3; ++id) EXPECT_TRUE(results.result(id).ok());

  tasks.clear();
  tasks.push_back(MakeTask(9, 4, &results));
  EXPECT_EQ(batcher->Submit(std::move(tasks)).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(results.calls(9), 0);
  absl::MutexLock lock(&observer.mu_);
  EXPECT_EQ(observer.dropped[DropReason::kShutdown], 1);
}

TEST(ModelBatcherTest, StopWithBlockedBackendAndZeroGraceFailsLeftovers) {
  FakeBackend backend;
  Results results;
  RecordingObserver observer;
  auto batcher = MustCreate(&backend, MakeConfig(1, absl::ZeroDuration()), &observer);
  backend.Block();
  std::vector<SequenceTask> tasks;
  tasks.push_back(MakeTask(1, 4, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(backend.WaitForEntered(1));  // task 1 is running, stuck
  tasks.clear();
  tasks.push_back(MakeTask(2, 4, &results));
  tasks.push_back(MakeTask(3, 4, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());  // queued behind it

  std::atomic<bool> stop_returned{false};
  std::thread stopper([&] {
    batcher->Stop(absl::ZeroDuration());
    stop_returned.store(true);
  });
  // Every task is answered while the backend is still stuck.
  ASSERT_TRUE(results.WaitFor(3));
  for (int id = 1; id <= 3; ++id) {
    EXPECT_EQ(results.result(id).status().code(), absl::StatusCode::kUnavailable) << id;
  }
  EXPECT_EQ(batcher->queue_depth(), 0u);
  // Stop returns once the stuck call does; its result is discarded.
  backend.Release();
  stopper.join();
  EXPECT_TRUE(stop_returned.load());
  for (int id = 1; id <= 3; ++id) EXPECT_EQ(results.calls(id), 1) << id;
  EXPECT_EQ(backend.calls().size(), 1u);
  absl::MutexLock lock(&observer.mu_);
  EXPECT_EQ(observer.dropped[DropReason::kShutdown], 3);
  EXPECT_EQ(observer.in_flight, 0);
}

TEST(ModelBatcherTest, StopTwiceIsHarmless) {
  FakeBackend backend;
  Results results;
  auto batcher = MustCreate(&backend, MakeConfig(2, kLongDelay));
  std::vector<SequenceTask> tasks;
  tasks.push_back(MakeTask(1, 4, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  batcher->Stop(absl::Seconds(5));
  batcher->Stop(absl::ZeroDuration());
  batcher->Stop(absl::Seconds(5));
  batcher.reset();  // the destructor stops again
  EXPECT_EQ(results.calls(1), 1);
  EXPECT_TRUE(results.result(1).ok());
}

TEST(ModelBatcherTest, DestructorAnswersEverything) {
  FakeBackend backend;
  Results results;
  {
    auto batcher = MustCreate(&backend, MakeConfig(1, kLongDelay));
    std::vector<SequenceTask> tasks;
    for (int id = 1; id <= 5; ++id) tasks.push_back(MakeTask(id, 4, &results));
    ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  }
  ASSERT_EQ(results.size(), 5u);
  for (int id = 1; id <= 5; ++id) EXPECT_EQ(results.calls(id), 1);
}

TEST(ModelBatcherTest, ObserverSeesBatchesDropsDepthAndInFlight) {
  FakeBackend backend;
  Results results;
  RecordingObserver observer;
  auto batcher = MustCreate(&backend, MakeConfig(1, kLongDelay, 3), &observer);
  std::vector<SequenceTask> tasks;
  tasks.push_back(MakeTask(1, 2, &results));
  tasks.push_back(MakeTask(2, 5, &results));
  tasks.push_back(MakeTask(3, 3, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitFor(3));
  tasks.clear();
  tasks.push_back(MakeTask(4, 2, &results));
  tasks[0].deadline = absl::Now() - absl::Milliseconds(1);
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitFor(4));
  batcher->Stop(absl::Seconds(5));

  absl::MutexLock lock(&observer.mu_);
  ASSERT_EQ(observer.batches.size(), 1u);
  const BatchStats& stats = observer.batches[0];
  EXPECT_EQ(stats.batch_size, 3);
  EXPECT_EQ(stats.real_tokens, 10);
  EXPECT_EQ(stats.padded_tokens, 15);
  EXPECT_EQ(stats.queue_times.size(), 3u);
  EXPECT_EQ(stats.status, absl::StatusCode::kOk);
  EXPECT_GE(stats.inference, absl::ZeroDuration());
  EXPECT_EQ(observer.dropped[DropReason::kDeadlineExceeded], 1);
  EXPECT_EQ(observer.last_depth, 0u);
  EXPECT_GE(observer.depth_reports, 3);
  EXPECT_EQ(observer.in_flight, 0);
  EXPECT_EQ(observer.max_in_flight, 3);
}

// A backend that says where its time went: the batcher hands its stages to the observer as
// they are; one that does not measure reports zero.
class StagedBackend : public FakeBackend {
 public:
  absl::StatusOr<std::vector<SequenceOutput>> RunTimed(const std::vector<SequenceInput>& batch, uint32_t outputs,
                                                       RunTimings* timings) override {
    timings->prepare = absl::Milliseconds(batch.size());
    timings->forward = absl::Milliseconds(10);
    timings->results = absl::Microseconds(7);
    return Run(batch, outputs);
  }
};

TEST(ModelBatcherTest, ObserverSeesTheBackendsStages) {
  StagedBackend staged;
  FakeBackend plain;
  for (InferenceBackend* backend : std::vector<InferenceBackend*>{&staged, &plain}) {
    Results results;
    RecordingObserver observer;
    auto batcher = MustCreate(backend, MakeConfig(1, kLongDelay, 2), &observer);
    std::vector<SequenceTask> tasks;
    tasks.push_back(MakeTask(1, 2, &results));
    tasks.push_back(MakeTask(2, 3, &results));
    ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
    ASSERT_TRUE(results.WaitFor(2));
    batcher->Stop(absl::Seconds(5));
    absl::MutexLock lock(&observer.mu_);
    ASSERT_EQ(observer.batches.size(), 1u);
    const RunTimings& stages = observer.batches[0].stages;
    const bool measured = backend == &staged;
    EXPECT_EQ(stages.prepare, measured ? absl::Milliseconds(2) : absl::ZeroDuration());
    EXPECT_EQ(stages.forward, measured ? absl::Milliseconds(10) : absl::ZeroDuration());
    EXPECT_EQ(stages.results, measured ? absl::Microseconds(7) : absl::ZeroDuration());
  }
}

TEST(ModelBatcherTest, LoneSequenceWaitsForCompanyThenGoes) {
  FakeBackend backend;
  Results results;
  auto batcher = MustCreate(&backend, MakeConfig(1, absl::Milliseconds(5)));
  const absl::Time start = absl::Now();
  std::vector<SequenceTask> tasks;
  tasks.push_back(MakeTask(1, 4, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitForId(1));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(5));
  EXPECT_GE(results.timing(1).queue, absl::Milliseconds(5));
  EXPECT_TRUE(results.result(1).ok());
}

}  // namespace
}  // namespace relserve

namespace relserve {
namespace {

// A GPU-like backend that must be warmed up per thread: it records which thread ran which
// (batch size, length), and how many of those runs came after the first batch a worker took
// from the queue (a request's).
class ShapeRecordingBackend : public InferenceBackend {
 public:
  explicit ShapeRecordingBackend(bool per_thread) : per_thread_(per_thread) {
    info_.vocab_size = 100000;
    info_.max_length = 64;
    info_.dtype = DType::kBFloat16;
    info_.device = "cuda:0";
  }
  const ModelInfo& info() const override { return info_; }
  absl::Status Validate(const SequenceInput&) const override { return absl::OkStatus(); }
  bool WarmsUpPerThread() const override { return per_thread_; }
  std::vector<int> WarmUpLengths(int) const override { return {16, 32, 64}; }
  std::vector<int> WarmUpBatchSizes(int max_batch_size) const override {
    std::vector<int> sizes;
    for (int s : {1, 2, 4, 8}) {
      if (s <= max_batch_size) sizes.push_back(s);
    }
    return sizes;
  }
  absl::StatusOr<std::vector<SequenceOutput>> Run(const std::vector<SequenceInput>& batch, uint32_t) override {
    const int length = static_cast<int>(batch.at(0).input_ids.size());
    absl::MutexLock lock(&mu_);
    runs_.push_back({std::this_thread::get_id(), static_cast<int>(batch.size()), length});
    if (fail_at_length_ == length) return absl::InternalError("no kernel for this shape");
    return std::vector<SequenceOutput>(batch.size());
  }
  struct RunRecord {
    std::thread::id thread;
    int batch, length;
  };
  std::vector<RunRecord> runs() {
    absl::MutexLock lock(&mu_);
    return runs_;
  }
  void FailAtLength(int length) {
    absl::MutexLock lock(&mu_);
    fail_at_length_ = length;
  }

 private:
  const bool per_thread_;
  ModelInfo info_;
  absl::Mutex mu_;
  std::vector<RunRecord> runs_ ABSL_GUARDED_BY(mu_);
  int fail_at_length_ ABSL_GUARDED_BY(mu_) = -1;
};

TEST(ModelBatcherWarmUpTest, EveryWorkerWarmsEveryShapeOnItsOwnThreadBeforeCreateReturns) {
  ShapeRecordingBackend backend(/*per_thread=*/true);
  BatcherConfig config = MakeConfig(3, absl::ZeroDuration(), /*max_batch_size=*/8, /*max_batch_tokens=*/256);
  config.warm_up_workers = true;
  config.model_name = "m";
  auto batcher = MustCreate(&backend, config);
  ASSERT_NE(batcher, nullptr);
  // Create returned: every worker has run every shape within the limits, on its own thread.
  const std::vector<ShapeRecordingBackend::RunRecord> runs = backend.runs();
  std::map<std::thread::id, std::set<std::pair<int, int>>> by_thread;
  for (const auto& r : runs) by_thread[r.thread].insert({r.batch, r.length});
  ASSERT_EQ(by_thread.size(), 3u);
  const std::set<std::pair<int, int>> expected = {{1, 16}, {2, 16}, {4, 16}, {8, 16}, {1, 32}, {2, 32},
                                                  {4, 32}, {8, 32}, {1, 64}, {2, 64}, {4, 64}};  // 8 x 64 > 256
  for (const auto& [thread, shapes] : by_thread) {
    EXPECT_NE(thread, std::this_thread::get_id());
    EXPECT_EQ(shapes, expected);
  }
  EXPECT_EQ(runs.size(), 3 * expected.size());
  EXPECT_EQ(batcher->warm_up_shapes_per_worker(), static_cast<int>(expected.size()));
  EXPECT_GT(batcher->warm_up_time(), absl::ZeroDuration());
  // A request's batch runs after that, on one of those threads.
  Results results;
  std::vector<SequenceTask> tasks;
  tasks.push_back(MakeTask(7, 5, &results));
  ASSERT_TRUE(batcher->Submit(std::move(tasks)).ok());
  ASSERT_TRUE(results.WaitFor(1));
  const auto after = backend.runs();
  ASSERT_EQ(after.size(), runs.size() + 1);
  EXPECT_EQ(by_thread.count(after.back().thread), 1u);
  batcher->Stop(absl::Seconds(5));
}

TEST(ModelBatcherWarmUpTest, BackendsThatDoNotAskAreNotWarmedPerWorker) {
  ShapeRecordingBackend backend(/*per_thread=*/false);
  BatcherConfig config = MakeConfig(2, absl::ZeroDuration());
  config.warm_up_workers = true;
  auto batcher = MustCreate(&backend, config);
  ASSERT_NE(batcher, nullptr);
  EXPECT_TRUE(backend.runs().empty());
  EXPECT_EQ(batcher->warm_up_shapes_per_worker(), 0);
  batcher->Stop(absl::Seconds(5));
}

TEST(ModelBatcherWarmUpTest, AFailedWarmUpFailsCreateNamingTheShape) {
  ShapeRecordingBackend backend(/*per_thread=*/true);
  backend.FailAtLength(32);
  BatcherConfig config = MakeConfig(2, absl::ZeroDuration(), 8, 256);
  config.warm_up_workers = true;
  config.model_name = "m";
  auto batcher = ModelBatcher::Create(&backend, config, nullptr);
  ASSERT_FALSE(batcher.ok());
  EXPECT_EQ(batcher.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(batcher.status().message(), HasSubstr("model m: warm-up at "));
  EXPECT_THAT(batcher.status().message(), HasSubstr(" x 32 tokens failed: no kernel for this shape"));
}

TEST(ModelBatcherWarmUpTest, AStopDuringWarmUpCancelsCreate) {
  ShapeRecordingBackend backend(/*per_thread=*/true);
  BatcherConfig config = MakeConfig(2, absl::ZeroDuration(), 8, 256);
  config.warm_up_workers = true;
  config.stop = [] { return true; };
  auto batcher = ModelBatcher::Create(&backend, config, nullptr);
  ASSERT_FALSE(batcher.ok());
  EXPECT_EQ(batcher.status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(backend.runs().empty());
}

}  // namespace
}  // namespace relserve
