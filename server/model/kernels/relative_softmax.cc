#include "server/model/kernels/relative_softmax.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "server/model/kernels/cpu_kernel_support.h"
#include "server/model/kernels/exp_non_positive.h"
#include "server/model/kernels/vector_math_avx512.h"

namespace relserve {
namespace {

// Everything a worker thread needs to compute a range of score rows.
struct RowArgs {
  void* scores = nullptr;
  int64_t batch = 0, length = 0;
  const void* c2p = nullptr;
  const int32_t* c2p_index = nullptr;
  int64_t c2p_cols = 0;
  const void* p2c = nullptr;
  const int32_t* p2c_index = nullptr;
  int64_t p2c_cols = 0;
  const float* position_bias = nullptr;  // [heads, 2L - 1]
  const float* segment = nullptr;        // [G, L, 2]
  const int32_t* segment_ids = nullptr;  // [batch, L]
  const uint8_t* keep = nullptr;         // [batch, L], 1 = real token; nullptr = all real
  const int64_t* key_end = nullptr;      // [batch]: one past the last real key
  bool zero_padded_queries = false;
  bool causal = false;
  bool avx512 = false;  // the AVX-512 gathers: asked for (RelativeScoreTerms::avx512) and on this CPU
};

inline float ToFloat(float v) { return v; }
inline float ToFloat(c10::BFloat16 v) { return static_cast<float>(v); }
inline float ToFloat(c10::Half v) { return static_cast<float>(v); }

template <typename T>
inline T FromFloat(float v) {
  return static_cast<T>(v);
}

// out[j] = v(j) or out[j] += v(j) for j in [first, n), v(j) = base[idx[j] + j * stride] as
// float: the relative terms' gathers. Scalar everywhere; AVX-512 hardware gathers below.
template <typename T, bool kAdd>
__attribute__((always_inline)) inline void GatherScalar(const T* __restrict base, const int32_t* __restrict idx,
                                                        int32_t stride, int32_t first, int32_t n,
                                                        float* __restrict out) {
  for (int32_t j = first; j < n; ++j) {
    const float v = ToFloat(base[idx[j] + j * stride]);
    out[j] = kAdd ? out[j] + v : v;
  }
}

#if RELSERVE_HAVE_AVX512_KERNELS
// AVX-512 versions. A bfloat16 is the high half of the 32-bit word that starts one element
// before it, so each lane gathers that word and clears its low half: the float itself, no
// shift. The word starts 2 bytes before the element, so a caller must not ask for element 0 of
// an allocation (offset idx[j] + j * stride == 0 with base at its start).
__attribute__((target("avx512f"))) void GatherBFloat16Avx512(const c10::BFloat16* base, const int32_t* idx,
                                                             int32_t stride, int32_t first, int32_t n,
                                                             float* out, bool add) {
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i vstride = _mm512_set1_epi32(stride);
  const __m512i high = _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u));
  const void* words = reinterpret_cast<const char*>(base) - 2;
  for (int32_t j = first; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512i vj = _mm512_add_epi32(_mm512_set1_epi32(j), lanes);
    const __m512i off = _mm512_add_epi32(_mm512_maskz_loadu_epi32(m, idx + j), _mm512_mullo_epi32(vj, vstride));
    const __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, off, words, 2);
    __m512 v = _mm512_castsi512_ps(_mm512_and_si512(w, high));
    if (add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, out + j));
    _mm512_mask_storeu_ps(out + j, m, v);
  }
}

__attribute__((target("avx512f"))) void GatherFloatAvx512(const float* base, const int32_t* idx, int32_t stride,
                                                          int32_t first, int32_t n, float* out, bool add) {
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i vstride = _mm512_set1_epi32(stride);
  for (int32_t j = first; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512i vj = _mm512_add_epi32(_mm512_set1_epi32(j), lanes);
    const __m512i off = _mm512_add_epi32(_mm512_maskz_loadu_epi32(m, idx + j), _mm512_mullo_epi32(vj, vstride));
    __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, off, base, 4);
    if (add) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, out + j));
    _mm512_mask_storeu_ps(out + j, m, v);
  }
}

// A row's last steps on 16 lanes: buf[0, n) (the scores plus their terms, -inf at padded keys)
// into out[0, L): the probabilities softmax(buf) over [0, n), 0 past n, in T (float or bfloat16,
// rounded to nearest, ties to even, as c10::BFloat16's conversion). Returns false, writing
// nothing, where every key is -inf (the caller's uniform row). The sum's order differs from the
// portable loop's, so probabilities may differ from its in the last place.
template <typename T>
__attribute__((target("avx512f"))) bool SoftmaxTailAvx512(float* buf, int64_t n, int64_t L, T* out) {
  const auto tail = [](int64_t left) {
    return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
  };
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf;
  // The masked max: GCC 12 warns of the unmasked one's undefined start value.
  for (int64_t j = 0; j < n; j += 16) {
    vmax = _mm512_maskz_max_ps(0xFFFF, _mm512_mask_loadu_ps(neg_inf, tail(n - j), buf + j), vmax);
  }
  // The lanes reduced through memory: GCC 12's _mm512_reduce_* warn of an uninitialized value.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, vmax);
  float max = lanes[0];
  for (int t = 1; t < 16; ++t) max = std::max(max, lanes[t]);
  if (max == -std::numeric_limits<float>::infinity()) return false;
  const __m512 vm = _mm512_set1_ps(max);
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tail(n - j);
    const __m512 e = _mm512_maskz_mov_ps(m, ExpNonPositiveAvx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, buf + j), vm)));
    _mm512_mask_storeu_ps(buf + j, m, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  _mm512_store_ps(lanes, vsum);
  float sum = 0.0f;
  for (int t = 0; t < 16; ++t) sum += lanes[t];
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  for (int64_t j = 0; j < L; j += 16) {
    const __mmask16 m = tail(L - j);
    const __m512 p = _mm512_mul_ps(_mm512_maskz_loadu_ps(tail(n - std::min(n, j)), buf + j), inv);
    if constexpr (std::is_same_v<T, float>) {
      _mm512_mask_storeu_ps(out + j, m, p);
    } else {
      // Round to nearest, ties to even, in the bits (no NaN here: every value is finite).
      const __m512i u = _mm512_castps_si512(p);
      const __m512i odd = _mm512_and_si512(_mm512_maskz_srli_epi32(0xFFFF, u, 16), _mm512_set1_epi32(1));
      const __m512i rounded =
          _mm512_maskz_srli_epi32(0xFFFF, _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
      const __m256i halves = _mm512_maskz_cvtepi32_epi16(0xFFFF, rounded);
      if (m == 0xFFFF) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), halves);
      } else {
        alignas(32) uint16_t last[16];
        _mm256_store_si256(reinterpret_cast<__m256i*>(last), halves);
        std::memcpy(out + j, last, static_cast<size_t>(L - j) * sizeof(uint16_t));
      }
    }
  }
  return true;
}

#endif

// Whether this CPU has the AVX-512 gathers (and this build compiled them).
bool CpuHasAvx512Gathers() {
#if RELSERVE_HAVE_AVX512_KERNELS
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
#else
  return false;
#endif
}

// One row's gather: base is the start of the term's allocation plus `offset` elements; `avx512`:
// with the AVX-512 gathers (RowArgs::avx512).
template <typename T, bool kAdd>
__attribute__((always_inline)) inline void GatherRow(bool avx512, const T* base, int64_t offset, const int32_t* idx,
                                                     int32_t stride, int32_t n, float* out) {
  const T* row = base + offset;
#if RELSERVE_HAVE_AVX512_KERNELS
  if constexpr (std::is_same_v<T, float>) {
    if (avx512) return GatherFloatAvx512(row, idx, stride, 0, n, out, kAdd);
  } else if constexpr (std::is_same_v<T, c10::BFloat16>) {
    // Element 0 of the allocation is left to the scalar path (see GatherBFloat16Avx512): with
    // a stride, only j = 0 can reach it; without one (c2p), any j of the first row can.
    if (avx512 && !(offset == 0 && stride == 0)) {
      int32_t first = 0;
      if (offset == 0 && n > 0) {
        GatherScalar<T, kAdd>(row, idx, stride, 0, 1, out);
        first = 1;
      }
      return GatherBFloat16Avx512(row, idx, stride, first, n, out, kAdd);
    }
  }
#endif
  GatherScalar<T, kAdd>(row, idx, stride, 0, n, out);
}

// The largest of buf[0, n): sixteen running maxima that the compiler keeps in one vector
// register (a plain max reduction is not vectorized without -ffast-math's NaN assumptions).
__attribute__((always_inline)) inline float RowMax(const float* __restrict buf, int64_t n) {
  constexpr int kLanes = 16;
  float lanes[kLanes];
  for (int t = 0; t < kLanes; ++t) lanes[t] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int t = 0; t < kLanes; ++t) lanes[t] = lanes[t] > buf[j + t] ? lanes[t] : buf[j + t];
  }
  float max = lanes[0];
  for (int t = 1; t < kLanes; ++t) max = max > lanes[t] ? max : lanes[t];
  for (; j < n; ++j) max = max > buf[j] ? max : buf[j];
  return max;
}

template <typename T>
__attribute__((always_inline)) inline void Rows(const RowArgs& a, int64_t begin, int64_t end,
                                                float* __restrict buf) {
  const int64_t L = a.length, B = a.batch;
  const float kNegInf = -std::numeric_limits<float>::infinity();
  T* scores = static_cast<T*>(a.scores);
  const T* c2p = static_cast<const T*>(a.c2p);
  const T* p2c = static_cast<const T*>(a.p2c);
  for (int64_t row = begin; row < end; ++row) {
    const int64_t g = row / L, i = row % L, b = g % B, h = g / B;
    T* __restrict out = scores + row * L;
    const uint8_t* __restrict keep = a.keep ? a.keep + b * L : nullptr;
    if (keep && a.zero_padded_queries && !keep[i]) {
      for (int64_t j = 0; j < L; ++j) out[j] = FromFloat<T>(0.0f);
      continue;
    }
    // Keys at or past key_end are padding (or, causal, after the query): probability 0, no work.
    int64_t n = a.key_end ? a.key_end[b] : L;
    if (a.causal) n = std::min(n, i + 1);
    if (n == 0) {  // every key padded: transformers' finite mask leaves a uniform row
      const T u = FromFloat<T>(1.0f / static_cast<float>(L));
      for (int64_t j = 0; j < L; ++j) out[j] = u;
      continue;
    }
    const int64_t d0 = L - 1 - i;  // table offset of key 0 for this query
    // The relative terms first, then q.k: transformers adds (c2p + p2c) to the scores.
    if (c2p) {
      GatherRow<T, false>(a.avx512, c2p, row * a.c2p_cols, a.c2p_index + d0, 0, static_cast<int32_t>(n), buf);
    } else {
      for (int64_t j = 0; j < n; ++j) buf[j] = 0.0f;
    }
    if (p2c) {
      GatherRow<T, true>(a.avx512, p2c, g * L * a.p2c_cols, a.p2c_index + d0, static_cast<int32_t>(a.p2c_cols),
                         static_cast<int32_t>(n), buf);
    }
    if (a.position_bias) {
      const float* __restrict pb = a.position_bias + h * (2 * L - 1) + d0;
      for (int64_t j = 0; j < n; ++j) buf[j] += pb[j];
    }
    if (a.segment) {
      const float same = a.segment[row * 2], other = a.segment[row * 2 + 1];
      const int32_t* __restrict ids = a.segment_ids + b * L;
      const int32_t mine = ids[i];
      for (int64_t j = 0; j < n; ++j) buf[j] += ids[j] == mine ? same : other;
    }
    for (int64_t j = 0; j < n; ++j) buf[j] = ToFloat(out[j]) + buf[j];
    if (keep) {
      for (int64_t j = 0; j < n; ++j) buf[j] = keep[j] ? buf[j] : kNegInf;
    }
#if RELSERVE_HAVE_AVX512_KERNELS
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, c10::BFloat16>) {
      if (a.avx512) {
        if (!SoftmaxTailAvx512(buf, n, L, out)) {
          const T u = FromFloat<T>(1.0f / static_cast<float>(L));
          for (int64_t j = 0; j < L; ++j) out[j] = u;
        }
        continue;
      }
    }
#endif
    const float max = RowMax(buf, n);
    if (max == kNegInf) {  // keys before key_end all padded too (a mask with holes)
      const T u = FromFloat<T>(1.0f / static_cast<float>(L));
      for (int64_t j = 0; j < L; ++j) out[j] = u;
      continue;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      const float e = ExpNonPositive(buf[j] - max);
      buf[j] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; ++j) out[j] = FromFloat<T>(buf[j] * inv);
    for (int64_t j = n; j < L; ++j) out[j] = FromFloat<T>(0.0f);
  }
}

// Entry points, one per dtype (see cpu_kernel_support.h).
RELSERVE_CPU_MULTIVERSION void RowsFloat(const RowArgs& a, int64_t b, int64_t e, float* buf) {
  Rows<float>(a, b, e, buf);
}
RELSERVE_CPU_MULTIVERSION void RowsBFloat16(const RowArgs& a, int64_t b, int64_t e, float* buf) {
  Rows<c10::BFloat16>(a, b, e, buf);
}
RELSERVE_CPU_MULTIVERSION void RowsHalf(const RowArgs& a, int64_t b, int64_t e, float* buf) {
  Rows<c10::Half>(a, b, e, buf);
}

void CheckTerm(const at::Tensor& t, const at::Tensor& index, const at::Tensor& scores, const char* name) {
  TORCH_CHECK(t.dim() == 3 && t.size(0) == scores.size(0) && t.size(1) == scores.size(1) && t.is_contiguous() &&
                  t.scalar_type() == scores.scalar_type(),
              name, ": expected a contiguous [G, L, R] tensor of the scores' dtype");
  const int64_t L = scores.size(1);
  TORCH_CHECK(index.defined() && index.scalar_type() == at::kInt && index.is_contiguous() &&
                  index.numel() == 2 * L - 1,
              name, " index: expected int32 [2L - 1]");
  const int32_t* p = index.data_ptr<int32_t>();
  for (int64_t d = 0; d < 2 * L - 1; ++d) {
    TORCH_CHECK(p[d] >= 0 && p[d] < t.size(2), name, " index ", d, " = ", p[d], " is outside [0, ", t.size(2), ")");
  }
}

}  // namespace

void RelativeSoftmaxWithAtenOps(at::Tensor& scores, int64_t batch, const RelativeScoreTerms& terms) {
  TORCH_CHECK(scores.dim() == 3 && scores.size(1) == scores.size(2), "scores: expected a [G, L, L] tensor");
  TORCH_CHECK(batch > 0 && scores.size(0) % batch == 0, "scores: groups are not a multiple of the batch");
  const int64_t G = scores.size(0), L = scores.size(1), heads = G / batch;
  const auto device = scores.device();
  at::Tensor i = at::arange(L, at::TensorOptions().dtype(at::kLong).device(device)).unsqueeze(1);
  at::Tensor offset = at::arange(L, i.options()).unsqueeze(0) - i + (L - 1);  // [L, L]: j - i + L - 1
  at::Tensor rel;  // float32 [G, L, L]: (c2p + p2c) + position bias
  if (terms.c2p.defined()) {
    at::Tensor idx = terms.c2p_index.to(device).to(at::kLong).index({offset});
    rel = at::gather(terms.c2p.to(at::kFloat), 2, idx.expand({G, L, L}));
  }
  if (terms.p2c.defined()) {
    // p2c[g, j, index(j - i)]: gathered along the keys' rows, then transposed to [query, key].
    at::Tensor idx = terms.p2c_index.to(device).to(at::kLong).index({offset}).t();
    at::Tensor term = at::gather(terms.p2c.to(at::kFloat), 2, idx.expand({G, L, L})).transpose(1, 2);
    rel = rel.defined() ? rel + term : term;
  }
  if (terms.position_bias.defined()) {
    at::Tensor pb = terms.position_bias.to(device).to(at::kFloat).index({at::indexing::Slice(), offset});
    pb = pb.unsqueeze(1).expand({heads, batch, L, L}).reshape({G, L, L});
    rel = rel.defined() ? rel + pb : pb;
  }
  if (terms.segment.defined()) {
    // [batch, L, L]: whether query i and key j share a segment, for every head.
    at::Tensor ids = terms.segment_ids.to(device);
    at::Tensor same = ids.unsqueeze(2).eq(ids.unsqueeze(1)).unsqueeze(0).expand({heads, batch, L, L}).reshape({G, L, L});
    at::Tensor seg = terms.segment.to(device).to(at::kFloat);
    at::Tensor term = at::where(same, seg.narrow(2, 0, 1), seg.narrow(2, 1, 1));
    rel = rel.defined() ? rel + term : term;
  }
  at::Tensor s = scores.to(at::kFloat);
  if (rel.defined()) s = s + rel;
  at::Tensor keep;
  if (terms.attention_mask.defined()) {
    keep = terms.attention_mask.to(device).ne(0).unsqueeze(0).expand({heads, batch, L}).reshape({G, 1, L});
    s = s.masked_fill(keep.logical_not(), std::numeric_limits<float>::lowest());
  }
  if (terms.causal) {
    s = s.masked_fill(offset.gt(L - 1), std::numeric_limits<float>::lowest());  // j > i
  }
  at::Tensor p = at::softmax(s, -1);
  if (keep.defined() && terms.zero_padded_queries) p = p * keep.transpose(1, 2).to(at::kFloat);
  scores.copy_(p);
}

void RelativeTermColumns(const at::Tensor& index, int64_t L, bool rows_are_keys, int32_t* first, int32_t* end) {
  TORCH_CHECK(L > 0 && index.device().is_cpu() && index.scalar_type() == at::kInt && index.dim() == 1 &&
                  index.size(0) == 2 * L - 1 && index.is_contiguous(),
              "RelativeTermColumns: expected a contiguous int32 [2L - 1] table on the CPU");
  const int32_t* t = index.data_ptr<int32_t>();
  // Row r reads the table over d = j - i + L - 1 for its L partners: the window [s, s + L - 1] with
  // s = L - 1 - i for query i (c2p) and s = j for key j (p2c). Every window holds d = L - 1, so its
  // minimum is that of [s, L - 1] (suffix) and of [L - 1, s + L - 1] (prefix from the middle).
  std::vector<int32_t> suffix_min(L), suffix_max(L), prefix_min(L), prefix_max(L);
  for (int64_t d = L - 1; d >= 0; --d) {
    suffix_min[d] = d == L - 1 ? t[d] : std::min(t[d], suffix_min[d + 1]);
    suffix_max[d] = d == L - 1 ? t[d] : std::max(t[d], suffix_max[d + 1]);
  }
  for (int64_t e = 0; e < L; ++e) {  // prefix_*[e]: over [L - 1, L - 1 + e]
    prefix_min[e] = e == 0 ? t[L - 1] : std::min(t[L - 1 + e], prefix_min[e - 1]);
    prefix_max[e] = e == 0 ? t[L - 1] : std::max(t[L - 1 + e], prefix_max[e - 1]);
  }
  for (int64_t r = 0; r < L; ++r) {
    const int64_t s = rows_are_keys ? r : L - 1 - r;
    first[r] = std::min(suffix_min[s], prefix_min[s]);
    end[r] = std::max(suffix_max[s], prefix_max[s]) + 1;
  }
}

void RelativeSoftmaxInPlace(at::Tensor& scores, int64_t batch, const RelativeScoreTerms& terms) {
  if (!scores.device().is_cpu()) return RelativeSoftmaxWithAtenOps(scores, batch, terms);
  TORCH_CHECK(scores.dim() == 3 && scores.size(1) == scores.size(2) && scores.is_contiguous(),
              "scores: expected a contiguous [G, L, L] tensor");
  TORCH_CHECK(batch > 0 && scores.size(0) % batch == 0, "scores: groups are not a multiple of the batch");
  const int64_t G = scores.size(0), L = scores.size(1);
  RowArgs a;
  a.scores = scores.data_ptr();
  a.batch = batch;
  a.length = L;
  if (terms.c2p.defined()) {
    CheckTerm(terms.c2p, terms.c2p_index, scores, "c2p");
    a.c2p = terms.c2p.data_ptr();
    a.c2p_index = terms.c2p_index.data_ptr<int32_t>();
    a.c2p_cols = terms.c2p.size(2);
  }
  if (terms.p2c.defined()) {
    CheckTerm(terms.p2c, terms.p2c_index, scores, "p2c");
    a.p2c = terms.p2c.data_ptr();
    a.p2c_index = terms.p2c_index.data_ptr<int32_t>();
    a.p2c_cols = terms.p2c.size(2);
  }
  at::Tensor bias;
  if (terms.position_bias.defined()) {
    bias = terms.position_bias.to(at::kFloat).contiguous();
    TORCH_CHECK(bias.dim() == 2 && bias.size(0) == G / batch && bias.size(1) == 2 * L - 1,
                "position_bias: expected [heads, 2L - 1]");
    a.position_bias = bias.data_ptr<float>();
  }
  at::Tensor keep, key_end;
  if (terms.attention_mask.defined()) {
    TORCH_CHECK(terms.attention_mask.dim() == 2 && terms.attention_mask.size(0) == batch &&
                    terms.attention_mask.size(1) == L,
                "attention_mask: expected [batch, L]");
    // The models convert their mask once per forward; other callers' masks are converted here.
    keep = terms.attention_mask.scalar_type() == at::kByte ? terms.attention_mask.contiguous()
                                                             : terms.attention_mask.ne(0).to(at::kByte).contiguous();
    key_end = at::zeros({batch}, at::kLong);
    const uint8_t* k = keep.data_ptr<uint8_t>();
    int64_t* e = key_end.data_ptr<int64_t>();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t j = L; j > 0; --j) {
        if (k[b * L + j - 1]) {
          e[b] = j;
          break;
        }
      }
    }
    a.keep = k;
    a.key_end = e;
  }
  at::Tensor segment, segment_ids;
  if (terms.segment.defined()) {
    segment = terms.segment.to(at::kFloat).contiguous();
    segment_ids = terms.segment_ids.to(at::kInt).contiguous();
    TORCH_CHECK(segment.dim() == 3 && segment.size(0) == G && segment.size(1) == L && segment.size(2) == 2,
                "segment: expected [G, L, 2]");
    TORCH_CHECK(segment_ids.dim() == 2 && segment_ids.size(0) == batch && segment_ids.size(1) == L,
                "segment_ids: expected [batch, L]");
    a.segment = segment.data_ptr<float>();
    a.segment_ids = segment_ids.data_ptr<int32_t>();
  }
  a.zero_padded_queries = terms.zero_padded_queries;
  a.causal = terms.causal;
  a.avx512 = terms.avx512 && CpuHasAvx512Gathers();

  void (*fn)(const RowArgs&, int64_t, int64_t, float*) = nullptr;
  switch (scores.scalar_type()) {
    case at::kFloat: fn = RowsFloat; break;
    case at::kBFloat16: fn = RowsBFloat16; break;
    case at::kHalf: fn = RowsHalf; break;
    default: TORCH_CHECK(false, "scores: unsupported dtype ", scores.scalar_type());
  }
  // About 16K score elements per task: small lengths still split into few tasks.
  const int64_t grain = std::max<int64_t>(1, 16384 / L);
  at::parallel_for(0, G * L, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> buf(L);
    fn(a, begin, end, buf.data());
  });
}

at::Tensor ToeplitzTable(const at::Tensor& m) {
  TORCH_CHECK(m.dim() == 2 && m.size(0) == m.size(1), "ToeplitzTable: expected a square matrix");
  const int64_t L = m.size(0);
  at::Tensor c = m.to(at::kLong).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  at::Tensor out = at::empty({2 * L - 1}, at::kInt);
  int32_t* o = out.data_ptr<int32_t>();
  for (int64_t d = 0; d < 2 * L - 1; ++d) {
    // j - i + L - 1 = d: i = L - 1 - d, j = 0 below the diagonal; i = 0, j = d - L + 1 above.
    const int64_t i = d < L ? L - 1 - d : 0, j = d < L ? 0 : d - L + 1;
    o[d] = static_cast<int32_t>(p[i * L + j]);
  }
  return out;
}

}  // namespace relserve
