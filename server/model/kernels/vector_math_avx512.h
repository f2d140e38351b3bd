#ifndef RELSERVE_SERVER_MODEL_KERNELS_VECTOR_MATH_AVX512_H_
#define RELSERVE_SERVER_MODEL_KERNELS_VECTOR_MATH_AVX512_H_

// Elementwise functions on 16 float32 lanes for the AVX-512 kernels (x86-64 builds only; call them
// from functions compiled for AVX-512F, where the CPU has it). Their scalar forms, which the
// portable loops vectorize, are in exp_non_positive.h and gemm_epilogue.cc.
#if defined(__x86_64__)
#include <immintrin.h>

namespace relserve {

// exp(x) for x <= 0, ExpNonPositive's steps on 16 lanes (the same operations, fused as GCC fuses
// the scalar form's, so the same bits).
__attribute__((target("avx512f"), always_inline)) inline __m512 ExpNonPositiveAvx512(__m512 x) {
  const __m512 shifted = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(12582912.0f));
  const __m512 r = _mm512_sub_ps(shifted, _mm512_set1_ps(12582912.0f));
  __m512 g = _mm512_fnmadd_ps(r, _mm512_set1_ps(0.693359375f), x);
  g = _mm512_fmadd_ps(r, _mm512_set1_ps(2.12194440e-4f), g);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, g, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(y, g), g, g), _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_maskz_slli_epi32(
      0xFFFF,
      _mm512_add_epi32(_mm512_sub_epi32(_mm512_castps_si512(shifted), _mm512_set1_epi32(0x4B400000)),
                       _mm512_set1_epi32(127)),
      23);
  const __m512 e = _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
  // 0 below -87, as ExpNonPositive (and for -inf); NaN stays NaN.
  const __mmask16 below = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
  return _mm512_mask_mov_ps(e, below, _mm512_setzero_ps());
}

// GELU's erf form, x / 2 * (1 + erf(x / sqrt(2))), erf by Abramowitz and Stegun's 7.1.26 step for
// step as LibTorch's Vectorized<float>::erf (absolute error below 1.5e-7), exp(-z^2) by
// ExpNonPositiveAvx512: GemmEpilogue's EpilogueActivation::kGelu.
__attribute__((target("avx512f"), always_inline)) inline __m512 GeluErfAvx512(__m512 x) {
  const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752440f));
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i z_bits = _mm512_castps_si512(z);
  const __m512 abs_z = _mm512_castsi512_ps(_mm512_and_si512(_mm512_set1_epi32(0x7FFFFFFF), z_bits));
  const __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f),
                                 _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), abs_z, _mm512_set1_ps(1.0f)));
  __m512 r = _mm512_fmadd_ps(_mm512_set1_ps(1.061405429f), t, _mm512_set1_ps(-1.453152027f));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(1.421413741f));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(-0.284496736f));
  r = _mm512_fmadd_ps(r, t, _mm512_set1_ps(0.254829592f));
  const __m512 e = ExpNonPositiveAvx512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(z, z)));
  const __m512 erf_abs = _mm512_fnmadd_ps(r, _mm512_mul_ps(t, e), _mm512_set1_ps(1.0f));
  const __m512 erf = _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(erf_abs), _mm512_and_si512(sign_bit, z_bits)));
  return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)), _mm512_add_ps(_mm512_set1_ps(1.0f), erf));
}

}  // namespace relserve

#endif  // defined(__x86_64__)

#endif  // RELSERVE_SERVER_MODEL_KERNELS_VECTOR_MATH_AVX512_H_
