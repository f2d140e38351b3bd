#include "server/model/kernels/layer_norm_kernel.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "server/model/kernels/cpu_kernel_support.h"

namespace relserve {
namespace {

struct NormArgs {
  const void* x = nullptr;
  const void* residual = nullptr;  // nullptr: none
  const void* weight = nullptr;
  const void* bias = nullptr;
  void* out = nullptr;
  int64_t hidden = 0;
  float eps = 0;
};

template <typename T>
__attribute__((always_inline)) inline void NormRows(const NormArgs& a, int64_t begin, int64_t end, float* buf) {
  const int64_t H = a.hidden;
  const T* w = static_cast<const T*>(a.weight);
  const T* bias = static_cast<const T*>(a.bias);
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(a.x) + r * H;
    T* out = static_cast<T*>(a.out) + r * H;
    if (a.residual) {
      const T* res = static_cast<const T*>(a.residual) + r * H;
      for (int64_t k = 0; k < H; ++k) buf[k] = static_cast<float>(x[k]) + static_cast<float>(res[k]);
    } else {
      for (int64_t k = 0; k < H; ++k) buf[k] = static_cast<float>(x[k]);
    }
    // Everything is computed relative to the row's first value, which float subtracts exactly
    // from values near it. With a large common offset (a mean of 1000 or 1e5, unit spread) a
    // float sum of the values themselves keeps the spread's digits only when the loop is
    // vectorized into many partial sums (not in sanitizer builds), and a mean of 1e5 is itself
    // only representable to within 0.004.
    const float shift = H > 0 ? buf[0] : 0.0f;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t k = 0; k < H; ++k) sum += buf[k] - shift;
    const float mean = sum / static_cast<float>(H);  // of the shifted values
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int64_t k = 0; k < H; ++k) {
      const float d = (buf[k] - shift) - mean;
      sq += d * d;
    }
    const float rstd = 1.0f / std::sqrt(sq / static_cast<float>(H) + a.eps);
    for (int64_t k = 0; k < H; ++k) {
      out[k] = static_cast<T>(((buf[k] - shift) - mean) * rstd * static_cast<float>(w[k]) +
                              static_cast<float>(bias[k]));
    }
  }
}

template <typename T>
__attribute__((always_inline)) inline void RmsRows(const NormArgs& a, int64_t begin, int64_t end, float* buf) {
  const int64_t H = a.hidden;
  const T* w = static_cast<const T*>(a.weight);
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(a.x) + r * H;
    T* out = static_cast<T*>(a.out) + r * H;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int64_t k = 0; k < H; ++k) {
      const float v = static_cast<float>(x[k]);
      sq += v * v;
    }
    const float scale = 1.0f / std::sqrt(sq / static_cast<float>(H) + a.eps);
    for (int64_t k = 0; k < H; ++k) {
      // (x * rsqrt).to(weight dtype), then weight * it: two roundings in reduced precision.
      const float normed = static_cast<float>(static_cast<T>(static_cast<float>(x[k]) * scale));
      out[k] = static_cast<T>(static_cast<float>(w[k]) * normed);
    }
  }
}

// Entry points, one per dtype (see cpu_kernel_support.h).
RELSERVE_CPU_MULTIVERSION void NormFloat(const NormArgs& a, int64_t b, int64_t e, float* buf) {
  NormRows<float>(a, b, e, buf);
}
RELSERVE_CPU_MULTIVERSION void NormBFloat16(const NormArgs& a, int64_t b, int64_t e, float* buf) {
  NormRows<c10::BFloat16>(a, b, e, buf);
}
RELSERVE_CPU_MULTIVERSION void NormHalf(const NormArgs& a, int64_t b, int64_t e, float* buf) {
  NormRows<c10::Half>(a, b, e, buf);
}
RELSERVE_CPU_MULTIVERSION void RmsFloat(const NormArgs& a, int64_t b, int64_t e, float* buf) {
  RmsRows<float>(a, b, e, buf);
}
RELSERVE_CPU_MULTIVERSION void RmsBFloat16(const NormArgs& a, int64_t b, int64_t e, float* buf) {
  RmsRows<c10::BFloat16>(a, b, e, buf);
}
RELSERVE_CPU_MULTIVERSION void RmsHalf(const NormArgs& a, int64_t b, int64_t e, float* buf) {
  RmsRows<c10::Half>(a, b, e, buf);
}

using RowsFn = void (*)(const NormArgs&, int64_t, int64_t, float*);

at::Tensor RunRows(const at::Tensor& x, NormArgs a, RowsFn fn) {
  const int64_t H = a.hidden;
  at::Tensor out = at::empty_like(x);
  a.out = out.data_ptr();
  const int64_t rows = H == 0 ? 0 : x.numel() / H;
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(H, 1));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> buf(H);
    fn(a, begin, end, buf.data());
  });
  return out;
}

}  // namespace

at::Tensor AddLayerNorm(const at::Tensor& x_in, const at::Tensor& residual_in, const at::Tensor& weight_in,
                        const at::Tensor& bias_in, double eps) {
  const int64_t H = x_in.size(-1);
  TORCH_CHECK(weight_in.numel() == H && bias_in.numel() == H, "AddLayerNorm: weight and bias must have ", H,
              " entries");
  const at::ScalarType dtype = x_in.scalar_type();
  at::Tensor x = x_in.contiguous();
  at::Tensor residual;
  if (residual_in.defined()) {
    TORCH_CHECK(residual_in.sizes() == x_in.sizes() && residual_in.scalar_type() == dtype,
                "AddLayerNorm: residual must match x in shape and dtype");
    residual = residual_in.contiguous();
  }
  at::Tensor weight = weight_in.to(dtype).contiguous(), bias = bias_in.to(dtype).contiguous();
  NormArgs a;
  a.x = x.data_ptr();
  a.residual = residual.defined() ? residual.data_ptr() : nullptr;
  a.weight = weight.data_ptr();
  a.bias = bias.data_ptr();
  a.hidden = H;
  a.eps = static_cast<float>(eps);
  switch (dtype) {
    case at::kFloat: return RunRows(x, a, NormFloat);
    case at::kBFloat16: return RunRows(x, a, NormBFloat16);
    case at::kHalf: return RunRows(x, a, NormHalf);
    default: TORCH_CHECK(false, "AddLayerNorm: unsupported dtype ", dtype);
  }
}

at::Tensor RmsNorm(const at::Tensor& x_in, const at::Tensor& weight_in, double eps) {
  const int64_t H = x_in.size(-1);
  TORCH_CHECK(weight_in.numel() == H, "RmsNorm: weight must have ", H, " entries");
  const at::ScalarType dtype = x_in.scalar_type();
  TORCH_CHECK(weight_in.scalar_type() == dtype, "RmsNorm: weight must have x's dtype");
  at::Tensor x = x_in.contiguous(), weight = weight_in.contiguous();
  NormArgs a;
  a.x = x.data_ptr();
  a.weight = weight.data_ptr();
  a.hidden = H;
  a.eps = static_cast<float>(eps);
  switch (dtype) {
    case at::kFloat: return RunRows(x, a, RmsFloat);
    case at::kBFloat16: return RunRows(x, a, RmsBFloat16);
    case at::kHalf: return RunRows(x, a, RmsHalf);
    default: TORCH_CHECK(false, "RmsNorm: unsupported dtype ", dtype);
  }
}

}  // namespace relserve
