#ifndef RELSERVE_SERVER_MODEL_LAYERS_INT8_LINEAR_H_
#define RELSERVE_SERVER_MODEL_LAYERS_INT8_LINEAR_H_

#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"

namespace relserve {

struct Linear;

// Dynamic int8 quantization of a Linear layer, as torch.ao.quantization.quantize_dynamic and
// ONNX Runtime's dynamic quantization do it: the weight is stored as int8, one symmetric scale
// per output channel (max |w| / 127, zero point 0); at each call the activation is quantized
// to uint8 with one affine scale for the whole tensor (its min and max), the product is
// accumulated in int32 and rescaled to float32, and the float32 bias is added. LibTorch's
// oneDNN quantized engine runs it (VNNI where the CPU has it). Activations in and out are
// float32.
//
// Because the activation's scale is the tensor's range, a sequence's output depends slightly
// on the other sequences of its batch (as ONNX Runtime's DynamicQuantizeLinear does).
struct Int8Weights;

// Selects LibTorch's oneDNN quantized engine; FAILED_PRECONDITION when this LibTorch has none.
absl::Status EnableInt8Engine();

// Packs `weight` [out, in] (float) and `bias` [out] (float or undefined) for Int8Apply.
std::shared_ptr<const Int8Weights> QuantizeInt8(const at::Tensor& weight, const at::Tensor& bias);

// x [..., in] float32 -> [..., out] float32.
at::Tensor Int8Apply(const Int8Weights& weights, const at::Tensor& x);

// Replaces each layer's float weight by its int8 form (Linear::int8); the float weight is
// released. Layers already quantized are left as they are.
absl::Status QuantizeLinearsInt8(const std::vector<Linear*>& layers);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_INT8_LINEAR_H_
