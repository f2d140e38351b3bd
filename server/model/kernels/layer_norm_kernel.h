#ifndef RELSERVE_SERVER_MODEL_KERNELS_LAYER_NORM_KERNEL_H_
#define RELSERVE_SERVER_MODEL_KERNELS_LAYER_NORM_KERNEL_H_

#include <ATen/core/Tensor.h>

namespace relserve {

// layer_norm(x + residual) over the last dimension with elementwise affine weight and bias,
// in one pass over memory and in float32 arithmetic whatever the dtype (float32, bfloat16,
// float16): the sum is not rounded to the dtype before it is normalized. residual may be
// undefined (plain layer_norm). x and residual have the same shape and dtype; weight and
// bias are [hidden] of that dtype. Returns a new contiguous tensor.
at::Tensor AddLayerNorm(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                        const at::Tensor& bias, double eps);

// T5LayerNorm: weight * (x * rsqrt(mean(x^2) + eps)), the mean in float32. In bfloat16 and
// float16 the normalized value is rounded to the dtype before the weight multiplies it, as
// transformers does; in float32 nothing is rounded. x: [..., hidden]; weight: [hidden], of
// x's dtype. Returns a new contiguous tensor.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_LAYER_NORM_KERNEL_H_
