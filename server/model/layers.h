#ifndef RELSERVE_SERVER_MODEL_LAYERS_H_
#define RELSERVE_SERVER_MODEL_LAYERS_H_

#include <string>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/model/weight_loader.h"

namespace relserve {

// nn.Linear: weight [out, in], optional bias [out].
struct Linear {
  at::Tensor weight;
  at::Tensor bias;
  at::Tensor operator()(const at::Tensor& x) const;
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

// Concatenates Linear layers along the output dimension, so that one GEMM computes them all.
Linear FuseLinear(const std::vector<const Linear*>& parts);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_H_
