#ifndef RELSERVE_SERVER_MODEL_HEADS_OUTPUT_HEADS_H_
#define RELSERVE_SERVER_MODEL_HEADS_OUTPUT_HEADS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/status.h"
#include "server/backend/inference_backend.h"
#include "server/model_config/colbert_config.h"
#include "server/model_config/model_config.h"
#include "server/model/heads/bge_m3_heads.h"
#include "server/model/heads/colbert_head.h"
#include "server/model/heads/masked_lm_head.h"
#include "server/model/layers/layers.h"

namespace relserve {

class WeightLoader;

// The heads beside the encoder that answer a batch's per-token outputs: kOutputSparse (a
// *ForMaskedLM checkpoint's masked-LM head: SPLADE vectors, masked_lm_head.h; or bge-m3's
// sparse_linear.pt: lexical weights, bge_m3_heads.h), kOutputMultiVector (a ColBERT checkpoint's
// projection, colbert_head.h, or bge-m3's colbert_linear.pt) and kOutputTokenLogits (a
// *ForTokenClassification checkpoint's classifier, which the family descriptor names). The
// engine loads them (LoadFromWeights while the checkpoint is open, LoadBesideWeights for the
// files beside it), describes them once (Describe), refuses outputs they cannot give
// (CheckOutputs) and runs them on each forward's last hidden state (TokenLogits, Collect).
// Immutable once described: every method after Describe may run on several threads at once.
class OutputHeads {
 public:
  // From the checkpoint's weights: the masked-LM head of a *ForMaskedLM config (where the
  // checkpoint holds one), the projection of a ColBERT checkpoint (`colbert`), and the token
  // classifier of a *ForTokenClassification config. A head that is there but malformed is
  // INVALID_ARGUMENT naming `checkpoint_files` (or `dir`, for ColBERT) and the tensor.
  absl::Status LoadFromWeights(const ModelConfig& config, const std::optional<ColbertConfig>& colbert,
                               WeightLoader& weights, const at::Tensor& word_embeddings, const c10::Device& device,
                               const std::string& dir, const std::string& checkpoint_files);
  // bge-m3's sparse_linear.pt and colbert_linear.pt, where `dir` holds them (BgeM3Heads::Load).
  absl::Status LoadBesideWeights(const std::string& dir, int64_t hidden_size, const c10::Device& device);
  // sentence-transformers' SpladePooling of a sparse encoder's modules.json (max or sum, relu or
  // log1p_relu; SPLADE's max of log(1 + relu) without one). INVALID_ARGUMENT naming `dir` and the
  // architecture where the checkpoint holds no masked-LM head for it.
  absl::Status SetSpladePooling(const MaskedLmHead::Pooling& pooling, const std::string& dir,
                                const std::string& architecture);

  // Picks the head that answers kOutputSparse (sparse_linear.pt over a masked-LM head; its
  // weights leave out `special_token_ids`, the tokenizer's cls, eos, pad and unk, so without a
  // tokenizer it is not used), fills info's sparse_kind, multi_vector_kind and multi_vector_dim,
  // and returns the description for the load log and `relserve-model info`: "sparse: splade ...;
  // multi-vector: none (there is no colbert_linear.pt)". `info.late_interaction` is read.
  std::string Describe(const ModelConfig& config, const std::optional<std::vector<int>>& special_token_ids,
                       ModelInfo* info);

  // FAILED_PRECONDITION naming the architecture and what is missing for a sparse, multi-vector
  // or token-logits output the model has no head for.
  absl::Status CheckOutputs(uint32_t outputs, const std::string& architecture) const;

  // The projections of the heads loaded (bge-m3's, a ColBERT checkpoint's, the token classifier),
  // for a packed GEMM to take, as the encoder's do, so that a forward asking for them wakes no
  // BLAS thread. The masked-LM head is not among them: its decoder is the word embeddings' own
  // tensor, which a packed copy would double.
  std::vector<Linear*> Linears();

  // The token classifier on [B, L, hidden] states: [B, L, labels].
  at::Tensor TokenLogits(const at::Tensor& last_hidden_state) const;

  // kOutputSparse and kOutputMultiVector of `batch` from `packed`, its real tokens' states
  // sequence after sequence ([N, hidden], N the sum of the sequences' lengths): each result's
  // sparse, multi_vector and num_vectors (num_tokens already set).
  void Collect(uint32_t outputs, const at::Tensor& packed, const std::vector<SequenceInput>& batch,
               std::vector<SequenceOutput>* results) const;

 private:
  enum class SparseHead { kNone, kSplade, kBgeM3 };
  SparseHead sparse_head_ = SparseHead::kNone;
  MaskedLmHead::Pooling splade_pooling_;
  std::optional<MaskedLmHead> masked_lm_;  // a *ForMaskedLM checkpoint's head, where it holds one
  BgeM3Heads bge_m3_;                      // sparse_linear.pt, colbert_linear.pt, where present
  std::optional<ColbertHead> colbert_;     // a ColBERT checkpoint's projection
  std::vector<int32_t> lexical_dropped_ids_;  // bge-m3's sparse weights leave these ids out
  // Why kOutputSparse / kOutputMultiVector are refused, for FAILED_PRECONDITION.
  std::string no_sparse_;
  std::string no_multi_vector_;
  // hidden_size -> labels on every token (FamilyDescriptor::TokenClassifier).
  Linear token_classifier_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_HEADS_OUTPUT_HEADS_H_
