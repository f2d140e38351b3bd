#ifndef RELSERVE_SERVER_MODEL_LAYERS_POST_NORM_BLOCK_H_
#define RELSERVE_SERVER_MODEL_LAYERS_POST_NORM_BLOCK_H_

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "server/model/layers/activation.h"
#include "server/model/layers/layers.h"
#include "server/model/layers/weight_loader.h"

namespace relserve {

// The layer of a BERT-style post-norm encoder (BERT, DeBERTa, MPNet) apart from how its
// attention is scored: the fused q/k/v projection, BertSelfOutput, BertIntermediate and
// BertOutput. Each family's layer adds its own relative-position tensors.
struct PostNormBlock {
  Linear qkv;  // q, k, v fused; the query rows pre-divided by the attention scale
  Linear attention_output;
  LayerNorm attention_norm;
  Linear intermediate;
  Linear output;
  LayerNorm output_norm;

  // Given the attention's context for input x: a = LayerNorm(attention_output(context) + x),
  // then LayerNorm(output(act(intermediate(a))) + a).
  at::Tensor AfterAttention(const at::Tensor& context, const at::Tensor& x, Activation act) const;
  // qkv, attention_output, intermediate and output.
  std::vector<Linear*> Linears() { return {&qkv, &attention_output, &intermediate, &output}; }
};

// Where a family keeps the parts after attention, and their sizes.
struct PostNormBlockNames {
  std::string attention_output;  // the Linear's prefix, e.g. "<layer>attention.output.dense"
  std::string attention_norm;    // e.g. "<layer>attention.output.LayerNorm"
  std::string layer;             // "<layer>": intermediate.dense, output.dense, output.LayerNorm
};

// Loads attention_output, attention_norm, intermediate, output and output_norm (qkv is the
// family's): attention_width is the attention's output width, hidden the model's.
absl::Status LoadPostNormBlockDense(WeightLoader& w, const PostNormBlockNames& names,
                                    int64_t attention_width, int64_t hidden, int64_t intermediate,
                                    double eps, PostNormBlock* block);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_POST_NORM_BLOCK_H_
