#ifndef RELSERVE_SERVER_BATCHING_BATCH_OBSERVER_H_
#define RELSERVE_SERVER_BATCHING_BATCH_OBSERVER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/backend/inference_backend.h"

namespace relserve {

// One backend call. An out-of-memory batch that is split and retried reports one BatchStats
// per call: the failed one (status RESOURCE_EXHAUSTED) and each retried half.
struct BatchStats {
  int32_t batch_size = 0;
  int64_t real_tokens = 0;    // sum of the sequences' lengths
  int64_t padded_tokens = 0;  // batch_size x longest length
  std::vector<absl::Duration> queue_times;  // per sequence: from Submit until taken into the batch
  absl::Duration inference;   // this backend call
  RunTimings stages;          // where the backend says its time went (zero where it does not measure)
  absl::StatusCode status = absl::StatusCode::kOk;
  std::string error;  // the status message when the call failed
};

enum class DropReason {
  kDeadlineExceeded,  // the deadline passed while queued
  kCancelled,         // the caller went away while queued
  kQueueFull,         // Submit refused: max_queue_sequences
  kShutdown,          // Submit refused after Stop began, or failed when Stop's grace ran out
};

// What the metrics layer learns from a ModelBatcher. Methods are called from worker threads and
// Submit's/Stop's callers, never under the batcher's queue lock, possibly concurrently; they
// must be cheap, must not block and must not call back into the batcher.
class BatchObserver {
 public:
  virtual ~BatchObserver() = default;

  virtual void OnBatch(const BatchStats& stats) = 0;
  // Once per sequence.
  virtual void OnDropped(DropReason reason) = 0;
  // The number of queued sequences after a change. Reports never go backwards in time: the
  // last one seen is the current depth.
  virtual void OnQueueDepth(size_t sequences) = 0;
  // Sequences taken from the queue into a batch and not yet answered: +n when a worker takes
  // a batch of n, -n when it has finished with it.
  virtual void OnInFlight(int64_t delta) = 0;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_BATCHING_BATCH_OBSERVER_H_
