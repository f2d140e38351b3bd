#include "server/model/heads/output_heads.h"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/model/families/family_descriptor.h"
#include "server/model/layers/weight_loader.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

at::Tensor ToHost(const at::Tensor& t) { return t.to(at::kFloat).to(at::kCPU).contiguous(); }

}  // namespace

absl::Status OutputHeads::LoadFromWeights(const ModelConfig& config, const std::optional<ColbertConfig>& colbert,
                                          WeightLoader& weights, const at::Tensor& word_embeddings,
                                          const c10::Device& device, const std::string& dir,
                                          const std::string& checkpoint_files) {
  // A *ForMaskedLM checkpoint's masked-LM head, where it holds one: SPLADE vectors. Without
  // it the backbone still serves embeddings, as it did before.
  if (std::optional<MaskedLmHeadLayout> layout = config.family->MaskedLmHead(config)) {
    if (MaskedLmHead::Present(weights, *layout)) {
      auto head = MaskedLmHead::Load(weights, *layout, word_embeddings);
      if (!head.ok()) {
        return absl::Status(head.status().code(), absl::StrCat(checkpoint_files, ": the masked-LM head of ",
                                                               config.architecture, ": ", head.status().message()));
      }
      masked_lm_ = std::move(*head);
    } else {
      no_sparse_ = absl::StrCat("its checkpoint holds no masked-LM head (no ", layout->dense, ".weight, ",
                                layout->bias.front(), ", ...) and there is no ", BgeM3Heads::kSparseFile);
    }
  }
  if (colbert.has_value()) {
    auto head = ColbertHead::Load(*colbert, config.hidden_size, weights, device);
    if (!head.ok()) return absl::Status(head.status().code(), absl::StrCat(dir, ": ", head.status().message()));
    colbert_ = std::move(*head);
  }
  if (std::optional<std::string> name = config.family->TokenClassifier(config)) {
    auto head = LoadLinear(weights, *name, config.hidden_size, config.num_labels, true);
    if (!head.ok()) {
      return absl::Status(head.status().code(), absl::StrCat(checkpoint_files, ": the token classifier of ",
                                                             config.architecture, ": ", head.status().message()));
    }
    token_classifier_ = std::move(*head);
  }
  return absl::OkStatus();
}

absl::Status OutputHeads::LoadBesideWeights(const std::string& dir, int64_t hidden_size, const c10::Device& device) {
  ASSIGN_OR_RETURN(bge_m3_, BgeM3Heads::Load(dir, hidden_size, device));
  return absl::OkStatus();
}

absl::Status OutputHeads::SetSpladePooling(const MaskedLmHead::Pooling& pooling, const std::string& dir,
                                           const std::string& architecture) {
  if (!masked_lm_.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": modules.json has a SpladePooling module, but the checkpoint holds no masked-LM head for it (",
        architecture, ")"));
  }
  splade_pooling_ = pooling;
  return absl::OkStatus();
}

std::string OutputHeads::Describe(const ModelConfig& config,
                                  const std::optional<std::vector<int>>& special_token_ids, ModelInfo* info) {
  std::string sparse, multi_vector;
  // sparse_linear.pt is a file someone put there for this: it wins over a masked-LM head. Its
  // weights leave out the tokenizer's cls, eos, pad and unk ids, which only a tokenizer knows.
  if (bge_m3_.has_sparse() && special_token_ids.has_value()) {
    for (int id : *special_token_ids) {
      if (id >= 0 &&
          std::find(lexical_dropped_ids_.begin(), lexical_dropped_ids_.end(), id) == lexical_dropped_ids_.end()) {
        lexical_dropped_ids_.push_back(id);
      }
    }
    sparse_head_ = SparseHead::kBgeM3;
    info->sparse_kind = "bge-m3";
    sparse = absl::StrCat("bge-m3 from ", BgeM3Heads::kSparseFile, " (special token ids ",
                          absl::StrJoin(lexical_dropped_ids_, ", "), " left out)");
  } else if (masked_lm_.has_value()) {
    const MaskedLmHeadLayout layout = *config.family->MaskedLmHead(config);
    sparse_head_ = SparseHead::kSplade;
    info->sparse_kind = "splade";
    sparse = absl::StrCat("splade (", splade_pooling_.sum ? "sum" : "max", ", ",
                          splade_pooling_.log1p_relu ? "log1p_relu" : "relu", ") from the masked-LM head (",
                          layout.dense, ", ", layout.layer_norm, ", decoder ",
                          masked_lm_->decoder_is_word_embeddings() ? "tied to the word embeddings" : layout.decoder_weight,
                          ")");
  } else if (bge_m3_.has_sparse()) {
    no_sparse_ = absl::StrCat(BgeM3Heads::kSparseFile, " is there, but without a tokenizer the special tokens ",
                              "its weights leave out (cls, eos, pad, unk) are not known");
  } else if (no_sparse_.empty()) {
    no_sparse_ = absl::StrCat("it is not a *ForMaskedLM architecture with a masked-LM head, and there is no ",
                              BgeM3Heads::kSparseFile);
  }
  const LateInteractionInfo& li = info->late_interaction;
  if (colbert_.has_value()) {
    info->multi_vector_kind = "colbert";
    info->multi_vector_dim = static_cast<int>(colbert_->dim());
    multi_vector = absl::StrCat(colbert_->Describe(), li.enabled ? absl::StrCat(
        "; MaxSim rerank, ", li.layout, " queries of ", li.query_length,
        " tokens, documents of ", li.document_length) : "; no tokenizer, so no MaxSim rerank");
  } else if (bge_m3_.has_colbert()) {
    info->multi_vector_kind = "colbert";
    info->multi_vector_dim = static_cast<int>(bge_m3_.colbert_dim());
    multi_vector = absl::StrCat("colbert from ", BgeM3Heads::kColbertFile, " (", config.hidden_size, " -> ",
                                info->multi_vector_dim, ")");
  } else {
    no_multi_vector_ = absl::StrCat("there is no ", BgeM3Heads::kColbertFile);
  }
  return absl::StrCat("sparse: ", sparse.empty() ? absl::StrCat("none (", no_sparse_, ")") : sparse,
                      "; multi-vector: ",
                      multi_vector.empty() ? absl::StrCat("none (", no_multi_vector_, ")") : multi_vector);
}

absl::Status OutputHeads::CheckOutputs(uint32_t outputs, const std::string& architecture) const {
  if ((outputs & kOutputSparse) && sparse_head_ == SparseHead::kNone) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", architecture, " has no sparse head: ", no_sparse_));
  }
  if ((outputs & kOutputMultiVector) && !bge_m3_.has_colbert() && !colbert_.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", architecture, " has no multi-vector head: ", no_multi_vector_));
  }
  if ((outputs & kOutputTokenLogits) && !token_classifier_.defined()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", architecture, " has no token-classification head"));
  }
  return absl::OkStatus();
}

std::vector<Linear*> OutputHeads::Linears() {
  std::vector<Linear*> out = bge_m3_.Linears();
  if (colbert_.has_value()) out.push_back(colbert_->linear());
  if (token_classifier_.defined()) out.push_back(&token_classifier_);
  return out;
}

at::Tensor OutputHeads::TokenLogits(const at::Tensor& last_hidden_state) const {
  return token_classifier_(last_hidden_state);
}

void OutputHeads::Collect(uint32_t outputs, const at::Tensor& packed, const std::vector<SequenceInput>& batch,
                          std::vector<SequenceOutput>* results) const {
  const bool sparse = (outputs & kOutputSparse) != 0, multi_vector = (outputs & kOutputMultiVector) != 0;
  if (!sparse && !multi_vector) return;
  // Sequence b's tokens are rows [first[b], first[b + 1]) of `packed`.
  const int64_t B = static_cast<int64_t>(batch.size());
  std::vector<int64_t> first(B + 1, 0), lengths(B);
  for (int64_t b = 0; b < B; ++b) {
    lengths[b] = static_cast<int64_t>(batch[b].input_ids.size());
    first[b + 1] = first[b] + lengths[b];
  }
  if (sparse && sparse_head_ == SparseHead::kSplade) {
    std::vector<std::vector<std::pair<int32_t, float>>> splade = masked_lm_->Splade(packed, lengths, splade_pooling_);
    for (int64_t b = 0; b < B; ++b) (*results)[b].sparse = std::move(splade[b]);
  }
  if (sparse && sparse_head_ == SparseHead::kBgeM3) {
    const at::Tensor token_weights = ToHost(bge_m3_.TokenWeights(packed));
    for (int64_t b = 0; b < B; ++b) {
      (*results)[b].sparse =
          LexicalWeights(batch[b].input_ids, token_weights.data_ptr<float>() + first[b], lexical_dropped_ids_);
    }
  }
  if (multi_vector) {
    const at::Tensor vectors = ToHost(colbert_.has_value() ? colbert_->Vectors(packed) : bge_m3_.ColbertVectors(packed));
    // A ColBERT checkpoint's: every token. FlagEmbedding's colbert vectors: every token after the
    // first (the final </s> too).
    const int64_t D = vectors.size(1);
    const int64_t skip = colbert_.has_value() ? 0 : 1;
    for (int64_t b = 0; b < B; ++b) {
      SequenceOutput& r = (*results)[b];
      r.num_vectors = static_cast<int32_t>(lengths[b] - skip);
      const float* p = vectors.data_ptr<float>() + (first[b] + skip) * D;
      r.multi_vector.assign(p, p + static_cast<int64_t>(r.num_vectors) * D);
    }
  }
}

}  // namespace relserve
