#include "server/model/runtime/device_graph.h"

#include <exception>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

#ifdef RELSERVE_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <torch/version.h>
// capture_begin takes a capture mode from LibTorch 2.0 on.
#if TORCH_VERSION_MAJOR >= 2
#define RELSERVE_GRAPH_CAPTURE_MODE , cudaStreamCaptureModeThreadLocal
#else
#define RELSERVE_GRAPH_CAPTURE_MODE
#endif
#endif

namespace relserve {

struct DeviceGraph::Impl {
  std::function<void()> work;  // the CPU's stand-in for a graph
#ifdef RELSERVE_WITH_CUDA
  std::unique_ptr<at::cuda::CUDAGraph> graph;
#endif
};

DeviceGraph::DeviceGraph() : impl_(std::make_unique<Impl>()) {}
DeviceGraph::~DeviceGraph() = default;

bool DeviceGraphsAvailable(const c10::Device& device, bool cpu_stand_in) {
  if (device.is_cpu()) return cpu_stand_in;
#ifdef RELSERVE_WITH_CUDA
  return device.is_cuda();
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<DeviceGraph>> DeviceGraph::Capture(const c10::Device& device,
                                                                   std::function<void()> work,
                                                                   DeviceGraph* share_pool_of,
                                                                   bool cpu_stand_in) {
  if (!DeviceGraphsAvailable(device, cpu_stand_in)) {
    return absl::FailedPreconditionError(absl::StrCat("no device graphs on ", device.str()));
  }
  std::unique_ptr<DeviceGraph> graph(new DeviceGraph());
  if (device.is_cpu()) {
    try {
      work();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("graph capture: ", e.what()));
    }
    graph->impl_->work = std::move(work);
    return graph;
  }
#ifdef RELSERVE_WITH_CUDA
  graph->impl_->graph = std::make_unique<at::cuda::CUDAGraph>();
  at::cuda::CUDAGraph& g = *graph->impl_->graph;
  try {
    // Thread-local capture (LibTorch 2): other threads' work on the device (other workers)
    // goes on while this one captures.
    if (share_pool_of != nullptr) {
      g.capture_begin(share_pool_of->impl_->graph->pool() RELSERVE_GRAPH_CAPTURE_MODE);
    } else {
      g.capture_begin({0, 0} RELSERVE_GRAPH_CAPTURE_MODE);
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("graph capture did not start: ", e.what()));
  }
  std::string failed;
  try {
    work();
  } catch (const std::exception& e) {
    failed = e.what();
  }
  try {
    g.capture_end();  // ends the stream's capture even after a failed work()
  } catch (const std::exception& e) {
    if (failed.empty()) failed = e.what();
  }
  if (!failed.empty()) return absl::InternalError(absl::StrCat("graph capture: ", failed));
  return graph;
#else
  (void)share_pool_of;
  return absl::FailedPreconditionError("no device graphs in this build");
#endif
}

void DeviceGraph::Replay() {
#ifdef RELSERVE_WITH_CUDA
  if (impl_->graph) {
    impl_->graph->replay();
    return;
  }
#endif
  impl_->work();
}

}  // namespace relserve
