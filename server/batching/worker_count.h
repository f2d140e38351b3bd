#ifndef RELSERVE_SERVER_BATCHING_WORKER_COUNT_H_
#define RELSERVE_SERVER_BATCHING_WORKER_COUNT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend/model_types.h"

namespace relserve {

// Workers per model and compute threads per worker on `cpus` CPUs for `dtype`; 0 asks for the
// automatic choice. Both automatic: in float32, one single-threaded worker per CPU, at most
// kAutoMaxWorkers, with the CPUs shared out among them (several batches side by side use small
// CPUs better than one batch spread over all of them; docs/PERFORMANCE.md). One automatic: the
// other divides the CPUs. Both given: taken as they are.
// `own_projections`: the dtype's projections run in relserve's own kernels on the CPU (bfloat16 with
// EngineKernels::packed_bfloat16_gemm on a CPU with AMX-BF16 or AVX512-BF16; int8 with EngineKernels::packed_int8_gemm
// on an x86-64 CPU with AMX-INT8, AVX-512 VNNI or AVX2). bfloat16 and int8 then take float32's rules: their batches run side by side
// (two single-thread bfloat16 workers serve 1.7x one two-thread worker at 8 callers;
// docs/PERFORMANCE.md). Otherwise bfloat16, and float16, run one worker over every CPU, and more
// workers (or more CPU copies of the model, ResolveWorkersPerCopy) are refused (INVALID_ARGUMENT):
// two bfloat16 batches at once through LibTorch 1.13's oneDNN linear crashed a server (a
// segmentation fault under 8 callers; docs/PERFORMANCE.md); and int8 through oneDNN's quantized
// linear, both automatic, runs one worker over every CPU, more when asked for
// (tests/model/concurrent_batches_test and the int8 server test run them side by side).
// Whether the CPU runs one batch of `dtype` at a time (above).
bool OneBatchAtATimeOnCpu(DType dtype, bool own_projections = false);
inline constexpr int kAutoMaxWorkers = 4;
// Workers per GPU when --workers-per-device is 0.
inline constexpr int kAutoGpuWorkers = 2;
struct CpuWorkers {
  int workers = 1;
  int threads = 1;
};
absl::StatusOr<CpuWorkers> ResolveCpuWorkers(int cpus, int workers_per_device, int threads_per_worker,
                                             DType dtype, bool own_projections = false);
// ResolveCpuWorkers on the CPU; on a GPU ("cuda", "cuda:N"), --workers-per-device or
// kAutoGpuWorkers workers sharing the CPUs.
absl::StatusOr<CpuWorkers> ResolveWorkers(int cpus, const std::string& device, int workers_per_device,
                                          int threads_per_worker, DType dtype, bool own_projections = false);
// The workers of each copy of a model when it runs a copy on each of `devices` (the items of
// --device, ExpandDeviceList's: all CPU or all GPUs), the `cpus` shared out among the copies:
// ResolveWorkers on the first device with cpus / copies (at least 1). INVALID_ARGUMENT for no
// device.
absl::StatusOr<CpuWorkers> ResolveWorkersPerCopy(int cpus, const std::vector<std::string>& devices,
                                                 int workers_per_device, int threads_per_worker, DType dtype,
                                                 bool own_projections = false);

}  // namespace relserve

#endif  // RELSERVE_SERVER_BATCHING_WORKER_COUNT_H_
