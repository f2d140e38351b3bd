#include "server/model/layers/post_norm_block.h"

#include "server/util/status_macros.h"

namespace relserve {

at::Tensor PostNormBlock::AfterAttention(const at::Tensor& context, const at::Tensor& x,
                                         Activation act) const {
  at::Tensor attended = attention_norm(attention_output(context), x);
  at::Tensor inner = intermediate(attended, act);
  return output_norm(output(inner), attended);
}

absl::Status LoadPostNormBlockDense(WeightLoader& w, const PostNormBlockNames& names,
                                    int64_t attention_width, int64_t hidden, int64_t intermediate,
                                    double eps, PostNormBlock* block) {
  ASSIGN_OR_RETURN(block->attention_output,
                   LoadLinear(w, names.attention_output, attention_width, hidden, true));
  ASSIGN_OR_RETURN(block->attention_norm, LoadLayerNorm(w, names.attention_norm, hidden, eps));
  ASSIGN_OR_RETURN(block->intermediate,
                   LoadLinear(w, names.layer + "intermediate.dense", hidden, intermediate, true));
  ASSIGN_OR_RETURN(block->output,
                   LoadLinear(w, names.layer + "output.dense", intermediate, hidden, true));
  ASSIGN_OR_RETURN(block->output_norm, LoadLayerNorm(w, names.layer + "output.LayerNorm", hidden, eps));
  return absl::OkStatus();
}

}  // namespace relserve
