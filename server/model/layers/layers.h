#ifndef RELSERVE_SERVER_MODEL_LAYERS_LAYERS_H_
#define RELSERVE_SERVER_MODEL_LAYERS_LAYERS_H_

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/model/layers/activation.h"
#include "server/model/layers/weight_loader.h"

namespace relserve {

struct Int8Weights;    // int8_linear.h
struct PackedLinear;   // packed_linear.h

// nn.Linear: weight [out, in], optional bias [out]. After QuantizeLinearsInt8 (--dtype int8)
// `int8` holds the layer instead and weight and bias are undefined. After PackLinearsFloat32
// (float32 on a CPU with AVX-512 or AVX2, packed_linear.h) `packed` holds the weight packed once
// for relserve's GEMM, which inputs up to its row bound take, beside the weight as loaded (or in
// its place, released, where every input takes it); after PackLinearsBFloat16 in its place.
struct Linear {
  at::Tensor weight;
  at::Tensor bias;
  std::shared_ptr<const Int8Weights> int8;
  std::shared_ptr<const PackedLinear> packed;
  bool defined() const { return weight.defined() || int8 != nullptr || packed != nullptr; }
  // The weight's `out` wherever it is held, as loaded or packed (not for a quantized layer).
  int64_t out_features() const;
  at::Tensor operator()(const at::Tensor& x) const;
  // act(x · wᵀ + bias) + residual (undefined: none), as ApplyActivation(act, (*this)(x)) and then
  // residual + that give it. Where x runs on the packed weights (float32, or bfloat16 with a
  // bfloat16 x), act is ReLU, GELU's erf form or linear, and the residual has the output's sizes
  // and dtype and is contiguous, the GEMM applies them to its results while they are in the cache
  // (kernels/gemm_epilogue.h: the same bits, but for GELU's erf, within 1.5e-7); else the
  // operators run after it.
  at::Tensor operator()(const at::Tensor& x, Activation act, const at::Tensor& residual = at::Tensor()) const;
};

// nn.LayerNorm with elementwise affine.
struct LayerNorm {
  at::Tensor weight;
  at::Tensor bias;
  double eps = 1e-5;
  at::Tensor operator()(const at::Tensor& x) const;
  // layer_norm(x + residual), the residual added in float32 without rounding (see
  // layer_norm_kernel.h).
  at::Tensor operator()(const at::Tensor& x, const at::Tensor& residual) const;
};

absl::StatusOr<Linear> LoadLinear(WeightLoader& w, const std::string& prefix, int64_t in, int64_t out,
                                  bool bias);
absl::StatusOr<LayerNorm> LoadLayerNorm(WeightLoader& w, const std::string& prefix, int64_t dim, double eps);

// Every layer's Linears(), in order (EncoderModel::EncoderLinears).
template <typename Layer>
std::vector<Linear*> AllLinears(std::vector<Layer>& layers) {
  std::vector<Linear*> out;
  for (Layer& layer : layers) {
    for (Linear* l : layer.Linears()) out.push_back(l);
  }
  return out;
}

// Concatenates Linear layers along the output dimension, so that one GEMM computes them all.
Linear FuseLinear(const std::vector<const Linear*>& parts);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_LAYERS_H_
