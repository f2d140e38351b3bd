#include "server/model/kernels/packed_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include <ATen/Parallel.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define RELSERVE_PACKED_GEMM_AVX512 1
#define RELSERVE_AVX512_FN __attribute__((target("avx512f,fma")))
#else
#define RELSERVE_PACKED_GEMM_AVX512 0
#endif

namespace relserve {
namespace {

constexpr int64_t kNr = PackedWeights::kPanelWidth;  // output features per panel: two AVX-512 vectors
constexpr int64_t kMr = 12;                           // rows per register tile: 24 accumulators
constexpr int64_t kKc = 256;                          // k per pass: a panel's slice is 32 KiB, in L1
constexpr int64_t kMc = 192;                          // rows per block: a block's slice of a stays in L2

#if RELSERVE_PACKED_GEMM_AVX512

// One register tile: rows [0, MR) of a (lda apart) times one panel's slice b (kc rows of kNr), into
// c (ldc apart), columns masked by m0 / m1. The first pass over k starts from the bias (or zero),
// the later ones from c. Where `prefetch` is not null, one cache line from it per step of k, kc in
// all, is brought into L1 for the tiles after this one.
template <int MR>
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
      const __m512 x = _mm512_set1_ps(a[i * lda + kk]);
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

// Rows [m0, m0 + mc) against panel p (of a matrix of n columns, depth k, panels k * kNr floats
// apart from `panels`), every pass over k. The first tiles of a pass prefetch the panel's next
// slice of kKc steps (which, the panels lying one after another, is the next panel's first slice
// after the last pass), so that the next pass does not wait for the weight on memory: in most runs
// 1.06-1.15 times as fast at 128 rows, about 1.4 times at 24 (docs/PERFORMANCE.md). The last slice
// of the last panel prefetches nothing.
RELSERVE_AVX512_FN void BlockTimesPanel(const float* a, int64_t lda, int64_t m0, int64_t mc, const float* panels,
                                        int64_t n, int64_t k, int64_t p, const float* bias, float* c, int64_t ldc) {
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
      kTiles[rows](a + (m0 + i) * lda + k0, lda, panel + k0 * kNr, kc, c + (m0 + i) * ldc + n0, ldc, mask0, mask1,
                   panel_bias, k0 == 0, prefetch);
    }
  }
}

#endif  // RELSERVE_PACKED_GEMM_AVX512

// Element (j, kk) of b into panel layout: out[(j / kNr) * k * kNr + kk * kNr + j % kNr].
void PackPanels(const float* b, int64_t n, int64_t k, int64_t b_row, int64_t b_col, float* out) {
  const int64_t panels = (n + kNr - 1) / kNr;
  if (n % kNr != 0) std::memset(out + (panels - 1) * k * kNr, 0, static_cast<size_t>(k * kNr) * sizeof(float));
  if (b_col == 1) {
    // Step by step along k within a panel: each row of the panel is written whole, from its
    // features' rows read in order, so that both the panel's row and the features' lines stay
    // in L1 (writing one feature down a whole panel instead missed L1 on every store).
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t j0 = p * kNr, cols = std::min(kNr, n - j0);
      float* panel = out + p * k * kNr;
      for (int64_t kk = 0; kk < k; ++kk) {
        for (int64_t j = 0; j < cols; ++j) panel[kk * kNr + j] = b[(j0 + j) * b_row + kk];
      }
    }
  } else {
    for (int64_t kk = 0; kk < k; ++kk) {
      const float* src = b + kk * b_col;
      for (int64_t j = 0; j < n; ++j) out[(j / kNr) * k * kNr + kk * kNr + j % kNr] = src[j * b_row];
    }
  }
}

}  // namespace

bool PackedWeights::Supported() {
#if RELSERVE_PACKED_GEMM_AVX512
  static const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return supported;
#else
  return false;
#endif
}

std::shared_ptr<const PackedWeights> PackedWeights::Pack(const float* w, int64_t n, int64_t k, int64_t ld) {
  std::shared_ptr<PackedWeights> packed(new PackedWeights(n, k));
  // Panel by panel on LibTorch's threads: each panel's features into its own part of the storage.
  const int64_t panels = packed->panels();
  at::parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {
    const int64_t f0 = begin * kNr, f1 = std::min(n, end * kNr);
    PackPanels(w + f0 * ld, f1 - f0, k, ld, 1, packed->data() + begin * k * kNr);
  });
  return packed;
}

void PackedGemm(const float* a, int64_t m, int64_t lda, const PackedWeights& w, const float* bias, float* c,
                int64_t ldc) {
#if RELSERVE_PACKED_GEMM_AVX512
  if (m <= 0 || w.n() <= 0) return;
  if (w.k() == 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < w.n(); ++j) c[i * ldc + j] = bias != nullptr ? bias[j] : 0.f;
    }
    return;
  }
  // Work items: (block of rows, panel), panels varying fastest, so that a thread sweeps the
  // panels of one block while that block's rows stay in its cache. The blocks are of even size (at
  // most kMc rows), so that the threads' even shares of items are even shares of the work: 256
  // rows are two blocks of 128, not 192 and 64.
  const int64_t blocks = (m + kMc - 1) / kMc;
  const int64_t block_rows = (m + blocks - 1) / blocks;
  const int64_t panels = w.panels();
  at::parallel_for(0, blocks * panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t block = item / panels, p = item % panels;
      const int64_t m0 = block * block_rows;
      if (m0 >= m) continue;
      BlockTimesPanel(a, lda, m0, std::min(block_rows, m - m0), w.panel(0), w.n(), w.k(), p, bias, c, ldc);
    }
  });
#else
  (void)a, (void)m, (void)lda, (void)w, (void)bias, (void)c, (void)ldc;
  std::abort();  // never packed where unsupported (PackedWeights::Supported)
#endif
}

void SerialGemm(const float* a, int64_t m, int64_t lda, const float* b, int64_t n, int64_t k, int64_t b_row,
                int64_t b_col, float* c, int64_t ldc) {
#if RELSERVE_PACKED_GEMM_AVX512
  if (m <= 0 || n <= 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.f);
    return;
  }
  // The thread's own panels, grown as needed and kept (64-byte aligned for the tiles' loads).
  thread_local std::unique_ptr<float[], void (*)(float*)> scratch(nullptr, [](float* p) { std::free(p); });
  thread_local size_t capacity = 0;
  const int64_t panels = (n + kNr - 1) / kNr;
  const size_t floats = static_cast<size_t>(panels * k * kNr);
  if (floats > capacity) {
    void* p = std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
    scratch.reset(static_cast<float*>(p));
    capacity = floats;
  }
  PackPanels(b, n, k, b_row, b_col, scratch.get());
  for (int64_t m0 = 0; m0 < m; m0 += kMc) {
    for (int64_t p = 0; p < panels; ++p) {
      BlockTimesPanel(a, lda, m0, std::min(kMc, m - m0), scratch.get(), n, k, p, nullptr, c, ldc);
    }
  }
#else
  (void)a, (void)m, (void)lda, (void)b, (void)n, (void)k, (void)b_row, (void)b_col, (void)c, (void)ldc;
  std::abort();  // never called where unsupported (PackedWeights::Supported)
#endif
}

}  // namespace relserve
