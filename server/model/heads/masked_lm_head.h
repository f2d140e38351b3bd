#ifndef RELSERVE_SERVER_MODEL_MASKED_LM_HEAD_H_
#define RELSERVE_SERVER_MODEL_MASKED_LM_HEAD_H_

#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/model/layers/activation.h"
#include "server/model/families/family_descriptor.h"
#include "server/model/layers/layers.h"
#include "server/model/layers/weight_loader.h"

namespace relserve {

// The masked-LM head of a *ForMaskedLM checkpoint (its family's MaskedLmHeadLayout: BERT's
// BertOnlyMLMHead, RoBERTa's and XLM-R's and MPNet's LM heads, ELECTRA's generator head,
// DeBERTa-v2's DebertaV2OnlyMLMHead), and the SPLADE vector it gives a sequence:
//   v[j] = max over the sequence's tokens t of log(1 + relu(logits[t, j])),
// every token counted, special tokens included, as SPLADE's max pooling and
// text-embeddings-inference's splade pooling take them (padding never reaches it). Runs in the
// model's dtype on the model's device; the maximum and the logarithm in float32. Immutable once
// loaded: Splade may run on several threads at once.
class MaskedLmHead {
 public:
  // Whether the checkpoint holds any of the head's tensors: a *ForMaskedLM checkpoint saved
  // without its head (a backbone relabelled) has none, and is served as an embedder only.
  static bool Present(const WeightLoader& weights, const MaskedLmHeadLayout& layout);

  // Takes the head's tensors from `weights`, in the loader's dtype and on its device. The
  // decoder is the checkpoint's own decoder weight when it holds one, else, when the layout is
  // tied, `word_embeddings` (the model's [vocab, width] table, shared, not copied). The bias is
  // read under its first name present; the aliases are marked as read. INVALID_ARGUMENT naming
  // the tensor for one that is missing or misshaped (an untied decoder included).
  static absl::StatusOr<MaskedLmHead> Load(WeightLoader& weights, const MaskedLmHeadLayout& layout,
                                           const at::Tensor& word_embeddings);

  // transform(h) = LayerNorm(act(dense(h))): token states [N, hidden] -> [N, width].
  at::Tensor Transform(const at::Tensor& tokens) const;
  // The logits of token states [N, hidden] -> [N, vocab], as the *ForMaskedLM class returns them.
  at::Tensor Logits(const at::Tensor& tokens) const;

  // SPLADE vectors of sequences packed one after another in `tokens` ([N, hidden], the real
  // tokens only; `lengths` of them per sequence, summing to N): for each sequence the entries
  // above 0 as (vocabulary id, weight), ids ascending. The [N, vocab] logits are never held at
  // once: they are computed `chunk_rows` tokens at a time (0: as many as fit in 64 MiB of
  // float32) and folded into a running maximum per sequence ([sequences, vocab]); log(1 + relu)
  // is monotone, so it is applied to the maximum.
  // `sum` (sentence-transformers' SpladePooling pooling_strategy "sum") adds log(1 + relu) over
  // the tokens instead; `log1p_relu` (its activation_function "log1p_relu") applies a second
  // log1p to each token's value.
  struct Pooling {
    bool sum = false;
    bool log1p_relu = false;
  };
  std::vector<std::vector<std::pair<int32_t, float>>> Splade(const at::Tensor& tokens,
                                                             const std::vector<int64_t>& lengths,
                                                             int64_t chunk_rows = 0) const {
    return Splade(tokens, lengths, Pooling(), chunk_rows);
  }
  std::vector<std::vector<std::pair<int32_t, float>>> Splade(const at::Tensor& tokens,
                                                             const std::vector<int64_t>& lengths,
                                                             Pooling pooling, int64_t chunk_rows = 0) const;

  int64_t vocab_size() const { return decoder_.size(0); }
  // Whether the decoder is the word embeddings (no decoder weight of its own in the checkpoint).
  bool decoder_is_word_embeddings() const { return decoder_is_word_embeddings_; }

 private:
  Linear dense_;
  Activation act_ = Activation::kGelu;
  LayerNorm norm_;
  at::Tensor decoder_;  // [vocab, width]
  at::Tensor bias_;     // [vocab]
  bool decoder_is_word_embeddings_ = false;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_MASKED_LM_HEAD_H_
