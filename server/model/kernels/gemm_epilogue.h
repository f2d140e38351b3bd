#ifndef RELSERVE_SERVER_MODEL_KERNELS_GEMM_EPILOGUE_H_
#define RELSERVE_SERVER_MODEL_KERNELS_GEMM_EPILOGUE_H_

#include <cstdint>

namespace relserve {

// The activations a GEMM applies to its results as it stores them (GemmEpilogue): those of the
// encoders' feed-forward layers that one pass over a result computes.
enum class EpilogueActivation {
  kNone,
  kRelu,  // max(x, 0); NaN stays NaN, as torch.relu
  kGelu,  // the erf form, x / 2 * (1 + erf(x / sqrt(2))), erf as LibTorch's vectorized one (below)
};

// What PackedGemm and GemmBFloat16 do to each result (a · wᵀ + bias) before it leaves the cache:
// the activation, then the residual's element added. Each step rounds as the operator it stands
// for does in the GEMM's dtype, so that the result is what act(linear(x)) + residual gives in
// LibTorch: in float32 c = act(s) + r; in bfloat16 every step rounds its float32 value to bfloat16
// (to nearest, ties to even), c = bf16(bf16(act(bf16(s))) + r). The additions and ReLU are exact
// to those operators' bits; GELU's erf is Abramowitz and Stegun's 7.1.26 (absolute error below
// 1.5e-7, LibTorch's Vectorized<float>::erf), so float32 results may differ from LibTorch's
// GELU in the last places, and a bfloat16 result, rarely, by one unit.
struct GemmEpilogue {
  EpilogueActivation activation = EpilogueActivation::kNone;
  // Null, or the residual [m, n] in the GEMM's output type (float for PackedGemm, bfloat16 bits
  // for GemmBFloat16), its rows `ldr` values apart; it must not overlap the GEMM's output.
  const void* residual = nullptr;
  int64_t ldr = 0;

  bool None() const { return activation == EpilogueActivation::kNone && residual == nullptr; }
};

// The epilogue on a block of float32 results already stored (the bias added): rows [row0, row0 +
// rows) and columns [col0, col0 + cols) of the GEMM's output c (rows ldc apart, c pointing at [0,
// 0]). PackedGemm runs it on each tile of rows after its last pass; GemmBFloat16 runs the same steps
// in registers as it stores each row (amx_gemm.cc).
void ApplyEpilogue(const GemmEpilogue& e, int64_t row0, int64_t col0, int64_t rows, int64_t cols, float* c,
                   int64_t ldc);

// The epilogue's GELU of one float32 value (for tests).
float EpilogueGelu(float x);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_GEMM_EPILOGUE_H_
