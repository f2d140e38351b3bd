#include "server/model/layers/encoder_driver.h"

#include <ATen/ATen.h>

namespace relserve {

at::Tensor EncoderPass::ToRows(const at::Tensor& batch_major) const {
  return packing ? packing->Pack(batch_major) : batch_major.reshape({batch * length, hidden});
}

at::Tensor EncoderPass::ToBatch(const at::Tensor& rows) const {
  return packing ? packing->Unpack(rows) : rows.view({batch, length, hidden});
}

at::Tensor EncoderPass::RowsAfterAttention(const at::Tensor& rows) const {
  if (!first_tokens_only) return rows;
  if (packing) return rows.index_select(0, packing->FirstTokenRows());
  return rows.view({batch, length, -1}).select(1, 0).contiguous();
}

EncoderOutputs RunEncoderLayers(const EncoderInputs& inputs, const at::Tensor& embeddings, size_t layers,
                                bool all_hidden_states, const EncoderLayerFn& layer,
                                const EncoderFinalFn& final_norm) {
  EncoderPass pass;
  pass.batch = embeddings.size(0);
  pass.length = embeddings.size(1);
  pass.hidden = embeddings.size(2);
  pass.attention = inputs.attention;
  pass.attention_stats = inputs.attention_stats;
  if (inputs.has_padding) {
    // As uint8 once, for every layer's softmax.
    pass.mask = inputs.attention_mask.ne(0).to(at::kByte);
    if (inputs.pack_rows) pass.packing = std::make_unique<TokenPacking>(inputs.attention_mask, inputs.token_rows);
  }
  EncoderOutputs out;
  if (all_hidden_states) out.hidden_states.push_back(embeddings);
  at::Tensor x = pass.ToRows(embeddings);
  for (size_t i = 0; i < layers; ++i) {
    pass.first_tokens_only = inputs.first_token_only && !all_hidden_states && i + 1 == layers;
    x = layer(pass, i, x);
    if (all_hidden_states && i + 1 < layers) out.hidden_states.push_back(pass.ToBatch(x));
  }
  if (final_norm) x = final_norm(x);
  // A layer that kept the first tokens left one row per sequence (so did any whose rows were
  // those already: every sequence one token long).
  const bool first_tokens = pass.first_tokens_only && x.size(0) == pass.batch;
  out.last_hidden_state = first_tokens ? x.view({pass.batch, 1, pass.hidden}) : pass.ToBatch(x);
  if (all_hidden_states && layers > 0) out.hidden_states.push_back(out.last_hidden_state);
  return out;
}

}  // namespace relserve
