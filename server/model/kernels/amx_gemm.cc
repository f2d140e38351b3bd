#include "server/model/kernels/amx_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include <ATen/Parallel.h>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define RELSERVE_AMX_GEMM 1
#define RELSERVE_AMX_FN __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define RELSERVE_AMX_GEMM 0
#endif

namespace relserve {
namespace {

constexpr int64_t kNr = PackedBFloat16Weights::kPanelWidth;  // output features per panel: two B tiles
constexpr int64_t kKs = PackedBFloat16Weights::kDepthStep;   // k per tile product (16 pairs)
constexpr int64_t kTileElements = 16 * kKs;                  // bfloat16 values in one B tile (1 KiB)
constexpr int64_t kMr = 32;                                  // rows per block: two A tiles
constexpr int64_t kMc = 256;                                 // rows per task: a's slice stays in L2

#if RELSERVE_AMX_GEMM

bool CpuHasAmxBFloat16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool amx_bf16 = (edx >> 22) & 1, amx_tile = (edx >> 24) & 1, avx512f = (ebx >> 16) & 1,
             avx512bw = (ebx >> 30) & 1, avx512vl = (ebx >> 31) & 1;
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  const bool avx512_bf16 = (eax >> 5) & 1;
  return amx_bf16 && amx_tile && avx512f && avx512bw && avx512vl && avx512_bf16;
}

// Linux keeps the tile data out of a process's state until it asks (arch_prctl); the answer
// holds for every thread of the process.
bool TileDataPermitted() {
  constexpr int kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  uint64_t features = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &features) == 0 && (features >> kXfeatureXtiledata) & 1) return true;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  return syscall(SYS_arch_prctl, kArchGetXcompPerm, &features) == 0 && (features >> kXfeatureXtiledata) & 1;
}

// Palette 1: tiles 0-3 the float32 results of a 32 x 32 block (16 x 16 each), 4-5 two A tiles (16 rows
// of 32 bfloat16), 6-7 two B tiles (16 rows of 16 pairs).
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
  _tile_loadconfig(&config);
}

// bfloat16 bits -> float32.
RELSERVE_AMX_FN inline __m512 LoadBFloat16(const uint16_t* p, __mmask16 mask) {
  const __m256i bits = _mm256_maskz_loadu_epi16(mask, p);
  // The masked forms: GCC 12 warns of the unmasked ones' undefined start value.
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xFFFF, bits);
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, wide, 16));
}

// Rows [0, rows) of the block's float32 results (32 x 32, rows 128 bytes apart), plus the bias,
// rounded to bfloat16 into c; `cols` of the 32 are written.
RELSERVE_AMX_FN void StoreBlock(const float* block, int64_t rows, int64_t cols, const uint16_t* bias, uint16_t* c,
                                int64_t ldc) {
  const __mmask16 m0 = cols >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32 ? 0xFFFF : cols <= 16 ? 0 : static_cast<__mmask16>((1u << (cols - 16)) - 1);
  const __mmask32 m = static_cast<__mmask32>(m0) | (static_cast<__mmask32>(m1) << 16);
  const __m512 b0 = bias != nullptr ? LoadBFloat16(bias, m0) : _mm512_setzero_ps();
  const __m512 b1 = bias != nullptr ? LoadBFloat16(bias + 16, m1) : _mm512_setzero_ps();
  for (int64_t i = 0; i < rows; ++i) {
    const __m512 lo = _mm512_add_ps(_mm512_loadu_ps(block + i * kNr), b0);
    const __m512 hi = _mm512_add_ps(_mm512_loadu_ps(block + i * kNr + 16), b1);
    const __m512bh both = _mm512_cvtne2ps_pbh(hi, lo);  // lo in the lower half
    _mm512_mask_storeu_epi16(c + i * ldc, m, reinterpret_cast<__m512i>(both));
  }
}

// The last columns of `rows` rows of a (k % kKs of them, from column k0), zero-padded to kKs, into
// tail (rows kKs values apart), so that the tiles never read past a row's end.
inline void CopyTail(const uint16_t* a, int64_t lda, int64_t rows, int64_t k0, int64_t k, uint16_t* tail) {
  std::memset(tail, 0, sizeof(uint16_t) * kMr * kKs);
  for (int64_t i = 0; i < rows; ++i) std::memcpy(tail + i * kKs, a + i * lda + k0, (k - k0) * sizeof(uint16_t));
}

// One step of 32 along k: ROWS/16 A tiles (rows `stride` bytes apart) times the panel's two B tiles
// (b), into the ROWS/16 x 2 float32 accumulator tiles.
template <int ROWS>
RELSERVE_AMX_FN inline void Step(const uint16_t* a, int64_t stride, const uint16_t* b) {
  _tile_loadd(4, a, stride);
  if constexpr (ROWS == 32) _tile_loadd(5, a + 16 * (stride / 2), stride);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b + kTileElements, 64);
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  if constexpr (ROWS == 32) {
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
}

// One block of ROWS (16 or 32) rows (a, lda apart; all ROWS readable) times one panel, over the
// whole of k, into the float32 block (32 x 32, rows 128 bytes apart). The tile configuration is
// loaded. The last k % 32 columns are copied out first (CopyTail).
template <int ROWS>
RELSERVE_AMX_FN void Block(const uint16_t* a, int64_t lda, const uint16_t* panel, int64_t k, float* block) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (ROWS == 32) {
    _tile_zero(2);
    _tile_zero(3);
  }
  const int64_t full = k / kKs * kKs;
  for (int64_t kk = 0; kk < full; kk += kKs) Step<ROWS>(a + kk, lda * 2, panel + (kk / kKs) * 2 * kTileElements);
  if (full < k) {
    alignas(64) uint16_t tail[kMr * kKs];
    CopyTail(a, lda, ROWS, full, k, tail);
    Step<ROWS>(tail, kKs * 2, panel + (full / kKs) * 2 * kTileElements);
  }
  _tile_stored(0, block, kNr * 4);
  _tile_stored(1, block + 16, kNr * 4);
  if constexpr (ROWS == 32) {
    _tile_stored(2, block + 16 * kNr, kNr * 4);
    _tile_stored(3, block + 16 * kNr + 16, kNr * 4);
  }
}

// Rows [r0, r1) of c for panel p. Rows of a short last block are copied into the thread's own
// zero-padded rows first, so that the tiles never read past a.
RELSERVE_AMX_FN void Task(const uint16_t* a, int64_t m, int64_t lda, const PackedBFloat16Weights& w,
                          const uint16_t* bias, uint16_t* c, int64_t ldc, int64_t r0, int64_t r1, int64_t p) {
  alignas(64) float block[kMr * kNr];
  thread_local std::vector<uint16_t> padded;
  const int64_t k = w.k();
  const int64_t n0 = p * kNr;
  const int64_t cols = std::min<int64_t>(kNr, w.n() - n0);
  const uint16_t* panel = w.panel(p);
  const uint16_t* panel_bias = bias != nullptr ? bias + n0 : nullptr;
  for (int64_t r = r0; r < r1; r += kMr) {
    const int64_t rows = std::min<int64_t>(kMr, r1 - r);
    const int64_t need = rows <= 16 ? 16 : kMr;  // rows the tiles read
    const uint16_t* rows_a = a + r * lda;
    int64_t rows_lda = lda;
    if (r + need > m) {
      padded.assign(static_cast<size_t>(need * k), 0);
      for (int64_t i = 0; i < rows; ++i) std::memcpy(padded.data() + i * k, rows_a + i * lda, k * sizeof(uint16_t));
      rows_a = padded.data();
      rows_lda = k;
    }
    if (need == 16) {
      Block<16>(rows_a, rows_lda, panel, k, block);
    } else {
      Block<kMr>(rows_a, rows_lda, panel, k, block);
    }
    StoreBlock(block, rows, cols, panel_bias, c + r * ldc + n0, ldc);
  }
}

// Tasks [begin, end) of one thread: task t is rows chunk t / panels, panel t % panels.
RELSERVE_AMX_FN void RunTasks(const uint16_t* a, int64_t m, int64_t lda, const PackedBFloat16Weights& w,
                              const uint16_t* bias, uint16_t* c, int64_t ldc, int64_t begin, int64_t end) {
  LoadTileConfig();
  const int64_t panels = w.panels();
  for (int64_t t = begin; t < end; ++t) {
    const int64_t r0 = (t / panels) * kMc;
    Task(a, m, lda, w, bias, c, ldc, r0, std::min(m, r0 + kMc), t % panels);
  }
  _tile_release();
}

#endif  // RELSERVE_AMX_GEMM

}  // namespace

void PackedBFloat16Weights::Free::operator()(uint16_t* p) const { std::free(p); }

PackedBFloat16Weights::PackedBFloat16Weights(int64_t n, int64_t k)
    : n_(n), k_(k), padded_k_((k + kKs - 1) / kKs * kKs), panels_((n + kNr - 1) / kNr) {
  const size_t bytes = static_cast<size_t>(panels_ * padded_k_ * kNr) * sizeof(uint16_t);
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr) throw std::bad_alloc();
  data_.reset(static_cast<uint16_t*>(p));
}

bool PackedBFloat16Weights::Supported() {
#if RELSERVE_AMX_GEMM
  static const bool supported = CpuHasAmxBFloat16() && TileDataPermitted();
  return supported;
#else
  return false;
#endif
}

std::shared_ptr<const PackedBFloat16Weights> PackedBFloat16Weights::Pack(const uint16_t* w, int64_t n, int64_t k,
                                                                         int64_t ld) {
  (void)Supported();  // asks for the tile registers once, before any GEMM on what is packed here
  std::shared_ptr<PackedBFloat16Weights> packed(new PackedBFloat16Weights(n, k));
  uint16_t* out = packed->data_.get();
  const int64_t steps = packed->padded_k_ / kKs;
  for (int64_t p = 0; p < packed->panels_; ++p) {
    for (int64_t step = 0; step < steps; ++step) {
      for (int64_t t = 0; t < 2; ++t) {
        uint16_t* tile = out + ((p * steps + step) * 2 + t) * kTileElements;
        for (int64_t r = 0; r < 16; ++r) {
          for (int64_t j = 0; j < 16; ++j) {
            const int64_t f = p * kNr + t * 16 + j;
            for (int64_t e = 0; e < 2; ++e) {
              const int64_t kk = step * kKs + 2 * r + e;
              tile[r * kKs + 2 * j + e] = f < n && kk < k ? w[f * ld + kk] : 0;
            }
          }
        }
      }
    }
  }
  return packed;
}

void AmxGemmBFloat16(const uint16_t* a, int64_t m, int64_t lda, const PackedBFloat16Weights& w, const uint16_t* bias,
                     uint16_t* c, int64_t ldc) {
#if RELSERVE_AMX_GEMM
  if (m <= 0) return;
  const int64_t chunks = (m + kMc - 1) / kMc;
  const int64_t panels = w.panels();
  at::parallel_for(0, chunks * panels, 1,
                   [&](int64_t begin, int64_t end) { RunTasks(a, m, lda, w, bias, c, ldc, begin, end); });
#else
  (void)a, (void)m, (void)lda, (void)w, (void)bias, (void)c, (void)ldc;
  std::abort();  // Supported() is false
#endif
}

}  // namespace relserve
