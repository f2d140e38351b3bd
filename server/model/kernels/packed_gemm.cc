#include "server/model/kernels/packed_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include <ATen/Parallel.h>

#if defined(__x86_64__)
#include <immintrin.h>

#include "server/model/kernels/avx2_lanes.h"
#include "server/model/kernels/prefetch_spread.h"
#include "server/model/kernels/thread_scratch.h"
#define RELSERVE_PACKED_GEMM_X86 1
#define RELSERVE_AVX512_FN __attribute__((target("avx512f,fma")))
#define RELSERVE_AVX2_FN __attribute__((target("avx2,fma")))
#else
#define RELSERVE_PACKED_GEMM_X86 0
#endif

namespace relserve {
namespace {

constexpr int64_t kNr = PackedWeights::kPanelWidth;  // output features per panel: two AVX-512 vectors
constexpr int64_t kMr = 12;                           // rows per AVX-512 register tile: 24 accumulators
constexpr int64_t kMr2 = 6;                           // rows per AVX2 register tile (half a panel): 12
constexpr int64_t kKc = 256;                          // k per pass: a panel's slice is 32 KiB, in L1
constexpr int64_t kMc = 192;                          // rows per block: a block's slice of a stays in L2
constexpr int64_t kHalf = kNr / 2;                    // features per AVX2 tile: half a panel
constexpr int64_t kPackedChunkRows = 4 * kMc;         // rows packed at once by PackedGemm (below)

#if RELSERVE_PACKED_GEMM_X86

// One register tile: rows [0, MR) of a (lda apart) times one panel's slice b (kc rows of kNr), into
// c (ldc apart), columns masked by m0 / m1. The first pass over k starts from the bias (or zero),
// the later ones from c. Where `prefetch` is not null, one cache line from it per step of k, kc in
// all, is brought into L1 for the tiles after this one.
// Where kPackedRows, a is the tile's rows packed by PackRowTiles (step kk of row i at kk * kMr + i)
// and lda is unused.
template <int MR, bool kPackedRows = false>
RELSERVE_AVX512_FN void Tile(const float* a, int64_t lda, const float* b, int64_t kc, float* c, int64_t ldc,
                             __mmask16 m0, __mmask16 m1, const float* bias, bool first, const char* prefetch) {
  __m512 acc0[MR], acc1[MR];
  if (first) {
    const __m512 b0 = bias != nullptr ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    const __m512 b1 = bias != nullptr ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i) {
      acc0[i] = b0;
      acc1[i] = b1;
    }
  } else {
    for (int i = 0; i < MR; ++i) {
      acc0[i] = _mm512_maskz_loadu_ps(m0, c + i * ldc);
      acc1[i] = _mm512_maskz_loadu_ps(m1, c + i * ldc + 16);
    }
  }
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m512 b0 = _mm512_load_ps(b + kk * kNr);
    const __m512 b1 = _mm512_load_ps(b + kk * kNr + 16);
    if (prefetch != nullptr) _mm_prefetch(prefetch + kk * 64, _MM_HINT_T0);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512 x = _mm512_set1_ps(kPackedRows ? a[kk * kMr + i] : a[i * lda + kk]);
      acc0[i] = _mm512_fmadd_ps(x, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(x, b1, acc1[i]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    _mm512_mask_storeu_ps(c + i * ldc, m0, acc0[i]);
    _mm512_mask_storeu_ps(c + i * ldc + 16, m1, acc1[i]);
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, __mmask16, __mmask16,
                        const float*, bool, const char*);

constexpr TileFn kTiles[kMr + 1] = {nullptr,  &Tile<1>, &Tile<2>, &Tile<3>,  &Tile<4>,  &Tile<5>, &Tile<6>,
                                    &Tile<7>, &Tile<8>, &Tile<9>, &Tile<10>, &Tile<11>, &Tile<12>};
constexpr TileFn kPackedTiles[kMr + 1] = {
    nullptr,           &Tile<1, true>,  &Tile<2, true>,  &Tile<3, true>, &Tile<4, true>,
    &Tile<5, true>,    &Tile<6, true>,  &Tile<7, true>,  &Tile<8, true>, &Tile<9, true>,
    &Tile<10, true>,   &Tile<11, true>, &Tile<12, true>};

// Rows [m0, m0 + mc) against panel p (of a matrix of n columns, depth k, panels k * kNr floats
// apart from `panels`), every pass over k. The first tiles of a pass prefetch the panel's next
// slice of kKc steps (which, the panels lying one after another, is the next panel's first slice
// after the last pass), so that the next pass does not wait for the weight on memory: in most runs
// 1.06-1.15 times as fast at 128 rows, about 1.4 times at 24 (docs/PERFORMANCE.md). The last slice
// of the last panel prefetches nothing.
RELSERVE_AVX512_FN void BlockTimesPanel(const float* a, int64_t lda, const float* packed, int64_t m0, int64_t mc,
                                        const float* panels, int64_t n, int64_t k, int64_t p, const float* bias,
                                        float* c, int64_t ldc, const GemmEpilogue& epilogue) {
  const int64_t n0 = p * kNr;
  const int64_t cols = std::min(kNr, n - n0);
  const __mmask16 mask0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 mask1 = cols >= 32 ? __mmask16(0xFFFF) : cols <= 16 ? __mmask16(0) : __mmask16((1u << (cols - 16)) - 1);
  const float* panel = panels + p * k * kNr;
  const float* panel_bias = bias != nullptr ? bias + n0 : nullptr;
  for (int64_t k0 = 0; k0 < k; k0 += kKc) {
    const int64_t kc = std::min(kKc, k - k0);
    for (int64_t i = 0; i < mc; i += kMr) {
      const int64_t rows = std::min(kMr, mc - i);
      // Tile t prefetches lines [t * kc, (t + 1) * kc) of the next slice's kc * kNr / 16.
      const int64_t tile = i / kMr;
      const char* prefetch = nullptr;
      if (tile * kc < kc * kNr / 16 && (k0 + kc < k || n0 + kNr < n)) {
        prefetch = reinterpret_cast<const char*>(panel + (k0 + kc) * kNr) + tile * kc * 64;
      }
      if (packed != nullptr) {
        const int64_t tiles = (mc + kMr - 1) / kMr;
        kPackedTiles[rows](packed + ((k0 / kKc) * tiles + tile) * kKc * kMr, 1, panel + k0 * kNr, kc,
                           c + (m0 + i) * ldc + n0, ldc, mask0, mask1, panel_bias, k0 == 0, prefetch);
      } else {
        kTiles[rows](a + (m0 + i) * lda + k0, lda, panel + k0 * kNr, kc, c + (m0 + i) * ldc + n0, ldc, mask0, mask1,
                     panel_bias, k0 == 0, prefetch);
      }
      // The tile's sums are complete after the last pass, and in L1.
      if (k0 + kc >= k) ApplyEpilogue(epilogue, m0 + i, n0, rows, cols, c, ldc);
    }
  }
}

// The same GEMM in AVX2 registers, for x86-64 CPUs without AVX-512F (AMD Zen 2 and 3, Intel client
// cores): sixteen 256-bit registers hold a tile of up to 6 rows times half a panel (16 features,
// one cache line of each step of the panel), 12 accumulators, the half panel's two vectors of the
// step and the broadcast value of a. The panels hold the same values as the AVX-512 tiles' but lie
// in half-slices (PackPanels), and each result is the same sum in the same order (so the same
// bits, FMA for FMA).

// One tile: rows [0, MR) of a (element (i, kk) at a[i * a_row + kk * a_col]: rows as they lie, or,
// where kPackedRows, packed by PackRowTiles, a_row 1 and a_col 6 known to the compiler) times the
// half-slice b (kc steps of 16 features, one after another) into c, `cols` of its 16 columns: all
// of them where kFull, else 1-15 (masked loads and stores). Whether the columns are whole is a
// template parameter, not a branch, so that GCC keeps the accumulators in registers throughout.
// Where `prefetch` is not null, each step prefetches the line at prefetch + kk * prefetch_stride:
// into L2 where the rows are packed (PackedGemm's weights, from memory), else into L1.
template <int MR, bool kFull, bool kPackedRows>
RELSERVE_AVX2_FN void Tile2(const float* a, int64_t a_row, int64_t a_col, const float* b, int64_t kc, float* c,
                            int64_t ldc, int64_t cols, const float* bias, bool first, const char* prefetch,
                            int64_t prefetch_stride) {
  if (kPackedRows) {
    a_row = 1;
    a_col = kMr2;
  }
  const __m256i m0 = Avx2LaneMask(kFull ? 8 : cols), m1 = Avx2LaneMask(kFull ? 8 : cols - 8);
  __m256 acc0[MR], acc1[MR];
  if (first) {
    __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    if (bias != nullptr) {
      b0 = kFull ? _mm256_loadu_ps(bias) : _mm256_maskload_ps(bias, m0);
      b1 = kFull ? _mm256_loadu_ps(bias + 8) : _mm256_maskload_ps(bias + 8, m1);
    }
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      acc0[i] = b0;
      acc1[i] = b1;
    }
  } else {
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      acc0[i] = kFull ? _mm256_loadu_ps(c + i * ldc) : _mm256_maskload_ps(c + i * ldc, m0);
      acc1[i] = kFull ? _mm256_loadu_ps(c + i * ldc + 8) : _mm256_maskload_ps(c + i * ldc + 8, m1);
    }
  }
  // Without a next slice, the lines prefetched are this one's own (in L1 already): a branch in the
  // loop would keep GCC from holding the accumulators in registers.
  const char* ahead = prefetch != nullptr ? prefetch : reinterpret_cast<const char*>(b);
  const int64_t stride = prefetch != nullptr ? prefetch_stride : kHalf * static_cast<int64_t>(sizeof(float));
  // Four steps per turn of the loop, and with the rows packed their strides are constants, so the
  // loop is little more than its loads and FMAs: about 1.08 times the rate at 128 rows
  // (docs/PERFORMANCE.md).
#pragma GCC unroll 4
  for (int64_t kk = 0; kk < kc; ++kk) {
    const __m256 b0 = _mm256_load_ps(b + kk * kHalf);
    const __m256 b1 = _mm256_load_ps(b + kk * kHalf + 8);
    _mm_prefetch(ahead + kk * stride, kPackedRows ? _MM_HINT_T1 : _MM_HINT_T0);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m256 x = _mm256_broadcast_ss(a + i * a_row + kk * a_col);
      acc0[i] = _mm256_fmadd_ps(x, b0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(x, b1, acc1[i]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    if (kFull) {
      _mm256_storeu_ps(c + i * ldc, acc0[i]);
      _mm256_storeu_ps(c + i * ldc + 8, acc1[i]);
    } else {
      _mm256_maskstore_ps(c + i * ldc, m0, acc0[i]);
      _mm256_maskstore_ps(c + i * ldc + 8, m1, acc1[i]);
    }
  }
}

using Tile2Fn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, int64_t,
                         const float*, bool, const char*, int64_t);

// [rows packed][whole columns][rows]
constexpr Tile2Fn kTiles2[2][2][kMr2 + 1] = {
    {{nullptr, &Tile2<1, false, false>, &Tile2<2, false, false>, &Tile2<3, false, false>, &Tile2<4, false, false>,
      &Tile2<5, false, false>, &Tile2<6, false, false>},
     {nullptr, &Tile2<1, true, false>, &Tile2<2, true, false>, &Tile2<3, true, false>, &Tile2<4, true, false>,
      &Tile2<5, true, false>, &Tile2<6, true, false>}},
    {{nullptr, &Tile2<1, false, true>, &Tile2<2, false, true>, &Tile2<3, false, true>, &Tile2<4, false, true>,
      &Tile2<5, false, true>, &Tile2<6, false, true>},
     {nullptr, &Tile2<1, true, true>, &Tile2<2, true, true>, &Tile2<3, true, true>, &Tile2<4, true, true>,
      &Tile2<5, true, true>, &Tile2<6, true, true>}}};

// Rows [m0, m0 + mc) of a, k deep, as the tiles read them fastest: for each pass s over k and each
// tile t of R = tile_rows rows (6 for AVX2, 12 for AVX-512), kKc * R floats at out + (s * tiles + t)
// * kKc * R holding step kk of row i at kk * R + i (rows past mc are zeros). The tile's R
// broadcasts per step then come from one line or two instead of R rows lda apart.
int64_t RowTiles(int64_t mc, int64_t tile_rows = kMr2) { return (mc + tile_rows - 1) / tile_rows; }
int64_t PackedRowsFloats(int64_t mc, int64_t k, int64_t tile_rows = kMr2) {
  return (k + kKc - 1) / kKc * RowTiles(mc, tile_rows) * kKc * tile_rows;
}

// A 16 x 16 block of floats transposed in registers: r[i] lane j becomes r[j] lane i.
RELSERVE_AVX512_FN inline void Transpose16x16(__m512 r[16]) {
  // The masked forms with every lane: GCC 12 warns of the unmasked ones' undefined start value.
  constexpr __mmask16 kAll = 0xFFFF;
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved in each 128-bit lane
    t[i] = _mm512_maskz_unpacklo_ps(kAll, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(kAll, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // each lane of r[i + j] now holds rows i .. i + 3 of a column
    r[i] = _mm512_maskz_shuffle_ps(kAll, t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_maskz_shuffle_ps(kAll, t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_maskz_shuffle_ps(kAll, t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_maskz_shuffle_ps(kAll, t[i + 1], t[i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {  // the 128-bit lanes gathered, columns j, 4 + j, 8 + j, 12 + j
    t[j] = _mm512_maskz_shuffle_f32x4(kAll, r[j], r[4 + j], 0x88);
    t[4 + j] = _mm512_maskz_shuffle_f32x4(kAll, r[j], r[4 + j], 0xDD);
    t[8 + j] = _mm512_maskz_shuffle_f32x4(kAll, r[8 + j], r[12 + j], 0x88);
    t[12 + j] = _mm512_maskz_shuffle_f32x4(kAll, r[8 + j], r[12 + j], 0xDD);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm512_maskz_shuffle_f32x4(kAll, t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_maskz_shuffle_f32x4(kAll, t[j], t[8 + j], 0xDD);
    r[4 + j] = _mm512_maskz_shuffle_f32x4(kAll, t[4 + j], t[12 + j], 0x88);
    r[12 + j] = _mm512_maskz_shuffle_f32x4(kAll, t[4 + j], t[12 + j], 0xDD);
  }
}

// Steps `lanes` of rows [0, rows) of src (ld apart; rows past `rows` zero) transposed: r[j] holds
// step j of every row. The packing routines below store each r[j] as a step of their layout.
RELSERVE_AVX512_FN inline void TransposeRows(const float* src, int64_t ld, int64_t rows, __mmask16 lanes,
                                             __m512 r[16]) {
  for (int i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_maskz_loadu_ps(lanes, src + i * ld) : _mm512_setzero_ps();
  Transpose16x16(r);
}

// PackRowTiles for the AVX-512 tiles (12 rows): each 16 steps of a tile's rows are read as 12
// vectors (rows past mc zero), transposed in registers, and each step's 12 values stored with one
// masked store, instead of a scalar load and store per value: the same values in the same places.
// On one thread a forward took 0.98-0.99 times the time (AMD Zen 4, docs/PERFORMANCE.md); on two,
// the packing waits on rows the other core wrote, and the time was level.
RELSERVE_AVX512_FN void PackRowTiles12(const float* a, int64_t lda, int64_t m0, int64_t mc, int64_t k, int64_t t0,
                                       int64_t t1, float* out) {
  const int64_t tiles = RowTiles(mc, kMr);
  for (int64_t k0 = 0, s = 0; k0 < k; k0 += kKc, ++s) {
    const int64_t kc = std::min(kKc, k - k0);
    for (int64_t t = t0; t < t1; ++t) {
      float* tile = out + (s * tiles + t) * kKc * kMr;
      const int64_t rows = std::min(kMr, mc - t * kMr);
      const float* src = a + (m0 + t * kMr) * lda + k0;
      for (int64_t kk = 0; kk < kc; kk += 16) {
        const int64_t steps = std::min<int64_t>(16, kc - kk);
        const __mmask16 lanes = steps >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << steps) - 1);
        __m512 r[16];
        TransposeRows(src + kk, lda, rows, lanes, r);
        for (int64_t j = 0; j < steps; ++j) _mm512_mask_storeu_ps(tile + (kk + j) * kMr, 0x0FFF, r[j]);
      }
    }
  }
}

// One AVX-512 run of PackPanels (below) where b is [n, k] rows (b_col 1): `features` (at most kNr)
// rows of src, b_row apart, kc steps each, into run (step kk's kNr features at kk * kNr; features
// past `features` zero). Each 16 features x 16 steps are one transpose in registers, so each
// step's 16 features are one store rather than 16 scalar stores of values read 16 rows apart.
RELSERVE_AVX512_FN void PackPanelRunAvx512(const float* src, int64_t b_row, int64_t features, int64_t kc,
                                           float* run) {
  for (int64_t h = 0; h < kNr; h += 16) {
    const int64_t rows = std::max<int64_t>(0, std::min<int64_t>(16, features - h));
    for (int64_t kk = 0; kk < kc; kk += 16) {
      const int64_t steps = std::min<int64_t>(16, kc - kk);
      const __mmask16 lanes = steps >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << steps) - 1);
      __m512 r[16];
      TransposeRows(src + h * b_row + kk, b_row, rows, lanes, r);
      for (int64_t j = 0; j < steps; ++j) _mm512_storeu_ps(run + (kk + j) * kNr + h, r[j]);
    }
  }
}

void PackRowTiles(const float* a, int64_t lda, int64_t m0, int64_t mc, int64_t k, int64_t t0, int64_t t1,
                  float* out, int64_t tile_rows = kMr2) {
  // Tiles of 12 rows are the AVX-512 kernel's, so this CPU has AVX-512F.
  if (tile_rows == kMr) return PackRowTiles12(a, lda, m0, mc, k, t0, t1, out);
  const int64_t tiles = RowTiles(mc, tile_rows);
  for (int64_t k0 = 0, s = 0; k0 < k; k0 += kKc, ++s) {
    const int64_t kc = std::min(kKc, k - k0);
    for (int64_t t = t0; t < t1; ++t) {
      float* tile = out + (s * tiles + t) * kKc * tile_rows;
      for (int64_t i = 0; i < tile_rows; ++i) {
        const int64_t row = t * tile_rows + i;
        if (row >= mc) {
          for (int64_t kk = 0; kk < kc; ++kk) tile[kk * tile_rows + i] = 0.f;
          continue;
        }
        const float* src = a + (m0 + row) * lda + k0;
        for (int64_t kk = 0; kk < kc; ++kk) tile[kk * tile_rows + i] = src[kk];
      }
    }
  }
}

// BlockTimesPanel's AVX2 counterpart: per pass over k, each half panel against every tile of rows
// (a half panel's slice, 16 KiB, stays in L1 while the tiles of the block read it), the tiles of
// the pass prefetching the next slice (below). The rows come from `packed` where it is not null
// (PackRowTiles of this block), else from a as they lie.
RELSERVE_AVX2_FN void BlockTimesPanelAvx2(const float* a, int64_t lda, const float* packed, int64_t m0, int64_t mc,
                                          const float* panels, int64_t n, int64_t k, int64_t p, const float* bias,
                                          float* c, int64_t ldc, const GemmEpilogue& epilogue) {
  const int64_t n0 = p * kNr;
  const int64_t cols = std::min(kNr, n - n0);
  const float* panel = panels + p * k * kNr;
  const int64_t tiles_per_half = (mc + kMr2 - 1) / kMr2;
  const int64_t tiles_per_pass = (cols > kHalf ? 2 : 1) * tiles_per_half;
  // The weights packed at load (rows packed: PackedGemm) stream from memory, and their next slice
  // is spread over the pass into L2 (prefetch_spread.h); SerialGemm's panels, packed by the thread
  // just before, have the first tiles of the pass bring the next slice into L1.
  const bool spread_weights = packed != nullptr;
  for (int64_t k0 = 0; k0 < k; k0 += kKc) {
    const int64_t kc = std::min(kKc, k - k0);
    const bool more = k0 + kc < k || n0 + kNr < n;
    const char* next = more ? reinterpret_cast<const char*>(panel + (k0 + kc) * kNr) : nullptr;
    const PrefetchSpread spread =
        SpreadPrefetch(kc * kNr * static_cast<int64_t>(sizeof(float)), tiles_per_pass, kc);
    for (int64_t half = 0; half < 2 && half * 16 < cols; ++half) {
      const int64_t half_cols = std::min<int64_t>(16, cols - half * 16);
      const float* half_bias = bias != nullptr ? bias + n0 + half * 16 : nullptr;
      for (int64_t i = 0; i < mc; i += kMr2) {
        const int64_t rows = std::min(kMr2, mc - i);
        const int64_t tile = half * tiles_per_half + i / kMr2;
        const char* prefetch = nullptr;
        if (next != nullptr && spread_weights) {
          prefetch = next + tile * spread.share;
        } else if (next != nullptr && tile * kc < kc * kNr / 16) {
          prefetch = next + tile * kc * kCacheLineBytes;
        }
        const float* rows_a = packed != nullptr
                                  ? packed + ((k0 / kKc) * tiles_per_half + i / kMr2) * kKc * kMr2
                                  : a + (m0 + i) * lda + k0;
        kTiles2[packed != nullptr][half_cols == 16][rows](
            rows_a, packed != nullptr ? 1 : lda, packed != nullptr ? kMr2 : 1, panel + k0 * kNr + half * kc * kHalf,
            kc, c + (m0 + i) * ldc + n0 + half * kHalf, ldc, half_cols, half_bias, k0 == 0, prefetch,
            spread_weights ? spread.stride : kCacheLineBytes);
        if (k0 + kc >= k) ApplyEpilogue(epilogue, m0 + i, n0 + half * kHalf, rows, half_cols, c, ldc);
      }
    }
  }
}

// The AVX-512 tiles read the rows from `packed` (PackRowTiles of this block in tiles of 12) where it
// is not null, else as they lie (SerialGemm).
RELSERVE_AVX512_FN void BlockTimesPanelAvx512(const float* a, int64_t lda, const float* packed, int64_t m0,
                                              int64_t mc, const float* panels, int64_t n, int64_t k, int64_t p,
                                              const float* bias, float* c, int64_t ldc, const GemmEpilogue& epilogue) {
  BlockTimesPanel(a, lda, packed, m0, mc, panels, n, k, p, bias, c, ldc, epilogue);
}

using BlockFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, const float*, int64_t, int64_t,
                         int64_t, const float*, float*, int64_t, const GemmEpilogue&);

BlockFn BlockFor(Float32Kernel kernel) {
  return kernel == Float32Kernel::kAvx512 ? &BlockTimesPanelAvx512 : &BlockTimesPanelAvx2;
}

#endif  // RELSERVE_PACKED_GEMM_X86

// Element (j, kk) of b into panels for `kernel`'s tiles: panel p holds features [p * kNr, (p + 1) *
// kNr) in k * kNr floats, cut into slices of kKc steps (the last one what is left of k), each
// slice holding runs of `width` features, a run's steps one after another: for the AVX-512 tiles
// one run of the whole panel (row kk of the panel at kk * kNr, as if there were no slices); for
// the AVX2 tiles two runs of half a panel, so that the half-slice a tile reads is 16 KiB in a row
// rather than every other line of 32 KiB, which used only half of L1's sets (1.10-1.18 times the
// rate, docs/PERFORMANCE.md). Element (j, kk) of b is b[j * b_row + kk * b_col].
void PackPanels(const float* b, int64_t n, int64_t k, int64_t b_row, int64_t b_col, float* out,
                Float32Kernel kernel) {
  const int64_t panels = (n + kNr - 1) / kNr;
  const int64_t width = kernel == Float32Kernel::kAvx512 ? kNr : kHalf;
  if (n % kNr != 0) std::memset(out + (panels - 1) * k * kNr, 0, static_cast<size_t>(k * kNr) * sizeof(float));
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t j0 = p * kNr, cols = std::min(kNr, n - j0);
    float* panel = out + p * k * kNr;
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      const int64_t kc = std::min(kKc, k - k0);
      for (int64_t f0 = 0; f0 < cols; f0 += width) {
        const int64_t features = std::min(width, cols - f0);
        float* run = panel + k0 * kNr + f0 * kc;
        const float* src = b + (j0 + f0) * b_row + k0 * b_col;
#if RELSERVE_PACKED_GEMM_X86
        if (kernel == Float32Kernel::kAvx512 && b_col == 1) {
          PackPanelRunAvx512(src, b_row, features, kc, run);
          continue;
        }
#endif
        // A step's features at a time: the run's row is written whole, and where b is [n, k]
        // (b_col 1) each feature's steps are read in order, so both stay in L1.
        for (int64_t kk = 0; kk < kc; ++kk) {
          for (int64_t f = 0; f < features; ++f) run[kk * width + f] = src[f * b_row + kk * b_col];
        }
      }
    }
  }
}

// The calling thread's buffers (thread_scratch.h): SerialGemm's panels, PackedGemm's packed rows.
enum class Scratch { kPanels, kRows };
float* ThreadScratch(Scratch slot, size_t floats) {
  return relserve::ThreadScratch<float>(static_cast<int>(slot), floats);
}

}  // namespace

bool PackedWeights::Supports(Float32Kernel kernel) {
#if RELSERVE_PACKED_GEMM_X86
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return kernel == Float32Kernel::kAvx512 ? avx512 : avx2;
#else
  (void)kernel;
  return false;
#endif
}

std::shared_ptr<const PackedWeights> PackedWeights::Pack(const float* w, int64_t n, int64_t k, int64_t ld) {
  return Pack(w, n, k, ld, Best());
}

bool PackedWeights::Supported() { return Supports(Float32Kernel::kAvx512) || Supports(Float32Kernel::kAvx2); }

Float32Kernel PackedWeights::Best() {
  return Supports(Float32Kernel::kAvx512) ? Float32Kernel::kAvx512 : Float32Kernel::kAvx2;
}

const char* Float32KernelName(Float32Kernel kernel) {
  return kernel == Float32Kernel::kAvx512 ? "avx512" : "avx2";
}

std::shared_ptr<const PackedWeights> PackedWeights::Pack(const float* w, int64_t n, int64_t k, int64_t ld,
                                                         Float32Kernel kernel) {
  std::shared_ptr<PackedWeights> packed(new PackedWeights(n, k, kernel));
  // Panel by panel on LibTorch's threads: each panel's features into its own part of the storage.
  const int64_t panels = packed->panels();
  at::parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {
    const int64_t f0 = begin * kNr, f1 = std::min(n, end * kNr);
    PackPanels(w + f0 * ld, f1 - f0, k, ld, 1, packed->data() + begin * k * kNr, kernel);
  });
  return packed;
}

void PackedGemm(const float* a, int64_t m, int64_t lda, const PackedWeights& w, const float* bias, float* c,
                int64_t ldc, const GemmEpilogue& epilogue) {
#if RELSERVE_PACKED_GEMM_X86
  const Float32Kernel kernel = w.kernel();
  if (!PackedWeights::Supports(kernel)) std::abort();  // never called where unsupported
  if (m <= 0 || w.n() <= 0) return;
  if (m > kPackedChunkRows) {
    // The rows are packed first, into a buffer the calling thread keeps: chunks of at most 4
    // blocks' rows bound it (768 x 3072 floats, 9 MB, for a base model's feed-forward) however long
    // the batch. Each chunk reads the weights again; at 768 rows that is 1 byte in 384 FLOPs.
    for (int64_t r0 = 0; r0 < m; r0 += kPackedChunkRows) {
      GemmEpilogue chunk = epilogue;
      if (chunk.residual != nullptr) chunk.residual = static_cast<const float*>(chunk.residual) + r0 * chunk.ldr;
      PackedGemm(a + r0 * lda, std::min(kPackedChunkRows, m - r0), lda, w, bias, c + r0 * ldc, ldc, chunk);
    }
    return;
  }
  if (w.k() == 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < w.n(); ++j) c[i * ldc + j] = bias != nullptr ? bias[j] : 0.f;
    }
    ApplyEpilogue(epilogue, 0, 0, m, w.n(), c, ldc);
    return;
  }
  // Work items: (block of rows, panel), panels varying fastest, so that a thread sweeps the
  // panels of one block while that block's rows stay in its cache. The blocks are of even size (at
  // most kMc rows), so that the threads' even shares of items are even shares of the work: 256
  // rows are two blocks of 128, not 192 and 64.
  const int64_t blocks = (m + kMc - 1) / kMc;
  const int64_t block_rows = (m + blocks - 1) / blocks;
  const int64_t panels = w.panels();
  const BlockFn block_times_panel = BlockFor(kernel);
  // Every block's rows packed first (PackRowTiles, in the kernel's tiles of rows: 6 for AVX2, 12
  // for AVX-512), on the threads, tile by tile, into the calling thread's buffer (kept between
  // calls): each step's broadcasts then come from one line instead of a line of each row, lda
  // apart (on a 32 KiB L1, rows 3 or 12 KiB apart fall in a few sets, which the panel's slice
  // needs too). AVX2 about 1.1 times the tiles' rate; AVX-512 1.02-1.04 times alone and a forward
  // 0.94-0.96 times the time on an AMD Zen 4 (docs/PERFORMANCE.md).
  const int64_t tile_rows = kernel == Float32Kernel::kAvx2 ? kMr2 : kMr;
  const int64_t block_floats = PackedRowsFloats(block_rows, w.k(), tile_rows);
  float* const packed = ThreadScratch(Scratch::kRows, static_cast<size_t>(blocks * block_floats));
  {
    const int64_t tiles = RowTiles(block_rows, tile_rows);
    at::parallel_for(0, blocks * tiles, 1, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end;) {
        const int64_t block = item / tiles, t0 = item % tiles, t1 = std::min(tiles, t0 + (end - item));
        const int64_t m0 = block * block_rows;
        // The last block may be shorter: its layout has RowTiles of its own rows.
        const int64_t mc = std::min(block_rows, m - m0), own_tiles = mc > 0 ? RowTiles(mc, tile_rows) : 0;
        if (t0 < own_tiles) {
          PackRowTiles(a, lda, m0, mc, w.k(), t0, std::min(t1, own_tiles), packed + block * block_floats, tile_rows);
        }
        item += t1 - t0;
      }
    });
  }
  at::parallel_for(0, blocks * panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t block = item / panels, p = item % panels;
      const int64_t m0 = block * block_rows;
      if (m0 >= m) continue;
      block_times_panel(a, lda, packed + block * block_floats, m0, std::min(block_rows, m - m0), w.panel(0), w.n(),
                        w.k(), p, bias, c, ldc, epilogue);
    }
  });
#else
  (void)a, (void)m, (void)lda, (void)w, (void)bias, (void)c, (void)ldc, (void)epilogue;
  std::abort();  // never packed where unsupported (PackedWeights::Supported)
#endif
}

void SerialGemm(const float* a, int64_t m, int64_t lda, const float* b, int64_t n, int64_t k, int64_t b_row,
                int64_t b_col, float* c, int64_t ldc, const NeededColumns& needed) {
  SerialGemm(a, m, lda, b, n, k, b_row, b_col, c, ldc, PackedWeights::Best(), needed);
}

void SerialGemm(const float* a, int64_t m, int64_t lda, const float* b, int64_t n, int64_t k, int64_t b_row,
                int64_t b_col, float* c, int64_t ldc, Float32Kernel kernel, const NeededColumns& needed) {
#if RELSERVE_PACKED_GEMM_X86
  if (!PackedWeights::Supports(kernel)) std::abort();  // never called where unsupported
  if (m <= 0 || n <= 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.f);
    return;
  }
  // The thread's own panels.
  const int64_t panels = (n + kNr - 1) / kNr;
  float* scratch = ThreadScratch(Scratch::kPanels, static_cast<size_t>(panels * k * kNr));
  PackPanels(b, n, k, b_row, b_col, scratch, kernel);
  const BlockFn block_times_panel = BlockFor(kernel);
  for (int64_t m0 = 0; m0 < m; m0 += kMc) {
    const int64_t mc = std::min(kMc, m - m0);
    for (int64_t p = 0; p < panels; ++p) {
      // Each run of tiles that need panel p, the tiles where they would be without `needed`: the
      // same tiles, the same sums.
      const int64_t c0 = p * kNr, c1 = std::min(n, c0 + kNr);
      const auto needs = [&](int64_t r) { return needed.Touches(m0 + r, m0 + std::min(mc, r + kMr), c0, c1); };
      for (int64_t r = 0; r < mc;) {
        while (r < mc && !needs(r)) r += kMr;
        int64_t e = r;
        while (e < mc && needs(e)) e += kMr;
        e = std::min(e, mc);
        if (e > r) block_times_panel(a, lda, nullptr, m0 + r, e - r, scratch, n, k, p, nullptr, c, ldc, GemmEpilogue());
        r = e;
      }
    }
  }
#else
  (void)a, (void)m, (void)lda, (void)b, (void)n, (void)k, (void)b_row, (void)b_col, (void)c, (void)ldc, (void)kernel;
  (void)needed;
  std::abort();  // never called where unsupported (PackedWeights::Supported)
#endif
}

}  // namespace relserve
