#ifndef RELSERVE_SERVER_MODEL_RUNTIME_DEVICE_GRAPH_H_
#define RELSERVE_SERVER_MODEL_RUNTIME_DEVICE_GRAPH_H_

#include <functional>
#include <memory>

#include <c10/core/Device.h>

#include "absl/status/statusor.h"

namespace relserve {

// Work on a GPU captured once and replayed with one launch (a CUDA graph, through LibTorch's
// at::cuda::CUDAGraph): what `work` queued on the capturing thread's current stream (never the
// default one) runs again on each Replay, reading and writing the same memory. Tensors that
// `work` leaves behind (its outputs) are rewritten in place by each replay; what it allocated
// and freed comes from the graph's private memory pool.
//
// On the CPU, where the caller asks for the stand-in (`cpu_stand_in`: EngineKernels::
// device_graphs_on_cpu, tests), a graph is `work` itself, run again on each replay, so that what
// is built around graphs is tested without a GPU: callers must read a replay's outputs from where
// `work` stores them, after Replay.
class DeviceGraph {
 public:
  // Runs `work` once, capturing it, with the calling thread's stream current on `device`.
  // `share_pool_of`: a graph whose memory pool this one shares (graphs sharing a pool must not
  // replay at the same time), or null for a pool of its own. FAILED_PRECONDITION where graphs
  // are not available on `device` (DeviceGraphsAvailable(device, cpu_stand_in)); INTERNAL when
  // the capture fails (the work synchronised with the host, for one), with CUDA's message.
  static absl::StatusOr<std::unique_ptr<DeviceGraph>> Capture(const c10::Device& device,
                                                              std::function<void()> work,
                                                              DeviceGraph* share_pool_of,
                                                              bool cpu_stand_in = false);
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  // Queues the captured work on the calling thread's current stream.
  void Replay();

 private:
  DeviceGraph();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether DeviceGraph::Capture works on `device`: a CUDA device in a build with CUDA, or the CPU
// with `cpu_stand_in`.
bool DeviceGraphsAvailable(const c10::Device& device, bool cpu_stand_in = false);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_RUNTIME_DEVICE_GRAPH_H_
