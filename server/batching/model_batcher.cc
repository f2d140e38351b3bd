#include "server/batching/model_batcher.h"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/batching/warm_up.h"
#include "server/util/status_macros.h"

namespace relserve {

using DoneFn = std::function<void(absl::StatusOr<SequenceOutput>, const TaskTiming&)>;

struct ModelBatcher::Queued {
  SequenceTask task;
  absl::Time enqueued;
};

// A batch a worker has taken. Lives on the worker's stack; registered in running_ while it runs.
struct ModelBatcher::RunningBatch {
  struct Member {
    // Guarded by mu_: whoever sets `answered` takes `done` and calls it (the worker with the
    // result, or Stop when the grace is over).
    DoneFn done;
    bool answered = false;
    // Set when taken, then read-only.
    uint32_t outputs = 0;
    int32_t length = 0;
    absl::Duration queue;
  };
  std::vector<Member> members;        // arrival order
  std::vector<SequenceInput> inputs;  // parallel to members
  absl::Time started;                 // the first backend call
  InferenceBackend* backend = nullptr;  // the worker's
};

struct ModelBatcher::Dropped {
  DoneFn done;
  absl::Status status;
  DropReason reason;
  absl::Duration queue;
};

namespace {

int32_t LengthOf(const SequenceInput& input) {
  return static_cast<int32_t>(input.input_ids.size());
}

void KeepRequested(uint32_t outputs, SequenceOutput* output) {
  if (!(outputs & kOutputTokenStates)) output->token_states = std::vector<float>();
  if (!(outputs & kOutputPooled)) output->pooled = std::vector<float>();
  if (!(outputs & kOutputLogits)) output->logits = std::vector<float>();
  if (!(outputs & kOutputPooledUnnormalized)) output->pooled_unnormalized = std::vector<float>();
  if (!(outputs & kOutputSparse)) output->sparse = std::vector<std::pair<int32_t, float>>();
  if (!(outputs & kOutputMultiVector)) {
    output->multi_vector = std::vector<float>();
    output->num_vectors = 0;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelBatcher>> ModelBatcher::Create(InferenceBackend* backend,
                                                                   BatcherConfig config,
                                                                   BatchObserver* observer) {
  return Create(std::vector<InferenceBackend*>{backend}, std::move(config), observer);
}

absl::StatusOr<std::unique_ptr<ModelBatcher>> ModelBatcher::Create(std::vector<InferenceBackend*> backends,
                                                                   BatcherConfig config,
                                                                   BatchObserver* observer) {
  if (backends.empty()) return absl::InvalidArgumentError("ModelBatcher needs a backend");
  for (const InferenceBackend* backend : backends) {
    if (backend == nullptr) return absl::InvalidArgumentError("ModelBatcher needs a backend");
  }
  for (size_t i = 1; i < backends.size(); ++i) {
    const ModelInfo& a = backends[0]->info();
    const ModelInfo& b = backends[i]->info();
    if (a.max_length != b.max_length || a.vocab_size != b.vocab_size || a.type_vocab_size != b.type_vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backend ", i, " takes other sequences than backend 0 (max_length ", b.max_length, " vs ", a.max_length,
          ", vocab_size ", b.vocab_size, " vs ", a.vocab_size, ", type_vocab_size ", b.type_vocab_size, " vs ",
          a.type_vocab_size, "): one batcher feeds copies of one model"));
    }
  }
  if (config.num_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_workers must be >= 1, got ", config.num_workers));
  }
  if (config.max_queue_sequences < 1) {
    return absl::InvalidArgumentError("max_queue_sequences must be >= 1");
  }
  RETURN_IF_ERROR(ValidateBatchPolicyConfig(config.policy));
  std::unique_ptr<ModelBatcher> batcher(new ModelBatcher(std::move(backends), std::move(config), observer));
  const std::vector<InferenceBackend*>& on = batcher->backends_;
  batcher->workers_.reserve(on.size() * batcher->config_.num_workers);
  // Worker k runs on backend k % n: the first batches spread over every backend.
  for (int i = 0; i < batcher->config_.num_workers; ++i) {
    for (InferenceBackend* backend : on) {
      batcher->workers_.emplace_back([b = batcher.get(), backend] { b->WorkerLoop(backend); });
    }
  }
  if (batcher->config_.warm_up_workers) {
    const absl::Time t0 = absl::Now();
    absl::Status status;
    {
      ModelBatcher* b = batcher.get();
      absl::MutexLock lock(&b->warm_mu_);
      b->warm_mu_.Await(absl::Condition(
          +[](ModelBatcher* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(m->warm_mu_) {
            return m->warmed_workers_ == static_cast<int>(m->workers_.size()) || !m->warm_status_.ok();
          },
          b));
      status = b->warm_status_;
    }
    if (!status.ok()) {
      batcher->Stop(absl::ZeroDuration());
      return status;
    }
    batcher->warm_up_time_ = absl::Now() - t0;
  }
  return batcher;
}

void ModelBatcher::WarmUpThisWorker(InferenceBackend* backend) {
  absl::Status status = absl::OkStatus();
  int shapes = 0;
  if (backend->WarmsUpPerThread()) {
    status = WarmUpWorker(*backend, config_.model_name, backend->info().max_length, config_.policy.max_batch_size,
                          config_.policy.max_batch_tokens, config_.stop, &shapes);
  }
  absl::MutexLock lock(&warm_mu_);
  if (!status.ok() && warm_status_.ok()) warm_status_ = status;
  warm_up_shapes_ = std::max(warm_up_shapes_, shapes);
  ++warmed_workers_;
}

ModelBatcher::ModelBatcher(std::vector<InferenceBackend*> backends, BatcherConfig config,
                           BatchObserver* observer)
    : backends_(std::move(backends)), config_(std::move(config)), observer_(observer) {
  drain_policy_ = config_.policy;
  drain_policy_.max_queue_delay = absl::ZeroDuration();
}

ModelBatcher::~ModelBatcher() { Stop(absl::ZeroDuration()); }

absl::Status ModelBatcher::Submit(std::vector<SequenceTask> tasks) {
  if (tasks.empty()) return absl::OkStatus();
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!tasks[i].done) {
      return absl::InvalidArgumentError(absl::StrCat("task ", i, " has no done callback"));
    }
    if (tasks[i].input.input_ids.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("task ", i, " has no input ids"));
    }
  }
  // More than the whole queue holds can never be accepted, however long the caller waits:
  // not the retryable RESOURCE_EXHAUSTED of a queue that is full now.
  if (tasks.size() > config_.max_queue_sequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request has ", tasks.size(), " sequences, more than the queue holds (max_queue_sequences=",
        config_.max_queue_sequences, "); split it into requests of at most ", config_.max_queue_sequences,
        " sequences"));
  }
  const size_t count = tasks.size();
  absl::Status status;
  DropReason reason = DropReason::kShutdown;
  uint64_t seq = 0;
  size_t depth = 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      status = absl::UnavailableError("model batcher is stopping");
      reason = DropReason::kShutdown;
    } else if (queue_.size() + count > config_.max_queue_sequences) {
      status = absl::ResourceExhaustedError(absl::StrCat(
          "queue full: ", queue_.size(), " sequences queued, ", count,
          " more would exceed max_queue_sequences=", config_.max_queue_sequences));
      reason = DropReason::kQueueFull;
    } else {
      const absl::Time now = absl::Now();
      for (SequenceTask& task : tasks) {
        PendingSequence pending;
        pending.length = LengthOf(task.input);
        pending.enqueued = now;
        pending.deadline = task.deadline;
        pending_.push_back(pending);
        queue_.push_back(Queued{std::move(task), now});
      }
      seq = NoteDepthLocked();
      depth = queue_.size();
      work_cv_.SignalAll();
    }
  }
  if (!status.ok()) {
    if (observer_ != nullptr) {
      for (size_t i = 0; i < count; ++i) observer_->OnDropped(reason);
    }
    return status;
  }
  ReportDepth(seq, depth);
  return absl::OkStatus();
}

void ModelBatcher::Stop(absl::Duration grace) {
  absl::MutexLock stop_lock(&stop_mu_);
  if (joined_) return;
  std::vector<Dropped> leftovers;
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_cv_.SignalAll();
    mu_.AwaitWithDeadline(absl::Condition(this, &ModelBatcher::DrainedLocked),
                          absl::Now() + grace);
    aborted_ = true;
    const absl::Time now = absl::Now();
    const absl::Status unavailable =
        absl::UnavailableError("model batcher stopped before the sequence ran");
    for (Queued& queued : queue_) {
      leftovers.push_back(Dropped{std::move(queued.task.done), unavailable,
                                  DropReason::kShutdown, now - queued.enqueued});
    }
    queue_.clear();
    pending_.clear();
    const absl::Status cut =
        absl::UnavailableError("model batcher stopped before the sequence's batch finished");
    for (RunningBatch* batch : running_) {
      for (RunningBatch::Member& member : batch->members) {
        if (member.answered) continue;
        member.answered = true;
        leftovers.push_back(
            Dropped{std::move(member.done), cut, DropReason::kShutdown, member.queue});
      }
    }
    seq = NoteDepthLocked();
    work_cv_.SignalAll();
  }
  ReportDepth(seq, 0);
  for (Dropped& dropped : leftovers) {
    if (observer_ != nullptr) observer_->OnDropped(dropped.reason);
    TaskTiming timing;
    timing.queue = dropped.queue;
    dropped.done(dropped.status, timing);
  }
  for (std::thread& worker : workers_) worker.join();
  joined_ = true;
}

size_t ModelBatcher::queue_depth() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

bool ModelBatcher::DrainedLocked() const { return queue_.empty() && running_.empty(); }

uint64_t ModelBatcher::NoteDepthLocked() { return ++depth_seq_; }

void ModelBatcher::ReportDepth(uint64_t seq, size_t depth) {
  if (observer_ == nullptr || seq == 0) return;
  absl::MutexLock lock(&report_mu_);
  if (seq <= reported_depth_seq_) return;
  reported_depth_seq_ = seq;
  observer_->OnQueueDepth(depth);
}

void ModelBatcher::CollectDroppedLocked(absl::Time now, std::vector<Dropped>* dropped) {
  size_t kept = 0;
  for (size_t i = 0; i < queue_.size(); ++i) {
    Queued& queued = queue_[i];
    const bool cancelled = queued.task.cancelled != nullptr &&
                           queued.task.cancelled->load(std::memory_order_acquire);
    if (cancelled) {
      dropped->push_back(Dropped{std::move(queued.task.done),
                                 absl::CancelledError("cancelled while queued"),
                                 DropReason::kCancelled, now - queued.enqueued});
      continue;
    }
    if (queued.task.deadline <= now) {
      dropped->push_back(Dropped{std::move(queued.task.done),
                                 absl::DeadlineExceededError("deadline exceeded while queued"),
                                 DropReason::kDeadlineExceeded, now - queued.enqueued});
      continue;
    }
    if (kept != i) {
      queue_[kept] = std::move(queue_[i]);
      pending_[kept] = pending_[i];
    }
    ++kept;
  }
  queue_.erase(queue_.begin() + kept, queue_.end());
  pending_.erase(pending_.begin() + kept, pending_.end());
}

void ModelBatcher::TakeLocked(const std::vector<size_t>& indices, absl::Time now,
                              RunningBatch* batch) {
  batch->members.reserve(indices.size());
  batch->inputs.reserve(indices.size());
  std::vector<bool> taken(queue_.size(), false);
  for (size_t index : indices) {
    Queued& queued = queue_[index];
    taken[index] = true;
    RunningBatch::Member member;
    member.done = std::move(queued.task.done);
    member.outputs = queued.task.outputs;
    member.length = LengthOf(queued.task.input);
    member.queue = now - queued.enqueued;
    batch->members.push_back(std::move(member));
    batch->inputs.push_back(std::move(queued.task.input));
  }
  size_t kept = 0;
  for (size_t i = 0; i < queue_.size(); ++i) {
    if (taken[i]) continue;
    if (kept != i) {
      queue_[kept] = std::move(queue_[i]);
      pending_[kept] = pending_[i];
    }
    ++kept;
  }
  queue_.erase(queue_.begin() + kept, queue_.end());
  pending_.erase(pending_.begin() + kept, pending_.end());
}

void ModelBatcher::WorkerLoop(InferenceBackend* backend) {
  if (config_.on_worker_start) config_.on_worker_start();
  if (config_.warm_up_workers) WarmUpThisWorker(backend);
  while (true) {
    std::vector<Dropped> dropped;
    RunningBatch batch;
    batch.backend = backend;
    bool exit = false;
    uint64_t seq = 0;
    size_t depth = 0;
    {
      absl::MutexLock lock(&mu_);
      while (true) {
        if (aborted_) {
          exit = true;
          break;
        }
        const absl::Time now = absl::Now();
        CollectDroppedLocked(now, &dropped);
        if (!dropped.empty()) break;  // answer them first, outside the lock
        if (queue_.empty()) {
          if (stopping_) {
            exit = true;
            break;
          }
          work_cv_.Wait(&mu_);
          continue;
        }
        const BatchDecision decision =
            DecideBatch(pending_, now, stopping_ ? drain_policy_ : config_.policy);
        if (decision.send) {
          TakeLocked(decision.indices, now, &batch);
          running_.push_back(&batch);
          if (!queue_.empty()) work_cv_.Signal();  // another idle worker may take the rest
          break;
        }
        work_cv_.WaitWithDeadline(&mu_, decision.wake_at);
      }
      if (!dropped.empty() || !batch.members.empty()) {
        seq = NoteDepthLocked();
        depth = queue_.size();
      }
    }
    ReportDepth(seq, depth);
    for (Dropped& d : dropped) {
      if (observer_ != nullptr) observer_->OnDropped(d.reason);
      TaskTiming timing;
      timing.queue = d.queue;
      d.done(d.status, timing);
    }
    if (!batch.members.empty()) Execute(&batch);
    if (exit) return;
  }
}

void ModelBatcher::Execute(RunningBatch* batch) {
  const int64_t count = static_cast<int64_t>(batch->members.size());
  if (observer_ != nullptr) observer_->OnInFlight(count);
  batch->started = absl::Now();
  RunRange(batch, 0, batch->members.size());
  {
    absl::MutexLock lock(&mu_);
    running_.erase(std::find(running_.begin(), running_.end(), batch));
  }
  if (observer_ != nullptr) observer_->OnInFlight(-count);
}

void ModelBatcher::RunRange(RunningBatch* batch, size_t begin, size_t end) {
  {
    // Stop may have answered them all already; then the work is pointless.
    absl::MutexLock lock(&mu_);
    bool any = false;
    for (size_t i = begin; i < end && !any; ++i) any = !batch->members[i].answered;
    if (!any) return;
  }
  uint32_t outputs = 0;
  int64_t real_tokens = 0;
  int64_t longest = 0;
  for (size_t i = begin; i < end; ++i) {
    const RunningBatch::Member& member = batch->members[i];
    outputs |= member.outputs;
    real_tokens += member.length;
    longest = std::max<int64_t>(longest, member.length);
  }
  const int64_t padded_tokens = static_cast<int64_t>(end - begin) * longest;

  std::vector<SequenceInput> part;
  const std::vector<SequenceInput>* inputs = &batch->inputs;
  if (begin != 0 || end != batch->inputs.size()) {
    part.assign(batch->inputs.begin() + begin, batch->inputs.begin() + end);
    inputs = &part;
  }

  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<SequenceOutput>> result;
  RunTimings stages;
  try {
    result = batch->backend->RunTimed(*inputs, outputs, &stages);
  } catch (const std::exception& e) {
    result = absl::InternalError(absl::StrCat("backend threw: ", e.what()));
  } catch (...) {
    result = absl::InternalError("backend threw an unknown exception");
  }
  const absl::Time finished = absl::Now();
  if (result.ok() && result->size() != end - begin) {
    result = absl::InternalError(absl::StrCat("backend returned ", result->size(),
                                              " outputs for ", end - begin, " sequences"));
  }

  if (observer_ != nullptr) {
    BatchStats stats;
    stats.batch_size = static_cast<int32_t>(end - begin);
    stats.real_tokens = real_tokens;
    stats.padded_tokens = padded_tokens;
    stats.queue_times.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) stats.queue_times.push_back(batch->members[i].queue);
    stats.inference = finished - start;
    stats.stages = stages;
    stats.status = result.status().code();
    if (!result.ok()) stats.error = std::string(result.status().message());
    observer_->OnBatch(stats);
  }

  if (absl::IsResourceExhausted(result.status()) && end - begin > 1) {
    const size_t mid = begin + (end - begin) / 2;
    RunRange(batch, begin, mid);
    RunRange(batch, mid, end);
    return;
  }
  Deliver(batch, begin, end, std::move(result), finished, padded_tokens);
}

void ModelBatcher::Deliver(RunningBatch* batch, size_t begin, size_t end,
                           absl::StatusOr<std::vector<SequenceOutput>> result,
                           absl::Time finished, int64_t padded_tokens) {
  std::vector<std::pair<size_t, DoneFn>> callbacks;
  callbacks.reserve(end - begin);
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = begin; i < end; ++i) {
      RunningBatch::Member& member = batch->members[i];
      if (member.answered) continue;
      member.answered = true;
      callbacks.emplace_back(i, std::move(member.done));
    }
  }
  absl::Status failure;
  if (!result.ok()) {
    failure = absl::Status(result.status().code(),
                           absl::StrCat("batch failed: ", std::string(result.status().message())));
  }
  for (auto& [index, done] : callbacks) {
    const RunningBatch::Member& member = batch->members[index];
    TaskTiming timing;
    timing.queue = member.queue;
    timing.inference = finished - batch->started;
    timing.batch_size = static_cast<int32_t>(end - begin);
    timing.batch_padded_tokens = padded_tokens;
    if (!result.ok()) {
      done(failure, timing);
      continue;
    }
    SequenceOutput output = std::move((*result)[index - begin]);
    KeepRequested(member.outputs, &output);
    done(std::move(output), timing);
  }
}

}  // namespace relserve
