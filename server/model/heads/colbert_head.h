#ifndef RELSERVE_SERVER_MODEL_COLBERT_HEAD_H_
#define RELSERVE_SERVER_MODEL_COLBERT_HEAD_H_

#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "server/model_config/colbert_config.h"
#include "server/model/layers/activation.h"
#include "server/model/layers/layers.h"

namespace relserve {

class WeightLoader;

// A ColBERT checkpoint's projection of every token (colbert_config.h): PyLate's Dense
// (pylate/models/Dense.py: linear, then its activation; Identity in every published model) read
// from its folder, or Stanford's `linear` (colbert/modeling/colbert.py: nn.Linear(hidden, dim,
// bias=False)) read from the checkpoint beside the `bert.*` weights. Each token's vector is then
// L2-normalised, as both do before scoring (torch.nn.functional.normalize, p=2, eps 1e-12). Run
// in float32 on the model's device. Immutable once loaded.
class ColbertHead {
 public:
  // PyLate: from config.dense's folder. Stanford: `linear.weight` through `checkpoint` (marking
  // it used), [dim, hidden_size]. INVALID_ARGUMENT naming the tensor when it is missing or of
  // another shape.
  static absl::StatusOr<ColbertHead> Load(const ColbertConfig& config, int64_t hidden_size, WeightLoader& checkpoint,
                                          const c10::Device& device);

  int64_t dim() const { return linear_.out_features(); }
  // Rows of token states [N, hidden] -> [N, dim], float32, each row of unit length.
  at::Tensor Vectors(const at::Tensor& tokens) const;
  std::string Describe() const;  // "PyLate Dense (32 -> 24)", for the load log
  // The projection, for a packed GEMM to take (OutputHeads::Linears).
  Linear* linear() { return &linear_; }

 private:
  Linear linear_;
  Activation activation_ = Activation::kLinear;
  std::string source_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_COLBERT_HEAD_H_
