#include "server/model/kernels/gemm_epilogue.h"

#include <cmath>
#include <cstring>

#include "server/model/kernels/cpu_kernel_support.h"
#include "server/model/kernels/exp_non_positive.h"

namespace relserve {
namespace {

// GELU's erf form with Abramowitz and Stegun's 7.1.26 for erf, step for step as LibTorch's
// Vectorized<float>::erf (1 - t (p1 + p2 t + ... + p5 t^4) exp(-z^2), t = 1 / (1 + p |z|), the
// sign of z restored), and its x * 0.5 * (1 + erf(x / sqrt(2))). Branch-free, so that the loops
// below vectorize.
__attribute__((always_inline)) inline float GeluErf(float x) {
  const float z = x * 0.70710678118654752440f;
  const float t = 1.0f / (0.3275911f * std::fabs(z) + 1.0f);
  float r = 1.061405429f * t + -1.453152027f;
  r = r * t + 1.421413741f;
  r = r * t + -0.284496736f;
  r = r * t + 0.254829592f;
  const float erf_abs = 1.0f - r * (t * ExpNonPositive(-(z * z)));
  return x * 0.5f * (1.0f + std::copysign(erf_abs, z));
}

// max(x, 0), NaN kept (x < 0 is false for it), as torch.relu.
__attribute__((always_inline)) inline float Relu(float x) { return x < 0.0f ? 0.0f : x; }

template <EpilogueActivation kAct>
__attribute__((always_inline)) inline float Activate(float x) {
  if constexpr (kAct == EpilogueActivation::kRelu) return Relu(x);
  if constexpr (kAct == EpilogueActivation::kGelu) return GeluErf(x);
  return x;
}

template <EpilogueActivation kAct, bool kResidual>
RELSERVE_CPU_MULTIVERSION void EpilogueFloatRows(const float* residual, int64_t ldr, int64_t rows, int64_t cols, float* c,
                                         int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i) {
    float* __restrict out = c + i * ldc;
    const float* r = kResidual ? residual + i * ldr : nullptr;
    for (int64_t j = 0; j < cols; ++j) {
      const float v = Activate<kAct>(out[j]);
      out[j] = kResidual ? v + r[j] : v;
    }
  }
}

template <typename T, typename Rows>
void Dispatch(const GemmEpilogue& e, int64_t row0, int64_t col0, int64_t rows, int64_t cols, T* c, int64_t ldc,
              Rows rows_fn) {
  if (e.None() || rows <= 0 || cols <= 0) return;
  const T* residual = e.residual != nullptr ? static_cast<const T*>(e.residual) + row0 * e.ldr + col0 : nullptr;
  rows_fn(e.activation, residual, e.ldr, rows, cols, c + row0 * ldc + col0, ldc);
}

}  // namespace

void ApplyEpilogue(const GemmEpilogue& e, int64_t row0, int64_t col0, int64_t rows, int64_t cols, float* c,
                   int64_t ldc) {
  Dispatch(e, row0, col0, rows, cols, c, ldc,
           [](EpilogueActivation act, const float* r, int64_t ldr, int64_t m, int64_t n, float* out, int64_t ld) {
             const bool res = r != nullptr;
             switch (act) {
               case EpilogueActivation::kNone:
                 if (res) EpilogueFloatRows<EpilogueActivation::kNone, true>(r, ldr, m, n, out, ld);
                 return;
               case EpilogueActivation::kRelu:
                 res ? EpilogueFloatRows<EpilogueActivation::kRelu, true>(r, ldr, m, n, out, ld)
                     : EpilogueFloatRows<EpilogueActivation::kRelu, false>(r, ldr, m, n, out, ld);
                 return;
               case EpilogueActivation::kGelu:
                 res ? EpilogueFloatRows<EpilogueActivation::kGelu, true>(r, ldr, m, n, out, ld)
                     : EpilogueFloatRows<EpilogueActivation::kGelu, false>(r, ldr, m, n, out, ld);
                 return;
             }
           });
}

float EpilogueGelu(float x) { return GeluErf(x); }

}  // namespace relserve
