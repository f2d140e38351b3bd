#ifndef RELSERVE_SERVER_MODEL_TILED_ATTENTION_H_
#define RELSERVE_SERVER_MODEL_TILED_ATTENTION_H_

#include <cstdint>

namespace relserve {

// Which float32 batches run attention's products head by head in relserve's register tiles on a
// CPU with AVX-512F or AVX2 (AttentionKernels::cpu_tiled_max_tokens) rather than in ATen's batched
// products (OpenBLAS):
//   kAuto: kWithPackedGemm where the tiles are AVX-512's, kWithPackedProjections where they are
//          AVX2's (measured per CPU kind, docs/PERFORMANCE.md: on an AVX2 CPU the tiles were about
//          1.1x OpenBLAS's batched products for batches past the bound as well, on an AVX-512 one
//          level or behind).
//   kWithPackedGemm: the batches the packed float32 GEMM takes (EngineKernels::packed_float32_gemm
//                    on, at most packed_gemm_max_rows tokens), so that a short batch's forward calls
//                    no BLAS at all: OpenBLAS's threads, once woken, spin on the cores the tiles'
//                    threads need (docs/PERFORMANCE.md, "Short batches without OpenBLAS").
//   kWithPackedProjections: every batch of an engine whose float32 projections are relserve's
//                           (packed_float32_gemm on, whatever the batch's size).
//   kNever, kAlways: for tests and measurements.
enum class TiledAttention { kNever, kAuto, kWithPackedGemm, kWithPackedProjections, kAlways };

// The most tokens a batch may have for `tiled` to run it in the tiles: packed_float32_rows is the
// packed GEMM's bound where the engine's float32 projections are relserve's, else 0; avx2_tiles:
// the tiles are AVX2's (PackedWeights::Best() is Float32Kernel::kAvx2), which kAuto follows.
int64_t TiledAttentionMaxTokens(TiledAttention tiled, int64_t packed_float32_rows, bool avx2_tiles);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_TILED_ATTENTION_H_
