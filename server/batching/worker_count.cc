#include "server/batching/worker_count.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace relserve {

absl::StatusOr<CpuWorkers> ResolveWorkers(int cpus, const std::string& device, int workers_per_device,
                                          int threads_per_worker, DType dtype) {
  if (device == "cpu") return ResolveCpuWorkers(cpus, workers_per_device, threads_per_worker, dtype);
  // A GPU: the workers queue batches on their own streams, so that one prepares and copies
  // while another computes; their host threads only run the small operations left on the CPU.
  CpuWorkers r;
  r.workers = workers_per_device > 0 ? workers_per_device : kAutoGpuWorkers;
  r.threads = threads_per_worker > 0 ? threads_per_worker : std::max(1, std::max(1, cpus) / r.workers);
  return r;
}

absl::StatusOr<CpuWorkers> ResolveWorkersPerCopy(int cpus, const std::vector<std::string>& devices,
                                                 int workers_per_device, int threads_per_worker, DType dtype) {
  if (devices.empty()) return absl::InvalidArgumentError("--device: no device");
  const int copies = static_cast<int>(devices.size());
  return ResolveWorkers(std::max(1, cpus / copies), devices.front(), workers_per_device, threads_per_worker, dtype);
}

absl::StatusOr<CpuWorkers> ResolveCpuWorkers(int cpus, int workers_per_device, int threads_per_worker,
                                             DType dtype) {
  cpus = std::max(1, cpus);
  CpuWorkers r;
  if (dtype != DType::kFloat32 && workers_per_device == 0 && threads_per_worker == 0) {
    r.threads = cpus;
    return r;
  }
  if (workers_per_device > 0 && threads_per_worker > 0) {
    r.workers = workers_per_device;
    r.threads = threads_per_worker;
  } else if (workers_per_device > 0) {
    r.workers = workers_per_device;
    r.threads = std::max(1, cpus / workers_per_device);
  } else if (threads_per_worker > 0) {
    r.threads = threads_per_worker;
    r.workers = std::max(1, cpus / threads_per_worker);
  } else {
    r.workers = std::min(cpus, kAutoMaxWorkers);
    r.threads = std::max(1, cpus / r.workers);
  }
  return r;
}

}  // namespace relserve
