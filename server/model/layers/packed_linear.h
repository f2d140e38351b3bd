#ifndef RELSERVE_SERVER_MODEL_LAYERS_PACKED_LINEAR_H_
#define RELSERVE_SERVER_MODEL_LAYERS_PACKED_LINEAR_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/kernels/gemm_epilogue.h"
#include "server/model/kernels/packed_gemm.h"

namespace relserve {

struct Linear;

// Inputs of at most this many rows (tokens) run on the packed weights by default; longer ones on
// the weight as loaded, through LibTorch's BLAS. Measured on AVX-512 (docs/PERFORMANCE.md, "float32
// weights packed once"): the packed GEMM is ahead of OpenBLAS at 128 rows (1.05-1.17x on one
// thread, more on two, where OpenBLAS's threads spin between small GEMMs) and behind it from about
// 240 rows.
inline constexpr int64_t kPackedLinearMaxRows = 192;

// The row bound under which every input takes the packed weights (ModelInfo::kEveryBatch).
inline constexpr int64_t kPackedLinearEveryRow = std::numeric_limits<int64_t>::max();

// The row bound an engine takes by default for `kernel`'s tiles on a CPU of this vendor
// (EngineKernels::packed_gemm_max_rows 0):
//  - kPackedLinearMaxRows for AVX-512 on Intel CPUs (measured on a Sapphire Rapids Xeon);
//  - kPackedLinearEveryRow for AVX-512 on AMD CPUs: on a Zen 4, with the rows packed in tiles of
//    12, forwards on the tiles alone took 0.86-0.97 times OpenBLAS's time at 8 x 128, 2 x 512 and
//    8 x 512 on two threads, and were level on one;
//  - kPackedLinearEveryRow for AVX2, whose tiles on half-panel slices ran past 192 rows level
//    with or ahead of OpenBLAS's Zen kernels on two threads (0.96-1.04 on one), and whose forward
//    then makes no BLAS call (1.04-1.12 times the speed at 8 x 128 and 2 x 512).
// Every input taking the packed weights also releases the weights as loaded (docs/PERFORMANCE.md).
int64_t DefaultPackedLinearMaxRows(Float32Kernel kernel, bool amd_cpu);
// The same for this CPU's vendor (CPUID's vendor string "AuthenticAMD").
int64_t DefaultPackedLinearMaxRows(Float32Kernel kernel);
bool ThisCpuIsAmd();
// Whether float32 engines on this CPU run every batch on the packed weights by default (so that
// their forward makes no BLAS call): PackedWeights::Supported() and DefaultPackedLinearMaxRows of
// its best kernel is kPackedLinearEveryRow. The programs' process tuning reads it
// (util/process_tuning.h).
bool Float32TakesEveryBatchByDefault();

// A Linear's weight packed once at load: for PackedGemm (float32), with the longest input (in rows)
// that takes it, or for GemmBFloat16 (bfloat16), which every input takes.
struct PackedLinear {
  std::shared_ptr<const PackedWeights> weights;            // float32; null for bfloat16
  int64_t max_rows = kPackedLinearMaxRows;                  // float32 only
  std::shared_ptr<const PackedBFloat16Weights> bfloat16;  // bfloat16; null for float32
};

// x [..., in] float32 on the CPU -> [..., out] float32: act(x · wᵀ + bias) + residual (bias [out]
// float32 and contiguous, or undefined; residual float32, contiguous, of the output's size, or
// undefined), through PackedGemm (kernels/packed_gemm.h), act and residual in its epilogue
// (kernels/gemm_epilogue.h).
at::Tensor PackedLinearApply(const PackedWeights& weights, const at::Tensor& bias, const at::Tensor& x,
                             EpilogueActivation act = EpilogueActivation::kNone,
                             const at::Tensor& residual = at::Tensor());

// x [..., in] on the CPU -> [..., out] in x's type: x · wᵀ + bias in bfloat16 (x and bias, [out]
// and contiguous or undefined, taken as bfloat16), through GemmBFloat16 (kernels/amx_gemm.h) on the
// CPU's best kernel (PackedBFloat16Weights::Best()). With act or residual (bfloat16, contiguous, of
// the output's size), x must be bfloat16: they run in the GEMM's epilogue, each step rounded to
// bfloat16 as LibTorch's bfloat16 operators round.
at::Tensor PackedBFloat16LinearApply(const PackedBFloat16Weights& weights, const at::Tensor& bias, const at::Tensor& x,
                                     EpilogueActivation act = EpilogueActivation::kNone,
                                     const at::Tensor& residual = at::Tensor());

// Whether Linear runs x on `packed`: always for bfloat16; for float32 where x has at most
// packed.max_rows rows.
bool UsePackedLinear(const PackedLinear& packed, const at::Tensor& x);

// Packs each float32 CPU layer's weight once for PackedGemm (Linear::packed), beside the weight
// as loaded, which inputs of more than max_rows rows still take. Under kPackedLinearEveryRow no
// input takes it, so it is released (its reference dropped: a weight tied to another tensor, such
// as the word embeddings, stays with that one), as bfloat16's is. The bias is made contiguous.
// Layers already packed or quantized are left as they are. Call only where
// PackedWeights::Supported().
absl::Status PackLinearsFloat32(const std::vector<Linear*>& layers, int64_t max_rows = kPackedLinearMaxRows);

// Packs each bfloat16 CPU layer's weight once for GemmBFloat16 (Linear::packed) in place of the
// weight as loaded, which is released (every input takes the packed one); the bias is made
// contiguous. Layers already packed or quantized (and empty weights) are left as they are. Call
// only where PackedBFloat16Weights::Supported().
absl::Status PackLinearsBFloat16(const std::vector<Linear*>& layers);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_PACKED_LINEAR_H_
