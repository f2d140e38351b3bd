#include "server/model/kernels/amx_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include <ATen/Parallel.h>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "server/model/kernels/avx2_lanes.h"
#include "server/model/kernels/prefetch_spread.h"
#include "server/model/kernels/thread_scratch.h"
#include "server/model/kernels/vector_math_avx512.h"
#define RELSERVE_AMX_GEMM 1
#define RELSERVE_AMX_FN \
  __attribute__((target("amx-tile,amx-bf16,amx-int8,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni")))
#define RELSERVE_INT8_AVX2_FN __attribute__((target("avx2,fma")))
#else
#define RELSERVE_AMX_GEMM 0
#endif

namespace relserve {
namespace {

constexpr int64_t kNr = PackedBFloat16Weights::kPanelWidth;  // output features per panel: two B tiles
constexpr int64_t kMr = 32;                                  // rows per block: two A tiles
constexpr int64_t kMc = 256;                                 // rows per task: a's slice stays in L2
constexpr int64_t kTileBytes = 1024;                         // one B tile: 16 rows of 64 bytes
static_assert(PackedInt8Weights::kPanelWidth == kNr, "one panel width for both types");

// The two products the tiles run: bfloat16 pairs summed in float32, and uint8 x int8 quads in int32.
// A step along k is one A tile row: 64 bytes.
struct BFloat16Product {
  using A = uint16_t;
  using Sum = float;
  static constexpr int64_t kStep = PackedBFloat16Weights::kDepthStep;
};
struct Int8Product {
  using A = uint8_t;
  using Sum = int32_t;
  static constexpr int64_t kStep = PackedInt8Weights::kDepthStep;
};
static_assert(BFloat16Product::kStep * sizeof(uint16_t) == 64 && Int8Product::kStep == 64, "one A tile row");

#if RELSERVE_AMX_GEMM

// CPUID leaf 7: whether AMX-TILE, AVX-512 F/BW/VL and the product's own instructions are there.
bool CpuHasAmx(bool bfloat16) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool amx_bf16 = (edx >> 22) & 1, amx_tile = (edx >> 24) & 1, amx_int8 = (edx >> 25) & 1,
             avx512f = (ebx >> 16) & 1, avx512bw = (ebx >> 30) & 1, avx512vl = (ebx >> 31) & 1;
  if (!(amx_tile && avx512f && avx512bw && avx512vl)) return false;
  if (!bfloat16) return amx_int8;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  const bool avx512_bf16 = (eax >> 5) & 1;
  return amx_bf16 && avx512_bf16;
}

// CPUID leaf 7: AVX-512 F, BW, VL and VNNI.
bool CpuHasAvx512Vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx512f = (ebx >> 16) & 1, avx512bw = (ebx >> 30) & 1, avx512vl = (ebx >> 31) & 1,
             avx512_vnni = (ecx >> 11) & 1;
  return avx512f && avx512bw && avx512vl && avx512_vnni;
}

// CPUID leaf 7: AVX-512 F, BW, VL, and (sub-leaf 1) AVX512-BF16.
bool CpuHasAvx512BFloat16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx512f = (ebx >> 16) & 1, avx512bw = (ebx >> 30) & 1, avx512vl = (ebx >> 31) & 1;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  const bool avx512_bf16 = (eax >> 5) & 1;
  return avx512f && avx512bw && avx512vl && avx512_bf16;
}

// Linux keeps the tile data out of a process's state until it asks (arch_prctl); the answer
// holds for every thread of the process.
bool TileDataPermitted() {
  static const bool permitted = [] {
    constexpr int kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    uint64_t features = 0;
    if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &features) == 0 && (features >> kXfeatureXtiledata) & 1) {
      return true;
    }
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
    return syscall(SYS_arch_prctl, kArchGetXcompPerm, &features) == 0 && (features >> kXfeatureXtiledata) & 1;
  }();
  return permitted;
}

// Palette 1: tiles 0-3 the 32-bit sums of a 32 x 32 block (16 x 16 each), 4-5 two A tiles (16 rows
// of 64 bytes), 6-7 two B tiles (16 rows of 64 bytes). Both products take the same shapes.
struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

RELSERVE_AMX_FN void LoadTileConfig() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  // Not GCC 12's _tile_loadconfig: its asm names only the first 8 bytes of the configuration as
  // read, so the compiler may drop the stores of the rest (it did, once the loop was inlined here).
  __asm__ volatile("ldtilecfg %0" : : "m"(config));
}

RELSERVE_AMX_FN void ReleaseTiles() { _tile_release(); }

// 16 bfloat16 values (their bits) as float32.
RELSERVE_AMX_FN inline __m512 BFloat16ToFloat(__m256i bits) {
  // The masked forms: GCC 12 warns of the unmasked ones' undefined start value.
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xFFFF, bits);
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, wide, 16));
}

// bfloat16 bits -> float32, the lanes past `mask` zero.
RELSERVE_AMX_FN inline __m512 LoadBFloat16(const uint16_t* p, __mmask16 mask) {
  return BFloat16ToFloat(_mm256_maskz_loadu_epi16(mask, p));
}

// The masks of a block's two 16-column halves when `cols` of its 32 columns are written.
inline void HalfMasks(int64_t cols, __mmask16* m0, __mmask16* m1) {
  *m0 = cols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << cols) - 1);
  *m1 = cols >= 32 ? 0xFFFF : cols <= 16 ? 0 : static_cast<__mmask16>((1u << (cols - 16)) - 1);
}

// 16 float32 values rounded to bfloat16 (to nearest, ties to even) and back.
RELSERVE_AMX_FN inline __m512 RoundToBFloat16(__m512 v) {
  return BFloat16ToFloat(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
}

// One half of a row (16 results, the bias added) through the epilogue's activation and residual
// (bfloat16 bits at `residual`, `mask` of them read), each step rounded to bfloat16 as LibTorch's
// bfloat16 operators round: the sum first, the activation's result (ReLU's is exact), the addition.
// The caller rounds what this returns.
RELSERVE_AMX_FN inline __m512 EpilogueHalf(__m512 v, EpilogueActivation act, const uint16_t* residual,
                                           __mmask16 mask) {
  v = RoundToBFloat16(v);
  if (act == EpilogueActivation::kRelu) v = _mm512_maskz_max_ps(0xFFFF, _mm512_setzero_ps(), v);  // NaN stays
  if (act == EpilogueActivation::kGelu) v = RoundToBFloat16(GeluErfAvx512(v));
  if (residual != nullptr) v = _mm512_add_ps(v, LoadBFloat16(residual, mask));
  return v;
}

// Rows [0, rows) of the block's float32 sums (32 x 32, rows 128 bytes apart), plus the bias,
// rounded to bfloat16 into c; `cols` of the 32 are written. Where `epilogue` has work, it runs on
// each row before the row is stored; `residual` is then its residual at the block's first row and
// column (or null).
RELSERVE_AMX_FN void StoreBFloat16Block(const float* block, int64_t rows, int64_t cols, const uint16_t* bias,
                                        uint16_t* c, int64_t ldc, const GemmEpilogue& epilogue = {},
                                        const uint16_t* residual = nullptr) {
  __mmask16 m0, m1;
  HalfMasks(cols, &m0, &m1);
  const __mmask32 m = static_cast<__mmask32>(m0) | (static_cast<__mmask32>(m1) << 16);
  const __m512 b0 = bias != nullptr ? LoadBFloat16(bias, m0) : _mm512_setzero_ps();
  const __m512 b1 = bias != nullptr ? LoadBFloat16(bias + 16, m1) : _mm512_setzero_ps();
  const bool work = !epilogue.None();
  for (int64_t i = 0; i < rows; ++i) {
    __m512 lo = _mm512_add_ps(_mm512_loadu_ps(block + i * kNr), b0);
    __m512 hi = _mm512_add_ps(_mm512_loadu_ps(block + i * kNr + 16), b1);
    if (work) {
      const uint16_t* r = residual != nullptr ? residual + i * epilogue.ldr : nullptr;
      lo = EpilogueHalf(lo, epilogue.activation, r, m0);
      hi = EpilogueHalf(hi, epilogue.activation, r != nullptr ? r + 16 : nullptr, m1);
    }
    const __m512bh both = _mm512_cvtne2ps_pbh(hi, lo);  // lo in the lower half
    _mm512_mask_storeu_epi16(c + i * ldc, m, reinterpret_cast<__m512i>(both));
  }
}

// The rows' quantization: row i's uint8 values stand for scale[i] * (q - zero[i]).
struct RowQuantization {
  const float* scale;
  const int32_t* zero;
};

// Rows [0, rows) of the block's int32 sums (32 x 32, rows 128 bytes apart), rescaled to float32
// (the rows' scales and zero points `q`, the panel's feature scales and sums from n0), plus the
// bias (float32, from n0), into c; `cols` of the 32 are written.
RELSERVE_AMX_FN void StoreInt8Block(const int32_t* block, int64_t rows, int64_t cols, RowQuantization q,
                                    const PackedInt8Weights& w, int64_t n0, const float* bias, float* c,
                                    int64_t ldc) {
  __mmask16 m0, m1;
  HalfMasks(cols, &m0, &m1);
  const __m512 ws0 = _mm512_loadu_ps(w.scales() + n0), ws1 = _mm512_loadu_ps(w.scales() + n0 + 16);
  const __m512i sum0 = _mm512_loadu_si512(w.sums() + n0), sum1 = _mm512_loadu_si512(w.sums() + n0 + 16);
  const __m512 b0 = bias != nullptr ? _mm512_maskz_loadu_ps(m0, bias + n0) : _mm512_setzero_ps();
  const __m512 b1 = bias != nullptr ? _mm512_maskz_loadu_ps(m1, bias + n0 + 16) : _mm512_setzero_ps();
  for (int64_t i = 0; i < rows; ++i) {
    const __m512i zero = _mm512_set1_epi32(q.zero[i]);
    const __m512 scale = _mm512_set1_ps(q.scale[i]);
    const __m512i lo = _mm512_sub_epi32(_mm512_loadu_si512(block + i * kNr), _mm512_mullo_epi32(zero, sum0));
    const __m512i hi = _mm512_sub_epi32(_mm512_loadu_si512(block + i * kNr + 16), _mm512_mullo_epi32(zero, sum1));
    const __m512 flo = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, lo), _mm512_mul_ps(scale, ws0), b0);
    const __m512 fhi = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, hi), _mm512_mul_ps(scale, ws1), b1);
    _mm512_mask_storeu_ps(c + i * ldc, m0, flo);
    _mm512_mask_storeu_ps(c + i * ldc + 16, m1, fhi);
  }
}

// StoreInt8Block in AVX2, with the same arithmetic (the zero point's share taken out in int32, then
// one fused multiply-add of the two scales' product and the bias).
RELSERVE_INT8_AVX2_FN void StoreInt8BlockAvx2(const int32_t* block, int64_t rows, int64_t cols, RowQuantization q,
                                              const PackedInt8Weights& w, int64_t n0, const float* bias, float* c,
                                              int64_t ldc) {
  __m256i masks[4], sums[4];
  __m256 scales[4], biases[4];
  for (int h = 0; h < 4; ++h) {
    masks[h] = Avx2LaneMask(cols - 8 * h);
    scales[h] = _mm256_loadu_ps(w.scales() + n0 + 8 * h);  // kept for whole panels
    sums[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.sums() + n0 + 8 * h));
    biases[h] = bias != nullptr ? _mm256_maskload_ps(bias + n0 + 8 * h, masks[h]) : _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < rows; ++i) {
    const __m256i zero = _mm256_set1_epi32(q.zero[i]);
    const __m256 scale = _mm256_set1_ps(q.scale[i]);
    for (int h = 0; h < 4; ++h) {
      const __m256i sum = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + i * kNr + 8 * h)),
                                           _mm256_mullo_epi32(zero, sums[h]));
      const __m256 out = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(scale, scales[h]), biases[h]);
      if (cols >= 8 * (h + 1)) {
        _mm256_storeu_ps(c + i * ldc + 8 * h, out);
      } else if (cols > 8 * h) {
        _mm256_maskstore_ps(c + i * ldc + 8 * h, masks[h], out);
      }
    }
  }
}

// The last columns of `rows` rows of a (k % kStep of them, from column k0), zero-padded to kStep,
// into tail (rows kStep values apart), so that the tiles never read past a row's end.
template <typename P>
inline void CopyTail(const typename P::A* a, int64_t lda, int64_t rows, int64_t k0, int64_t k, typename P::A* tail) {
  std::memset(tail, 0, sizeof(typename P::A) * kMr * P::kStep);
  for (int64_t i = 0; i < rows; ++i) {
    std::memcpy(tail + i * P::kStep, a + i * lda + k0, (k - k0) * sizeof(typename P::A));
  }
}

// One step along k: ROWS/16 A tiles (rows `stride` bytes apart) times the panel's two B tiles (b),
// into the ROWS/16 x 2 accumulator tiles.
template <typename P, int ROWS>
RELSERVE_AMX_FN inline void Step(const void* a, int64_t stride, const int8_t* b) {
  _tile_loadd(4, a, stride);
  if constexpr (ROWS == 32) _tile_loadd(5, static_cast<const char*>(a) + 16 * stride, stride);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b + kTileBytes, 64);
  if constexpr (std::is_same_v<P, Int8Product>) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    if constexpr (ROWS == 32) {
      _tile_dpbusd(2, 5, 6);
      _tile_dpbusd(3, 5, 7);
    }
  } else {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (ROWS == 32) {
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
}

// One block of ROWS (16 or 32) rows (a, lda values apart; all ROWS readable) times one panel (its
// bytes), over the whole of k, into the block of sums (32 x 32, rows 128 bytes apart). The tile
// configuration is loaded. The last k % kStep columns are copied out first (CopyTail).
template <typename P, int ROWS>
RELSERVE_AMX_FN void Block(const typename P::A* a, int64_t lda, const int8_t* panel, int64_t k,
                           typename P::Sum* block) {
  using A = typename P::A;
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (ROWS == 32) {
    _tile_zero(2);
    _tile_zero(3);
  }
  const int64_t full = k / P::kStep * P::kStep;
  const int64_t stride = lda * static_cast<int64_t>(sizeof(A));
  for (int64_t kk = 0; kk < full; kk += P::kStep) Step<P, ROWS>(a + kk, stride, panel + (kk / P::kStep) * 2 * kTileBytes);
  if (full < k) {
    alignas(64) A tail[kMr * P::kStep];
    CopyTail<P>(a, lda, ROWS, full, k, tail);
    Step<P, ROWS>(tail, 64, panel + (full / P::kStep) * 2 * kTileBytes);
  }
  _tile_stored(0, block, kNr * 4);
  _tile_stored(1, block + 16, kNr * 4);
  if constexpr (ROWS == 32) {
    _tile_stored(2, block + 16 * kNr, kNr * 4);
    _tile_stored(3, block + 16 * kNr + 16, kNr * 4);
  }
}

// Rows [r0, r1) of a (m rows, lda values apart, depth k) times one panel, each block of sums handed
// to store(block, first row, rows). Rows of a short last block are copied into the thread's own
// zero-padded rows first, so that the tiles never read past a.
template <typename P, typename Store>
RELSERVE_AMX_FN void Task(const typename P::A* a, int64_t m, int64_t lda, int64_t k, const int8_t* panel, int64_t r0,
                          int64_t r1, const Store& store) {
  using A = typename P::A;
  alignas(64) typename P::Sum block[kMr * kNr];
  thread_local std::vector<A> padded;
  for (int64_t r = r0; r < r1; r += kMr) {
    const int64_t rows = std::min<int64_t>(kMr, r1 - r);
    const int64_t need = rows <= 16 ? 16 : kMr;  // rows the tiles read
    const A* rows_a = a + r * lda;
    int64_t rows_lda = lda;
    if (r + need > m) {
      padded.assign(static_cast<size_t>(need * k), 0);
      for (int64_t i = 0; i < rows; ++i) std::memcpy(padded.data() + i * k, rows_a + i * lda, k * sizeof(A));
      rows_a = padded.data();
      rows_lda = k;
    }
    if (need == 16) {
      Block<P, 16>(rows_a, rows_lda, panel, k, block);
    } else {
      Block<P, kMr>(rows_a, rows_lda, panel, k, block);
    }
    store(block, r, rows);
  }
}

// The GEMM's tasks over LibTorch's threads: task t is rows chunk t / panels (kMc rows), panel
// t % panels, run as task(first row, end row, panel) after the thread loads its tile configuration.
// Without `tiles` (the AVX-512 VNNI kernel) no tile configuration is loaded.
template <typename RunTask>
void ParallelTasks(int64_t m, int64_t panels, const RunTask& task, bool tiles = true) {
  const int64_t chunks = (m + kMc - 1) / kMc;
  at::parallel_for(0, chunks * panels, 1, [&](int64_t begin, int64_t end) {
    if (tiles) LoadTileConfig();
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r0 = (t / panels) * kMc;
      task(r0, std::min(m, r0 + kMc), t % panels);
    }
    if (tiles) ReleaseTiles();
  });
}

// The int8 product without tiles, on AVX-512 VNNI (vpdpbusd), from the same packed panels: row r of
// B tile t at step s is 16 features x 4 depths, one register. Rows [r0, r1) of q (quantized, rows
// padded_k bytes apart, r1 - r0 a multiple of 8) times panel, into block (32 x 32 int32, rows 128
// bytes apart; rows from r0).
constexpr int64_t kVnniRows = 8;
RELSERVE_AMX_FN void VnniRows(const uint8_t* q, int64_t padded_k, const int8_t* panel, int32_t* block) {
  __m512i acc[kVnniRows][2];
  for (int i = 0; i < kVnniRows; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
  const int64_t quads = padded_k / 4;
  for (int64_t d = 0; d < quads; ++d) {
    const int8_t* b = panel + (d / 16) * 2 * kTileBytes + (d % 16) * 64;
    const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + kTileBytes);
    for (int i = 0; i < kVnniRows; ++i) {
      int32_t four;
      std::memcpy(&four, q + i * padded_k + 4 * d, sizeof(four));
      const __m512i a = _mm512_set1_epi32(four);
      acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], a, b0);
      acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], a, b1);
    }
  }
  for (int i = 0; i < kVnniRows; ++i) {
    _mm512_storeu_si512(block + i * kNr, acc[i][0]);
    _mm512_storeu_si512(block + i * kNr + 16, acc[i][1]);
  }
}

// The bfloat16 product without tiles, on AVX512-BF16 (VDPBF16PS), from the same packed panels: row
// r of B tile t at step s is 16 features x 2 depths, one register, and each of ROWS rows of a
// broadcasts its pair of values at those depths. Rows [0, ROWS) of a (lda values apart, k of them
// read: never past a row's end) times the panel, summed in float32 into block (rows kNr floats
// apart). Where `prefetch` is not null, each pair of depths prefetches the line at prefetch + d *
// prefetch_stride into L2 (the next panel, prefetch_spread.h).
constexpr int64_t kBFloat16Rows = 12;  // 24 accumulators of the 32 registers
template <int ROWS>
RELSERVE_AMX_FN void BFloat16Rows(const uint16_t* a, int64_t lda, int64_t k, const uint16_t* panel, float* block,
                                  const char* prefetch, int64_t prefetch_stride) {
  __m512 acc[ROWS][2];
  for (int i = 0; i < ROWS; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const char* tiles = reinterpret_cast<const char*>(panel);
  if (prefetch == nullptr) prefetch = tiles, prefetch_stride = 0;  // no branch in the loop
  // The rows in groups of three, each group one pointer that moves a pair of values a step: row
  // 3g + j is read at group[g] + j * row_bytes, an address x86 forms from two registers. Twelve
  // pointers of their own left the compiler short of registers: it kept some in vector registers
  // and moved them back every step.
  constexpr int kGroups = (ROWS + 2) / 3;
  const int64_t row_bytes = lda * static_cast<int64_t>(sizeof(uint16_t));
  const char* group[kGroups];
  for (int g = 0; g < kGroups; ++g) group[g] = reinterpret_cast<const char*>(a) + 3 * g * row_bytes;
  // Pairs of depths d < k / 2, sixteen to a tile row's run (the panel's B tiles hold 16 pairs
  // each, their two tiles kTileBytes apart), then an odd k's last value alone, its pair's other
  // half zero (the weight's is zero too): never past a row's end.
  const int64_t pairs = k / 2;
  for (int64_t d0 = 0; d0 < pairs; d0 += 16) {
    const char* b = tiles + (d0 / 16) * 2 * kTileBytes;
    const int64_t run = std::min<int64_t>(16, pairs - d0);
    for (int64_t s = 0; s < run; ++s, b += 64) {
      const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_load_si512(b));
      const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_load_si512(b + kTileBytes));
      _mm_prefetch(prefetch, _MM_HINT_T1);
      prefetch += prefetch_stride;
#pragma GCC unroll 12
      for (int i = 0; i < ROWS; ++i) {
        int32_t two;
        std::memcpy(&two, group[i / 3] + (i % 3) * row_bytes, sizeof(two));
        const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(two));
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], x, b0);
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], x, b1);
      }
#pragma GCC unroll 4
      for (int g = 0; g < kGroups; ++g) group[g] += 2 * sizeof(uint16_t);
    }
  }
  if (k % 2 != 0) {
    const int64_t d = pairs;
    const char* b = tiles + (d / 16) * 2 * kTileBytes + (d % 16) * 64;
    const __m512bh b0 = reinterpret_cast<__m512bh>(_mm512_load_si512(b));
    const __m512bh b1 = reinterpret_cast<__m512bh>(_mm512_load_si512(b + kTileBytes));
    for (int i = 0; i < ROWS; ++i) {
      const __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int32_t>(a[i * lda + 2 * d])));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], x, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], x, b1);
    }
  }
  for (int i = 0; i < ROWS; ++i) {
    _mm512_storeu_ps(block + i * kNr, acc[i][0]);
    _mm512_storeu_ps(block + i * kNr + 16, acc[i][1]);
  }
}

using BFloat16RowsFn = void (*)(const uint16_t*, int64_t, int64_t, const uint16_t*, float*, const char*, int64_t);
constexpr BFloat16RowsFn kBFloat16RowsFns[kBFloat16Rows + 1] = {
    nullptr,          &BFloat16Rows<1>, &BFloat16Rows<2>, &BFloat16Rows<3>,  &BFloat16Rows<4>,
    &BFloat16Rows<5>, &BFloat16Rows<6>, &BFloat16Rows<7>, &BFloat16Rows<8>,  &BFloat16Rows<9>,
    &BFloat16Rows<10>, &BFloat16Rows<11>, &BFloat16Rows<12>};

// b's element (feature j, depth d) at b[j * b_row + d * b_col], packed into `out` as
// PackedBFloat16Weights packs a weight (panels of kNr features, padded_k deep; zeros past n and k),
// every value of out written. Where the features lie side by side (b_row 1: b is [k, n]), each
// tile row is two runs of 16 values interleaved; otherwise each dword is one feature's pair.
RELSERVE_AMX_FN void PackBFloat16Strided(const uint16_t* b, int64_t n, int64_t k, int64_t b_row, int64_t b_col,
                                         int64_t panels, int64_t padded_k, uint16_t* out) {
  uint32_t* dwords = reinterpret_cast<uint32_t*>(out);  // a tile row: 16 features x one pair
  const int64_t pairs = (k + 1) / 2, padded_pairs = padded_k / 2;
  for (int64_t p = 0; p < panels; ++p) {
    uint32_t* panel = dwords + p * padded_k * kNr / 2;
    for (int64_t t = 0; t < 2; ++t) {
      const int64_t f0 = p * kNr + t * 16;
      const int64_t width = std::max<int64_t>(0, std::min<int64_t>(16, n - f0));
      const __mmask16 lanes = static_cast<__mmask16>((1u << width) - 1);
      for (int64_t q = 0; q < padded_pairs; ++q) {
        uint32_t* row = panel + (q / 16) * (2 * kTileBytes / 4) + t * (kTileBytes / 4) + (q % 16) * 16;
        const int64_t d = 2 * q;
        if (q >= pairs || width == 0) {
          _mm512_store_si512(row, _mm512_setzero_si512());
        } else if (b_row == 1) {
          const __m256i lo = _mm256_maskz_loadu_epi16(lanes, b + f0 + d * b_col);
          const __m256i hi = d + 1 < k ? _mm256_maskz_loadu_epi16(lanes, b + f0 + (d + 1) * b_col)
                                       : _mm256_setzero_si256();
          // The masked forms: GCC 12 warns of the unmasked ones' undefined start value.
          _mm512_store_si512(row, _mm512_or_si512(_mm512_maskz_cvtepu16_epi32(0xFFFF, lo),
                                                  _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, hi), 16)));
        } else if (b_col == 1 && d + 1 < k) {
          // Each feature's pair is one dword of its row: one gather of the 16 features' dwords.
          const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                _mm512_set1_epi32(static_cast<int32_t>(b_row)));
          _mm512_store_si512(row, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), lanes, at, b + f0 * b_row + d,
                                                              sizeof(uint16_t)));
        } else {
          for (int64_t j = 0; j < 16; ++j) {
            const uint16_t* v = b + (f0 + j) * b_row + d * b_col;
            row[j] = j < width ? static_cast<uint32_t>(v[0]) | (d + 1 < k ? static_cast<uint32_t>(v[b_col]) << 16 : 0u)
                               : 0u;
          }
        }
      }
    }
  }
}

// Row x (k float32 values) quantized to uint8 into q (padded_k values: zeros past k), with its
// scale and zero point: the range [min(x, 0), max(x, 0)] over 255 steps.
RELSERVE_AMX_FN void QuantizeRow(const float* x, int64_t k, int64_t padded_k, uint8_t* q, float* scale,
                                 int32_t* zero) {
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
  for (int64_t j = 0; j < k; j += 16) {
    const __mmask16 m = k - j >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (k - j)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j);  // zeros past k leave the range as it is
    lo = _mm512_maskz_min_ps(0xFFFF, lo, v);
    hi = _mm512_maskz_max_ps(0xFFFF, hi, v);
  }
  alignas(64) float lows[16], highs[16];
  _mm512_store_ps(lows, lo);
  _mm512_store_ps(highs, hi);
  const float min = *std::min_element(lows, lows + 16), max = *std::max_element(highs, highs + 16);
  float s = (max - min) / 255.0f;
  if (!(s > 0) || !std::isfinite(s)) s = 1.0f;  // all zeros (or not finite: no meaningful scale)
  const int32_t z = static_cast<int32_t>(std::min(255.0f, std::max(0.0f, std::nearbyint(-min / s))));
  *scale = s;
  *zero = z;
  const __m512 inverse = _mm512_set1_ps(1.0f / s);
  const __m512i zv = _mm512_set1_epi32(z), floor = _mm512_setzero_si512(), ceiling = _mm512_set1_epi32(255);
  for (int64_t j = 0; j < padded_k; j += 16) {
    const __mmask16 m = j >= k ? 0 : k - j >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (k - j)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    const __m512i rounded =
        _mm512_maskz_cvt_roundps_epi32(0xFFFF, _mm512_mul_ps(v, inverse), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i r = _mm512_add_epi32(rounded, zv);
    r = _mm512_maskz_min_epi32(0xFFFF, _mm512_maskz_max_epi32(0xFFFF, r, floor), ceiling);
    r = _mm512_maskz_mov_epi32(m, r);  // zeros past k: a zero value times a zero weight adds nothing
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + j), _mm512_maskz_cvtepi32_epi8(0xFFFF, r));
  }
}

// The int8 product on AVX2 alone (Int8Kernel::kAvx2) on 7-bit weights, from the same packed panels
// as VnniRows: each 64-byte row of a B tile (16 features x 4 depths) is two registers of 8
// features. VPMADDUBSW multiplies a row's 4 uint8 values (broadcast) by each feature's 4 int8
// weights and adds them in pairs in int16 (exact: the weights keep within +-63), VPMADDWD by ones
// adds the pairs in int32.
// Rows [0, kVnniRows) of q (rows padded_k bytes apart) times the panel, into block (rows kNr int32
// apart), 4 rows x 16 features at a time: 8 accumulators, 2 weight registers, the broadcast, the
// ones and the products' temporaries fit AVX2's 16 registers. (Summing the two int16 halves of each
// lane without VPMADDWD, a sign flip, a shift and two additions in place of the second multiply,
// ran at 0.63x this on an AMD Zen 3: the simple operations, not the multiplier, bound it there.)
// Each turn of the innermost loop (a tile's 16 rows) prefetches one line, at prefetch + turn *
// prefetch_stride, into L2 where `prefetch` is not null: 2 groups of rows x 2 tiles x 16 rows per
// step of 64 depths, so padded_k turns in all.
constexpr int64_t kAvx2Rows = 4;
RELSERVE_INT8_AVX2_FN void Avx2RowsSevenBit(const uint8_t* q, int64_t padded_k, const int8_t* panel, int32_t* block,
                                            const char* prefetch, int64_t prefetch_stride) {
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t steps = padded_k / PackedInt8Weights::kDepthStep;
  // Without a next panel, the line prefetched is this panel's first, again and again (in L1).
  const char* ahead = prefetch != nullptr ? prefetch : reinterpret_cast<const char*>(panel);
  const int64_t stride = prefetch != nullptr ? prefetch_stride : 0;
  int64_t turn = 0;
  for (int64_t r0 = 0; r0 < kVnniRows; r0 += kAvx2Rows) {
    const uint8_t* rows = q + r0 * padded_k;
    for (int64_t t = 0; t < 2; ++t) {  // B tile t: the panel's features 16t .. 16t + 15
      __m256i acc[kAvx2Rows][2];
      for (int i = 0; i < kAvx2Rows; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
      for (int64_t s = 0; s < steps; ++s) {
        const int8_t* tile = panel + (s * 2 + t) * kTileBytes;
        for (int64_t r = 0; r < 16; ++r) {
          const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + r * 64));
          const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + r * 64 + 32));
          _mm_prefetch(ahead + (turn++) * stride, _MM_HINT_T1);
          const int64_t d = s * PackedInt8Weights::kDepthStep + 4 * r;
          for (int i = 0; i < kAvx2Rows; ++i) {
            int32_t four;
            std::memcpy(&four, rows + i * padded_k + d, sizeof(four));
            const __m256i a = _mm256_set1_epi32(four);
            acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b0), ones));
            acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b1), ones));
          }
        }
      }
      for (int i = 0; i < kAvx2Rows; ++i) {
        int32_t* out = block + (r0 + i) * kNr + 16 * t;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), acc[i][0]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), acc[i][1]);
      }
    }
  }
}

// The same on 8-bit weights (whose pairs of products VPMADDUBSW would saturate), with the
// activations widened to 16 bits (QuantizeRowAvx2): each 64-byte row of a B tile (16 features x
// 4 depths) is read 16 bytes at a time and sign-extended (VPMOVSXBW) to 4 features x 4 depths in
// int16. VPMADDWD multiplies them by the row's 4 values (broadcast) and adds the products in pairs
// into int32, each lane holding a feature's depths 0-1 or 2-3 (the two summed at the end, VPHADDD).
// The products and their sums are exact for every int8 weight, so the results are VnniRows' bit for
// bit. Rows [0, kVnniRows) of q (rows padded_k values apart) times the panel, into block (rows kNr
// int32 apart), 4 rows x 8 features at a time: 8 accumulators, the two weight registers and the 4
// broadcasts fit AVX2's 16 registers. Both kernels take two multiplies per 32 products, but this
// one half again as many instructions in all, and on an AMD Zen 3 it ran at about 0.75 times
// Avx2RowsSevenBit's rate (docs/PERFORMANCE.md).
RELSERVE_INT8_AVX2_FN void Avx2RowsEightBit(const uint16_t* q, int64_t padded_k, const int8_t* panel, int32_t* block) {
  const int64_t steps = padded_k / PackedInt8Weights::kDepthStep;
  for (int64_t r0 = 0; r0 < kVnniRows; r0 += kAvx2Rows) {
    const uint16_t* rows = q + r0 * padded_k;
    for (int64_t e = 0; e < 4; ++e) {  // the panel's features 8e .. 8e + 7: half e % 2 of B tile e / 2
      const int64_t t = e / 2, half = (e % 2) * 32;
      __m256i acc[kAvx2Rows][2];
      for (int i = 0; i < kAvx2Rows; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
      for (int64_t s = 0; s < steps; ++s) {
        const int8_t* tile = panel + (s * 2 + t) * kTileBytes + half;
#pragma GCC unroll 4
        for (int64_t r = 0; r < 16; ++r) {
          const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + r * 64)));
          const __m256i w1 =
              _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + r * 64 + 16)));
          const int64_t d = s * PackedInt8Weights::kDepthStep + 4 * r;
          for (int i = 0; i < kAvx2Rows; ++i) {
            int64_t four;
            std::memcpy(&four, rows + i * padded_k + d, sizeof(four));
            const __m256i a = _mm256_set1_epi64x(four);
            acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(w0, a));
            acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(w1, a));
          }
        }
      }
      // Lanes (2f, 2f + 1) of acc[i][0] are feature f's depths 0-1 and 2-3 (f = 0..3), of acc[i][1]
      // feature 4 + f's: VPHADDD adds them within 128-bit halves (features 0 1 4 5 | 2 3 6 7).
      for (int i = 0; i < kAvx2Rows; ++i) {
        const __m256i sums = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[i][0], acc[i][1]), 0xD8);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(block + (r0 + i) * kNr + 8 * e), sums);
      }
    }
  }
}

// QuantizeRow in AVX2, with the same results (the same range, scale, zero point and rounding: to
// nearest even, the default MXCSR mode), into bytes (Q = uint8_t, for Avx2RowsSevenBit) or each
// value widened to 16 bits (uint16_t, for Avx2RowsEightBit).
template <typename Q>
RELSERVE_INT8_AVX2_FN void QuantizeRowAvx2(const float* x, int64_t k, int64_t padded_k, Q* q, float* scale,
                                           int32_t* zero) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  for (int64_t j = 0; j < k; j += 8) {
    const __m256 v = _mm256_maskload_ps(x + j, Avx2LaneMask(k - j));  // zeros past k leave the range as it is
    lo = _mm256_min_ps(lo, v);
    hi = _mm256_max_ps(hi, v);
  }
  alignas(32) float lows[8], highs[8];
  _mm256_store_ps(lows, lo);
  _mm256_store_ps(highs, hi);
  const float min = *std::min_element(lows, lows + 8), max = *std::max_element(highs, highs + 8);
  float s = (max - min) / 255.0f;
  if (!(s > 0) || !std::isfinite(s)) s = 1.0f;
  const int32_t z = static_cast<int32_t>(std::min(255.0f, std::max(0.0f, std::nearbyint(-min / s))));
  *scale = s;
  *zero = z;
  const __m256 inverse = _mm256_set1_ps(1.0f / s);
  const __m256i zv = _mm256_set1_epi32(z), floor = _mm256_setzero_si256(), ceiling = _mm256_set1_epi32(255);
  for (int64_t j = 0; j < padded_k; j += 16) {  // padded_k is a multiple of 64
    const __m256i m0 = Avx2LaneMask(k - j), m1 = Avx2LaneMask(k - j - 8);
    __m256i r0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_maskload_ps(x + j, m0), inverse));
    __m256i r1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_maskload_ps(x + j + 8, m1), inverse));
    r0 = _mm256_and_si256(_mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(r0, zv), floor), ceiling), m0);
    r1 = _mm256_and_si256(_mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(r1, zv), floor), ceiling), m1);
    // 16 int32 in [0, 255] -> 16 uint16 in order, then bytes (the packs work within 128-bit lanes).
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packus_epi32(r0, r1), 0xD8);
    if constexpr (sizeof(Q) == 2) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + j), words);
    } else {
      const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + j), bytes);
    }
  }
}

#endif  // RELSERVE_AMX_GEMM

// src (n rows of k values, rows `ld` apart) into AMX B tiles, panel by panel (kNr features), step by
// step along k (64 bytes of a tile row: 16 features x G values, G = 4 / sizeof(T)), two tiles per
// step: row r of tile t holds src[f, kk + G*r .. kk + G*r + G - 1] for its 16 features f side by
// side. Past n and k: zeros.
template <typename T>
void PackBTiles(const T* src, int64_t n, int64_t k, int64_t ld, int64_t panels, int64_t padded_k, T* out) {
  constexpr int64_t kGroup = 4 / sizeof(T);      // values of one feature side by side: 2 or 4
  constexpr int64_t kStep = 16 * kGroup;         // depth of one step
  constexpr int64_t kTileValues = kTileBytes / sizeof(T);
  const int64_t steps = padded_k / kStep;
  at::parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {  // the panels are independent
    for (int64_t p = begin; p < end; ++p) {
      for (int64_t step = 0; step < steps; ++step) {
        for (int64_t t = 0; t < 2; ++t) {
          T* tile = out + ((p * steps + step) * 2 + t) * kTileValues;
          for (int64_t r = 0; r < 16; ++r) {
            for (int64_t j = 0; j < 16; ++j) {
              const int64_t f = p * kNr + t * 16 + j;
              for (int64_t e = 0; e < kGroup; ++e) {
                const int64_t kk = step * kStep + kGroup * r + e;
                tile[r * kStep + kGroup * j + e] = f < n && kk < k ? src[f * ld + kk] : T(0);
              }
            }
          }
        }
      }
    }
  });
}

// One feature's k weights w quantized as PackedInt8Weights keeps them: its scale (max |w| / level, 1
// for all zeros; NaN is passed over), its values w / scale rounded to nearest (ties to even) and
// held within [-level, level] into q, and their sum into *sum. Returns the scale.
float QuantizeFeature(const float* w, int64_t k, float level, int8_t* q, int32_t* sum) {
  float amax = 0;
  for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(w[j]));
  const float scale = amax > 0 ? amax / level : 1.0f;
  int32_t total = 0;
  for (int64_t j = 0; j < k; ++j) {
    const float v = std::nearbyint(w[j] / scale);
    q[j] = static_cast<int8_t>(std::min(level, std::max(-level, v)));
    total += q[j];
  }
  *sum = total;
  return scale;
}

#if RELSERVE_AMX_GEMM
// QuantizeFeature in AVX-512, with the same results: the same division, rounding and bounds, lane
// by lane (the operands of max are ordered so that a NaN lane gives what std::max gives).
RELSERVE_AMX_FN float QuantizeFeatureAvx512(const float* w, int64_t k, float level, int8_t* q, int32_t* sum) {
  __m512 vmax = _mm512_setzero_ps();
  for (int64_t j = 0; j < k; j += 16) {
    const __mmask16 m = k - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (k - j)) - 1);
    vmax = _mm512_maskz_max_ps(0xFFFF, _mm512_abs_ps(_mm512_maskz_loadu_ps(m, w + j)), vmax);
  }
  // (The maskz forms and the reductions through memory keep GCC 12's intrinsics from warning of
  // their undefined pass-through values, as elsewhere in this file.)
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, vmax);
  float amax = 0;
  for (float lane : lanes) amax = std::max(amax, lane);
  const float scale = amax > 0 ? amax / level : 1.0f;
  const __m512 vscale = _mm512_set1_ps(scale), low = _mm512_set1_ps(-level), high = _mm512_set1_ps(level);
  __m512i total = _mm512_setzero_si512();
  for (int64_t j = 0; j < k; j += 16) {
    const __mmask16 m = k - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (k - j)) - 1);
    const __m512 v = _mm512_maskz_roundscale_ps(0xFFFF, _mm512_div_ps(_mm512_maskz_loadu_ps(m, w + j), vscale),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i r =
        _mm512_maskz_cvtps_epi32(m, _mm512_maskz_min_ps(0xFFFF, high, _mm512_maskz_max_ps(0xFFFF, v, low)));
    total = _mm512_add_epi32(total, r);
    _mm512_mask_cvtepi32_storeu_epi8(q + j, m, r);
  }
  alignas(64) int32_t sums[16];
  _mm512_store_si512(sums, total);
  int32_t all = 0;
  for (int32_t lane : sums) all += lane;
  *sum = all;
  return scale;
}
#endif  // RELSERVE_AMX_GEMM

// What this CPU runs of relserve's kernels here, read once (CPUID; for AMX, Linux's grant of the
// tile registers, asked then): all false where they are not built.
struct CpuKernels {
  bool amx_bfloat16 = false;
  bool amx_int8 = false;
  bool avx512_bfloat16 = false;
  bool avx512_vnni = false;
  bool avx2_fma = false;
};
const CpuKernels& ThisCpu() {
  static const CpuKernels kernels = [] {
    CpuKernels k;
#if RELSERVE_AMX_GEMM
    k.amx_bfloat16 = CpuHasAmx(/*bfloat16=*/true) && TileDataPermitted();
    k.amx_int8 = CpuHasAmx(/*bfloat16=*/false) && TileDataPermitted();
    k.avx512_bfloat16 = CpuHasAvx512BFloat16();
    k.avx512_vnni = CpuHasAvx512Vnni();
    k.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return k;
  }();
  return kernels;
}

}  // namespace

bool PackedBFloat16Weights::AmxSupported() { return ThisCpu().amx_bfloat16; }

bool PackedBFloat16Weights::Avx512Supported() { return ThisCpu().avx512_bfloat16; }

bool PackedBFloat16Weights::Supports(BFloat16Kernel kernel) {
  return kernel == BFloat16Kernel::kAmx ? AmxSupported() : Avx512Supported();
}

bool PackedBFloat16Weights::Supported() { return AmxSupported() || Avx512Supported(); }

BFloat16Kernel PackedBFloat16Weights::Best() {
  return AmxSupported() ? BFloat16Kernel::kAmx : BFloat16Kernel::kAvx512;
}

const char* BFloat16KernelName(BFloat16Kernel kernel) {
  return kernel == BFloat16Kernel::kAmx ? "amx" : "avx512-bf16";
}

std::shared_ptr<const PackedBFloat16Weights> PackedBFloat16Weights::Pack(const uint16_t* w, int64_t n, int64_t k,
                                                                         int64_t ld) {
  (void)AmxSupported();  // asks for the tile registers once, before any GEMM on what is packed here
  std::shared_ptr<PackedBFloat16Weights> packed(new PackedBFloat16Weights(n, k));
  static_assert(kDepthStep == 32, "two bfloat16 values per tile-row dword");
  PackBTiles<uint16_t>(w, n, k, ld, packed->panels(), packed->padded_k(), packed->data());
  return packed;
}

namespace {

// The epilogue's bfloat16 residual at row r, column n0 (null where it has none).
const uint16_t* ResidualAt(const GemmEpilogue& e, int64_t r, int64_t n0) {
  return e.residual != nullptr ? static_cast<const uint16_t*>(e.residual) + r * e.ldr + n0 : nullptr;
}

}  // namespace

void GemmBFloat16(const uint16_t* a, int64_t m, int64_t lda, const PackedBFloat16Weights& w, const uint16_t* bias,
                  uint16_t* c, int64_t ldc, BFloat16Kernel kernel, const GemmEpilogue& epilogue) {
#if RELSERVE_AMX_GEMM
  if (m <= 0) return;
  const int64_t k = w.k();
  const bool tiles = kernel == BFloat16Kernel::kAmx;
  ParallelTasks(
      m, w.panels(),
      [&](int64_t r0, int64_t r1, int64_t p) {
        const int64_t n0 = p * kNr;
        const int64_t cols = std::min<int64_t>(kNr, w.n() - n0);
        const uint16_t* panel_bias = bias != nullptr ? bias + n0 : nullptr;
        if (tiles) {
          Task<BFloat16Product>(a, m, lda, k, reinterpret_cast<const int8_t*>(w.panel(p)), r0, r1,
                                [&](const float* block, int64_t r, int64_t rows) {
                                  StoreBFloat16Block(block, rows, cols, panel_bias, c + r * ldc + n0, ldc, epilogue,
                                                     ResidualAt(epilogue, r, n0));
                                });
          return;
        }
        // Blocks of kBFloat16Rows rows, each bringing an even share of the next panel (the thread's
        // next task's, as ParallelTasks orders them) into L2 while it works (prefetch_spread.h).
        alignas(64) float block[kBFloat16Rows * kNr];
        const char* next = p + 1 < w.panels() ? reinterpret_cast<const char*>(w.panel(p + 1)) : nullptr;
        const PrefetchSpread spread =
            SpreadPrefetch(w.padded_k() * kNr * static_cast<int64_t>(sizeof(uint16_t)),
                           (r1 - r0 + kBFloat16Rows - 1) / kBFloat16Rows, /*steps=*/(k + 1) / 2);
        for (int64_t r = r0; r < r1; r += kBFloat16Rows) {
          const int64_t rows = std::min<int64_t>(kBFloat16Rows, r1 - r);
          const char* prefetch = next != nullptr ? next + (r - r0) / kBFloat16Rows * spread.share : nullptr;
          kBFloat16RowsFns[rows](a + r * lda, lda, k, w.panel(p), block, prefetch, spread.stride);
          StoreBFloat16Block(block, rows, cols, panel_bias, c + r * ldc + n0, ldc, epilogue,
                             ResidualAt(epilogue, r, n0));
        }
      },
      tiles);
#else
  (void)a, (void)m, (void)lda, (void)w, (void)bias, (void)c, (void)ldc, (void)kernel, (void)epilogue;
  std::abort();  // Supported() is false
#endif
}

void SerialGemmBFloat16(const uint16_t* a, int64_t m, int64_t lda, const uint16_t* b, int64_t n, int64_t k,
                        int64_t b_row, int64_t b_col, uint16_t* c, int64_t ldc, const NeededColumns& needed) {
#if RELSERVE_AMX_GEMM
  if (!PackedBFloat16Weights::Avx512Supported()) std::abort();  // never called where unsupported
  if (m <= 0 || n <= 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, uint16_t{0});
    return;
  }
  // b in the thread's own panels, then each panel (in L1) times every block of rows.
  const int64_t panels = (n + kNr - 1) / kNr;
  const int64_t padded_k = (k + PackedBFloat16Weights::kDepthStep - 1) / PackedBFloat16Weights::kDepthStep *
                           PackedBFloat16Weights::kDepthStep;
  // The calling thread's panels (thread_scratch.h).
  uint16_t* scratch = ThreadScratch<uint16_t, 1>(0, static_cast<size_t>(panels * padded_k * kNr));
  PackBFloat16Strided(b, n, k, b_row, b_col, panels, padded_k, scratch);
  alignas(64) float block[kBFloat16Rows * kNr];
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t cols = std::min<int64_t>(kNr, n - p * kNr);
    for (int64_t r = 0; r < m; r += kBFloat16Rows) {
      const int64_t rows = std::min<int64_t>(kBFloat16Rows, m - r);
      if (!needed.Touches(r, r + rows, p * kNr, p * kNr + cols)) continue;
      kBFloat16RowsFns[rows](a + r * lda, lda, k, scratch + p * padded_k * kNr, block, nullptr, 0);
      StoreBFloat16Block(block, rows, cols, nullptr, c + r * ldc + p * kNr, ldc);
    }
  }
#else
  (void)a, (void)m, (void)lda, (void)b, (void)n, (void)k, (void)b_row, (void)b_col, (void)c, (void)ldc, (void)needed;
  std::abort();  // Avx512Supported() is false
#endif
}

PackedInt8Weights::PackedInt8Weights(int64_t n, int64_t k, int max_level)
    : PackedPanels(n, k),
      scales_(static_cast<size_t>(panels() * kPanelWidth), 0.0f),
      sums_(static_cast<size_t>(panels() * kPanelWidth), 0),
      max_level_(max_level) {}

bool PackedInt8Weights::Supported() { return ThisCpu().amx_int8; }

bool PackedInt8Weights::VnniSupported() { return ThisCpu().avx512_vnni; }

bool PackedInt8Weights::Avx2Supported() { return ThisCpu().avx2_fma; }

bool PackedInt8Weights::Supports(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::kAmx:
      return Supported();
    case Int8Kernel::kVnni:
      return VnniSupported();
    case Int8Kernel::kAvx2:
      return Avx2Supported();
  }
  return false;
}

bool PackedInt8Weights::AnySupported() { return Supported() || VnniSupported() || Avx2Supported(); }

std::shared_ptr<const PackedInt8Weights> PackedInt8Weights::Quantize(const float* w, int64_t n, int64_t k, int64_t ld,
                                                                     int max_level) {
  (void)Supported();  // asks for the tile registers once (where there are any), before any GEMM on what is packed here
  if (max_level != kSevenBitLevel && max_level != kEightBitLevel) std::abort();  // never asked otherwise
  const float level = static_cast<float>(max_level);
  std::shared_ptr<PackedInt8Weights> packed(new PackedInt8Weights(n, k, max_level));
  // Feature by feature, on LibTorch's threads: the scale, the int8 values and their sum.
  std::vector<int8_t> q(static_cast<size_t>(n * k));
#if RELSERVE_AMX_GEMM
  const bool avx512 = VnniSupported();  // AVX-512 F, BW, VL: every CPU either int8 kernel runs on
#else
  const bool avx512 = false;
#endif
  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    for (int64_t f = begin; f < end; ++f) {
#if RELSERVE_AMX_GEMM
      if (avx512) {
        packed->scales_[f] = QuantizeFeatureAvx512(w + f * ld, k, level, q.data() + f * k, &packed->sums_[f]);
        continue;
      }
#endif
      packed->scales_[f] = QuantizeFeature(w + f * ld, k, level, q.data() + f * k, &packed->sums_[f]);
    }
  });
  static_assert(kDepthStep == 64, "four int8 values per tile-row dword");
  PackBTiles<int8_t>(q.data(), n, k, k, packed->panels(), packed->padded_k(), packed->data());
  return packed;
}

float PackedInt8Weights::Dequantized(int64_t f, int64_t j) const {
  const int64_t p = f / kNr, t = (f % kNr) / 16, col = f % 16, step = j / kDepthStep, r = (j % kDepthStep) / 4,
                e = j % 4;
  const int8_t v = panel(p)[(step * 2 + t) * kTileBytes + r * 64 + 4 * col + e];
  return static_cast<float>(v) * scales_[f];
}

void GemmInt8(const float* a, int64_t m, int64_t lda, const PackedInt8Weights& w, const float* bias, float* c,
              int64_t ldc, Int8Kernel kernel) {
#if RELSERVE_AMX_GEMM
  if (m <= 0) return;
  const bool avx2 = kernel == Int8Kernel::kAvx2;
  // On AVX2, 7-bit weights take VPMADDUBSW's kernel; 8-bit ones the rows widened to 16 bits (q16).
  const bool wide = avx2 && w.max_level() > PackedInt8Weights::kSevenBitLevel;
  const int64_t k = w.k(), padded_k = w.padded_k();
  // The rows quantized, whole tiles of them: the rows past m stay zero, so no block needs copying.
  const int64_t rows = (m + kMr - 1) / kMr * kMr;
  thread_local std::vector<uint8_t> quantized;
  thread_local std::vector<uint16_t> widened;
  thread_local std::vector<float> scales;
  thread_local std::vector<int32_t> zeros;
  uint8_t* q = nullptr;
  uint16_t* q16 = nullptr;
  if (wide) {
    if (widened.size() < static_cast<size_t>(rows * padded_k)) widened.resize(static_cast<size_t>(rows * padded_k));
    q16 = widened.data();
    std::fill(q16 + m * padded_k, q16 + rows * padded_k, uint16_t{0});
  } else {
    if (quantized.size() < static_cast<size_t>(rows * padded_k)) quantized.resize(static_cast<size_t>(rows * padded_k));
    q = quantized.data();
    std::memset(q + m * padded_k, 0, static_cast<size_t>((rows - m) * padded_k));
  }
  scales.resize(static_cast<size_t>(m));
  zeros.resize(static_cast<size_t>(m));
  float* row_scales = scales.data();
  int32_t* row_zeros = zeros.data();
  at::parallel_for(0, m, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (wide) {
        QuantizeRowAvx2(a + i * lda, k, padded_k, q16 + i * padded_k, row_scales + i, row_zeros + i);
      } else if (avx2) {
        QuantizeRowAvx2(a + i * lda, k, padded_k, q + i * padded_k, row_scales + i, row_zeros + i);
      } else {
        QuantizeRow(a + i * lda, k, padded_k, q + i * padded_k, row_scales + i, row_zeros + i);
      }
    }
  });
  const bool tiles = kernel == Int8Kernel::kAmx;
  ParallelTasks(
      m, w.panels(),
      [&](int64_t r0, int64_t r1, int64_t p) {
        const int64_t n0 = p * kNr;
        const int64_t cols = std::min<int64_t>(kNr, w.n() - n0);
        auto store = [&](const int32_t* block, int64_t r, int64_t n_rows) {
          const RowQuantization rq{row_scales + r, row_zeros + r};
          if (avx2) {
            StoreInt8BlockAvx2(block, n_rows, cols, rq, w, n0, bias, c + r * ldc + n0, ldc);
          } else {
            StoreInt8Block(block, n_rows, cols, rq, w, n0, bias, c + r * ldc + n0, ldc);
          }
        };
        if (tiles) {
          Task<Int8Product>(q, rows, padded_k, padded_k, w.panel(p), r0, r1, store);
          return;
        }
        alignas(64) int32_t block[kVnniRows * kNr];
        // Avx2RowsSevenBit brings the next panel (the thread's next task's, as ParallelTasks
        // orders them) into L2 while it works, an even share per block of rows (prefetch_spread.h).
        const char* next = p + 1 < w.panels() ? reinterpret_cast<const char*>(w.panel(p + 1)) : nullptr;
        const PrefetchSpread spread =
            SpreadPrefetch(padded_k * kNr, (r1 - r0 + kVnniRows - 1) / kVnniRows, /*steps=*/padded_k);
        for (int64_t r = r0; r < r1; r += kVnniRows) {  // q holds whole blocks of 8 rows past r1
          if (avx2) {
            if (wide) {
              Avx2RowsEightBit(q16 + r * padded_k, padded_k, w.panel(p), block);
            } else {
              const char* prefetch = next != nullptr ? next + (r - r0) / kVnniRows * spread.share : nullptr;
              Avx2RowsSevenBit(q + r * padded_k, padded_k, w.panel(p), block, prefetch, spread.stride);
            }
          } else {
            VnniRows(q + r * padded_k, padded_k, w.panel(p), block);
          }
          store(block, r, std::min<int64_t>(kVnniRows, r1 - r));
        }
      },
      tiles);
#else
  (void)a, (void)m, (void)lda, (void)w, (void)bias, (void)c, (void)ldc;
  std::abort();  // Supported() is false
#endif
}

}  // namespace relserve
