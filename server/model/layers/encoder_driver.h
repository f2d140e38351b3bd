#ifndef RELSERVE_SERVER_MODEL_LAYERS_ENCODER_DRIVER_H_
#define RELSERVE_SERVER_MODEL_LAYERS_ENCODER_DRIVER_H_

#include <cstdint>
#include <functional>
#include <memory>

#include <ATen/core/Tensor.h>

#include "server/model/layers/encoder_model.h"
#include "server/model/layers/relative_attention.h"
#include "server/model/layers/token_packing.h"

namespace relserve {

// What every family's layers read of one forward pass: the batch's shape, the padding mask and
// the packing of real tokens. Between attentions the hidden states are rows: the real tokens'
// only when the batch has padding (packed), else all B * L positions.
struct EncoderPass {
  int64_t batch = 0, length = 0, hidden = 0;
  at::Tensor mask;                       // uint8 [B, L], 1 = real token; undefined without padding
  std::unique_ptr<TokenPacking> packing;  // null without padding, or with EncoderInputs::pack_rows false
  AttentionKernels attention;                // EncoderInputs'
  AttentionStats* attention_stats = nullptr;  // EncoderInputs'
  // Set for the last layer of a forward whose caller reads only each sequence's first token
  // (EncoderInputs::first_token_only): RowsAfterAttention then keeps those.
  bool first_tokens_only = false;

  // What every layer's attention takes from the forward's inputs: its path and kernels (the
  // precision of the CPU's products among them), and where its calls are counted.
  void ForAttention(RelativeAttentionInputs& att) const {
    att.kernels = attention;
    att.stats = attention_stats;
  }

  // [B, L, hidden] -> rows, and back (zeros at padded positions).
  at::Tensor ToRows(const at::Tensor& batch_major) const;
  at::Tensor ToBatch(const at::Tensor& rows) const;

  // The rows (the attention's context, the layer's input) that the rest of a layer runs on after
  // its attention: all of them, or with first_tokens_only each sequence's first token, [B, ...].
  at::Tensor RowsAfterAttention(const at::Tensor& rows) const;
};

// One encoder layer: the rows before it -> the rows after it.
using EncoderLayerFn = std::function<at::Tensor(const EncoderPass& pass, size_t layer, const at::Tensor& rows)>;
// A norm after the last layer (T5's final_layer_norm), on rows; empty when the family has none.
using EncoderFinalFn = std::function<at::Tensor(const at::Tensor& rows)>;

// The skeleton every family's Forward shares, as CTranslate2's TransformerEncoder holds it once:
// the mask and packing from `inputs`, the embeddings [B, L, hidden] to rows, `layers` layers,
// the final norm, and the outputs in transformers' layout: last_hidden_state [B, L, hidden]
// and, with all_hidden_states, hidden_states[0] = the embeddings and hidden_states[i] = the
// output of layer i (the last one after the final norm, as output_hidden_states gives them).
// Logits are the family's: it computes them from last_hidden_state afterwards.
// With inputs.first_token_only (and not all_hidden_states), the last layer runs with
// first_tokens_only set; if it keeps the first tokens (B rows), last_hidden_state is [B, 1, hidden].
EncoderOutputs RunEncoderLayers(const EncoderInputs& inputs, const at::Tensor& embeddings, size_t layers,
                                bool all_hidden_states, const EncoderLayerFn& layer,
                                const EncoderFinalFn& final_norm = nullptr);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_ENCODER_DRIVER_H_
