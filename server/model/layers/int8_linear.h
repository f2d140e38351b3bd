#ifndef RELSERVE_SERVER_MODEL_LAYERS_INT8_LINEAR_H_
#define RELSERVE_SERVER_MODEL_LAYERS_INT8_LINEAR_H_

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "server/model/layers/int8_weight_bits.h"

namespace relserve {

struct Linear;

// Dynamic int8 quantization of a Linear layer, as torch.ao.quantization.quantize_dynamic and
// ONNX Runtime's dynamic quantization do it: the weight is stored as int8, one symmetric scale
// per output channel (max |w| / 127, zero point 0); at each call the activation is quantized
// to uint8 with an affine scale (its min and max), the product is accumulated in int32 and
// rescaled to float32, and the float32 bias is added. Activations in and out are float32.
// Four GEMMs run it (Int8Gemm):
//  - kAmx, kVnni and kAvx2: relserve's GEMM (kernels/amx_gemm.h, GemmInt8) in AMX tiles on CPUs with
//    AMX-INT8, in AVX-512 VNNI registers on CPUs with that, or in AVX2 registers on other x86-64
//    CPUs (all three the same answers, bit for bit, on the same weights: see Int8Kernel; the AVX2
//    kernel's weights take 7 bits by default, Int8WeightBits). Each row (token) of the activation
//    has its own scale, so a sequence's output does
//    not depend on the other sequences of its batch, and the weights are quantized and packed once.
//  - kOneDnn: LibTorch's oneDNN quantized engine (VNNI where the CPU has it), with one scale for
//    the whole activation tensor: a sequence's output depends slightly on the other sequences of
//    its batch (as ONNX Runtime's DynamicQuantizeLinear does).
struct Int8Weights;

enum class Int8Gemm { kAmx, kVnni, kAvx2, kOneDnn };

// The GEMM int8 runs: with `own` (EngineKernels::packed_int8_gemm), kAmx where the CPU has AMX-INT8,
// else kVnni where it has AVX-512 VNNI, else kAvx2 where it has AVX2 and FMA; kOneDnn without `own`
// or any of them.
Int8Gemm ChooseInt8Gemm(bool own);

// The name ModelInfo::projections and relserve-model give `gemm`: "relserve-amx-int8",
// "relserve-vnni-int8", "relserve-avx2-int8" or "onednn-int8".
const char* Int8GemmName(Int8Gemm gemm);

// Selects LibTorch's oneDNN quantized engine; FAILED_PRECONDITION when this LibTorch has none.
absl::Status EnableInt8Engine();

// The largest |int8 weight| `gemm` quantizes to under `bits` (int8_weight_bits.h): 127 or 63.
// INVALID_ARGUMENT for kEight on kOneDnn where OneDnnInt8SevenBitWeights() (its sums would saturate).
absl::StatusOr<int> Int8WeightLevel(Int8Gemm gemm, Int8WeightBits bits);

// Packs `weight` [out, in] (float) and `bias` [out] (float or undefined) for Int8Apply through
// `gemm` (relserve's only where its kernel runs: PackedInt8Weights::Supports; kOneDnn only after
// EnableInt8Engine()), its weights in Int8WeightLevel(gemm, bits) (which must be ok).
std::shared_ptr<const Int8Weights> QuantizeInt8(const at::Tensor& weight, const at::Tensor& bias, Int8Gemm gemm,
                                                Int8WeightBits bits = Int8WeightBits::kAuto);

// x [..., in] float32 -> [..., out] float32.
at::Tensor Int8Apply(const Int8Weights& weights, const at::Tensor& x);

// Whether kOneDnn quantizes the weights to 7 bits (-63..63) rather than 8: on x86-64 CPUs without
// VNNI (AVX-512 VNNI or AVX-VNNI), where oneDNN multiplies u8 by s8 with VPMADDUBSW, whose pairs
// of products saturate at 16 bits (2 x 255 x 127 > 32767), which left 8-bit weights far off
// float32 (token cosine 0.945 on the references); 2 x 255 x 63 fits. (PyTorch reduces the
// activations' range instead, apply_dynamic's reduce_range: on the references its worst token
// measured 0.9925 against 0.991 here (MPNet), but T5, DeBERTa and both BERTs stayed further from
// float32 than with 7-bit weights.)
bool OneDnnInt8SevenBitWeights();

// Replaces each layer's float weight by its int8 form for `gemm` (Linear::int8); the float weight
// is released. Layers already quantized (and empty weights) are left as they are.
// FAILED_PRECONDITION for kAmx, kVnni or kAvx2 on a CPU without it; Int8WeightLevel's error for
// `bits` that `gemm` cannot take.
absl::Status QuantizeLinearsInt8(const std::vector<Linear*>& layers, Int8Gemm gemm,
                                 Int8WeightBits bits = Int8WeightBits::kAuto);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_INT8_LINEAR_H_
