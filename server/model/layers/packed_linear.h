#ifndef RELSERVE_SERVER_MODEL_LAYERS_PACKED_LINEAR_H_
#define RELSERVE_SERVER_MODEL_LAYERS_PACKED_LINEAR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "server/model/kernels/packed_gemm.h"

namespace relserve {

struct Linear;

// Inputs of at most this many rows (tokens) run on the packed weights by default; longer ones on
// the weight as loaded, through LibTorch's BLAS. Measured on AVX-512 (docs/PERFORMANCE.md, "float32
// weights packed once"): the packed GEMM is ahead of OpenBLAS at 128 rows (1.05-1.17x on one
// thread, more on two, where OpenBLAS's threads spin between small GEMMs) and behind it from about
// 240 rows.
inline constexpr int64_t kPackedLinearMaxRows = 192;

// A Linear's weight packed for PackedGemm, and the longest input (in rows) that takes it.
struct PackedLinear {
  std::shared_ptr<const PackedWeights> weights;
  int64_t max_rows = kPackedLinearMaxRows;
};

// x [..., in] float32 on the CPU -> [..., out] float32: x · wᵀ + bias (bias [out] float32 and
// contiguous, or undefined), through PackedGemm (kernels/packed_gemm.h).
at::Tensor PackedLinearApply(const PackedWeights& weights, const at::Tensor& bias, const at::Tensor& x);

// Whether Linear runs x on `packed` (x has at most packed.max_rows rows).
bool UsePackedLinear(const PackedLinear& packed, const at::Tensor& x);

// Packs each float32 CPU layer's weight once for PackedGemm (Linear::packed), beside the weight
// as loaded (which longer inputs still take); the bias is made contiguous. Layers already packed
// or quantized are left as they are. Call only where PackedWeights::Supported().
absl::Status PackLinearsFloat32(const std::vector<Linear*>& layers, int64_t max_rows = kPackedLinearMaxRows);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_PACKED_LINEAR_H_
