#include "server/model/layers/layers.h"

#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include "server/model/layers/int8_linear.h"
#include "server/model/layers/packed_linear.h"
#include "server/model/kernels/layer_norm_kernel.h"
#include "server/util/status_macros.h"

namespace relserve {

at::Tensor Linear::operator()(const at::Tensor& x) const {
  if (int8 != nullptr) return Int8Apply(*int8, x);
  if (packed != nullptr && UsePackedLinear(*packed, x)) {
    return packed->bfloat16 != nullptr ? PackedBFloat16LinearApply(*packed->bfloat16, bias, x)
                                       : PackedLinearApply(*packed->weights, bias, x);
  }
  return bias.defined() ? at::linear(x, weight, bias) : at::linear(x, weight);
}

namespace {

// The GEMM epilogue's form of act, where it has one.
std::optional<EpilogueActivation> EpilogueActivationOf(Activation act) {
  switch (act) {
    case Activation::kLinear: return EpilogueActivation::kNone;
    case Activation::kRelu: return EpilogueActivation::kRelu;
    case Activation::kGelu: return EpilogueActivation::kGelu;
    default: return std::nullopt;
  }
}

}  // namespace

at::Tensor Linear::operator()(const at::Tensor& x, Activation act, const at::Tensor& residual) const {
  const std::optional<EpilogueActivation> fused = EpilogueActivationOf(act);
  if (fused.has_value() && x.dim() >= 1 && int8 == nullptr && packed != nullptr && UsePackedLinear(*packed, x)) {
    const at::ScalarType out_type = packed->bfloat16 != nullptr ? at::kBFloat16 : at::kFloat;
    std::vector<int64_t> out_sizes = x.sizes().vec();
    out_sizes.back() = out_features();
    const bool residual_fits = !residual.defined() || (residual.device().is_cpu() && residual.scalar_type() == out_type &&
                                                       residual.is_contiguous() && residual.sizes() == out_sizes);
    if (x.scalar_type() == out_type && residual_fits) {
      return packed->bfloat16 != nullptr ? PackedBFloat16LinearApply(*packed->bfloat16, bias, x, *fused, residual)
                                         : PackedLinearApply(*packed->weights, bias, x, *fused, residual);
    }
  }
  at::Tensor y = ApplyActivation(act, (*this)(x));
  return residual.defined() ? residual + y : y;
}

int64_t Linear::out_features() const {
  if (weight.defined()) return weight.size(0);
  TORCH_CHECK(packed != nullptr, "Linear::out_features: a quantized or empty layer");
  return packed->bfloat16 != nullptr ? packed->bfloat16->n() : packed->weights->n();
}

at::Tensor LayerNorm::operator()(const at::Tensor& x) const { return (*this)(x, at::Tensor()); }

at::Tensor LayerNorm::operator()(const at::Tensor& x, const at::Tensor& residual) const {
  const at::ScalarType t = x.scalar_type();
  if (x.device().is_cpu() && (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf)) {
    return AddLayerNorm(x, residual, weight, bias, eps);
  }
  return at::layer_norm(residual.defined() ? x + residual : x, {weight.size(0)}, weight, bias, eps);
}

absl::StatusOr<Linear> LoadLinear(WeightLoader& w, const std::string& prefix, int64_t in, int64_t out,
                                  bool bias) {
  Linear l;
  ASSIGN_OR_RETURN(l.weight, w.Get(prefix + ".weight", {out, in}));
  if (bias) {
    ASSIGN_OR_RETURN(l.bias, w.Get(prefix + ".bias", {out}));
  }
  return l;
}

absl::StatusOr<LayerNorm> LoadLayerNorm(WeightLoader& w, const std::string& prefix, int64_t dim, double eps) {
  LayerNorm n;
  ASSIGN_OR_RETURN(n.weight, w.Get(prefix + ".weight", {dim}));
  ASSIGN_OR_RETURN(n.bias, w.Get(prefix + ".bias", {dim}));
  n.eps = eps;
  return n;
}

Linear FuseLinear(const std::vector<const Linear*>& parts) {
  std::vector<at::Tensor> weights, biases;
  bool has_bias = true;
  for (const Linear* p : parts) {
    weights.push_back(p->weight);
    has_bias = has_bias && p->bias.defined();
    if (p->bias.defined()) biases.push_back(p->bias);
  }
  Linear fused;
  fused.weight = at::cat(weights, 0).contiguous();
  if (has_bias) fused.bias = at::cat(biases, 0).contiguous();
  return fused;
}

}  // namespace relserve
