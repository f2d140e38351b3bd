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

// Which bfloat16 batches run attention's products head by head in relserve's AVX512-BF16
// registers (AttentionKernels::cpu_tiled_bfloat16_max_tokens, on a CPU with AVX512-BF16) rather
// than in ATen's batched products (oneDNN):
//   kAuto: batches of at most kBFloat16TiledAttentionMaxTokens tokens. There a head's products are
//          small and oneDNN's calls cost more than they run (docs/PERFORMANCE.md: attention
//          0.86x at T5-base 1 x 128, 0.72x at DeBERTa-v3-base 1 x 128 on an AMD Zen 4); at
//          T5-base 8 x 128 the tiles took 1.2x oneDNN's time, and at 2 x 512 they were level.
//   kNever, kAlways: for measurements (--bfloat16-attention onednn, tiles) and tests.
enum class BFloat16TiledAttention { kAuto, kNever, kAlways };
inline constexpr int64_t kBFloat16TiledAttentionMaxTokens = 192;

// The most tokens a bfloat16 batch may have for `tiled` to run it in the tiles.
int64_t BFloat16TiledAttentionMaxTokens(BFloat16TiledAttention tiled);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_TILED_ATTENTION_H_
