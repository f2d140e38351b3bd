#ifndef RELSERVE_SERVER_SERVING_SEQUENCE_SUBMITTER_H_
#define RELSERVE_SERVER_SERVING_SEQUENCE_SUBMITTER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/backend/inference_backend.h"
#include "server/metrics/server_metrics.h"
#include "server/serving/model_registry.h"

namespace relserve {

// What the sequences of one request came back with.
struct RequestResults {
  std::vector<SequenceOutput> outputs;  // in submission order
  absl::Duration max_queue;             // longest wait for a batch
  absl::Duration max_inference;         // longest batch the request took part in
};

// Splits a request into one batcher task per sequence (they may land in different batches)
// and calls `done` exactly once: with every output, or with the first error (queue full,
// deadline, cancellation, a failed batch). `done` runs on a worker thread, or on the calling
// thread when the batcher refuses the request outright.
//
// A sequence whose outputs are not all finite (NaN or infinity: broken weights, or an overflow
// in reduced precision) fails the request with INTERNAL naming the model and the sequence,
// rather than answering numbers that mean nothing; each such sequence is counted in
// `metrics` (may be null) as relserve_nonfinite_outputs_total.
void SubmitSequences(const ServedModel& model, std::vector<SequenceInput> sequences, uint32_t outputs,
                     absl::Time deadline, std::shared_ptr<const std::atomic<bool>> cancelled,
                     ServerMetrics* metrics, std::function<void(absl::StatusOr<RequestResults>)> done);

// Whether every value `out` carries is finite.
bool AllFinite(const SequenceOutput& out);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_SEQUENCE_SUBMITTER_H_
