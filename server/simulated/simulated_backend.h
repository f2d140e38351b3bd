#ifndef RELSERVE_SERVER_SIMULATED_SIMULATED_BACKEND_H_
#define RELSERVE_SERVER_SIMULATED_SIMULATED_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/backend/inference_backend.h"
#include "server/simulated/simulated_device.h"

namespace relserve {

// A model on a simulated GPU (--model NAME=simulated:PROFILE, simulated_device.h): no weights
// and no arithmetic, only the time a GPU would take, so that the worker pool, the batcher and the
// transports can be measured against a device on a machine without one. Each batch, on its
// worker's thread:
//   1. its shape as a GPU batch runs it: the length rounded by DeviceBatchLength, the size by
//      DeviceBatchSize (device_shapes.h), and, where that many rows times the length is within
//      the profile's graph_tokens, a CUDA graph of that size (as the engine captures them);
//   2. the host's launch: eager_launch or graph_launch seconds slept on the worker's thread (plus
//      cold_ms the first time this thread runs this shape);
//   3. the device: DeviceSeconds(rows, length) + copy_seconds on the one device clock shared by
//      every worker (SimulatedDevice), starting as the launch starts (an eager forward's kernels
//      run while it launches the rest) and finishing no earlier than the launch ends;
//   4. outputs: pooled [hidden] = (sum of ids, count, 1, 0, ...), logits where the profile has labels.
// Every simulated time is slept `scale` times longer. `on_busy` (may be empty) is called with
// each batch's device seconds in wall time (the server's relserve_simulated_device_busy_seconds_total).
class SimulatedBackend : public InferenceBackend {
 public:
  SimulatedBackend(SimulatedDeviceSpec spec, std::function<void(double)> on_busy);

  const ModelInfo& info() const override { return info_; }
  absl::Status Validate(const SequenceInput& sequence) const override;
  absl::StatusOr<std::vector<SequenceOutput>> Run(const std::vector<SequenceInput>& batch, uint32_t outputs) override;
  absl::StatusOr<std::vector<SequenceOutput>> RunTimed(const std::vector<SequenceInput>& batch, uint32_t outputs,
                                                       RunTimings* timings) override;
  std::vector<int> WarmUpLengths(int max_length) const override;
  bool WarmsUpPerThread() const override { return true; }
  std::vector<int> WarmUpBatchSizes(int max_batch_size) const override;

  const SimulatedDeviceSpec& spec() const { return spec_; }
  // Wall seconds the device has been busy, and batches that paid the cold cost.
  double busy_seconds() const { return absl::ToDoubleSeconds(device_.busy()); }
  int64_t cold_batches() const;
  // The rows and length a batch of `batch` sequences whose longest has `length` tokens runs at,
  // and whether it replays a graph.
  struct Shape {
    int64_t rows = 0, length = 0;
    bool graph = false;
  };
  Shape ShapeOf(int64_t batch, int64_t length) const;

 private:
  const SimulatedDeviceSpec spec_;
  const std::function<void(double)> on_busy_;
  ModelInfo info_;
  SimulatedDevice device_;
  mutable absl::Mutex cold_mu_;
  std::set<std::tuple<std::thread::id, int64_t, int64_t>> warm_shapes_ ABSL_GUARDED_BY(cold_mu_);
  int64_t cold_batches_ ABSL_GUARDED_BY(cold_mu_) = 0;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_SIMULATED_SIMULATED_BACKEND_H_
