#include "server/model/layers/activation.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace relserve {

absl::StatusOr<Activation> ParseActivation(const std::string& name) {
  if (name == "gelu" || name == "gelu_python") return Activation::kGelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast" || name == "gelu_accurate") {
    return Activation::kGeluTanh;
  }
  if (name == "quick_gelu") return Activation::kQuickGelu;
  if (name == "gelu_10") return Activation::kGelu10;
  if (name == "relu") return Activation::kRelu;
  if (name == "relu2") return Activation::kRelu2;
  if (name == "relu6") return Activation::kRelu6;
  if (name == "leaky_relu") return Activation::kLeakyRelu;
  if (name == "silu" || name == "swish") return Activation::kSilu;
  if (name == "mish") return Activation::kMish;
  if (name == "tanh") return Activation::kTanh;
  if (name == "sigmoid") return Activation::kSigmoid;
  if (name == "linear") return Activation::kLinear;
  return absl::InvalidArgumentError(absl::StrCat("unsupported activation \"", name, "\""));
}

at::Tensor ApplyActivation(Activation act, at::Tensor x) {
  switch (act) {
    case Activation::kGelu:
      return at::gelu_out(x, x);  // in place: the input is a temporary
    case Activation::kGeluTanh:
      return at::gelu_out(x, x, "tanh");
    case Activation::kQuickGelu:
      return x * at::sigmoid(x * 1.702);
    case Activation::kGelu10:
      return at::clamp(at::gelu(x), -10.0, 10.0);
    case Activation::kRelu:
      return at::relu_(x);
    case Activation::kRelu2: {
      at::Tensor r = at::relu_(x);
      return r.mul_(r);
    }
    case Activation::kRelu6:
      return at::clamp_(x, 0.0, 6.0);
    case Activation::kLeakyRelu:
      return at::leaky_relu_(x, 0.01);
    case Activation::kSilu:
      return at::silu_(x);
    case Activation::kMish:
      return at::mish(x);
    case Activation::kTanh:
      return at::tanh_(x);
    case Activation::kSigmoid:
      return at::sigmoid_(x);
    case Activation::kLinear:
      return x;
  }
  return x;
}

}  // namespace relserve
