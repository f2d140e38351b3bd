#include "server/model/heads/colbert_head.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "server/checkpoint/model_checkpoint.h"
#include "server/model/layers/weight_loader.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::StatusOr<ColbertHead> ColbertHead::Load(const ColbertConfig& config, int64_t hidden_size,
                                              WeightLoader& checkpoint, const c10::Device& device) {
  ColbertHead head;
  if (config.dense.has_value()) {
    const DenseConfig& d = *config.dense;
    ASSIGN_OR_RETURN(auto file, OpenModelCheckpoint(d.directory));
    WeightLoader w(*file, at::kFloat);
    ASSIGN_OR_RETURN(head.linear_, LoadLinear(w, "linear", d.in_features, d.out_features, d.bias));
    if (absl::Status unused = w.CheckNoneUnused({}); !unused.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(d.directory, ": ", unused.message()));
    }
    ASSIGN_OR_RETURN(head.activation_, ParseActivation(d.activation));
    head.source_ = absl::StrCat("PyLate Dense of ", d.directory, " (", d.in_features, " -> ", d.out_features,
                                d.bias ? ", bias" : "", ", ", d.activation, ")");
  } else {
    ASSIGN_OR_RETURN(head.linear_, LoadLinear(checkpoint, "linear", hidden_size, config.dim, /*bias=*/false));
    head.source_ = absl::StrCat("Stanford ColBERT linear (", hidden_size, " -> ", config.dim, ")");
  }
  head.linear_.weight = head.linear_.weight.to(at::kFloat).to(device);
  if (head.linear_.bias.defined()) head.linear_.bias = head.linear_.bias.to(at::kFloat).to(device);
  return head;
}

at::Tensor ColbertHead::Vectors(const at::Tensor& tokens) const {
  at::Tensor v = ApplyActivation(activation_, linear_(tokens.to(at::kFloat)));
  return v / at::clamp_min(v.norm(2, {1}, /*keepdim=*/true), 1e-12);
}

std::string ColbertHead::Describe() const { return source_; }

}  // namespace relserve
