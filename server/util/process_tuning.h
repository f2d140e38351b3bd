#ifndef RELSERVE_SERVER_UTIL_PROCESS_TUNING_H_
#define RELSERVE_SERVER_UTIL_PROCESS_TUNING_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/util/environment_reader.h"

namespace relserve {

// Where tensors' memory comes from, set by RELSERVE_ALLOCATOR:
// - cache (default): LibTorch's CPU tensors of 128 KiB and more come from relserve's buffer
//   cache (server/model/runtime/buffer_cache.h): each block its own mapping, released blocks reused,
//   the cache bounded by the peak in use at once and a quarter more. For the rest (request
//   bodies, JSON, answers), glibc maps blocks of 1 MiB and more on their own (a fixed
//   M_MMAP_THRESHOLD: malloc_mmap_threshold.h, which says why 1 MiB) and keeps no more arenas
//   than cores (M_ARENA_MAX), so that the large short-lived buffers of long requests go back to
//   the system instead of staying in the arena of the thread that served them.
// - heap: the setting before the cache: glibc serves every tensor from its heap, never maps
//   large blocks and never trims (mallopt M_MMAP_MAX 0, M_TRIM_THRESHOLD INT_MAX). As fast,
//   but under a mix of batch shapes the worker threads' arenas fragment and the resident size
//   climbs (docs/PERFORMANCE.md, "Memory under mixed lengths").
// - system: LibTorch's and glibc's defaults (large blocks mapped and unmapped every time).
enum class AllocatorMode { kCache, kHeap, kSystem };

// Reads RELSERVE_ALLOCATOR through `getenv` (unset or empty: cache). RELSERVE_MALLOC_DEFAULTS=1,
// the older switch, still means system when RELSERVE_ALLOCATOR is unset. INVALID_ARGUMENT names
// the variable, its value and the accepted values. The programs read it twice: at start
// (TuneProcessForInference, glibc's side) and with their flags (the engine's side,
// EngineOptions::allocator).
absl::StatusOr<AllocatorMode> AllocatorModeFromEnvironment(const GetEnv& getenv);

// The dtype the command line asks for (--dtype X or --dtype=X, the last one given), else
// RELSERVE_DTYPE's, else empty: what the programs' flags will read, seen before they are parsed.
std::string AskedDType(char** argv, const GetEnv& getenv);
// The same for any flag: --name X or --name=X, else RELSERVE_NAME (upper case, '-' as '_').
std::string AskedFlag(char** argv, const GetEnv& getenv, const std::string& name);

// Whether LibTorch's OpenMP threads should spin briefly before they sleep (GOMP_SPINCOUNT, below)
// for a process asked for `dtype` (empty: the default, float32): under bfloat16 and int8; under
// float32 where its forward makes no BLAS call, that is where the CPU's packed float32 GEMM takes
// every batch by default (`float32_takes_every_batch`: model/layers/packed_linear.h,
// DefaultPackedLinearMaxRows) and --float32-gemm is not `blas`.
bool ShortSpinFor(const std::string& dtype, bool float32_takes_every_batch, const std::string& float32_gemm);

// Process-wide settings that make CPU inference fast; call first thing in main(), with the
// process's environment (`getenv`: std::getenv's answers; every variable below is read through it).
//
// 1. OpenMP threads wait passively. LibTorch's OpenMP pool otherwise spins after each
//    parallel region, competing for the cores with OpenBLAS's own threads: a batch of one
//    128-token sequence ran 3x slower. libgomp reads OMP_WAIT_POLICY only when it loads, so
//    when the variable is unset this sets it and re-executes the program once (a policy the
//    user set is kept).
// 2. With --dtype int8 (or RELSERVE_DTYPE=int8), OpenBLAS's threads sleep as soon as they
//    are idle (OPENBLAS_THREAD_TIMEOUT=4) instead of yielding in a loop for up to 2^28 cycles:
//    the int8 products run on LibTorch's OpenMP threads, and OpenBLAS's, spinning between the
//    attention products they still compute, took a third of the CPU time of a base model's
//    8 x 128 batch. In float32, where OpenBLAS computes nearly everything, spinning is kept
//    (sleeping at once made one 128-token sequence about 5% slower). A value the user set is
//    kept; both variables are read when the libraries load, hence the one re-execution.
//    With --dtype bfloat16 or int8 (or RELSERVE_DTYPE), LibTorch's OpenMP threads also spin
//    briefly before they sleep (GOMP_SPINCOUNT=10000, about 0.1 ms), so that the next parallel
//    region of the same forward pass finds them awake: with a futex wake per region one
//    128-token sequence took 1.14-1.35x as long (docs/PERFORMANCE.md). In float32 they spin so
//    too where its forward makes no BLAS call (`float32_takes_every_batch`, ShortSpinFor: on an
//    AMD Zen 4 one 128-token sequence took 0.95 times as long), and sleep at once where OpenBLAS
//    computes the longer batches (the spin made those batches, whose OpenBLAS threads then share
//    the cores with the spinning ones, 5-8% slower). Not set when the user set GOMP_SPINCOUNT or
//    OMP_WAIT_POLICY.
// 3. OpenBLAS's AVX-512 or AVX2 kernels where it fell back to its generic ones on a CPU model
//    it does not know (openblas_core.h): OPENBLAS_CORETYPE is set, with the same one
//    re-execution; a value the user set is kept.
// 4. glibc's malloc as RELSERVE_ALLOCATOR asks (above, TuneMalloc). A bad value prints a
//    message naming the variable and exits with status 2, as a bad flag does.
void TuneProcessForInference(char** argv, const GetEnv& getenv, bool float32_takes_every_batch = false);

// glibc's side of `mode` (mallopt; process-wide): what TuneProcessForInference does last.
void TuneMalloc(AllocatorMode mode);

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_PROCESS_TUNING_H_
