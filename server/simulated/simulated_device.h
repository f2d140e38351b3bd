#ifndef RELSERVE_SERVER_SIMULATED_SIMULATED_DEVICE_H_
#define RELSERVE_SERVER_SIMULATED_SIMULATED_DEVICE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace relserve {

// What one GPU takes to run one model, in the seconds of the real device (before any scale).
// The profile "h100-deberta-v3-base" follows the H100 measurements of docs/PERFORMANCE.md
// (DeBERTa-v3-base, bfloat16): a batch of B sequences padded to L tokens keeps the device busy
// fixed + per_token * B * L + per_attention * B * L^2 (32 x 128: 5.3 ms, measured 5.0; 32 x 512:
// 29.8 ms, measured 30.5), and the host takes eager_launch to queue an eager forward's kernels
// (1 x 128: 4.49 ms, launch-bound) or graph_launch to replay a CUDA graph.
struct SimulatedDeviceProfile {
  std::string name;
  // The model it stands for (ModelInfo).
  std::string architecture;
  int hidden_size = 0, num_layers = 0, vocab_size = 0, max_length = 0;
  double fixed_seconds = 0;
  double per_token_seconds = 0;
  double per_attention_seconds = 0;  // per B * L^2
  double eager_launch_seconds = 0;
  double graph_launch_seconds = 0;
  // Batches whose rounded size x L is at most this replay a graph (the server's default
  // --cuda-graph-tokens).
  int64_t graph_tokens = 0;
  double copy_seconds = 0;  // per batch: the inputs in and the results out

  double DeviceSeconds(int64_t batch, int64_t length) const;
  // Real tokens per device second with the device always busy: full batches (min(max_batch_size,
  // max_batch_tokens / L) sequences of exactly L tokens, as DeviceBatchSize rounds them) of
  // lengths spread evenly over the tokens of [8, 512], the serving benchmark's workload
  // (scripts/bench-batching-ceiling.sh's workload_full_tps on the real device).
  double SaturatedTokensPerSecond(int max_batch_size, int64_t max_batch_tokens) const;
};

// The profiles known: "h100-deberta-v3-base". NOT_FOUND naming them otherwise.
absl::StatusOr<SimulatedDeviceProfile> FindSimulatedProfile(std::string_view name);

// A --model value "simulated:PROFILE[,scale=S][,cold-ms=C][,graphs=0|1]":
//   scale    every simulated time is slept S times longer in wall time (default 20), so that
//            this machine's gRPC, batcher and client keep up with a device S times slower;
//   cold-ms  host milliseconds (before the scale) added to the first batch of each (thread,
//            batch size, length): a library's per-thread, per-shape first-call work such as
//            cuDNN's execution plans (default 0);
//   graphs   0 runs every batch eagerly (default 1: CUDA graphs as the profile says).
struct SimulatedDeviceSpec {
  SimulatedDeviceProfile profile;
  double scale = 20;
  double cold_ms = 0;
  bool graphs = true;
  std::string Describe() const;  // "simulated:h100-deberta-v3-base,scale=20,cold-ms=0,graphs=1"
};
bool IsSimulatedModel(std::string_view model);  // starts with "simulated:"
// INVALID_ARGUMENT naming the part and what is accepted; NOT_FOUND for an unknown profile.
absl::StatusOr<SimulatedDeviceSpec> ParseSimulatedDeviceSpec(std::string_view model);

// One device's clock: work runs one piece at a time, in the order it was queued, and each piece
// is slept for, never spun. Thread-safe.
class SimulatedDevice {
 public:
  // Queues `work` that may start at `ready` (and not before the work queued before it is done)
  // and whose batch cannot finish before `not_before` (its launch's end); sleeps until the batch
  // finishes and returns that time. The busy time grows by `work`; the device is free for the
  // next piece once `work` is done, even while this batch's launch goes on (two workers' streams
  // interleave).
  absl::Time Enqueue(absl::Time ready, absl::Duration work, absl::Time not_before);
  absl::Duration busy() const;

 private:
  mutable absl::Mutex mu_;
  absl::Time free_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration busy_ ABSL_GUARDED_BY(mu_);
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_SIMULATED_SIMULATED_DEVICE_H_
