#ifndef RELSERVE_SERVER_BATCHING_MODEL_BATCHER_H_
#define RELSERVE_SERVER_BATCHING_MODEL_BATCHER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/backend/inference_backend.h"
#include "server/batching/batch_observer.h"
#include "server/batching/batch_policy.h"
#include "server/batching/sequence_task.h"

namespace relserve {

struct BatcherConfig {
  BatchPolicyConfig policy;
  int num_workers = 1;  // per backend
  size_t max_queue_sequences = 10000;
  std::function<void()> on_worker_start;  // run first on each worker thread (e.g. set thread counts); may be empty
  // For backends that WarmsUpPerThread (a GPU): each worker runs WarmUpWorker (warm_up.h) on
  // its own thread after on_worker_start and before it takes work: every batch size and length
  // a batch can run at within `policy`'s limits. Create returns once every worker has, and fails
  // with the first worker's error (naming `model_name`); CANCELLED when `stop` returns true.
  bool warm_up_workers = false;
  std::string model_name;
  std::function<bool()> stop;
};

// The queue and workers of one model. Submitted sequences wait in one queue (arrival order);
// a free worker drops the expired (DEADLINE_EXCEEDED) and cancelled (CANCELLED) ones, asks
// DecideBatch for a batch, and either takes it or sleeps until the decision's wake_at or a new
// arrival. The queue lock is held only for those steps: backend calls, `done` callbacks and
// observer calls run outside it.
//
// A worker runs its batch with the union of its tasks' output flags. On RESOURCE_EXHAUSTED the
// batch is split in halves and each half retried, down to single sequences, before the
// sequences fail; any other error fails that batch's tasks with the backend's code and the
// message prefixed "batch failed: ", and the worker goes on with the next batch.
class ModelBatcher {
 public:
  // Starts num_workers worker threads. INVALID_ARGUMENT for a bad config (a null backend,
  // num_workers < 1, max_queue_sequences < 1, or a policy ValidateBatchPolicyConfig refuses).
  // `backend` and `observer` (may be null) must outlive the batcher.
  static absl::StatusOr<std::unique_ptr<ModelBatcher>> Create(InferenceBackend* backend,
                                                              BatcherConfig config,
                                                              BatchObserver* observer);
  // One queue fed to several copies of a model (one per device, the same weights): num_workers
  // workers run on each backend, and whichever worker is free takes the next batch. INVALID_ARGUMENT
  // also for no backends, or for backends whose ModelInfo disagree on what a sequence may be
  // (max_length, vocab_size, type_vocab_size).
  static absl::StatusOr<std::unique_ptr<ModelBatcher>> Create(std::vector<InferenceBackend*> backends,
                                                              BatcherConfig config,
                                                              BatchObserver* observer);

  ModelBatcher(const ModelBatcher&) = delete;
  ModelBatcher& operator=(const ModelBatcher&) = delete;

  ~ModelBatcher();  // Stop(absl::ZeroDuration()) if not stopped

  // Queues `tasks`, all or nothing. INVALID_ARGUMENT if a task has no `done` or no input ids,
  // or if there are more tasks than max_queue_sequences (they could never be queued);
  // RESOURCE_EXHAUSTED (naming max_queue_sequences) when the tasks would push the queue past
  // max_queue_sequences; UNAVAILABLE after Stop began. Then no task is accepted and no callback
  // runs. On OK every task's `done` runs exactly once, later, on a worker thread (or on Stop's
  // caller, for what Stop fails); never inside Submit.
  absl::Status Submit(std::vector<SequenceTask> tasks);

  // Stops accepting, lets queued and running work finish for up to `grace` (queued sequences go
  // at once, without waiting for company), then fails what is left, queued or running, with
  // UNAVAILABLE, and joins the worker threads. A backend call cannot be interrupted: if one is
  // still running when the grace ends, its tasks are answered UNAVAILABLE at once (its result
  // is discarded) and Stop returns when the call does. Safe to call twice, and concurrently.
  void Stop(absl::Duration grace);

  // Sequences queued and not yet taken by a worker.
  size_t queue_depth() const;

  // With warm_up_workers: how long the workers' warm-ups took (from Create's start to the last
  // one's end) and the shapes each ran; zero otherwise.
  absl::Duration warm_up_time() const { return warm_up_time_; }
  int warm_up_shapes_per_worker() const { return warm_up_shapes_; }

 private:
  struct Queued;
  struct RunningBatch;
  struct Dropped;

  ModelBatcher(std::vector<InferenceBackend*> backends, BatcherConfig config, BatchObserver* observer);

  void WorkerLoop(InferenceBackend* backend);
  // WarmUpWorker on the calling worker thread, reported to Create (warm_mu_).
  void WarmUpThisWorker(InferenceBackend* backend);
  // Moves expired and cancelled tasks out of the queue.
  void CollectDroppedLocked(absl::Time now, std::vector<Dropped>* dropped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeLocked(const std::vector<size_t>& indices, absl::Time now, RunningBatch* batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Execute(RunningBatch* batch);
  void RunRange(RunningBatch* batch, size_t begin, size_t end);
  void Deliver(RunningBatch* batch, size_t begin, size_t end,
               absl::StatusOr<std::vector<SequenceOutput>> result, absl::Time finished,
               int64_t padded_tokens);
  bool DrainedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Bumps the depth report sequence number; call ReportDepth with the pair after unlocking.
  uint64_t NoteDepthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReportDepth(uint64_t seq, size_t depth) ABSL_LOCKS_EXCLUDED(mu_);

  const std::vector<InferenceBackend*> backends_;
  const BatcherConfig config_;
  BatchPolicyConfig drain_policy_;  // config_.policy without the queue delay, used while stopping
  BatchObserver* const observer_;

  mutable absl::Mutex mu_;
  absl::CondVar work_cv_;  // new arrivals, Stop
  // Parallel vectors, arrival order.
  std::vector<Queued> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<PendingSequence> pending_ ABSL_GUARDED_BY(mu_);
  // Batches taken by workers and not yet finished; their tasks' `answered` flags and `done`
  // callbacks are guarded by mu_.
  std::vector<RunningBatch*> running_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // Submit refuses; queued work drains
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;   // grace over: workers exit
  uint64_t depth_seq_ ABSL_GUARDED_BY(mu_) = 0;

  absl::Mutex report_mu_ ABSL_ACQUIRED_AFTER(mu_);
  uint64_t reported_depth_seq_ ABSL_GUARDED_BY(report_mu_) = 0;

  absl::Mutex stop_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // serializes Stop
  bool joined_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::vector<std::thread> workers_;  // written by Create, joined under stop_mu_

  // The workers' warm-ups (warm_up_workers), waited for by Create.
  absl::Mutex warm_mu_;
  int warmed_workers_ ABSL_GUARDED_BY(warm_mu_) = 0;
  absl::Status warm_status_ ABSL_GUARDED_BY(warm_mu_);
  int warm_up_shapes_ = 0;        // written by the workers under warm_mu_, read after Create's wait
  absl::Duration warm_up_time_;  // written by Create after the wait
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_BATCHING_MODEL_BATCHER_H_
