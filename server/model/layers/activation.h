#ifndef RELSERVE_SERVER_MODEL_LAYERS_ACTIVATION_H_
#define RELSERVE_SERVER_MODEL_LAYERS_ACTIVATION_H_

#include <string>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

namespace relserve {

// transformers' ACT2FN entries (activations.py), resolved once at load time.
enum class Activation {
  kGelu,         // "gelu", "gelu_python": erf form
  kGeluTanh,     // "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate": tanh approximation
  kQuickGelu,    // x * sigmoid(1.702 x)
  kGelu10,       // gelu clipped to [-10, 10]
  kRelu,
  kRelu2,        // relu(x)^2
  kRelu6,
  kLeakyRelu,    // slope 0.01
  kSilu,         // "silu", "swish"
  kMish,
  kTanh,
  kSigmoid,
  kLinear,
};

absl::StatusOr<Activation> ParseActivation(const std::string& name);
// Returns act(x); may reuse x's storage when `x` is a temporary the caller no longer needs.
at::Tensor ApplyActivation(Activation act, at::Tensor x);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_ACTIVATION_H_
