#ifndef RELSERVE_SERVER_MODEL_KERNELS_AVX2_LANES_H_
#define RELSERVE_SERVER_MODEL_KERNELS_AVX2_LANES_H_

// The lane mask the AVX2 kernels (packed_gemm.cc's float32 tiles, amx_gemm.cc's int8 rows) load
// and store a row's tail with. Included only by files that build x86-64 kernels.

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace relserve {

// Lanes [0, count) of an AVX2 mask of eight 32-bit lanes (count clamped to [0, 8]).
__attribute__((target("avx2"), always_inline)) inline __m256i Avx2LaneMask(int64_t count) {
  const int32_t n = static_cast<int32_t>(std::max<int64_t>(0, std::min<int64_t>(8, count)));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_AVX2_LANES_H_
