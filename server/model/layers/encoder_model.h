#ifndef RELSERVE_SERVER_MODEL_LAYERS_ENCODER_MODEL_H_
#define RELSERVE_SERVER_MODEL_LAYERS_ENCODER_MODEL_H_

#include <vector>

#include <ATen/core/Tensor.h>

#include "server/model/layers/attention_options.h"

namespace relserve {

struct Linear;

// A padded batch, as transformers takes it. All tensors int64 [batch, length] on the model's device.
struct EncoderInputs {
  at::Tensor input_ids;
  at::Tensor attention_mask;  // 1 = real token, 0 = padding
  at::Tensor token_type_ids;  // may be undefined (zeros)
  // False when every attention_mask entry is 1: the model may then skip masking work.
  bool has_padding = true;
  // Optional: int64 [N], the flat positions b * L + t of the real tokens, in order, on the
  // model's device (see TokenPacking). Undefined = found from attention_mask.
  at::Tensor token_rows;
  // False keeps the padded positions in the batch between attentions (computed, and masked as
  // keys) instead of packing the real tokens: shapes then depend on the batch's size and length
  // only, as a captured CUDA graph needs (captured_forwards.h). Padded positions' outputs are
  // then what the layers compute for them, as in transformers, instead of zeros.
  bool pack_rows = true;
  // How attention runs (EngineOptions::gpu_attention's path off the CPU, EngineOptions::kernels),
  // and where the forward's attention calls are counted and timed (null: nowhere). Every layer's
  // attention takes both (EncoderPass::ForAttention).
  AttentionKernels attention{};
  AttentionStats* attention_stats = nullptr;
  // The caller reads only each sequence's first token (a classifier's head on it, CLS pooling),
  // whose position 0 is a real token. A model that RunsFirstTokenOnly() then runs its last layer's
  // output projection and feed-forward on those rows alone, and last_hidden_state is [batch, 1,
  // hidden]; others ignore it. Ignored with all_hidden_states.
  bool first_token_only = false;
};

struct EncoderOutputs {
  // hidden_states[0] is the embedding output and hidden_states[i] the output after layer i,
  // exactly as transformers' output_hidden_states gives them. Empty unless asked for.
  std::vector<at::Tensor> hidden_states;
  at::Tensor last_hidden_state;  // [batch, length, hidden]
  at::Tensor logits;             // [batch, num_labels] for classification models, else undefined
};

// A loaded encoder. Forward is const and safe to call from several threads at once: the
// weights are shared read-only. Torch errors surface as c10::Error; callers convert them.
class EncoderModel {
 public:
  virtual ~EncoderModel() = default;
  virtual EncoderOutputs Forward(const EncoderInputs& inputs, bool all_hidden_states) const = 0;
  // Whether Forward honours EncoderInputs::first_token_only, its logits reading the first token
  // alone. In a 12-layer model the last layer's projection and feed-forward are about 6% of the
  // products.
  virtual bool RunsFirstTokenOnly() const { return false; }
  // The word embeddings [vocab, embedding width] as loaded (dtype and device of the model), for
  // a masked-LM decoder tied to them; undefined for families without a masked-LM head.
  virtual at::Tensor word_embeddings() const { return at::Tensor(); }
  // The encoder layers' projections (attention q/k/v and output, the feed-forward's), which
  // --dtype int8 quantizes after load (int8_linear.h). Embeddings, layer norms, relative-position
  // tables and projections, pooling and task heads are not among them and stay in float.
  virtual std::vector<Linear*> EncoderLinears() = 0;
  // The projections beside the layers: an embedding projection, a pooler, a classifier (undefined
  // ones included). bfloat16 on relserve's AMX GEMM and float32 on its packed GEMM pack them with
  // the layers' (packed_linear.h), so that no projection of the model runs in LibTorch's linear
  // (oneDNN, OpenBLAS); int8 leaves them in float.
  virtual std::vector<Linear*> HeadLinears() { return {}; }
  // EncoderLinears() then HeadLinears(): every projection a packed GEMM takes.
  std::vector<Linear*> ProjectionLinears() {
    std::vector<Linear*> linears = EncoderLinears();
    for (Linear* head : HeadLinears()) linears.push_back(head);
    return linears;
  }
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_ENCODER_MODEL_H_
