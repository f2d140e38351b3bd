#ifndef RELSERVE_SERVER_BATCHING_SEQUENCE_TASK_H_
#define RELSERVE_SERVER_BATCHING_SEQUENCE_TASK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/backend/inference_backend.h"

namespace relserve {

// How one sequence went through the batcher.
struct TaskTiming {
  absl::Duration queue;      // from Submit until a worker took it into a batch (or dropped it)
  absl::Duration inference;  // from the batch's first backend call until its result
                             // (out-of-memory retries included); zero if it never ran
  int32_t batch_size = 0;    // sequences in the backend call that produced the result
  int64_t batch_padded_tokens = 0;  // that call's count x longest length
};

// One sequence to run, and where its result goes.
struct SequenceTask {
  SequenceInput input;  // must not be empty
  uint32_t outputs = 0;  // OutputFlag bits; the result holds only these fields
  absl::Time deadline = absl::InfiniteFuture();  // dropped with DEADLINE_EXCEEDED if still queued then
  std::shared_ptr<const std::atomic<bool>> cancelled;  // may be null; true = the caller has gone
  // Called exactly once, from a worker thread (or from Submit's caller on rejection paths that
  // accepted the task). Must not block.
  std::function<void(absl::StatusOr<SequenceOutput>, const TaskTiming&)> done;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_BATCHING_SEQUENCE_TASK_H_
