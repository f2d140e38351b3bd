#ifndef RELSERVE_SERVER_BATCHING_WARM_UP_H_
#define RELSERVE_SERVER_BATCHING_WARM_UP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "server/backend/inference_backend.h"

namespace relserve {

// Runs the model `name` once at each of the backend's WarmUpLengths(max_length), a batch of
// two sequences, before it serves, so that the first real requests do not pay for allocator
// growth and kernel selection (as Triton's model warm-up does, beside the scheduler). Each run
// asks for what requests ask for: the pooled output and, for a model with a classification
// head, the logits.
//
// It is also the start's check that the model computes numbers: a model whose outputs hold NaN
// or infinity would report SERVING and then fail every request (INTERNAL). Errors, each naming
// the model and the length:
// - a run that fails: its code, "model m: warm-up at 16 tokens failed: ...";
// - outputs that are not finite: FAILED_PRECONDITION, "model m: warm-up at 16 tokens gave NaN
//   in the pooled output (32 of 32 values): ..." with the likely causes;
// - CANCELLED as soon as `stop` returns true (polled before each length).
// With --warmup false nothing runs, and nothing is checked.
absl::Status WarmUp(InferenceBackend& engine, const std::string& name, int max_length,
                    const std::function<bool()>& stop);

// Every shape a batch can run at, on the calling thread (a worker's, before it takes work, for
// backends that WarmsUpPerThread): each of the backend's WarmUpBatchSizes(max_batch_size) at
// each of its WarmUpLengths(max_length) whose padded tokens (size x length) fit
// max_batch_tokens, largest lengths first. The outputs are not checked (WarmUp does that once).
// Errors as WarmUp's, naming the shape ("warm-up at 8 x 128 tokens failed: ..."); CANCELLED as
// soon as `stop` returns true. On OK, `shapes` (when not null) is the number of shapes run.
absl::Status WarmUpWorker(InferenceBackend& backend, const std::string& name, int max_length, int max_batch_size,
                          int64_t max_batch_tokens, const std::function<bool()>& stop, int* shapes = nullptr);

}  // namespace relserve

#endif  // RELSERVE_SERVER_BATCHING_WARM_UP_H_
