#ifndef RELSERVE_SERVER_UTIL_PROCESS_TUNING_H_
#define RELSERVE_SERVER_UTIL_PROCESS_TUNING_H_

namespace relserve {

// Process-wide settings that make CPU inference fast; call first thing in main().
//
// 1. OpenMP threads wait passively. LibTorch's OpenMP pool otherwise spins after each
//    parallel region, competing for the cores with OpenBLAS's own threads: a batch of one
//    128-token sequence ran 3x slower. libgomp reads OMP_WAIT_POLICY only when it loads, so
//    when the variable is unset this sets it and re-executes the program once (a policy the
//    user set is kept).
// 2. Large tensors are reused instead of mapped anew. glibc serves blocks over 32 MB with
//    mmap and unmaps them on free, so every layer's activations were fresh pages the kernel
//    had to zero (about 400 MB per layer at batch 32 x 128 for a base model, a quarter of the
//    time). Disabling mmap and trimming keeps freed memory for reuse; the process then holds
//    on to its peak memory. RELSERVE_MALLOC_DEFAULTS=1 keeps glibc's defaults.
void TuneProcessForInference(char** argv);

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_PROCESS_TUNING_H_
