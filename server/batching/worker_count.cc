#include "server/batching/worker_count.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace relserve {
namespace {

constexpr const char* kOneBatchReason =
    "two bfloat16 batches at once through LibTorch 1.13's oneDNN kernels crashed a server with two bfloat16 "
    "workers under 8 callers; relserve's own bfloat16 GEMM, on a CPU with AMX-BF16 and --bfloat16-gemm auto, "
    "runs them side by side";

}  // namespace

bool OneBatchAtATimeOnCpu(DType dtype, bool own_projections) {
  return (dtype == DType::kBFloat16 && !own_projections) || dtype == DType::kFloat16;
}

absl::StatusOr<CpuWorkers> ResolveWorkers(int cpus, const std::string& device, int workers_per_device,
                                          int threads_per_worker, DType dtype, bool own_projections) {
  if (device == "cpu") {
    return ResolveCpuWorkers(cpus, workers_per_device, threads_per_worker, dtype, own_projections);
  }
  // A GPU: the workers queue batches on their own streams, so that one prepares and copies
  // while another computes; their host threads only run the small operations left on the CPU.
  CpuWorkers r;
  r.workers = workers_per_device > 0 ? workers_per_device : kAutoGpuWorkers;
  r.threads = threads_per_worker > 0 ? threads_per_worker : std::max(1, std::max(1, cpus) / r.workers);
  return r;
}

absl::StatusOr<CpuWorkers> ResolveWorkersPerCopy(int cpus, const std::vector<std::string>& devices,
                                                 int workers_per_device, int threads_per_worker, DType dtype,
                                                 bool own_projections) {
  if (devices.empty()) return absl::InvalidArgumentError("--device: no device");
  const int copies = static_cast<int>(devices.size());
  if (copies > 1 && devices.front() == "cpu" && OneBatchAtATimeOnCpu(dtype, own_projections)) {
    return absl::InvalidArgumentError(absl::StrCat("--device ", absl::StrJoin(devices, ","), " with --dtype ",
                                                   DTypeName(dtype), ": on the CPU, ", DTypeName(dtype),
                                                   " runs one batch at a time (", kOneBatchReason,
                                                   "); list the CPU once"));
  }
  return ResolveWorkers(std::max(1, cpus / copies), devices.front(), workers_per_device, threads_per_worker, dtype,
                        own_projections);
}

absl::StatusOr<CpuWorkers> ResolveCpuWorkers(int cpus, int workers_per_device, int threads_per_worker,
                                             DType dtype, bool own_projections) {
  cpus = std::max(1, cpus);
  CpuWorkers r;
  if (OneBatchAtATimeOnCpu(dtype, own_projections)) {
    if (workers_per_device > 1) {
      return absl::InvalidArgumentError(absl::StrCat("--workers-per-device ", workers_per_device, " with --dtype ",
                                                     DTypeName(dtype), ": on the CPU, ", DTypeName(dtype),
                                                     " runs one worker (", kOneBatchReason,
                                                     "); float32 and int8 take several, and so does bfloat16 on a CPU with AMX-BF16"));
    }
    r.threads = threads_per_worker > 0 ? threads_per_worker : cpus;
    return r;
  }
  if (dtype == DType::kInt8 && !own_projections && workers_per_device == 0 && threads_per_worker == 0) {
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
