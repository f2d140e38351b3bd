#ifndef RELSERVE_SERVER_MODEL_KERNELS_PARALLEL_FOR_H_
#define RELSERVE_SERVER_MODEL_KERNELS_PARALLEL_FOR_H_

#include <cstdint>
#include <functional>

namespace relserve {

// at::parallel_for for code outside this folder: fn(b, e) over chunks of [begin, end) on LibTorch's
// intra-op threads, inline where called from one of them.
// at::parallel_for is a header template, and with LibTorch's OpenMP backend it runs in parallel
// only in files compiled with OpenMP, as this folder's are; called from a file built without it,
// it silently runs every chunk on the calling thread. The chunks are at most
// at::get_num_threads(), one per thread, and may be shorter than `grain` (which only bounds how
// many threads a short range takes). at::get_thread_num() inside fn names the thread (0 ..
// at::get_num_threads() - 1), for per-thread scratch; in a call made from inside a chunk, which
// runs inline, it reads 0 until that call returns.
void ParallelFor(int64_t begin, int64_t end, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_PARALLEL_FOR_H_
