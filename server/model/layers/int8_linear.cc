#include "server/model/layers/int8_linear.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>

#include "absl/strings/str_cat.h"
#include "server/model/layers/layers.h"

namespace relserve {

struct Int8Weights {
  c10::intrusive_ptr<LinearPackedParamsBase> packed;
};

absl::Status EnableInt8Engine() {
  const auto& engines = at::globalContext().supportedQEngines();
  for (at::QEngine e : engines) {
    if (e == at::QEngine::ONEDNN) {
      at::globalContext().setQEngine(at::QEngine::ONEDNN);
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(
      "int8 needs LibTorch's oneDNN quantized engine, which this LibTorch was built without");
}

std::shared_ptr<const Int8Weights> QuantizeInt8(const at::Tensor& weight, const at::Tensor& bias) {
  const at::Tensor w = weight.to(at::kFloat).contiguous();
  // One symmetric scale per output channel; an all-zero row keeps scale 1 (its int8 is 0).
  at::Tensor amax = w.abs().amax({1});
  at::Tensor scales = at::where(amax > 0, amax / 127.0, at::ones_like(amax)).to(at::kDouble);
  at::Tensor zero_points = at::zeros({w.size(0)}, at::kLong);
  at::Tensor qw = at::quantize_per_channel(w, scales, zero_points, /*axis=*/0, at::kQInt8);
  static const auto prepack =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("quantized::linear_prepack", "")
          .typed<c10::intrusive_ptr<LinearPackedParamsBase>(at::Tensor, c10::optional<at::Tensor>)>();
  c10::optional<at::Tensor> b;
  if (bias.defined()) b = bias.to(at::kFloat).contiguous();
  auto out = std::make_shared<Int8Weights>();
  out->packed = prepack.call(qw, b);
  return out;
}

at::Tensor Int8Apply(const Int8Weights& weights, const at::Tensor& x) {
  return weights.packed->apply_dynamic(x.contiguous(), /*reduce_range=*/false);
}

absl::Status QuantizeLinearsInt8(const std::vector<Linear*>& layers) {
  for (Linear* layer : layers) {
    if (layer == nullptr || layer->int8 != nullptr || !layer->weight.defined()) continue;
    if (!layer->weight.device().is_cpu()) {
      return absl::InvalidArgumentError(
          absl::StrCat("int8 runs on the CPU only; the weights are on ", layer->weight.device().str()));
    }
    layer->int8 = QuantizeInt8(layer->weight, layer->bias);
    layer->weight = at::Tensor();
    layer->bias = at::Tensor();
  }
  return absl::OkStatus();
}

}  // namespace relserve
